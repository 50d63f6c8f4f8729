//! The FDv2 polling payload (PROTOCOL.md B §5.5, E 38).

use bytes::Bytes;

use crate::store::{ApplyMode, ChangeSet, Selector, Snapshot, Transfer, split_all_data};

use super::wire::{self, Name};
use super::{
    Action, Error, Event, PayloadLimits, Protocol, malformed_first, parse_event, slice_of,
};

/// Parse an FDv2 polling response body `{"events":[{"event":…,"data":{…}},…]}` into the
/// change set of its first complete payload.
///
/// The events run through a fresh [`Protocol`], so the body must carry its own
/// `server-intent`. Parsing stops at the first `payload-transferred`, or at an intent of
/// `none` (which gives [`super::ChangeSetBuilder::no_changes`]). Elements without an `event`
/// are skipped; so are heartbeats, `goodbye` and unknown events, whose data is not
/// parsed. An `error` event drops the changes collected so far.
///
/// ```
/// use bytes::Bytes;
/// use flagsync_core::fdv2::parse_poll;
/// use flagsync_core::store::Transfer;
///
/// let body = Bytes::from_static(br#"{"events":[
///   {"event":"server-intent","data":{"payloads":[{"intentCode":"xfer-full"}]}},
///   {"event":"put-object","data":{"version":1,"kind":"flag","key":"f","object":{"key":"f","version":2}}},
///   {"event":"payload-transferred","data":{"state":"s","version":1}}]}"#);
/// let cs = parse_poll(&body).unwrap();
/// assert_eq!((cs.transfer, cs.changes.len()), (Transfer::Full, 1));
/// ```
///
/// # Errors
/// [`Error::MalformedJson`] or [`Error::Schema`] for a body or event of the wrong shape,
/// [`Error::MissingIntent`] for a payload that starts with a put, delete or
/// transferred event, [`Error::IncompletePayload`] if no payload completes,
/// [`Error::PayloadTooLarge`] or [`Error::TooManyObjects`] past the default
/// [`PayloadLimits`].
pub fn parse_poll(body: &Bytes) -> Result<ChangeSet, Error> {
    parse_poll_with(body, PayloadLimits::default())
}

/// [`parse_poll`], holding at most `limits` of the payload before its
/// `payload-transferred` (the body itself is bounded by the HTTP body limit; this bounds
/// the objects built from it).
///
/// ```
/// use bytes::Bytes;
/// use flagsync_core::fdv2::{Error, PayloadLimits, parse_poll_with};
///
/// let body = Bytes::from_static(br#"{"events":[
///   {"event":"server-intent","data":{"payloads":[{"intentCode":"xfer-full"}]}},
///   {"event":"put-object","data":{"version":1,"kind":"flag","key":"f","object":{"key":"f","version":2}}},
///   {"event":"put-object","data":{"version":1,"kind":"flag","key":"g","object":{"key":"g","version":2}}},
///   {"event":"payload-transferred","data":{"state":"s","version":1}}]}"#);
/// let one = PayloadLimits { max_bytes: 1 << 20, max_objects: 1 };
/// assert_eq!(parse_poll_with(&body, one), Err(Error::TooManyObjects { limit: 1 }));
/// ```
///
/// # Errors
/// As [`parse_poll`], with `limits`.
pub fn parse_poll_with(body: &Bytes, limits: PayloadLimits) -> Result<ChangeSet, Error> {
    let parsed: wire::PollBody<'_> = serde_json::from_slice(body)
        .map_err(|e| malformed_first(Error::from_json(wire::POLL, &e), body))?;
    let mut protocol = Protocol::with_limits(limits);
    for raw in parsed.events {
        if let Some(change_set) = read_element(&mut protocol, &slice_of(body, raw.get()), None)? {
            return Ok(change_set);
        }
    }
    Err(Error::IncompletePayload)
}

/// Run one element of a polling body's `events` (valid JSON, without surrounding
/// whitespace) through `protocol`: the change set if it completes a payload.
///
/// Elements without an `event`, heartbeats, `goodbye` and unknown events are skipped
/// unread. With `stored`, each object put is compacted as it is read
/// ([`Change::compact_against`](crate::store::Change)): an item the store holds already
/// takes the stored buffer, any other a buffer of its own, so `element` is not kept.
pub(super) fn read_element(
    protocol: &mut Protocol,
    element: &Bytes,
    stored: Option<&Snapshot>,
) -> Result<Option<ChangeSet>, Error> {
    let schema = Error::Schema { event: wire::POLL };
    if element.first() != Some(&b'{') {
        return Err(schema);
    }
    let parsed: wire::PollEvent<'_> = serde_json::from_slice(element).map_err(|_| schema)?;
    let Some(name) = parsed.event else {
        return Ok(None);
    };
    match Name::parse(&name) {
        None | Some(Name::Heartbeat | Name::Goodbye) => return Ok(None),
        Some(_) => {}
    }
    let data = parsed.data.ok_or(Error::Schema {
        event: event_name(&name),
    })?;
    let mut event = parse_event(&name, &slice_of(element, data.get()))?;
    if let (Some(stored), Event::PutObject(put)) = (stored, &mut event) {
        put.change.compact_against(stored);
    }
    match protocol.handle_event(event)? {
        Action::Apply(change_set) => Ok(Some(change_set)),
        Action::Goodbye { .. } | Action::ServerError { .. } | Action::Ignore => Ok(None),
    }
}

