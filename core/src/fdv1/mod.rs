//! FDv1: the `put`, `patch` and `delete` stream events and the polling payload
//! (PROTOCOL.md B §1.6, §2.2).
//!
//! Parsing happens once, into [`Event`]; flag and segment bodies stay raw JSON slices
//! of the event data (no copy) and are decoded only as far as the store needs.
//!
//! ```
//! use bytes::Bytes;
//! use flagsync_core::fdv1::{self, Event};
//!
//! let data = Bytes::from_static(br#"{"path":"/flags/f","data":{"key":"f","version":3}}"#);
//! match fdv1::parse_event("patch", &data).unwrap() {
//!     Event::Patch(change) => assert_eq!((change.key.as_str(), change.item.version), ("f", 3)),
//!     other => panic!("{other:?}"),
//! }
//! ```

mod prescan;
mod raw_items;

use std::borrow::Cow;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::status::ErrorKind;
use crate::store::{Change, DecodeError, Item, Kind, decode, split_all_data, split_patch};
pub use prescan::{PutPrescan, parse_put_prescanned};
pub(crate) use raw_items::slice_of;

/// One FDv1 stream event, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// `put`: the whole data set, replacing the store.
    Put(Vec<Change>),
    /// `patch`: one item to upsert (applied only if newer).
    Patch(Change),
    /// `delete`: a tombstone to upsert (applied only if newer).
    Delete(Change),
    /// A `patch` or `delete` whose path names no known kind: ignored, with no reconnect.
    UnknownPath(String),
    /// An event name flagsync does not handle: ignored without looking at its data.
    Unknown(String),
}

/// Why FDv1 data could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The data is not JSON (status kind INVALID_DATA).
    #[error("malformed JSON in {event} data")]
    MalformedJson {
        /// The event (`put`, `patch`, `delete`) or `poll`.
        event: &'static str,
    },
    /// The data is JSON of the wrong shape (status kind UNKNOWN).
    #[error("{event} data does not match the schema")]
    Schema {
        /// The event (`put`, `patch`, `delete`) or `poll`.
        event: &'static str,
    },
}

impl Error {
    /// The data-source error kind this failure is reported with (PROTOCOL.md B §1.7).
    pub fn kind(self) -> ErrorKind {
        match self {
            Self::MalformedJson { .. } => ErrorKind::InvalidData,
            Self::Schema { .. } => ErrorKind::Unknown,
        }
    }

    fn from_json(event: &'static str, err: &serde_json::Error) -> Self {
        Self::from_decode(event, DecodeError::from_json(err))
    }

    fn from_decode(event: &'static str, err: DecodeError) -> Self {
        match err {
            DecodeError::MalformedJson => Self::MalformedJson { event },
            _ => Self::Schema { event },
        }
    }
}

/// Parse the data of the SSE event named `event_type`.
///
/// Unknown event names are returned as [`Event::Unknown`] without parsing `data`,
/// which may be anything (PROTOCOL.md C.2).
pub fn parse_event(event_type: &str, data: &Bytes) -> Result<Event, Error> {
    let parsed = match event_type {
        "put" => parse_put(data),
        "patch" => parse_patch(data),
        "delete" => parse_delete(data),
        other => return Ok(Event::Unknown(other.to_owned())),
    };
    parsed.map_err(|e| malformed_first(e, data))
}

/// Parse an FDv1 polling response body `{"flags":{…},"segments":{…}}`.
pub fn parse_poll(body: &Bytes) -> Result<Vec<Change>, Error> {
    split_all_data(body, false).map_err(|e| malformed_first(Error::from_decode("poll", e), body))
}

/// Data that is both of the wrong shape and not JSON at all is malformed JSON
/// (INVALID_DATA), whichever problem comes first in the text, as for a parser that reads
/// the whole document before looking at its shape (PROTOCOL.md B §1.7). Only runs on the
/// error path.
fn malformed_first(err: Error, data: &[u8]) -> Error {
    match err {
        Error::Schema { event }
            if serde_json::from_slice::<serde::de::IgnoredAny>(data).is_err() =>
        {
            Error::MalformedJson { event }
        }
        other => other,
    }
}

