//! One stored item: its version, whether it is a tombstone, and its raw JSON.
//!
//! The store never builds the full flag model (DESIGN.md §3). An item is decoded
//! once, lightly: the fields the store needs (`key`, `version`, `deleted`) and the
//! references the dependency index needs (`prerequisites[].key` and the values of
//! `segmentMatch` clauses). Everything else is skipped and stays in [`Item::raw`].

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use serde::Deserialize;
use serde::de::{self, IgnoredAny, SeqAccess, Visitor};

use super::Kind;

/// A versioned item as the store keeps it.
#[derive(Clone, PartialEq, Eq)]
pub struct Item {
    /// The item's version.
    pub version: u64,
    /// True for a tombstone: the item was deleted at `version`.
    pub deleted: bool,
    /// The item's JSON exactly as the server sent it. For a tombstone made by a
    /// delete event this is `{"key":…,"version":N,"deleted":true}`.
    pub raw: Bytes,
}

impl Item {
    /// A tombstone for `key` at `version`, with a `key` field so that readers of any
    /// SDK decode it (PROTOCOL.md B §7.8).
    pub fn tombstone(key: &str, version: u64) -> Self {
        let json = serde_json::json!({ "key": key, "version": version, "deleted": true });
        Self {
            version,
            deleted: true,
            raw: Bytes::from(json.to_string()),
        }
    }

    /// The raw JSON as text. Raw JSON is always valid UTF-8 (it was parsed as JSON),
    /// so this only returns `""` for an item built by hand from invalid bytes.
    pub fn raw_str(&self) -> &str {
        std::str::from_utf8(&self.raw).unwrap_or("")
    }
}

impl fmt::Debug for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Item")
            .field("version", &self.version)
            .field("deleted", &self.deleted)
            .field("raw_len", &self.raw.len())
            .finish()
    }
}

/// What decoding an item's JSON yields: the item and the keys it references.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The item's own `key` field, if it has one (tombstones from some SDKs do not,
    /// and the Go SDK writes `$deleted`).
    pub key: Option<String>,
    /// The stored item.
    pub item: Item,
    /// Items this one depends on: prerequisite flags and segments named by
    /// `segmentMatch` clauses (PROTOCOL.md B §3.4). Empty for tombstones.
    pub depends_on: Vec<(Kind, String)>,
}

/// Why an item's JSON could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes are not JSON.
    #[error("malformed JSON")]
    MalformedJson,
    /// The JSON is well formed but is not an item (no numeric `version`, not an object…).
    #[error("JSON does not match the item schema")]
    Schema,
}

impl DecodeError {
    /// Classify a serde_json error: syntax and truncation are malformed JSON, anything
    /// else is a schema mismatch.
    pub(crate) fn from_json(err: &serde_json::Error) -> Self {
        match err.classify() {
            serde_json::error::Category::Data => Self::Schema,
            _ => Self::MalformedJson,
        }
    }
}

/// Decode an item of `kind` from `raw`, keeping `raw` as the stored bytes.
pub fn decode(kind: Kind, raw: Bytes) -> Result<Decoded, DecodeError> {
    let head: ItemHead<'_> =
        serde_json::from_slice(&raw).map_err(|e| DecodeError::from_json(&e))?;
    let deleted = head.deleted.unwrap_or(false);
    let mut depends_on = Vec::new();
    if !deleted {
        if kind == Kind::Flag {
            for p in &head.prerequisites {
                depends_on.push((Kind::Flag, p.key.to_string()));
            }
        }
        for rule in &head.rules {
            for clause in &rule.clauses {
                if clause.op == "segmentMatch" {
                    for v in &clause.values.0 {
                        depends_on.push((Kind::Segment, v.to_string()));
                    }
                }
            }
        }
        depends_on.sort_unstable();
        depends_on.dedup();
    }
    let key = head.key.map(Cow::into_owned);
    Ok(Decoded {
        key,
        item: Item {
            version: head.version,
            deleted,
            raw,
        },
        depends_on,
    })
}

/// The part of a flag or segment the store reads. Unknown fields are skipped.
#[derive(Deserialize)]
struct ItemHead<'a> {
    #[serde(default, borrow)]
    key: Option<Cow<'a, str>>,
    version: u64,
    #[serde(default)]
    deleted: Option<bool>,
    #[serde(default, borrow)]
    prerequisites: Vec<Prerequisite<'a>>,
    #[serde(default, borrow, deserialize_with = "null_as_default")]
    rules: Vec<Rule<'a>>,
}

