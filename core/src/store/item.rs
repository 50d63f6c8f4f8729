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
///
/// One pass over the JSON with no intermediate model: the visitor reads `key`,
/// `version` and `deleted`, pushes prerequisite keys and `segmentMatch` values straight
/// into the dependency list, and skips everything else.
pub fn decode(kind: Kind, raw: Bytes) -> Result<Decoded, DecodeError> {
    let mut depends_on = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(&raw);
    let head = de::DeserializeSeed::deserialize(
        HeadSeed {
            kind,
            deps: &mut depends_on,
        },
        &mut de,
    )
    .and_then(|h| de.end().map(|()| h))
    .map_err(|e| DecodeError::from_json(&e))?;
    let deleted = head.deleted;
    if deleted {
        depends_on.clear();
    } else if depends_on.len() > 1 {
        depends_on.sort_unstable();
        depends_on.dedup();
    }
    Ok(Decoded {
        key: head.key,
        item: Item {
            version: head.version,
            deleted,
            raw,
        },
        depends_on,
    })
}

struct Head {
    key: Option<String>,
    version: u64,
    deleted: bool,
}

/// Reads an item's top level; nested references go to `deps`.
struct HeadSeed<'o> {
    kind: Kind,
    deps: &'o mut Vec<(Kind, String)>,
}

impl<'de> de::DeserializeSeed<'de> for HeadSeed<'_> {
    type Value = Head;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Head, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for HeadSeed<'_> {
    type Value = Head;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a flag or segment object")
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Head, A::Error> {
        let (mut key, mut version, mut deleted) = (None, None, false);
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Key => key = map.next_value::<Option<String>>()?,
                Field::Version => version = Some(map.next_value::<u64>()?),
                Field::Deleted => deleted = map.next_value::<Option<bool>>()?.unwrap_or(false),
                Field::Prerequisites if self.kind == Kind::Flag => {
                    map.next_value_seed(Each(Prerequisite(&mut *self.deps)))?;
                }
                Field::Rules => map.next_value_seed(Each(Rule(&mut *self.deps)))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let version = version.ok_or_else(|| de::Error::missing_field("version"))?;
        Ok(Head {
            key,
            version,
            deleted,
        })
    }
}

/// The object keys (and the one string value) the decoder looks at, matched without
/// allocating.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Key,
    Version,
    Deleted,
    Prerequisites,
    Rules,
    Clauses,
    Op,
    Values,
    SegmentMatch,
    Other,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Field, E> {
                Ok(match v {
                    "key" => Field::Key,
                    "version" => Field::Version,
                    "deleted" => Field::Deleted,
                    "prerequisites" => Field::Prerequisites,
                    "rules" => Field::Rules,
                    "clauses" => Field::Clauses,
                    "op" => Field::Op,
                    "values" => Field::Values,
                    "segmentMatch" => Field::SegmentMatch,
                    _ => Field::Other,
                })
            }
            fn visit_unit<E: de::Error>(self) -> Result<Field, E> {
                Ok(Field::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// Applies a seed to every element of an array; `null` is an empty array.
struct Each<S>(S);

/// A seed that can be used for several elements in turn.
trait ElementSeed<'de> {
    fn element<A: SeqAccess<'de>>(&mut self, seq: &mut A) -> Result<bool, A::Error>;
}

impl<'de, S: ElementSeed<'de>> de::DeserializeSeed<'de> for Each<S> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, S: ElementSeed<'de>> Visitor<'de> for Each<S> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        while self.0.element(&mut seq)? {}
        Ok(())
    }
}

/// `prerequisites[]`: `{"key": …}` adds a flag dependency.
struct Prerequisite<'o>(&'o mut Vec<(Kind, String)>);

impl<'de> ElementSeed<'de> for Prerequisite<'_> {
    fn element<A: SeqAccess<'de>>(&mut self, seq: &mut A) -> Result<bool, A::Error> {
        seq.next_element_seed(ObjectFields {
            deps: &mut *self.0,
            kind: Fields::Prerequisite,
        })
        .map(|o| o.is_some())
    }
}

/// `rules[]`: each rule's `clauses`.
struct Rule<'o>(&'o mut Vec<(Kind, String)>);

impl<'de> ElementSeed<'de> for Rule<'_> {
    fn element<A: SeqAccess<'de>>(&mut self, seq: &mut A) -> Result<bool, A::Error> {
        seq.next_element_seed(ObjectFields {
            deps: &mut *self.0,
            kind: Fields::Rule,
        })
        .map(|o| o.is_some())
    }
}

/// `clauses[]`: a `segmentMatch` clause adds its string values as segment dependencies.
struct Clause<'o>(&'o mut Vec<(Kind, String)>);

impl<'de> ElementSeed<'de> for Clause<'_> {
    fn element<A: SeqAccess<'de>>(&mut self, seq: &mut A) -> Result<bool, A::Error> {
        seq.next_element_seed(ObjectFields {
            deps: &mut *self.0,
            kind: Fields::Clause,
        })
        .map(|o| o.is_some())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Fields {
    Prerequisite,
    Rule,
    Clause,
}

/// Reads the one field of interest in a nested object and skips the rest.
struct ObjectFields<'o> {
    deps: &'o mut Vec<(Kind, String)>,
    kind: Fields,
}

impl<'de> de::DeserializeSeed<'de> for ObjectFields<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ObjectFields<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // For clauses: `op` usually precedes `values`; values read before the op is
        // known are kept aside until it is.
        let mut op_is_segment_match: Option<bool> = None;
        let mut early_values: Vec<String> = Vec::new();
        while let Some(field) = map.next_key::<Field>()? {
            match (self.kind, field) {
                (Fields::Prerequisite, Field::Key) => {
                    let key = map.next_value::<String>()?;
                    self.deps.push((Kind::Flag, key));
                }
                (Fields::Rule, Field::Clauses) => {
                    map.next_value_seed(Each(Clause(&mut *self.deps)))?
                }
                (Fields::Clause, Field::Op) => {
                    op_is_segment_match = Some(map.next_value::<Field>()? == Field::SegmentMatch);
                }
                (Fields::Clause, Field::Values) => match op_is_segment_match {
                    Some(false) => {
                        map.next_value::<IgnoredAny>()?;
                    }
                    Some(true) => {
                        let values = map.next_value::<StringValues<'de>>()?;
                        self.deps.extend(
                            values
                                .0
                                .into_iter()
                                .map(|v| (Kind::Segment, v.into_owned())),
                        );
                    }
                    None => {
                        let values = map.next_value::<StringValues<'de>>()?;
                        early_values.extend(values.0.into_iter().map(Cow::into_owned));
                    }
                },
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if op_is_segment_match == Some(true) {
            self.deps
                .extend(early_values.into_iter().map(|v| (Kind::Segment, v)));
        }
        Ok(())
    }
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
