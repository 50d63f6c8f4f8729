//! Zero-copy splitting of a `{"key": {...}, ...}` JSON map into stored items.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::store::{Change, DecodeError, Kind, decode};

/// A JSON object's members with their values left raw, in document order.
#[derive(Default)]
pub(crate) struct RawItems<'a>(pub(crate) Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de: 'a, 'a> Deserialize<'de> for RawItems<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = RawItems<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of items")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(entry) = map.next_entry::<Cow<'a, str>, &'a RawValue>()? {
                    out.push(entry);
                }
                Ok(RawItems(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// The part of `whole` that `part` borrows from it, without copying; a copy if `part`
/// does not lie inside `whole`.
pub(crate) fn slice_of(whole: &Bytes, part: &str) -> Bytes {
    let base = whole.as_ptr() as usize;
    let start = (part.as_ptr() as usize).wrapping_sub(base);
    match start.checked_add(part.len()) {
        Some(end) if start <= whole.len() && end <= whole.len() => whole.slice(start..end),
        _ => Bytes::copy_from_slice(part.as_bytes()),
    }
}

/// Decode every member of `items` as an item of `kind`, stored under its map key.
pub(crate) fn decode_all(
    whole: &Bytes,
    kind: Kind,
    items: RawItems<'_>,
    out: &mut Vec<Change>,
) -> Result<(), DecodeError> {
    for (key, raw) in items.0 {
        let d = decode(kind, slice_of(whole, raw.get()))?;
        out.push(Change {
            kind,
            key: key.into_owned(),
            item: d.item,
            depends_on: d.depends_on,
        });
    }
    Ok(())
}