#[derive(Deserialize)]
struct Prerequisite<'a> {
    #[serde(borrow)]
    key: Cow<'a, str>,
}

#[derive(Deserialize)]
struct Rule<'a> {
    #[serde(default, borrow, deserialize_with = "null_as_default")]
    clauses: Vec<Clause<'a>>,
}

#[derive(Deserialize)]
struct Clause<'a> {
    #[serde(default, borrow)]
    op: Cow<'a, str>,
    #[serde(default, borrow)]
    values: StringValues<'a>,
}

/// The string members of a clause's `values`; other JSON values are skipped
/// without being built.
#[derive(Default)]
struct StringValues<'a>(Vec<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for StringValues<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = StringValues<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of values")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(StringValues::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = seq.next_element::<MaybeStr<'a>>()? {
                    if let MaybeStr::Str(s) = v {
                        out.push(s);
                    }
                }
                Ok(StringValues(out))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

enum MaybeStr<'a> {
    Str(Cow<'a, str>),
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for MaybeStr<'a> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = MaybeStr<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(MaybeStr::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(MaybeStr::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(MaybeStr::Other)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(MaybeStr::Other)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(MaybeStr::Other)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(MaybeStr::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(MaybeStr::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MaybeStr::Other)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(MaybeStr::Other)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: de::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(kind: Kind, s: &str) -> Result<Decoded, DecodeError> {
        decode(kind, Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn flag_references_prerequisites_and_segment_matches() {
        let d = dec(
            Kind::Flag,
            r#"{"key":"f","version":3,"on":true,"prerequisites":[{"key":"p1","variation":0}],
               "rules":[{"clauses":[{"attribute":"key","op":"segmentMatch","values":["s1",2,"s2"]},
                                    {"attribute":"email","op":"in","values":["x@y"]}]}],
               "targets":[{"values":["a"]}]}"#,
        )
        .unwrap();
        assert_eq!(d.key.as_deref(), Some("f"));
        assert_eq!(d.item.version, 3);
        assert!(!d.item.deleted);
        assert_eq!(
            d.depends_on,
            vec![
                (Kind::Segment, "s1".into()),
                (Kind::Segment, "s2".into()),
                (Kind::Flag, "p1".into())
            ]
        );
    }

    #[test]
    fn segment_rules_reference_segments_only() {
        let d = dec(
            Kind::Segment,
            r#"{"key":"s","version":1,"rules":[{"clauses":[{"op":"segmentMatch","values":["s0"]}]}],"prerequisites":[{"key":"ignored"}]}"#,
        )
        .unwrap();
        assert_eq!(d.depends_on, vec![(Kind::Segment, "s0".into())]);
    }

    #[test]
    fn tombstones_decode_in_all_three_shapes() {
        for s in [
            r#"{"version":7,"deleted":true}"#,
            r#"{"key":"x","version":7,"deleted":true}"#,
            r#"{"key":"$deleted","version":7,"deleted":true,"on":false}"#,
        ] {
            let d = dec(Kind::Flag, s).unwrap();
            assert!(d.item.deleted);
            assert_eq!(d.item.version, 7);
        }
    }

    #[test]
    fn null_lists_are_empty() {
        let d = dec(
            Kind::Flag,
            r#"{"key":"f","version":1,"rules":null,"prerequisites":[]}"#,
        )
        .unwrap();
        assert!(d.depends_on.is_empty());
    }

    #[test]
    fn errors_are_classified() {
        assert_eq!(dec(Kind::Flag, "{sorry"), Err(DecodeError::MalformedJson));
        assert_eq!(dec(Kind::Flag, "true"), Err(DecodeError::Schema));
        assert_eq!(
            dec(Kind::Flag, r#"{"key":"x","version":"no"}"#),
            Err(DecodeError::Schema)
        );
        assert_eq!(dec(Kind::Flag, r#"{"key":"x"}"#), Err(DecodeError::Schema));
    }

    #[test]
    fn tombstone_constructor_has_a_key() {
        let t = Item::tombstone("k", 5);
        assert_eq!(
            serde_json::from_slice::<serde_json::Value>(&t.raw).unwrap(),
            serde_json::json!({"key":"k","version":5,"deleted":true})
        );
    }
}
