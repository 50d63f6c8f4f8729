//! Polling responses (E 38), FDv2 and FDv1-shaped.

use super::*;

// ---- polling (E 38) --------------------------------------------------------------

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