/// Parse an FDv2 polling body, or an FDv1-shaped one (`{"flags":…,"segments":…}`, no
/// `events`), which an FDv2 polling source accepts as a full transfer with the empty
/// selector (PROTOCOL.md E 38): a server that still answers in FDv1 keeps the client
/// working, at CACHED availability.
///
/// ```
/// use bytes::Bytes;
/// use flagsync_core::fdv2::parse_poll_or_fdv1;
/// use flagsync_core::store::Transfer;
///
/// let fdv1 = Bytes::from_static(br#"{"flags":{"f":{"key":"f","version":1}},"segments":{}}"#);
/// assert_eq!(parse_poll_or_fdv1(&fdv1).unwrap().transfer, Transfer::Full);
/// // A broken FDv2 body is not mistaken for an empty FDv1 one.
/// assert!(parse_poll_or_fdv1(&Bytes::from_static(br#"{"events":5}"#)).is_err());
/// assert!(parse_poll_or_fdv1(&Bytes::from_static(br#"{}"#)).is_err());
/// ```
///
/// # Errors
/// As [`parse_poll`], for a body that is not FDv1-shaped either.
pub fn parse_poll_or_fdv1(body: &Bytes) -> Result<ChangeSet, Error> {
    parse_poll_or_fdv1_with(body, PayloadLimits::default())
}

/// [`parse_poll_or_fdv1`], holding at most `limits` of an FDv2 payload (see
/// [`parse_poll_with`]). An FDv1-shaped body is one data set, bounded by the body limit
/// alone, like an FDv1 poll.
///
/// # Errors
/// As [`parse_poll_with`], for a body that is not FDv1-shaped either.
pub fn parse_poll_or_fdv1_with(body: &Bytes, limits: PayloadLimits) -> Result<ChangeSet, Error> {
    let err = match parse_poll_with(body, limits) {
        Ok(cs) => return Ok(cs),
        Err(e @ Error::Schema { .. }) => e,
        Err(e) => return Err(e),
    };
    match serde_json::from_slice::<wire::PollShape<'_>>(body) {
        Ok(shape)
            if shape.events.is_none() && (shape.flags.is_some() || shape.segments.is_some()) =>
        {
            parse_fdv1_fallback_poll(body)
        }
        _ => Err(err),
    }
}

/// The static name of a known protocol event, for errors.
fn event_name(name: &str) -> &'static str {
    [
        wire::SERVER_INTENT,
        wire::PUT_OBJECT,
        wire::DELETE_OBJECT,
        wire::PAYLOAD_TRANSFERRED,
        wire::ERROR,
    ]
    .into_iter()
    .find(|n| *n == name)
    .unwrap_or(wire::POLL)
}

/// Parse an FDv1-shaped polling body `{"flags":{…},"segments":{…}}` (which an FDv2
/// initializer accepts, PROTOCOL.md E 38) as an FDv2 full transfer with the empty
/// selector.
///
/// ```
/// use bytes::Bytes;
/// use flagsync_core::fdv2::parse_fdv1_fallback_poll;
/// use flagsync_core::store::Transfer;
///
/// let body = Bytes::from_static(br#"{"flags":{"f":{"key":"f","version":1}},"segments":{}}"#);
/// let cs = parse_fdv1_fallback_poll(&body).unwrap();
/// assert_eq!((cs.transfer, cs.changes.len()), (Transfer::Full, 1));
/// ```
///
/// # Errors
/// [`Error::MalformedJson`] or [`Error::Schema`] (event `poll`).
pub fn parse_fdv1_fallback_poll(body: &Bytes) -> Result<ChangeSet, Error> {
    let changes = split_all_data(body, false)
        .map_err(|e| malformed_first(Error::from_decode(wire::POLL, e), body))?;
    Ok(ChangeSet {
        mode: ApplyMode::Fdv2,
        transfer: Transfer::Full,
        changes,
        selector: Some(Selector::default()),
    })
}
