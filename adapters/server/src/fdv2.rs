//! FDv2 as the server sends it (PROTOCOL.md B §5.1, §5.2, §5.5): the events of a
//! payload, framed as server-sent events for `/sdk/stream` or as one
//! `{"events":[…]}` body for `/sdk/poll`.

use serde_json::json;

use super::data::{Encoded, Fdv2Objects, ItemKind};
use std::sync::Arc;

use crate::hub::Frame;

/// Every object's `put-object` event, as SSE text made once per data version.
fn objects_sse(objects: &Fdv2Objects) -> Arc<[u8]> {
    objects
        .objects_sse
        .get_or_init(|| {
            let puts: Vec<Event> = objects.objects.iter().map(|o| put(o.put_data())).collect();
            to_sse(&puts).into_bytes().into()
        })
        .clone()
}

/// A full transfer on a stream for `reason`: its intent, the shared objects, its end.
fn full_frame(objects: &Fdv2Objects, reason: &str) -> Frame {
    let intent = to_sse(&[server_intent("xfer-full", objects.version, reason)]);
    let done = to_sse(&[payload_transferred(&objects.state, objects.version)]);
    Frame::from_pieces(vec![
        intent.into_bytes().into(),
        objects_sse(objects),
        done.into_bytes().into(),
    ])
}

/// The whole data set as one `xfer-full` payload on an open stream (the data was
/// replaced); the objects are shared by every stream.
pub(super) fn full_transfer_frame(objects: &Fdv2Objects) -> Frame {
    full_frame(objects, "replaced")
}

/// The first payload of a stream whose client has no basis (`has_basis == false`) or
/// an old one: a full transfer, the objects shared by every stream.
pub(super) fn initial_frame(objects: &Fdv2Objects, has_basis: bool) -> Frame {
    full_frame(
        objects,
        if has_basis {
            "cant-catchup"
        } else {
            "payload-missing"
        },
    )
}

/// The payload id the server announces in `server-intent` and `error`.
pub(super) const PAYLOAD_ID: &str = "flagsync-local";

/// One FDv2 event: its name and its JSON data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Event {
    pub(super) name: &'static str,
    pub(super) data: String,
}

impl Event {
    fn new(name: &'static str, data: impl Into<String>) -> Self {
        Self {
            name,
            data: data.into(),
        }
    }
}

/// `server-intent` with one payload.
fn server_intent(code: &str, target: u64, reason: &str) -> Event {
    let data = json!({"payloads": [
        {"id": PAYLOAD_ID, "target": target, "intentCode": code, "reason": reason}
    ]});
    Event::new("server-intent", data.to_string())
}

/// A `delete-object`.
pub(super) fn delete_object(kind: ItemKind, key: &str, version: u64) -> Event {
    let data = json!({"version": version, "kind": kind.fdv2_name(), "key": key});
    Event::new("delete-object", data.to_string())
}

/// A `put-object` from its data.
pub(super) fn put(data: String) -> Event {
    Event::new("put-object", data)
}

/// `payload-transferred`: the payload is complete, with this selector.
pub(super) fn payload_transferred(state: &str, version: u64) -> Event {
    Event::new(
        "payload-transferred",
        json!({"state": state, "version": version}).to_string(),
    )
}

/// `goodbye`.
pub(super) fn goodbye(reason: &str) -> Event {
    Event::new("goodbye", json!({"reason": reason}).to_string())
}

/// `heart-beat` (its data is never read).
pub(super) fn heartbeat() -> Event {
    Event::new("heart-beat", "{}")
}

/// The first payload for a client whose selector state is `basis`: intent `none` if
/// it is current; otherwise every object as a full transfer. With `error_halfway`, an
/// `error` event interrupts the objects half-way and they are all sent again (the
/// client drops the partial changes and keeps the intent, PROTOCOL.md B §5.3).
pub(super) fn initial_payload(
    objects: &Fdv2Objects,
    basis: Option<&str>,
    error_halfway: bool,
) -> Vec<Event> {
    let (state, version) = (objects.state.as_str(), objects.version);
    if basis == Some(state) {
        return vec![server_intent("none", version, "up-to-date")];
    }
    let reason = if basis.is_some() {
        "cant-catchup"
    } else {
        "payload-missing"
    };
    let mut events = vec![server_intent("xfer-full", version, reason)];
    if error_halfway {
        let half = objects.objects.len().div_ceil(2);
        events.extend(objects.objects[..half].iter().map(|o| put(o.put_data())));
        let error =
            json!({"payloadId": PAYLOAD_ID, "reason": "injected fault: payload interrupted"});
        events.push(Event::new("error", error.to_string()));
    }
    events.extend(objects.objects.iter().map(|o| put(o.put_data())));
    events.push(payload_transferred(state, version));
    events
}

/// The polling body of a full transfer for a client with an old basis (`has_basis`)
/// or none: encoded (and gzip-compressed) once per data version, shared by every poll.
pub(super) fn full_poll_body(objects: &Fdv2Objects, has_basis: bool) -> Arc<Encoded> {
    objects.poll_bodies[usize::from(has_basis)]
        .get_or_init(|| {
            let basis = has_basis.then_some("");
            let body = to_poll_body(&initial_payload(objects, basis, false));
            Arc::new(Encoded::new(body.into_bytes()))
        })
        .clone()
}

/// Every object of a replaced data set, as a new full transfer on an open stream (the
/// events `full_transfer_frame` encodes; tests compare them).
#[cfg(test)]
pub(super) fn full_transfer(objects: &Fdv2Objects) -> Vec<Event> {
    let mut events = vec![server_intent("xfer-full", objects.version, "replaced")];
    events.extend(objects.objects.iter().map(|o| put(o.put_data())));
    events.push(payload_transferred(&objects.state, objects.version));
    events
}

