use super::*;

fn parse(name: &str, data: &str) -> Result<Event, Error> {
    parse_event(name, &Bytes::copy_from_slice(data.as_bytes()))
}

#[test]
fn put_with_and_without_path() {
    for data in [
        r#"{"path":"/","data":{"flags":{"f":{"key":"f","version":1}},"segments":{"s":{"key":"s","version":2}}}}"#,
        r#"{"data":{"flags":{"f":{"key":"f","version":1}},"segments":{"s":{"key":"s","version":2}}}}"#,
    ] {
        let Ok(Event::Put(changes)) = parse("put", data) else {
            panic!()
        };
        let got: Vec<_> = changes
            .iter()
            .map(|c| (c.kind, c.key.as_str(), c.item.version))
            .collect();
        assert_eq!(
            got,
            [(Kind::Flag, "f", 1), (Kind::Segment, "s", 2)],
            "document order"
        );
    }
}

#[test]
fn put_items_are_slices_of_the_event_data() {
    let data = Bytes::from_static(
        br#"{"data":{"flags":{"f":{"key":"f","version":1,"on":true}},"segments":{}}}"#,
    );
    let Ok(Event::Put(changes)) = parse_event("put", &data) else {
        panic!()
    };
    assert_eq!(
        &changes[0].item.raw[..],
        br#"{"key":"f","version":1,"on":true}"#
    );
    let inside = changes[0].item.raw.as_ptr() as usize - data.as_ptr() as usize;
    assert!(inside < data.len());
}

