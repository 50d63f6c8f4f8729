//! FDv2: the protocol events, the change-set builder, the protocol state machine and the
//! polling payload (PROTOCOL.md B §5.1–5.3, §5.5; E 28–32, 38).
//!
//! Parsing happens once, into [`Event`]; a `put-object`'s `object` stays a raw JSON slice
//! of the event data (no copy) and is decoded only as far as the store needs.
//! [`Protocol`] turns events into change sets: nothing is handed out before
//! `payload-transferred` (or an intent of `none`).
//!
//! ```
//! use bytes::Bytes;
//! use flagsync_core::fdv2::{self, Action, Protocol};
//! use flagsync_core::store::{Kind, Store};
//!
//! let mut protocol = Protocol::new();
//! let mut store = Store::new();
//! for (name, data) in [
//!     ("server-intent", r#"{"payloads":[{"id":"p","target":1,"intentCode":"xfer-full"}]}"#),
//!     ("put-object", r#"{"version":1,"kind":"flag","key":"f","object":{"key":"f","version":7}}"#),
//!     ("payload-transferred", r#"{"state":"s1","version":1}"#),
//! ] {
//!     let event = fdv2::parse_event(name, &Bytes::from(data)).unwrap();
//!     if let Action::Apply(change_set) = protocol.handle_event(event).unwrap() {
//!         store.apply(change_set);
//!     }
//! }
//! assert_eq!(store.snapshot().get(Kind::Flag, "f").unwrap().version, 7);
//! assert_eq!(store.selector().state, "s1");
//! ```

mod builder;
mod intent;
mod limits;
mod poll;
mod poll_reader;
mod wire;

use bytes::Bytes;
use serde::Deserialize;

use crate::fdv1::slice_of;
use crate::status::ErrorKind;
use crate::store::{Change, DecodeError, Kind, Selector, decode, split_put_object};

pub use builder::{Action, ChangeSetBuilder, Protocol};
pub use intent::IntentCode;
pub use limits::PayloadLimits;
pub use poll::{
    parse_fdv1_fallback_poll, parse_poll, parse_poll_or_fdv1, parse_poll_or_fdv1_with,
    parse_poll_with,
};
pub use poll_reader::PollReader;

/// One FDv2 event, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// `server-intent`: what the server will send.
    ServerIntent(ServerIntent),
    /// `put-object`: one object to upsert.
    PutObject(PutObject),
    /// `delete-object`: one object to delete.
    DeleteObject(DeleteObject),
    /// `payload-transferred`: the end of a payload, with its selector.
    PayloadTransferred(Selector),
    /// `goodbye`: the server is about to close.
    Goodbye {
        /// Why.
        reason: String,
    },
    /// `error`: the server failed while serving a payload; partial changes are dropped.
    Error {
        /// The payload that failed.
        payload_id: String,
        /// Why.
        reason: String,
    },
    /// A heartbeat (`heart-beat` or `heartbeat`); its data is never parsed.
    Heartbeat,
    /// A `put-object` or `delete-object` of a kind other than flag or segment: ignored,
    /// so that a newer server never breaks an older client (PROTOCOL.md A.4.6).
    UnknownObjectKind {
        /// The object kind as sent.
        kind: String,
    },
    /// An event name flagsync does not handle; its data is never parsed.
    Unknown(String),
}

/// What the server intends to send (`server-intent`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerIntent {
    /// What kind of transfer follows.
    pub code: IntentCode,
    /// The payload id (`""` if absent).
    pub id: String,
    /// The payload target version (0 if absent).
    pub target: u64,
    /// Why the server chose this intent (`""` if absent).
    pub reason: String,
}

/// A `put-object`, with its `object` decoded for the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutObject {
    /// The envelope (change) version, which may differ from the object's own version.
    pub version: u64,
    /// The item to write, stored under the envelope's key; its raw JSON is a slice of
    /// the event data.
    pub change: Change,
}

/// A `delete-object`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteObject {
    /// The object's kind.
    pub kind: Kind,
    /// The object's key.
    pub key: String,
    /// The envelope version: the version of the tombstone.
    pub version: u64,
}

/// Why FDv2 data could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The data is not JSON.
    #[error("malformed JSON in {event} data")]
    MalformedJson {
        /// The event name, or `poll` for a polling response body.
        event: &'static str,
    },
    /// The data is JSON of the wrong shape: a missing or null required field, an unknown
    /// intent code, a number of payloads other than one, an invalid object.
    #[error("{event} data does not match the schema")]
    Schema {
        /// The event name, or `poll` for a polling response body.
        event: &'static str,
    },
    /// A `put-object`, `delete-object` or `payload-transferred` arrived before any
    /// `server-intent` (PROTOCOL.md E 28).
    #[error("changeset: cannot complete without a server-intent")]
    MissingIntent,
    /// A polling response ended without a complete payload.
    #[error("no complete payload in the polling response")]
    IncompletePayload,
    /// The payload not yet completed by `payload-transferred` held more than
    /// [`PayloadLimits::max_bytes`] (raw JSON plus key of each object); it was dropped.
    #[error("uncommitted fdv2 payload larger than the limit of {limit} bytes")]
    PayloadTooLarge {
        /// The configured limit, in bytes.
        limit: usize,
    },
    /// The payload not yet completed by `payload-transferred` held more than
    /// [`PayloadLimits::max_objects`] objects; it was dropped.
    #[error("uncommitted fdv2 payload of more than the limit of {limit} objects")]
    TooManyObjects {
        /// The configured limit, in objects.
        limit: usize,
    },
}