/// Events framed as server-sent events.
pub(super) fn to_sse(events: &[Event]) -> String {
    let mut out = String::new();
    for e in events {
        out.push_str("event: ");
        out.push_str(e.name);
        out.push_str("\ndata: ");
        out.push_str(&e.data);
        out.push_str("\n\n");
    }
    out
}

/// Events as a polling body, `{"events":[{"event":…,"data":{…}},…]}`.
pub(super) fn to_poll_body(events: &[Event]) -> String {
    let mut out = String::from("{\"events\":[");
    for (i, e) in events.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"event\":\"");
        out.push_str(e.name);
        out.push_str("\",\"data\":");
        out.push_str(&e.data);
        out.push('}');
    }
    out.push_str("]}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Object;
    use serde_json::Value;

    fn objects() -> Fdv2Objects {
        let object = |kind, key: &str, version: u64| {
            let raw = json!({"key": key, "version": version}).to_string();
            Object::new(kind, key, version, raw.into())
        };
        Fdv2Objects {
            state: "e-3".into(),
            version: 3,
            objects: vec![
                object(ItemKind::Flag, "a", 2),
                object(ItemKind::Flag, "b", 1),
                object(ItemKind::Segment, "s", 5),
            ],
            objects_sse: std::sync::OnceLock::new(),
            poll_bodies: Default::default(),
        }
    }

    #[test]
    fn the_shared_poll_bodies_equal_the_payloads() {
        let o = objects();
        for (basis, has) in [(None, false), (Some("old"), true)] {
            let want = to_poll_body(&initial_payload(&o, basis, false));
            assert_eq!(&*full_poll_body(&o, has).bytes, want.as_bytes());
            assert!(Arc::ptr_eq(
                &full_poll_body(&o, has),
                &full_poll_body(&o, has)
            ));
        }
    }

    #[test]
    fn shared_stream_frames_equal_the_payloads() {
        let o = objects();
        for (basis, has) in [(None, false), (Some("old"), true)] {
            let want = to_sse(&initial_payload(&o, basis, false));
            assert_eq!(initial_frame(&o, has).concat(), want.into_bytes());
        }
        let want = to_sse(&full_transfer(&o));
        assert_eq!(full_transfer_frame(&o).concat(), want.into_bytes());
    }

    fn names(events: &[Event]) -> Vec<&str> {
        events.iter().map(|e| e.name).collect()
    }

    #[test]
    fn full_payload_without_or_with_a_stale_basis() {
        for (basis, reason) in [(None, "payload-missing"), (Some("e-2"), "cant-catchup")] {
            let events = initial_payload(&objects(), basis, false);
            assert_eq!(
                names(&events),
                [
                    "server-intent",
                    "put-object",
                    "put-object",
                    "put-object",
                    "payload-transferred"
                ]
            );
            let intent: Value = serde_json::from_str(&events[0].data).unwrap();
            assert_eq!(
                intent,
                json!({"payloads": [{"id": PAYLOAD_ID, "target": 3, "intentCode": "xfer-full", "reason": reason}]})
            );
            let done: Value = serde_json::from_str(&events[4].data).unwrap();
            assert_eq!(done, json!({"state": "e-3", "version": 3}));
        }
    }

    #[test]
    fn current_basis_gets_intent_none() {
        let events = initial_payload(&objects(), Some("e-3"), true);
        assert_eq!(names(&events), ["server-intent"]);
        assert!(events[0].data.contains("\"intentCode\":\"none\""));
    }

    #[test]
    fn error_halfway_then_everything_again() {
        let events = initial_payload(&objects(), None, true);
        assert_eq!(
            names(&events),
            [
                "server-intent",
                "put-object",
                "put-object",
                "error",
                "put-object",
                "put-object",
                "put-object",
                "payload-transferred"
            ]
        );
        let error: Value = serde_json::from_str(&events[3].data).unwrap();
        assert_eq!(error["payloadId"], PAYLOAD_ID);
    }

    #[test]
    fn the_core_reads_what_the_server_sends() {
        use bytes::Bytes;
        use flagsync_core::fdv2::parse_poll;
        use flagsync_core::store::Transfer;

        for error_halfway in [false, true] {
            let body = to_poll_body(&initial_payload(&objects(), None, error_halfway));
            let cs = parse_poll(&Bytes::from(body)).unwrap();
            assert_eq!((cs.transfer, cs.changes.len()), (Transfer::Full, 3));
            let selector = cs.selector.unwrap();
            assert_eq!((selector.state.as_str(), selector.version), ("e-3", 3));
        }
        let body = to_poll_body(&initial_payload(&objects(), Some("e-3"), false));
        let cs = parse_poll(&Bytes::from(body)).unwrap();
        assert_eq!(cs.transfer, Transfer::None);
    }

    #[test]
    fn framing() {
        let events = [heartbeat(), goodbye("bye")];
        assert_eq!(
            to_sse(&events),
            "event: heart-beat\ndata: {}\n\nevent: goodbye\ndata: {\"reason\":\"bye\"}\n\n"
        );
        let body: Value = serde_json::from_str(&to_poll_body(&events)).unwrap();
        assert_eq!(
            body,
            json!({"events": [{"event": "heart-beat", "data": {}}, {"event": "goodbye", "data": {"reason": "bye"}}]})
        );
        assert_eq!(to_poll_body(&[]), "{\"events\":[]}");
    }
}
