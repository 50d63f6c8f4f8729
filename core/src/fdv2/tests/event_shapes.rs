//! Event shapes: parsing each FDv2 event, its defaults and its errors.

use super::*;

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
