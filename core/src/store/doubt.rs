//! Doubtful data that the store takes anyway, as LaunchDarkly's SDKs do, and that the
//! data system reports as a warning with the keys (issue 42): a key that was not valid
//! UTF-8, and an item whose body names another key than the one it is stored under.
//! (FDv2 changes no newer than the stored item are the store's to report: see
//! [`super::Applied::not_newer`].)
//!
//! # What the official SDKs do, and why flagsync keeps these items
//!
//! **A key that is not valid UTF-8.** An SSE stream is decoded as UTF-8 with U+FFFD
//! for invalid sequences (WHATWG, `crate::sse`), so such a key reaches the store with
//! U+FFFD in it; a polling body that is not UTF-8 is already refused as malformed.
//! LaunchDarkly's Go SDK keeps the key's raw bytes (its SSE reader does not decode, and
//! `go-jsonstream` copies string bytes as they are); the Python SDK's SSE reader
//! decodes strictly, so the line fails, the connection is dropped and the stream
//! reconnects, to get the same data again. flagsync keeps the item, as Go does: a Rust
//! string cannot hold the raw bytes, and refusing would refuse the whole `put` or
//! payload and reconnect into it again and again. A flag that names a segment by the
//! same damaged key still finds it, since both went through the same decoding. The
//! warning says which keys, so the data can be fixed at its source.
//!
//! **A body whose `key` differs from the key it is stored under.** Both SDKs store an
//! FDv1 `put` item under its map key and an FDv2 `put-object` under the envelope's
//! `key`, whatever the body says; for an FDv1 `patch`, Go uses the path's key and
//! Python the body's (flagsync the body's, PROTOCOL.md B §1.6, and `crate::fdv1` warns
//! there). Neither refuses or reports it. flagsync stores as they do and warns: the
//! engine buckets rollouts and names events by the body's key, so such a flag does not
//! evaluate as its map key suggests.
//!
//! Checking costs a comparison per item: a body whose first field is `"key"` with the
//! stored key (how LaunchDarkly's services and flagsync's server write items) is read
//! no further; any other is read again for its `key`, skipping everything else.

use std::borrow::Cow;

use serde::Deserialize;

use super::{Change, Kind};

/// At most this many keys are named in one warning; the count covers them all.
pub const NAMED: usize = 10;

/// Items of one change set that are doubtful in one way: how many, and the first
/// [`NAMED`] of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named<T> {
    /// How many items.
    pub count: usize,
    /// The first [`NAMED`] of them, in order.
    pub first: Vec<T>,
}

impl<T> Default for Named<T> {
    fn default() -> Self {
        Self {
            count: 0,
            first: Vec::new(),
        }
    }
}

impl<T> Named<T> {
    fn push(&mut self, item: T) {
        self.count += 1;
        if self.first.len() < NAMED {
            self.first.push(item);
        }
    }

    /// True if no item is doubtful in this way.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// The doubtful items of a change set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Doubts {
    /// Items whose key holds U+FFFD: a key that was not valid UTF-8 (or one that names
    /// the replacement character itself, which no flag service does).
    pub replaced_keys: Named<(Kind, String)>,
    /// Items whose body's `key` is another than the key they are stored under: the
    /// kind, the stored key and the body's key.
    pub other_body_keys: Named<(Kind, String, String)>,
}

impl Doubts {
    /// True if nothing is doubtful.
    pub fn is_empty(&self) -> bool {
        self.replaced_keys.is_empty() && self.other_body_keys.is_empty()
    }
}

