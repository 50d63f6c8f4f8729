//! Properties: the protocol under random event sequences, and the one-pass `put-object`
//! reading against the general parse.

use super::*;

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
