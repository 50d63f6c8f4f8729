use super::*;
use serde_json::json;

/// Changes with their items decoded: (kind, key, version, the item if put).
fn decoded(changes: Vec<Change>) -> Vec<(ItemKind, String, u64, Option<Value>)> {
    changes
        .into_iter()
        .map(|c| match c {
            Change::Put(kind, key, version, raw) => {
                (kind, key, version, serde_json::from_slice(&raw).ok())
            }
            Change::Delete(kind, key, version) => (kind, key, version, None),
        })
        .collect()
}

/// The live item as a value.
fn item(d: &Data, kind: ItemKind, key: &str) -> Option<Value> {
    d.get(kind, key)
        .map(|raw| serde_json::from_slice(raw).unwrap())
}

#[test]
fn fills_key_and_version_and_bumps() {
    let mut d = Data::from_json(json!({"flags": {"a": {"on": true}}})).unwrap();
    assert_eq!(item(&d, ItemKind::Flag, "a").unwrap()["version"], 1);
    assert_eq!(item(&d, ItemKind::Flag, "a").unwrap()["key"], "a");
    let (v, _) = d.upsert(ItemKind::Flag, "a", json!({"on": false})).unwrap();
    assert_eq!(v, 2);
    assert_eq!(d.delete(ItemKind::Flag, "a", None), 3);
    assert!(d.get(ItemKind::Flag, "a").is_none());
    let (v, _) = d.upsert(ItemKind::Flag, "a", json!({})).unwrap();
    assert_eq!(v, 4);
    let (v, _) = d
        .upsert(ItemKind::Flag, "a", json!({"version": 2}))
        .unwrap();
    assert_eq!(v, 2);
}

#[test]
fn rejects_bad_shapes() {
    assert!(Data::from_json(json!([1])).is_err());
    assert!(Data::from_json(json!({"flags": []})).is_err());
    assert!(Data::from_json(json!({"flags": {"a": {"key": "b"}}})).is_err());
    assert!(Data::from_json(json!({"flags": {"a": {"version": "x"}}})).is_err());
    assert!(Data::from_json(json!({"flagz": {}})).is_err());
}

