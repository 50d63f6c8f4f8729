//! The FDv2 wire format: event names and JSON shapes (PROTOCOL.md B §5.1, §5.2, §5.5).
//!
//! This is the only file that spells wire names (STYLE.md §3.2). Everything here borrows
//! from the event data; nothing is copied until [`super`] builds its [`super::Event`].

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::intent::IntentCode;
use crate::store::Kind;

/// `server-intent`.
pub(crate) const SERVER_INTENT: &str = "server-intent";
/// `put-object`.
pub(crate) const PUT_OBJECT: &str = "put-object";
/// `delete-object`.
pub(crate) const DELETE_OBJECT: &str = "delete-object";
/// `payload-transferred`.
pub(crate) const PAYLOAD_TRANSFERRED: &str = "payload-transferred";
/// `goodbye`.
pub(crate) const GOODBYE: &str = "goodbye";
/// `error`.
pub(crate) const ERROR: &str = "error";
/// The name used in errors about a whole polling response body.
pub(crate) const POLL: &str = "poll";

/// An event name flagsync knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Name {
    ServerIntent,
    PutObject,
    DeleteObject,
    PayloadTransferred,
    Goodbye,
    Error,
    Heartbeat,
}

impl Name {
    /// The known event named `name`, if any. Both heartbeat spellings are accepted
    /// (PROTOCOL.md A.1).
    pub(crate) fn parse(name: &str) -> Option<Self> {
        Some(match name {
            SERVER_INTENT => Self::ServerIntent,
            PUT_OBJECT => Self::PutObject,
            DELETE_OBJECT => Self::DeleteObject,
            PAYLOAD_TRANSFERRED => Self::PayloadTransferred,
            GOODBYE => Self::Goodbye,
            ERROR => Self::Error,
            "heart-beat" | "heartbeat" => Self::Heartbeat,
            _ => return None,
        })
    }
}

/// The store kind named by an FDv2 object kind (`flag`, `segment`).
pub(crate) fn kind(name: &str) -> Option<Kind> {
    Kind::ALL.into_iter().find(|k| k.fdv2_name() == name)
}

/// `{"payloads":[…]}`.
#[derive(Deserialize)]
pub(crate) struct ServerIntent<'a> {
    #[serde(borrow)]
    pub(crate) payloads: Vec<Payload<'a>>,
}

/// One element of `payloads`.
#[derive(Deserialize)]
pub(crate) struct Payload<'a> {
    #[serde(default, borrow)]
    pub(crate) id: Option<Cow<'a, str>>,
    #[serde(default)]
    pub(crate) target: Option<u64>,
    #[serde(rename = "intentCode", borrow)]
    pub(crate) intent_code: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(crate) reason: Option<Cow<'a, str>>,
}

/// The intent named by an intent code; any other string is a schema error.
/// (A string is read first: serde_json reports `null` for an enum as a syntax error.)
pub(crate) fn intent_code(code: &str) -> Option<IntentCode> {
    Some(match code {
        "xfer-full" => IntentCode::TransferFull,
        "xfer-changes" => IntentCode::TransferChanges,
        "none" => IntentCode::None,
        _ => return None,
    })
}

/// `put-object`: the `object` stays raw JSON, borrowed from the data.
#[derive(Deserialize)]
pub(crate) struct PutObject<'a> {
    pub(crate) version: u64,
    #[serde(borrow)]
    pub(crate) kind: Cow<'a, str>,
    #[serde(borrow)]
    pub(crate) key: Cow<'a, str>,
    #[serde(borrow)]
    pub(crate) object: &'a RawValue,
}

/// `delete-object`.
#[derive(Deserialize)]
pub(crate) struct DeleteObject<'a> {
    pub(crate) version: u64,
    #[serde(borrow)]
    pub(crate) kind: Cow<'a, str>,
    #[serde(borrow)]
    pub(crate) key: Cow<'a, str>,
}

/// `payload-transferred`: extra fields (such as `id`) are ignored.
#[derive(Deserialize)]
pub(crate) struct PayloadTransferred<'a> {
    #[serde(borrow)]
    pub(crate) state: Cow<'a, str>,
    pub(crate) version: u64,
}

/// `goodbye`.
#[derive(Deserialize)]
pub(crate) struct Goodbye<'a> {
    #[serde(borrow)]
    pub(crate) reason: Cow<'a, str>,
}

/// `error`.
#[derive(Deserialize)]
pub(crate) struct ServerError<'a> {
    #[serde(rename = "payloadId", borrow)]
    pub(crate) payload_id: Cow<'a, str>,
    #[serde(borrow)]
    pub(crate) reason: Cow<'a, str>,
}

/// A polling response body `{"events":[…]}`; each element is checked to be an object
/// before it is read as a [`PollEvent`].
#[derive(Deserialize)]
pub(crate) struct PollBody<'a> {
    #[serde(borrow)]
    pub(crate) events: Vec<&'a RawValue>,
}

/// One element of `events`: `{"event":"<name>","data":{…}}`.
#[derive(Deserialize)]
pub(crate) struct PollEvent<'a> {
    #[serde(default, borrow)]
    pub(crate) event: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(crate) data: Option<&'a RawValue>,
}

/// Which top-level members a polling body has, to tell an FDv1-shaped body from a
/// broken FDv2 one (only read on the error path).
#[derive(Deserialize)]
pub(crate) struct PollShape<'a> {
    #[serde(borrow)]
    pub(crate) events: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(crate) flags: Option<&'a RawValue>,
    #[serde(borrow)]
    pub(crate) segments: Option<&'a RawValue>,
}
