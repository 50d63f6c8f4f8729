//! The change-set builder.

use super::*;

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
