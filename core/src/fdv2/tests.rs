use proptest::prelude::*;

use super::*;
use crate::store::{ApplyMode, ChangeSet, Item, Store, Transfer};

fn parse(name: &str, data: &str) -> Result<Event, Error> {
    parse_event(name, &Bytes::copy_from_slice(data.as_bytes()))
}

fn ev(name: &str, data: &str) -> Event {
    parse(name, data).unwrap_or_else(|e| panic!("{name} {data}: {e:?}"))
}

fn intent(code: &str) -> Event {
    ev(
        "server-intent",
        &format!(r#"{{"payloads":[{{"id":"p","target":3,"intentCode":"{code}","reason":"r"}}]}}"#),
    )
}

fn put(kind: &str, key: &str, env_version: u64, obj_version: u64) -> Event {
    ev(
        "put-object",
        &format!(
            r#"{{"version":{env_version},"kind":"{kind}","key":"{key}","object":{{"key":"{key}","version":{obj_version}}}}}"#
        ),
    )
}

fn del(kind: &str, key: &str, version: u64) -> Event {
    ev(
        "delete-object",
        &format!(r#"{{"version":{version},"kind":"{kind}","key":"{key}"}}"#),
    )
}

fn transferred(state: &str, version: u64) -> Event {
    ev(
        "payload-transferred",
        &format!(r#"{{"state":"{state}","version":{version}}}"#),
    )
}

fn sel(state: &str, version: u64) -> Selector {
    Selector {
        state: state.into(),
        version,
    }
}

/// Feed `events` to `protocol`, applying every change set to `store`; return the
/// actions.
fn run(protocol: &mut Protocol, store: &mut Store, events: Vec<Event>) -> Vec<Action> {
    events
        .into_iter()
        .map(|e| {
            let a = protocol.handle_event(e).unwrap();
            if let Action::Apply(cs) = &a {
                store.apply(cs.clone());
            }
            a
        })
        .collect()
}

fn flags(store: &Store) -> Vec<(String, u64)> {
    store
        .data()
        .sorted(Kind::Flag)
        .into_iter()
        .map(|(k, i)| (k.to_owned(), i.version))
        .collect()
}

fn schema(event: &'static str) -> Error {
    Error::Schema { event }
}

// ---- event shapes ----------------------------------------------------------------

#[test]
fn server_intent_all_codes_and_defaults() {
    for (code, want) in [
        ("xfer-full", IntentCode::TransferFull),
        ("xfer-changes", IntentCode::TransferChanges),
        ("none", IntentCode::None),
    ] {
        assert_eq!(
            intent(code),
            Event::ServerIntent(ServerIntent {
                code: want,
                id: "p".into(),
                target: 3,
                reason: "r".into()
            })
        );
    }
    let minimal = ev("server-intent", r#"{"payloads":[{"intentCode":"none"}]}"#);
    assert_eq!(
        minimal,
        Event::ServerIntent(ServerIntent {
            code: IntentCode::None,
            id: String::new(),
            target: 0,
            reason: String::new()
        })
    );
    let nulls = ev(
        "server-intent",
        r#"{"payloads":[{"id":null,"target":null,"reason":null,"intentCode":"none","extra":1}]}"#,
    );
    assert_eq!(nulls, minimal);
}

#[test]
fn server_intent_invalid() {
    for data in [
        r#"{"payloads":[]}"#,
        r#"{"payloads":[{"intentCode":"none"},{"intentCode":"none"}]}"#,
        r#"{"payloads":{"intentCode":"none"}}"#,
        r#"{"payloads":null}"#,
        r#"{}"#,
        r#"{"payloads":[{}]}"#,
        r#"{"payloads":[{"intentCode":null}]}"#,
        r#"{"payloads":[{"intentCode":"xfer-everything"}]}"#,
        r#"{"payloads":[{"intentCode":"none","target":"3"}]}"#,
        r#"[]"#,
    ] {
        assert_eq!(
            parse("server-intent", data),
            Err(schema("server-intent")),
            "{data}"
        );
    }
    assert_eq!(
        parse("server-intent", r#"{"payloads":["#),
        Err(Error::MalformedJson {
            event: "server-intent"
        })
    );
}

#[test]
fn put_object_keeps_the_object_raw_and_zero_copy() {
    let data = Bytes::from_static(
        br#"{"version":461,"kind":"flag","key":"f","object":{"key":"f","version":112,"on":true,"prerequisites":[{"key":"p","variation":0}]}}"#,
    );
    let Ok(Event::PutObject(p)) = parse_event("put-object", &data) else {
        panic!()
    };
    assert_eq!(p.version, 461);
    assert_eq!((p.change.kind, p.change.key.as_str()), (Kind::Flag, "f"));
    assert_eq!(p.change.item.version, 112, "the object's own version");
    assert!(!p.change.item.deleted);
    assert_eq!(p.change.depends_on, [(Kind::Flag, "p".to_owned())]);
    assert!(
        p.change
            .item
            .raw
            .starts_with(br#"{"key":"f","version":112"#)
    );
    let inside = p.change.item.raw.as_ptr() as usize - data.as_ptr() as usize;
    assert!(inside < data.len(), "a slice of the event data");

    let seg = put("segment", "s", 1, 2);
    let Event::PutObject(p) = seg else { panic!() };
    assert_eq!((p.change.kind, p.change.item.version), (Kind::Segment, 2));
}

#[test]
fn put_object_key_comes_from_the_envelope() {
    let e = ev(
        "put-object",
        r#"{"version":1,"kind":"flag","key":"outer","object":{"version":5}}"#,
    );
    let Event::PutObject(p) = e else { panic!() };
    assert_eq!(p.change.key, "outer");
}

#[test]
fn put_object_invalid() {
    for data in [
        r#"{"kind":"flag","key":"f","object":{"key":"f","version":1}}"#,
        r#"{"version":1,"key":"f","object":{"key":"f","version":1}}"#,
        r#"{"version":1,"kind":"flag","object":{"key":"f","version":1}}"#,
        r#"{"version":1,"kind":"flag","key":"f"}"#,
        r#"{"version":1,"kind":"flag","key":"f","object":null}"#,
        r#"{"version":null,"kind":"flag","key":"f","object":{"key":"f","version":1}}"#,
        r#"{"version":"1","kind":"flag","key":"f","object":{"key":"f","version":1}}"#,
        r#"{"version":1,"kind":"flag","key":"f","object":{"key":"f"}}"#,
        r#"{"version":1,"kind":"flag","key":"f","object":[1]}"#,
        r#"{"version":-1,"kind":"flag","key":"f","object":{"key":"f","version":1}}"#,
    ] {
        assert_eq!(
            parse("put-object", data),
            Err(schema("put-object")),
            "{data}"
        );
    }
    assert_eq!(
        parse(
            "put-object",
            r#"{"version":1,"kind":"flag","key":"f","object":{"#
        ),
        Err(Error::MalformedJson {
            event: "put-object"
        })
    );
    assert_eq!(
        parse("put-object", "not json"),
        Err(Error::MalformedJson {
            event: "put-object"
        })
    );
}

#[test]
fn delete_object_shapes() {
    assert_eq!(
        del("segment", "s", 9),
        Event::DeleteObject(DeleteObject {
            kind: Kind::Segment,
            key: "s".into(),
            version: 9
        })
    );
    for data in [
        r#"{"kind":"flag","key":"f"}"#,
        r#"{"version":1,"key":"f"}"#,
        r#"{"version":1,"kind":"flag"}"#,
        r#"{"version":1,"kind":"flag","key":null}"#,
    ] {
        assert_eq!(
            parse("delete-object", data),
            Err(schema("delete-object")),
            "{data}"
        );
    }
    assert_eq!(
        parse("delete-object", "{"),
        Err(Error::MalformedJson {
            event: "delete-object"
        })
    );
}

#[test]
fn unknown_object_kinds_are_ignored() {
    assert_eq!(
        parse(
            "put-object",
            r#"{"version":1,"kind":"experiment","key":"x","object":{"anything":true}}"#
        ),
        Ok(Event::UnknownObjectKind {
            kind: "experiment".into()
        })
    );
    assert_eq!(
        parse(
            "delete-object",
            r#"{"version":1,"kind":"experiment","key":"x"}"#
        ),
        Ok(Event::UnknownObjectKind {
            kind: "experiment".into()
        })
    );
    // Required fields are still required.
    assert_eq!(
        parse("delete-object", r#"{"kind":"experiment","key":"x"}"#),
        Err(schema("delete-object"))
    );
    let mut p = Protocol::new();
    p.handle_event(intent("xfer-full")).unwrap();
    assert_eq!(
        p.handle_event(Event::UnknownObjectKind { kind: "x".into() }),
        Ok(Action::Ignore)
    );
    assert!(p.builder().changes().is_empty());
}

#[test]
fn payload_transferred_shapes() {
    assert_eq!(
        parse(
            "payload-transferred",
            r#"{"state":"(p:1:2)","version":2,"id":"ignored"}"#
        ),
        Ok(Event::PayloadTransferred(sel("(p:1:2)", 2)))
    );
    for data in [
        r#"{"version":2}"#,
        r#"{"state":"s"}"#,
        r#"{"state":null,"version":2}"#,
        r#"{"state":"s","version":null}"#,
    ] {
        assert_eq!(
            parse("payload-transferred", data),
            Err(schema("payload-transferred")),
            "{data}"
        );
    }
    assert!(!sel("", 0).is_defined());
}

#[test]
fn goodbye_and_error_shapes() {
    assert_eq!(
        parse("goodbye", r#"{"reason":"bye","silent":true}"#),
        Ok(Event::Goodbye {
            reason: "bye".into()
        })
    );
    assert_eq!(parse("goodbye", r#"{}"#), Err(schema("goodbye")));
    assert_eq!(
        parse("error", r#"{"payloadId":"p","reason":"oops"}"#),
        Ok(Event::Error {
            payload_id: "p".into(),
            reason: "oops".into()
        })
    );
    assert_eq!(parse("error", r#"{"reason":"oops"}"#), Err(schema("error")));
    assert_eq!(parse("error", r#"{"payloadId":"p"}"#), Err(schema("error")));
    assert_eq!(
        parse("error", "{"),
        Err(Error::MalformedJson { event: "error" })
    );
}

#[test]
fn heartbeat_both_spellings_and_unknown_events_are_not_parsed() {
    assert_eq!(parse("heart-beat", "not json {"), Ok(Event::Heartbeat));
    assert_eq!(parse("heartbeat", ""), Ok(Event::Heartbeat));
    assert_eq!(
        parse("something-new", "not json {"),
        Ok(Event::Unknown("something-new".into()))
    );
    assert_eq!(
        parse("put", "{}"),
        Ok(Event::Unknown("put".into())),
        "FDv1 names are unknown here"
    );
}

#[test]
fn every_error_is_invalid_data() {
    for e in [
        Error::MalformedJson { event: "x" },
        Error::Schema { event: "x" },
        Error::MissingIntent,
        Error::IncompletePayload,
    ] {
        assert_eq!(e.kind(), crate::ErrorKind::InvalidData);
        assert!(!e.to_string().ends_with('.'));
    }
    assert_eq!(
        Error::MissingIntent.to_string(),
        "changeset: cannot complete without a server-intent"
    );
}

// ---- builder ---------------------------------------------------------------------

fn change(key: &str) -> Change {
    let Event::PutObject(p) = put("flag", key, 1, 1) else {
        panic!()
    };
    p.change
}

#[test]
fn builder_starts_empty_and_finish_needs_an_intent() {
    let mut b = ChangeSetBuilder::new();
    assert_eq!(b.intent(), None);
    assert!(b.changes().is_empty());
    assert_eq!(b.finish(sel("s", 1)), Err(Error::MissingIntent));
    assert_eq!(b.expect_changes(), Err(Error::MissingIntent));
}

#[test]
fn builder_add_does_not_check_the_intent() {
    let mut b = ChangeSetBuilder::new();
    b.add_put(change("a"));
    b.add_delete(Kind::Segment, "s", 4);
    assert_eq!(b.changes().len(), 2);
    let t = &b.changes()[1];
    assert_eq!((t.kind, t.key.as_str()), (Kind::Segment, "s"));
    assert_eq!(t.item, Item::tombstone("s", 4));
}

#[test]
fn builder_start_clears_changes_reset_keeps_intent() {
    let mut b = ChangeSetBuilder::new();
    b.add_put(change("a"));
    b.start(IntentCode::TransferChanges);
    assert!(b.changes().is_empty());
    b.add_put(change("b"));
    b.reset();
    assert!(b.changes().is_empty());
    assert_eq!(b.intent(), Some(IntentCode::TransferChanges));
}

#[test]
fn builder_expect_changes() {
    let mut b = ChangeSetBuilder::new();
    b.start(IntentCode::None);
    b.expect_changes().unwrap();
    assert_eq!(b.intent(), Some(IntentCode::TransferChanges));
    b.start(IntentCode::TransferFull);
    b.expect_changes().unwrap();
    assert_eq!(b.intent(), Some(IntentCode::TransferFull));
}

#[test]
fn builder_finish_returns_changes_and_downgrades_full() {
    let mut b = ChangeSetBuilder::new();
    b.start(IntentCode::TransferFull);
    b.add_put(change("a"));
    let cs = b.finish(sel("s1", 1)).unwrap();
    assert_eq!(cs.mode, ApplyMode::Fdv2);
    assert_eq!(cs.transfer, Transfer::Full);
    assert_eq!(cs.changes, [change("a")]);
    assert_eq!(cs.selector, Some(sel("s1", 1)));
    assert!(b.changes().is_empty());
    assert_eq!(b.intent(), Some(IntentCode::TransferChanges));
    b.add_put(change("b"));
    let cs = b.finish(sel("s2", 2)).unwrap();
    assert_eq!(cs.transfer, Transfer::Changes);
    assert_eq!(b.intent(), Some(IntentCode::TransferChanges));
    b.start(IntentCode::None);
    assert_eq!(b.finish(sel("", 0)).unwrap().transfer, Transfer::None);
}

#[test]
fn builder_no_changes_and_empty() {
    let n = ChangeSetBuilder::no_changes();
    assert_eq!(
        (n.mode, n.transfer, n.changes.len(), n.selector),
        (
            ApplyMode::Fdv2,
            Transfer::None,
            0,
            Some(Selector::default())
        )
    );
    let e = ChangeSetBuilder::empty(sel("s", 3));
    assert_eq!(
        (e.transfer, e.changes.len(), e.selector),
        (Transfer::Full, 0, Some(sel("s", 3)))
    );
}

// ---- protocol (E 28–32) ----------------------------------------------------------

#[test]
fn nothing_is_visible_before_payload_transferred() {
    let mut p = Protocol::new();
    let mut store = Store::new();
    let actions = run(
        &mut p,
        &mut store,
        vec![
            intent("xfer-full"),
            put("flag", "a", 1, 1),
            del("flag", "b", 2),
        ],
    );
    assert!(actions.iter().all(|a| *a == Action::Ignore));
    assert!(!store.initialized());
    assert_eq!(p.builder().changes().len(), 2);
    run(&mut p, &mut store, vec![transferred("s", 1)]);
    assert!(store.initialized());
    assert_eq!(flags(&store), [("a".into(), 1)]);
    assert!(
        store
            .data()
            .get_including_deleted(Kind::Flag, "b")
            .unwrap()
            .deleted
    );
    assert_eq!(store.selector(), &sel("s", 1));
}

#[test]
fn a_put_delete_or_transferred_before_the_intent_is_a_protocol_error() {
    for e in [
        put("flag", "a", 1, 1),
        del("flag", "a", 1),
        transferred("s", 1),
    ] {
        let mut p = Protocol::new();
        assert_eq!(p.handle_event(e), Err(Error::MissingIntent));
    }
    // Heartbeats, goodbyes and unknown events before the intent are fine.
    let mut p = Protocol::new();
    assert_eq!(p.handle_event(Event::Heartbeat), Ok(Action::Ignore));
    assert_eq!(
        p.handle_event(Event::Unknown("x".into())),
        Ok(Action::Ignore)
    );
    assert_eq!(
        p.handle_event(Event::Goodbye { reason: "r".into() }),
        Ok(Action::Goodbye { reason: "r".into() })
    );
}

#[test]
fn xfer_full_replaces_xfer_changes_merges_none_is_a_no_op() {
    let mut p = Protocol::new();
    let mut store = Store::new();
    run(
        &mut p,
        &mut store,
        vec![
            intent("xfer-full"),
            put("flag", "a", 1, 1),
            put("flag", "b", 1, 1),
            transferred("s1", 1),
        ],
    );
    assert_eq!(flags(&store), [("a".into(), 1), ("b".into(), 1)]);
    // Changes on the same connection merge (no new intent needed).
    run(
        &mut p,
        &mut store,
        vec![
            put("flag", "c", 2, 1),
            del("flag", "a", 2),
            transferred("s2", 2),
        ],
    );
    assert_eq!(flags(&store), [("b".into(), 1), ("c".into(), 1)]);
    assert_eq!(store.selector(), &sel("s2", 2));
    // xfer-changes merges too.
    run(
        &mut p,
        &mut store,
        vec![
            intent("xfer-changes"),
            put("flag", "d", 3, 1),
            transferred("s3", 3),
        ],
    );
    assert_eq!(flags(&store).len(), 3);
    // none: up to date, nothing changes, the selector stays.
    let actions = run(&mut p, &mut store, vec![intent("none")]);
    assert_eq!(actions, [Action::Apply(ChangeSetBuilder::no_changes())]);
    assert_eq!(flags(&store).len(), 3);
    assert_eq!(store.selector(), &sel("s3", 3));
    assert_eq!(p.builder().intent(), Some(IntentCode::TransferChanges));
    // A second xfer-full replaces again: absent keys are removed.
    run(
        &mut p,
        &mut store,
        vec![
            intent("xfer-full"),
            put("flag", "z", 4, 1),
            transferred("s4", 4),
        ],
    );
    assert_eq!(flags(&store), [("z".into(), 1)]);
    assert_eq!(store.selector(), &sel("s4", 4));
}

#[test]
fn object_versions_are_ignored() {
    let mut p = Protocol::new();
    let mut store = Store::new();
    run(
        &mut p,
        &mut store,
        vec![
            intent("xfer-full"),
            put("flag", "a", 10, 10),
            transferred("s1", 1),
            put("flag", "a", 11, 3),
            transferred("s2", 2),
        ],
    );
    assert_eq!(
        flags(&store),
        [("a".into(), 3)],
        "an older object version wins"
    );
    // A full transfer with a lower version replaces too.
    run(
        &mut p,
        &mut store,
        vec![
            intent("xfer-full"),
            put("flag", "a", 1, 1),
            transferred("s3", 3),
        ],
    );
    assert_eq!(flags(&store), [("a".into(), 1)]);
}

#[test]
fn error_discards_uncommitted_changes_then_later_changes_apply() {
    let mut p = Protocol::new();
    let mut store = Store::new();
    let actions = run(
        &mut p,
        &mut store,
        vec![
            intent("xfer-full"),
            put("flag", "lost", 1, 1),
            ev("error", r#"{"payloadId":"p","reason":"boom"}"#),
        ],
    );
    assert_eq!(
        actions[2],
        Action::ServerError {
            payload_id: "p".into(),
            reason: "boom".into()
        }
    );
    assert!(p.builder().changes().is_empty());
    assert_eq!(p.builder().intent(), Some(IntentCode::TransferFull));
    run(
        &mut p,
        &mut store,
        vec![
            Event::Heartbeat,
            put("flag", "kept", 1, 1),
            ev("heartbeat", ""),
            Event::Unknown("x".into()),
            transferred("s", 1),
        ],
    );
    assert_eq!(flags(&store), [("kept".into(), 1)]);
    assert!(store.initialized());
}

#[test]
fn a_new_intent_drops_partial_changes() {
    let mut p = Protocol::new();
    let mut store = Store::new();
    run(
        &mut p,
        &mut store,
        vec![
            intent("xfer-full"),
            put("flag", "lost", 1, 1),
            intent("xfer-full"),
            put("flag", "kept", 1, 1),
            transferred("s", 1),
        ],
    );
    assert_eq!(flags(&store), [("kept".into(), 1)]);
}

#[test]
fn goodbye_changes_nothing() {
    let mut p = Protocol::new();
    p.handle_event(intent("xfer-full")).unwrap();
    p.handle_event(put("flag", "a", 1, 1)).unwrap();
    let before = p.clone();
    assert_eq!(
        p.handle_event(ev("goodbye", r#"{"reason":"r"}"#)),
        Ok(Action::Goodbye { reason: "r".into() })
    );
    assert_eq!(p, before);
}

// ---- polling (E 38) --------------------------------------------------------------

fn poll(body: &str) -> Result<ChangeSet, Error> {
    parse_poll(&Bytes::copy_from_slice(body.as_bytes()))
}

const INTENT_FULL: &str = r#"{"event":"server-intent","data":{"payloads":[{"id":"p","target":1,"intentCode":"xfer-full"}]}}"#;
const PUT_A: &str = r#"{"event":"put-object","data":{"version":461,"kind":"flag","key":"a","object":{"key":"a","version":112}}}"#;
const DEL_B: &str = r#"{"event":"delete-object","data":{"version":5,"kind":"segment","key":"b"}}"#;
const DONE: &str = r#"{"event":"payload-transferred","data":{"state":"s","version":1}}"#;

fn events(list: &[&str]) -> String {
    format!(r#"{{"events":[{}]}}"#, list.join(","))
}

#[test]
fn poll_full_payload() {
    let cs = poll(&events(&[INTENT_FULL, PUT_A, DEL_B, DONE])).unwrap();
    assert_eq!((cs.mode, cs.transfer), (ApplyMode::Fdv2, Transfer::Full));
    assert_eq!(cs.selector, Some(sel("s", 1)));
    let got: Vec<_> = cs
        .changes
        .iter()
        .map(|c| (c.kind, c.key.as_str(), c.item.version, c.item.deleted))
        .collect();
    assert_eq!(
        got,
        [(Kind::Flag, "a", 112, false), (Kind::Segment, "b", 5, true)]
    );
}

#[test]
fn poll_items_are_slices_of_the_body() {
    let body = Bytes::from(events(&[INTENT_FULL, PUT_A, DONE]));
    let cs = parse_poll(&body).unwrap();
    let raw = &cs.changes[0].item.raw;
    assert_eq!(&raw[..], br#"{"key":"a","version":112}"#);
    let inside = raw.as_ptr() as usize - body.as_ptr() as usize;
    assert!(inside < body.len());
}

#[test]
fn poll_stops_at_the_first_transferred_or_none() {
    let cs = poll(&events(&[INTENT_FULL, PUT_A, DONE, DEL_B, "42"])).unwrap();
    assert_eq!(cs.changes.len(), 1);
    let none = r#"{"event":"server-intent","data":{"payloads":[{"intentCode":"none"}]}}"#;
    assert_eq!(
        poll(&events(&[none, PUT_A, "garbage-but-json"])),
        Err(Error::MalformedJson { event: "poll" })
    );
    assert_eq!(
        poll(&events(&[none, PUT_A, r#""not an object""#])),
        Ok(ChangeSetBuilder::no_changes())
    );
}

#[test]
fn poll_skips_elements_without_event_and_non_protocol_events() {
    let body = events(&[
        r#"{"data":{}}"#,
        r#"{"event":"heart-beat","data":"whatever"}"#,
        r#"{"event":"heartbeat"}"#,
        r#"{"event":"goodbye","data":{}}"#,
        r#"{"event":"new-thing","data":[1,2]}"#,
        INTENT_FULL,
        r#"{"event":"put-object","data":{"version":1,"kind":"experiment","key":"x","object":{}}}"#,
        PUT_A,
        DONE,
    ]);
    assert_eq!(poll(&body).unwrap().changes.len(), 1);
}

#[test]
fn poll_error_event_drops_partial_changes() {
    let err = r#"{"event":"error","data":{"payloadId":"p","reason":"r"}}"#;
    let cs = poll(&events(&[INTENT_FULL, PUT_A, err, DEL_B, DONE])).unwrap();
    assert_eq!(cs.changes.len(), 1);
    assert_eq!(cs.changes[0].key, "b");
}

#[test]
fn poll_must_not_start_with_a_put_or_transferred() {
    assert_eq!(poll(&events(&[PUT_A, DONE])), Err(Error::MissingIntent));
    assert_eq!(poll(&events(&[DONE])), Err(Error::MissingIntent));
    assert_eq!(poll(&events(&[DEL_B, DONE])), Err(Error::MissingIntent));
}

#[test]
fn poll_invalid_bodies() {
    for body in [
        r#"{}"#,
        r#"{"events":{}}"#,
        r#"{"events":null}"#,
        r#"[]"#,
        r#"{"events":[1]}"#,
        r#"{"events":[["put-object",{}]]}"#,
    ] {
        assert_eq!(poll(body), Err(schema("poll")), "{body}");
    }
    assert_eq!(poll("{"), Err(Error::MalformedJson { event: "poll" }));
    assert_eq!(poll(r#"{"events":[]}"#), Err(Error::IncompletePayload));
    assert_eq!(
        poll(&events(&[INTENT_FULL, PUT_A])),
        Err(Error::IncompletePayload)
    );
    assert_eq!(
        poll(&events(&[r#"{"event":"put-object"}"#])),
        Err(schema("put-object"))
    );
    assert_eq!(
        poll(&events(&[
            INTENT_FULL,
            r#"{"event":"put-object","data":{"version":1,"kind":"flag","key":"a"}}"#
        ])),
        Err(schema("put-object"))
    );
    assert_eq!(
        poll(&events(&[
            r#"{"event":"server-intent","data":{"payloads":[{"intentCode":"bogus"}]}}"#
        ])),
        Err(schema("server-intent"))
    );
}

#[test]
fn poll_applied_to_a_store() {
    let mut store = Store::new();
    store.apply(poll(&events(&[INTENT_FULL, PUT_A, DEL_B, DONE])).unwrap());
    assert!(store.initialized());
    assert_eq!(flags(&store), [("a".into(), 112)]);
    assert_eq!(store.selector(), &sel("s", 1));
}

#[test]
fn fdv1_shaped_poll_is_a_full_transfer_with_the_empty_selector() {
    let body = Bytes::from_static(
        br#"{"flags":{"f":{"key":"f","version":3}},"segments":{"s":{"key":"s","version":1}}}"#,
    );
    let cs = parse_fdv1_fallback_poll(&body).unwrap();
    assert_eq!((cs.mode, cs.transfer), (ApplyMode::Fdv2, Transfer::Full));
    assert_eq!(cs.selector, Some(Selector::default()));
    assert_eq!(cs.changes.len(), 2);
    let mut store = Store::new();
    store.apply(cs);
    assert!(store.initialized());
    assert!(!store.selector().is_defined());
    assert_eq!(
        parse_fdv1_fallback_poll(&Bytes::from_static(b"{")),
        Err(Error::MalformedJson { event: "poll" })
    );
    assert_eq!(
        parse_fdv1_fallback_poll(&Bytes::from_static(b"[]")),
        Err(schema("poll"))
    );
}

// ---- properties ------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    Put(u8, u8),
    Del(u8, u8),
}

fn op_event(op: &Op) -> Event {
    match *op {
        Op::Put(k, v) => put("flag", &format!("k{k}"), 1, u64::from(v)),
        Op::Del(k, v) => del("flag", &format!("k{k}"), u64::from(v)),
    }
}

fn noise() -> impl Strategy<Value = Event> {
    prop_oneof![
        Just(Event::Heartbeat),
        Just(Event::Unknown("x".into())),
        Just(Event::UnknownObjectKind { kind: "y".into() }),
        Just(Event::Goodbye { reason: "g".into() }),
    ]
}

proptest! {
    /// Noise between the events of a payload changes nothing, the change set keeps the
    /// order of the changes, and nothing is applied before `payload-transferred`.
    #[test]
    fn noise_is_ignored_and_order_kept(
        ops in prop::collection::vec(
            prop_oneof![
                (0u8..4, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
                (0u8..4, any::<u8>()).prop_map(|(k, v)| Op::Del(k, v)),
            ],
            0..12,
        ),
        noise in prop::collection::vec(prop::option::of(noise()), 13),
    ) {
        let mut clean = Protocol::new();
        let mut noisy = Protocol::new();
        clean.handle_event(intent("xfer-full")).unwrap();
        noisy.handle_event(intent("xfer-full")).unwrap();
        for (i, op) in ops.iter().enumerate() {
            if let Some(n) = &noise[i] {
                let a = noisy.handle_event(n.clone()).unwrap();
                prop_assert!(!matches!(a, Action::Apply(_)));
            }
            prop_assert_eq!(clean.handle_event(op_event(op)).unwrap(), Action::Ignore);
            prop_assert_eq!(noisy.handle_event(op_event(op)).unwrap(), Action::Ignore);
        }
        let Action::Apply(a) = clean.handle_event(transferred("s", 1)).unwrap() else { panic!() };
        let Action::Apply(b) = noisy.handle_event(transferred("s", 1)).unwrap() else { panic!() };
        prop_assert_eq!(&a, &b);
        let keys: Vec<_> = a.changes.iter().map(|c| c.key.clone()).collect();
        let want: Vec<_> = ops
            .iter()
            .map(|op| match op { Op::Put(k, _) | Op::Del(k, _) => format!("k{k}") })
            .collect();
        prop_assert_eq!(keys, want);
        // The last change to a key wins, whatever the versions.
        let mut store = Store::new();
        store.apply(a);
        let mut want = std::collections::HashMap::new();
        for op in &ops {
            match *op {
                Op::Put(k, v) => want.insert(k, (u64::from(v), false)),
                Op::Del(k, v) => want.insert(k, (u64::from(v), true)),
            };
        }
        for (k, (v, deleted)) in want {
            let item = store.data().get_including_deleted(Kind::Flag, &format!("k{k}")).unwrap();
            prop_assert_eq!((item.version, item.deleted), (v, deleted));
        }
    }

    /// The same payload gives the same change set over the stream and in a poll body.
    #[test]
    fn stream_and_poll_agree(keys in prop::collection::vec(0u8..8, 0..8)) {
        let mut list = vec![INTENT_FULL.to_owned()];
        let mut p = Protocol::new();
        p.handle_event(intent("xfer-full")).unwrap();
        for (i, k) in keys.iter().enumerate() {
            let data = format!(r#"{{"version":{i},"kind":"segment","key":"s{k}","object":{{"key":"s{k}","version":{i}}}}}"#);
            list.push(format!(r#"{{"event":"put-object","data":{data}}}"#));
            p.handle_event(ev("put-object", &data)).unwrap();
        }
        list.push(DONE.to_owned());
        let Action::Apply(streamed) = p.handle_event(transferred("s", 1)).unwrap() else { panic!() };
        let refs: Vec<&str> = list.iter().map(String::as_str).collect();
        prop_assert_eq!(poll(&events(&refs)).unwrap(), streamed);
    }
}

/// The one-pass `put-object` reading agrees with the general serde_json way on every
/// shape, errors included.
#[test]
fn put_object_fast_path_agrees_with_the_general_parse() {
    let deep = format!(
        r#"{{"version":1,"kind":"flag","key":"d","object":{{"key":"d","version":1,"x":{}{}}}}}"#,
        "[".repeat(126),
        "]".repeat(126)
    );
    let cases = [
        r#"{"version":3,"kind":"flag","key":"f","object":{"key":"f","version":2,"prerequisites":[{"key":"p"}]}}"#,
        r#"{"version":3,"kind":"segment","key":"s","object":{"key":"s","version":2,"rules":[{"clauses":[{"op":"segmentMatch","values":["t"]}]}]}}"#,
        r#" { "version" : 3 , "kind" : "flag" , "key" : "f" , "object" : {"version":2} } "#,
        r#"{"object":{"key":"f","version":2},"version":3,"kind":"flag","key":"f"}"#,
        r#"{"version":3,"kind":"flag","key":"f","object":{"key":"f","version":2},"extra":[1]}"#,
        r#"{"version":3,"version":4,"kind":"flag","key":"f","object":{"version":2}}"#,
        r#"{"version":3,"kind":"flag","kind":"segment","key":"f","object":{"version":2}}"#,
        r#"{"version":3,"kind":"flag","key":"f","key":"g","object":{"version":2}}"#,
        r#"{"version":3,"kind":"flag","key":"f","object":{"version":2},"object":{"version":5}}"#,
        r#"{"v\u0065rsion":3,"kind":"fl\u0061g","key":"\u00e9","object":{"version":2}}"#,
        r#"{"version":3,"kind":"experiment","key":"x","object":{}}"#,
        r#"{"version":3,"kind":"flag","key":"f"}"#,
        r#"{"kind":"flag","key":"f","object":{"version":2}}"#,
        r#"{"version":"3","kind":"flag","key":"f","object":{"version":2}}"#,
        r#"{"version":-3,"kind":"flag","key":"f","object":{"version":2}}"#,
        r#"{"version":3.5,"kind":"flag","key":"f","object":{"version":2}}"#,
        r#"{"version":3,"kind":7,"key":"f","object":{"version":2}}"#,
        r#"{"version":3,"kind":"flag","key":null,"object":{"version":2}}"#,
        r#"{"version":3,"kind":"flag","key":"f","object":[]}"#,
        r#"{"version":3,"kind":"flag","key":"f","object":{"key":"f"}}"#,
        r#"{"version":3,"kind":"flag","key":"f","object":{"version":2,}}"#,
        r#"{"version":3,"kind":"flag","key":"f","object":{"version":2}} x"#,
        r#"{"version":3,"kind":"flag","key":"f","object":{"version":2}"#,
        r#"[3,"flag","f",{"version":2}]"#,
        &deep,
    ];
    for data in cases {
        let data = Bytes::copy_from_slice(data.as_bytes());
        assert_eq!(parse_put(&data), parse_put_general(&data), "{data:?}");
    }
    let bad_utf8 = Bytes::from_static(
        b"{\"version\":3,\"kind\":\"flag\",\"key\":\"\xff\",\"object\":{\"version\":2}}",
    );
    assert_eq!(parse_put(&bad_utf8), parse_put_general(&bad_utf8));
}

proptest! {
    /// Same agreement on `put-object` data cut or corrupted at any point.
    #[test]
    fn put_object_fast_path_agrees_on_damaged_data(cut in 0usize..160, byte in 0u8..128, at in 0usize..160) {
        let good = br#"{"version":9,"kind":"flag","key":"f","object":{"key":"f","version":2,"rules":[{"clauses":[{"op":"segmentMatch","values":["s"]}]}]}}"#;
        let mut v = good[..cut.min(good.len())].to_vec();
        if let Some(b) = v.get_mut(at) {
            *b = byte;
        }
        for data in [Bytes::from(v), Bytes::from_static(good)] {
            prop_assert_eq!(parse_put(&data), parse_put_general(&data));
        }
    }
}
