//! The protocol state machine (E 28–32).

use super::*;

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