impl Error {
    /// The data-source error kind this failure is reported with: an invalid payload is
    /// INVALID_DATA (PROTOCOL.md A.4.6).
    pub fn kind(self) -> ErrorKind {
        ErrorKind::InvalidData
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
/// Heartbeats and unknown event names are returned without parsing `data`, which may be
/// anything.
pub fn parse_event(event_type: &str, data: &Bytes) -> Result<Event, Error> {
    use wire::Name;
    let Some(name) = Name::parse(event_type) else {
        return Ok(Event::Unknown(event_type.to_owned()));
    };
    let (event, parsed) = match name {
        Name::Heartbeat => return Ok(Event::Heartbeat),
        Name::ServerIntent => (wire::SERVER_INTENT, parse_intent(data)),
        Name::PutObject => (wire::PUT_OBJECT, parse_put(data)),
        Name::DeleteObject => (wire::DELETE_OBJECT, parse_delete(data)),
        Name::PayloadTransferred => (wire::PAYLOAD_TRANSFERRED, parse_transferred(data)),
        Name::Goodbye => (wire::GOODBYE, parse_goodbye(data)),
        Name::Error => (wire::ERROR, parse_error(data)),
    };
    parsed.map_err(|e| malformed_first(Error::from_decode(event, e), data))
}

/// Data that is both of the wrong shape and not JSON at all is malformed JSON, whichever
/// problem comes first in the text. Only runs on the error path.
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

fn from_slice<'a, T: Deserialize<'a>>(data: &'a [u8]) -> Result<T, DecodeError> {
    serde_json::from_slice(data).map_err(|e| DecodeError::from_json(&e))
}

fn parse_intent(data: &Bytes) -> Result<Event, DecodeError> {
    let wire::ServerIntent { payloads } = from_slice(data)?;
    let [payload] = <[_; 1]>::try_from(payloads).map_err(|_| DecodeError::Schema)?;
    Ok(Event::ServerIntent(ServerIntent {
        code: wire::intent_code(&payload.intent_code).ok_or(DecodeError::Schema)?,
        id: payload.id.map(String::from).unwrap_or_default(),
        target: payload.target.unwrap_or_default(),
        reason: payload.reason.map(String::from).unwrap_or_default(),
    }))
}

fn parse_put(data: &Bytes) -> Result<Event, DecodeError> {
    // One pass over the usual shape; anything else takes the general way below.
    if let Some((version, key, kind, d)) = split_put_object(data, wire::kind) {
        return Ok(Event::PutObject(PutObject {
            version,
            change: Change {
                kind,
                key,
                item: d.item,
                depends_on: d.depends_on,
            },
        }));
    }
    parse_put_general(data)
}

/// Any `put-object` data, through serde_json: the reference for [`split_put_object`].
fn parse_put_general(data: &Bytes) -> Result<Event, DecodeError> {
    let put: wire::PutObject<'_> = from_slice(data)?;
    let Some(kind) = wire::kind(&put.kind) else {
        return Ok(Event::UnknownObjectKind {
            kind: put.kind.into_owned(),
        });
    };
    // The object keeps its own version; the key is the envelope's (PROTOCOL.md B §5.8).
    let d = decode(kind, slice_of(data, put.object.get()))?;
    Ok(Event::PutObject(PutObject {
        version: put.version,
        change: Change {
            kind,
            key: put.key.into_owned(),
            item: d.item,
            depends_on: d.depends_on,
        },
    }))
}

fn parse_delete(data: &Bytes) -> Result<Event, DecodeError> {
    let del: wire::DeleteObject<'_> = from_slice(data)?;
    let Some(kind) = wire::kind(&del.kind) else {
        return Ok(Event::UnknownObjectKind {
            kind: del.kind.into_owned(),
        });
    };
    Ok(Event::DeleteObject(DeleteObject {
        kind,
        key: del.key.into_owned(),
        version: del.version,
    }))
}

fn parse_transferred(data: &Bytes) -> Result<Event, DecodeError> {
    let t: wire::PayloadTransferred<'_> = from_slice(data)?;
    Ok(Event::PayloadTransferred(Selector {
        state: t.state.into_owned(),
        version: t.version,
    }))
}

fn parse_goodbye(data: &Bytes) -> Result<Event, DecodeError> {
    let g: wire::Goodbye<'_> = from_slice(data)?;
    Ok(Event::Goodbye {
        reason: g.reason.into_owned(),
    })
}

fn parse_error(data: &Bytes) -> Result<Event, DecodeError> {
    let e: wire::ServerError<'_> = from_slice(data)?;
    Ok(Event::Error {
        payload_id: e.payload_id.into_owned(),
        reason: e.reason.into_owned(),
    })
}

#[cfg(test)]
mod tests;
