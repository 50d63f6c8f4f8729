//! One stored item: its version, whether it is a tombstone, and its raw JSON.
//!
//! The store never builds the full flag model (DESIGN.md §3). An item is decoded
//! once, lightly: the fields the store needs (`key`, `version`, `deleted`) and the
//! references the dependency index needs (`prerequisites[].key` and the values of
//! `segmentMatch` clauses). Everything else is skipped and stays in [`Item::raw`].

use std::fmt;

use bytes::Bytes;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::decode;

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