#[test]
fn put_requires_both_maps() {
    assert_eq!(
        parse("put", r#"{"data":{"flags":{}}}"#),
        Err(Error::Schema { event: "put" })
    );
    assert_eq!(
        parse("put", r#"{"data":{"flags":true,"segments":{}}}"#),
        Err(Error::Schema { event: "put" })
    );
}

#[test]
fn malformed_json_is_invalid_data_and_schema_mismatch_is_unknown() {
    for name in ["put", "patch", "delete"] {
        let e = parse(name, "{sorry").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidData, "{name}");
    }
    assert_eq!(
        parse("patch", r#"{"path":"/flags/x","data":true}"#)
            .unwrap_err()
            .kind(),
        ErrorKind::Unknown
    );
    // Truncated and schema-invalid at once (the harness's delete case): malformed wins.
    assert_eq!(
        parse("delete", r#"{"path":"/flags/x","version":"no""#)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidData
    );
    assert_eq!(
        parse("put", r#"{"data":{"flags":true,"segments":{}}"#)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidData
    );
    assert_eq!(
        parse("delete", r#"{"path":"/flags/x","version":"no"}"#)
            .unwrap_err()
            .kind(),
        ErrorKind::Unknown
    );
}

#[test]
fn patch_keys_by_the_object_and_selects_kind_by_path() {
    let Ok(Event::Patch(c)) = parse(
        "patch",
        r#"{"path":"/segments/p","data":{"key":"s","version":4}}"#,
    ) else {
        panic!()
    };
    assert_eq!(
        (c.kind, c.key.as_str(), c.item.version),
        (Kind::Segment, "s", 4)
    );
    let Ok(Event::Patch(c)) = parse("patch", r#"{"path":"/flags/p","data":{"version":4}}"#) else {
        panic!()
    };
    assert_eq!(c.key, "p");
}

#[test]
fn delete_makes_a_keyed_tombstone_from_the_path() {
    let Ok(Event::Delete(c)) = parse("delete", r#"{"path":"/flags/gone","version":9}"#) else {
        panic!()
    };
    assert_eq!(
        (c.kind, c.key.as_str(), c.item.version, c.item.deleted),
        (Kind::Flag, "gone", 9, true)
    );
}

#[test]
fn unknown_paths_and_events_are_ignored() {
    assert_eq!(
        parse("patch", r#"{"path":"/cats/Jack","data":{}}"#),
        Ok(Event::UnknownPath("/cats/Jack".into()))
    );
    assert_eq!(
        parse("delete", r#"{"path":"/cats/Jack","version":1}"#),
        Ok(Event::UnknownPath("/cats/Jack".into()))
    );
    assert_eq!(
        parse("whatever", "not JSON"),
        Ok(Event::Unknown("whatever".into()))
    );
    assert_eq!(
        parse("indirect/put", "{}"),
        Ok(Event::Unknown("indirect/put".into()))
    );
}

#[test]
fn paths_match_by_prefix_and_keys_may_be_empty() {
    assert_eq!(parse_path("/flags/"), Some((Kind::Flag, "")));
    assert_eq!(parse_path("/segments/a/b"), Some((Kind::Segment, "a/b")));
    assert_eq!(parse_path("/flags"), None);
}

#[test]
fn poll_payload() {
    let body = Bytes::from_static(br#"{"flags":{"f":{"key":"f","version":1}},"segments":{}}"#);
    assert_eq!(parse_poll(&body).unwrap().len(), 1);
    assert_eq!(
        parse_poll(&Bytes::from_static(b"{}")),
        Err(Error::Schema { event: "poll" })
    );
    assert_eq!(
        parse_poll(&Bytes::new()),
        Err(Error::MalformedJson { event: "poll" })
    );
}

/// The one-pass patch reading agrees with the general serde_json way on every shape,
/// errors included.
#[test]
fn patch_fast_path_agrees_with_the_general_parse() {
    let deep = format!(
        r#"{{"path":"/flags/d","data":{{"key":"d","version":1,"x":{}{}}}}}"#,
        "[".repeat(126),
        "]".repeat(126)
    );
    let cases = [
        r#"{"path":"/flags/f","data":{"key":"f","version":2,"prerequisites":[{"key":"p"}]}}"#,
        r#"{"path":"/segments/s","data":{"key":"s","version":2,"rules":[{"clauses":[{"op":"segmentMatch","values":["t"]}]}]}}"#,
        r#" { "path" : "/flags/f" , "data" : {"version":2} } "#,
        r#"{"data":{"key":"f","version":2},"path":"/flags/f"}"#,
        r#"{"path":"/flags/f","data":{"key":"f","version":2},"extra":1}"#,
        r#"{"path":"/flags/f","path":"/flags/g","data":{"key":"f","version":2}}"#,
        r#"{"path":"/flags/f","data":{"key":"f","version":2},"data":{"version":3}}"#,
        r#"{"p\u0061th":"/fl\u0061gs/\u00e9","data":{"version":2}}"#,
        r#"["/flags/f",{"key":"f","version":2}]"#,
        r#"{"path":"/other/f","data":{"key":"f","version":2}}"#,
        r#"{"path":"/other/f","data":{"key":"f","version":2}"#,
        r#"{"path":"/flags/f","data":{"key":"f","version":"2"}}"#,
        r#"{"path":"/flags/f","data":{"key":"f","version":2,}}"#,
        r#"{"path":"/flags/f","data":{"key":"f"}} x"#,
        r#"{"path":"/flags/f","data":{"key":"f","version":2}} x"#,
        r#"{"path":"/flags/f","data":[]}"#,
        r#"{"path":7,"data":{"key":"f","version":2}}"#,
        r#"{"path":"/flags/f"}"#,
        &deep,
    ];
    for data in cases {
        let data = Bytes::copy_from_slice(data.as_bytes());
        assert_eq!(parse_patch(&data), parse_patch_general(&data), "{data:?}");
    }
    let bad_utf8 = Bytes::from_static(b"{\"path\":\"/flags/\xff\",\"data\":{\"version\":2}}");
    assert_eq!(parse_patch(&bad_utf8), parse_patch_general(&bad_utf8));
}

proptest::proptest! {
    /// Same agreement on patch data cut or corrupted at any point.
    #[test]
    fn patch_fast_path_agrees_on_damaged_data(cut in 0usize..120, byte in 0u8..128, at in 0usize..120) {
        let good = br#"{"path":"/flags/f","data":{"key":"f","version":2,"rules":[{"clauses":[{"op":"segmentMatch","values":["s"]}]}]}}"#;
        let mut v = good[..cut.min(good.len())].to_vec();
        if let Some(b) = v.get_mut(at) {
            *b = byte;
        }
        for data in [Bytes::from(v), Bytes::from_static(good)] {
            proptest::prop_assert_eq!(parse_patch(&data), parse_patch_general(&data));
        }
    }
}