/// The doubtful items of `changes` (tombstones are checked for their key only: their
/// body is the store's own or a delete's).
///
/// ```
/// use bytes::Bytes;
/// use flagsync_core::store::{Change, Kind, doubts};
///
/// let mut c = Change::from_json(Kind::Flag, Bytes::from_static(br#"{"key":"b","version":1}"#)).unwrap();
/// c.key = "a".into();
/// let d = doubts(&[c]);
/// assert_eq!(d.other_body_keys.first, [(Kind::Flag, "a".to_owned(), "b".to_owned())]);
/// ```
pub fn doubts(changes: &[Change]) -> Doubts {
    let mut d = Doubts::default();
    for c in changes {
        if c.key.contains(char::REPLACEMENT_CHARACTER) {
            d.replaced_keys.push((c.kind, c.key.clone()));
        }
        if c.item.deleted {
            continue;
        }
        if let Some(body) = other_body_key(&c.key, &c.item.raw) {
            d.other_body_keys.push((c.kind, c.key.clone(), body));
        }
    }
    d
}

#[derive(Deserialize)]
struct KeyOnly<'a> {
    #[serde(borrow, default)]
    key: Option<Cow<'a, str>>,
}

/// The body's `key` if it has one and it is not `key`.
fn other_body_key(key: &str, raw: &[u8]) -> Option<String> {
    // The usual shape: `{"key":"<key>"` with no escapes in it.
    if let Some(rest) = raw.strip_prefix(br#"{"key":""#)
        && rest.strip_prefix(key.as_bytes()).and_then(|r| r.first()) == Some(&b'"')
        && !key.contains(['"', '\\'])
    {
        return None;
    }
    let body = serde_json::from_slice::<KeyOnly<'_>>(raw).ok()?.key?;
    (body != key).then(|| body.into_owned())
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn change(key: &str, raw: &str) -> Change {
        let mut c = Change::from_json(Kind::Flag, Bytes::copy_from_slice(raw.as_bytes())).unwrap();
        c.key = key.to_owned();
        c
    }

    #[test]
    fn a_body_with_its_own_key_is_not_doubtful() {
        for raw in [
            r#"{"key":"a","version":1}"#,
            r#"{"version":1,"key":"a"}"#,
            r#" {"key" : "a","version":1}"#,
            r#"{"key":"\u0061","version":1}"#,
        ] {
            assert!(doubts(&[change("a", raw)]).is_empty(), "{raw}");
        }
        let quoted = r#"{"key":"a\"b","version":1}"#;
        assert!(doubts(&[change("a\"b", quoted)]).is_empty());
    }

    #[test]
    fn a_body_naming_another_key_is_reported_with_both_keys() {
        for raw in [
            r#"{"key":"b","version":1}"#,
            r#"{"key":"ab","version":1}"#,
            r#"{"version":1,"key":"b"}"#,
        ] {
            let d = doubts(&[change("a", raw)]);
            assert_eq!(d.other_body_keys.count, 1, "{raw}");
            assert_eq!(d.other_body_keys.first[0].1, "a");
            assert_ne!(d.other_body_keys.first[0].2, "a");
        }
        // A prefix of the stored key is another key too.
        let d = doubts(&[change("ab", r#"{"key":"a","version":1}"#)]);
        assert_eq!(d.other_body_keys.first[0].2, "a");
    }

    #[test]
    fn a_body_without_a_key_and_tombstones_are_not_compared() {
        let mut t = change("a", r#"{"key":"zzz","version":1,"deleted":true}"#);
        t.item.deleted = true;
        assert!(doubts(&[t]).is_empty());
    }

    #[test]
    fn a_replaced_key_is_reported() {
        let key = "bad\u{FFFD}key";
        let d = doubts(&[change(key, &format!(r#"{{"key":"{key}","version":1}}"#))]);
        assert_eq!(d.replaced_keys.first, [(Kind::Flag, key.to_owned())]);
        assert!(d.other_body_keys.is_empty());
    }

    #[test]
    fn at_most_ten_keys_are_named_but_all_are_counted() {
        let changes: Vec<Change> = (0..25)
            .map(|i| change(&format!("k{i}"), r#"{"key":"x","version":1}"#))
            .collect();
        let d = doubts(&changes);
        assert_eq!(d.other_body_keys.count, 25);
        assert_eq!(d.other_body_keys.first.len(), NAMED);
        assert_eq!(d.other_body_keys.first[9].1, "k9");
    }
}