#[test]
fn replacing_never_takes_an_item_version_back() {
    let mut d = Data::from_json(json!({"flags": {
        "same": {"on": true}, "edited": {"on": true}, "ahead": {"on": true},
        "gone": {}
    }}))
    .unwrap();
    d.upsert(ItemKind::Flag, "edited", json!({"on": true}))
        .unwrap(); // version 2
    d.delete(ItemKind::Flag, "gone", None); // tombstone 2
    d.replace(
        Data::from_json(json!({"flags": {
            "same": {"on": true}, "edited": {"on": false},
            "ahead": {"on": false, "version": 9}, "gone": {}, "new": {}
        }}))
        .unwrap(),
    );
    let v = |k| {
        item(&d, ItemKind::Flag, k).unwrap()["version"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(v("same"), 1, "unchanged: kept");
    assert_eq!(v("edited"), 3, "changed: the served version plus one");
    assert_eq!(v("ahead"), 9, "a newer version in the data wins");
    assert_eq!(v("gone"), 3, "above the tombstone");
    assert_eq!(v("new"), 1);
    assert_eq!(d.version(), 4);
}

#[test]
fn replacing_says_what_changed_and_keeps_tombstones() {
    let mut d = Data::from_json(json!({"flags": {"same": {"on": true}, "edited": {},
        "gone": {"version": 4}}, "segments": {"s": {}}}))
    .unwrap();
    let same = json!({"flags": {"same": {"on": true}, "edited": {}, "gone": {"version": 4}},
        "segments": {"s": {}}});
    assert!(
        d.replace_with_changes(Data::from_json(same).unwrap())
            .is_empty()
    );
    assert_eq!(d.version(), 1, "nothing changed: the payload version stays");
    let changes = d.replace_with_changes(
        Data::from_json(
            json!({"flags": {"same": {"on": true}, "edited": {"on": true},
            "new": {}}, "segments": {"s": {}}}),
        )
        .unwrap(),
    );
    assert_eq!(
        decoded(changes),
        [
            (ItemKind::Flag, "gone".into(), 5, None),
            (
                ItemKind::Flag,
                "edited".into(),
                2,
                Some(json!({"key": "edited", "version": 2, "on": true}))
            ),
            (
                ItemKind::Flag,
                "new".into(),
                1,
                Some(json!({"key": "new", "version": 1}))
            ),
        ]
    );
    assert_eq!(d.version(), 2);
    assert!(item(&d, ItemKind::Flag, "gone").is_none());
    // The key back: above its tombstone, whatever the file says.
    let changes = d.replace_with_changes(
        Data::from_json(
            json!({"flags": {"same": {"on": true}, "edited": {"on": true},
            "new": {}, "gone": {"version": 1}}, "segments": {"s": {}}}),
        )
        .unwrap(),
    );
    assert_eq!(
        decoded(changes),
        [(
            ItemKind::Flag,
            "gone".into(),
            6,
            Some(json!({"key": "gone", "version": 6}))
        )]
    );
}

#[test]
fn etag_follows_content() {
    let mut d = Data::from_json(json!({"flags": {"a": {}}})).unwrap();
    let e1 = d.rendered().etag.clone();
    assert_eq!(d.rendered().etag, e1);
    d.upsert(ItemKind::Flag, "a", json!({})).unwrap();
    assert_ne!(d.rendered().etag, e1);
    assert_eq!(
        d.rendered().text(),
        r#"{"flags":{"a":{"key":"a","version":2}},"segments":{}}"#
    );
}

#[test]
fn payload_version_and_state_follow_changes() {
    let mut d = Data::from_json(json!({"flags": {"a": {}}, "segments": {"s": {}}})).unwrap();
    d.set_epoch("e".into());
    assert_eq!((d.version(), d.state()), (1, "e-1".to_owned()));
    let o = d.fdv2_objects();
    assert_eq!(
        (o.state.as_str(), o.version, o.objects.len()),
        ("e-1", 1, 2)
    );
    let put: Value = serde_json::from_str(&o.objects[0].put_data()).unwrap();
    assert_eq!(
        put,
        json!({"version": 1, "kind": "flag", "key": "a", "object": {"key": "a", "version": 1}})
    );
    d.upsert(ItemKind::Flag, "b", json!({})).unwrap();
    d.delete(ItemKind::Flag, "a", None);
    assert_eq!(d.state(), "e-3");
    let o = d.fdv2_objects();
    assert_eq!((o.version, o.objects.len()), (3, 2));
    d.replace(Data::from_json(json!({})).unwrap());
    assert_eq!(d.state(), "e-4");
    assert!(d.fdv2_objects().objects.is_empty());
}

#[test]
fn flag_values_and_put_shape() {
    let d = Data::from_json(json!({"flagValues": {"x": true}})).unwrap();
    assert_eq!(
        item(&d, ItemKind::Flag, "x").unwrap()["variations"][0],
        true
    );
    let d = Data::from_json(json!({"path": "/", "data": {"flags": {}, "segments": {"s": {}}}}))
        .unwrap();
    assert!(item(&d, ItemKind::Segment, "s").is_some());
}

#[test]
fn an_unchanged_replacement_holds_the_new_bytes() {
    let mut d = Data::from_json(json!({"flags": {"a": {"on": true}}})).unwrap();
    let new = Data::from_json(json!({"flags": {"a": {"on": true}}})).unwrap();
    let at = new.get(ItemKind::Flag, "a").unwrap().as_ptr();
    assert!(d.replace_with_changes(new).is_empty());
    assert_eq!(d.get(ItemKind::Flag, "a").unwrap().as_ptr(), at);
    assert_eq!(d.version(), 1, "nothing sent, nothing changed");
}

/// The value flag `key` serves `user` in `snapshot`.
fn served(snapshot: &flagsync_core::Snapshot, key: &str, user: &str) -> Option<Value> {
    let context = flagsync_eval::ContextBuilder::new(user).build().unwrap();
    flagsync_eval::evaluate_flag(
        snapshot,
        &flagsync_eval::SlotModels,
        key,
        &context,
        flagsync_eval::Options::default(),
        |_, detail| detail.value.map(|v| serde_json::to_value(v).unwrap()),
    )
}

fn segment_flag(version: u64) -> Value {
    json!({"key": "f", "version": version, "on": true, "variations": ["out", "in"],
        "offVariation": 0, "fallthrough": {"variation": 0},
        "rules": [{"id": "r", "variation": 1,
            "clauses": [{"attribute": "", "op": "segmentMatch", "values": ["s"]}]}]})
}

#[test]
fn the_evaluation_store_follows_every_change_and_names_the_flags_changed() {
    let mut d = Data::from_json(json!({
        "flags": {"f": segment_flag(1), "g": {"on": false, "variations": [1, 2], "offVariation": 1}},
        "segments": {"s": {"included": ["u1"]}},
    }))
    .unwrap();
    assert_eq!(d.changed_flags(), None, "nothing built, nothing known");
    let snap = d.eval_snapshot();
    assert_eq!(served(&snap, "f", "u1"), Some(json!("in")));
    assert_eq!(served(&snap, "f", "u2"), Some(json!("out")));
    assert_eq!(served(&snap, "g", "u1"), Some(json!(2.0)));

    // A segment's change changes the flags that use it.
    d.upsert(ItemKind::Segment, "s", json!({"included": ["u2"]}))
        .unwrap();
    assert_eq!(d.changed_flags(), Some(&["f".to_owned()][..]));
    let after = d.eval_snapshot();
    assert_eq!(served(&after, "f", "u1"), Some(json!("out")));
    assert_eq!(served(&after, "f", "u2"), Some(json!("in")));
    assert_eq!(
        served(&snap, "f", "u1"),
        Some(json!("in")),
        "old views stay whole"
    );

    d.delete(ItemKind::Flag, "g", None);
    assert_eq!(d.changed_flags(), Some(&["g".to_owned()][..]));
    assert_eq!(served(&d.eval_snapshot(), "g", "u1"), None);

    // A replacement: only what changed is named.
    let new = Data::from_json(json!({
        "flags": {"f": segment_flag(1), "h": {"on": false, "variations": [true], "offVariation": 0}},
        "segments": {"s": {"included": ["u2"], "version": 2}},
    }))
    .unwrap();
    let changes = d.replace_with_changes(new);
    assert!(!changes.is_empty());
    assert_eq!(d.changed_flags(), Some(&["h".to_owned()][..]));
    assert_eq!(served(&d.eval_snapshot(), "h", "u9"), Some(json!(true)));
    assert_eq!(served(&d.eval_snapshot(), "f", "u2"), Some(json!("in")));
}