/// The kind and key named by a stream path (`/flags/KEY`, `/segments/KEY`), or `None`
/// for any other path. The key is the rest of the path and may be empty.
pub fn parse_path(path: &str) -> Option<(Kind, &str)> {
    Kind::ALL
        .into_iter()
        .find_map(|k| path.strip_prefix(k.fdv1_path_prefix()).map(|key| (k, key)))
}

/// `put`: `{"path":"/","data":{…}}`; `path` is optional and ignored (PROTOCOL.md A.1).
fn parse_put(data: &Bytes) -> Result<Event, Error> {
    split_all_data(data, true)
        .map(Event::Put)
        .map_err(|e| Error::from_decode("put", e))
}

#[derive(Deserialize)]
struct Patch<'a> {
    #[serde(borrow)]
    path: Cow<'a, str>,
    #[serde(borrow)]
    data: &'a RawValue,
}

fn parse_patch(data: &Bytes) -> Result<Event, Error> {
    // One pass over the usual shape; anything else takes the general way below.
    if let Some((path, kind, d)) = split_patch(data, |p| parse_path(p).map(|(k, _)| k))
        && let Some((_, path_key)) = parse_path(&path)
    {
        return Ok(Event::Patch(Change {
            kind,
            key: patch_key(kind, path_key, d.key),
            item: d.item,
            depends_on: d.depends_on,
        }));
    }
    parse_patch_general(data)
}

/// The key a `patch` is stored under: the object's own `key` (PROTOCOL.md B §1.6, as
/// LaunchDarkly's Python SDK does), the path's key for an object without one.
///
/// An object naming another key than its path is doubtful: the Go SDK stores it under
/// the path's key, the Python SDK under the object's, and neither says so. flagsync
/// keeps the Python rule, which B §1.6 binds, and warns with both keys (issue 42; see
/// `crate::store::doubts` for the `put` and FDv2 counterparts).
fn patch_key(kind: Kind, path_key: &str, body_key: Option<String>) -> String {
    match body_key {
        Some(body) => {
            if body != path_key {
                tracing::warn!(
                    kind = kind.namespace(),
                    path_key = ?path_key,
                    body_key = ?body,
                    "fdv1: a patch names another key in its object than in its path; stored under the object's key"
                );
            }
            body
        }
        None => path_key.to_owned(),
    }
}

/// Any `patch` data, through serde_json: the reference for [`split_patch`].
fn parse_patch_general(data: &Bytes) -> Result<Event, Error> {
    let patch: Patch<'_> =
        serde_json::from_slice(data).map_err(|e| Error::from_json("patch", &e))?;
    let Some((kind, path_key)) = parse_path(&patch.path) else {
        return Ok(Event::UnknownPath(patch.path.into_owned()));
    };
    let d = decode(kind, slice_of(data, patch.data.get()))
        .map_err(|e| Error::from_decode("patch", e))?;
    let key = patch_key(kind, path_key, d.key);
    Ok(Event::Patch(Change {
        kind,
        key,
        item: d.item,
        depends_on: d.depends_on,
    }))
}

#[derive(Deserialize)]
struct Delete<'a> {
    #[serde(borrow)]
    path: Cow<'a, str>,
    version: u64,
}

fn parse_delete(data: &Bytes) -> Result<Event, Error> {
    let del: Delete<'_> =
        serde_json::from_slice(data).map_err(|e| Error::from_json("delete", &e))?;
    let Some((kind, key)) = parse_path(&del.path) else {
        return Ok(Event::UnknownPath(del.path.into_owned()));
    };
    Ok(Event::Delete(Change {
        kind,
        key: key.to_owned(),
        item: Item::tombstone(key, del.version),
        depends_on: Vec::new(),
    }))
}

#[cfg(test)]
mod tests;
