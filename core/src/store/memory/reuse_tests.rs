//! A full transfer that repeats what is stored keeps the stored entries, and lets the
//! buffer it came in go (issue 42: a poll body polled again).

use bytes::Bytes;

use super::*;
use crate::store::{ChangeSet, split_all_data};

/// A data set of flags (key, version), each padded to ~200 bytes, in one buffer.
fn data_set(flags: &[(&str, u64)]) -> Bytes {
    let pad = "p".repeat(160);
    let items: Vec<String> = flags
        .iter()
        .map(|(k, v)| format!(r#""{k}":{{"key":"{k}","version":{v},"salt":"{pad}"}}"#))
        .collect();
    Bytes::from(format!(
        r#"{{"flags":{{{}}},"segments":{{}}}}"#,
        items.join(",")
    ))
}

/// The full transfer of `body`, its items slices of it.
fn full(body: &Bytes) -> ChangeSet {
    ChangeSet::fdv1_full(split_all_data(body, false).unwrap())
}

fn raw_in(s: &Store, key: &str, body: &Bytes) -> bool {
    let raw = &s.data().get(Kind::Flag, key).unwrap().raw;
    body.as_ptr_range().contains(&raw.as_ptr())
}

const FIRST: &[(&str, u64)] = &[("a", 1), ("b", 1), ("c", 1), ("d", 1)];

#[test]
fn a_repeated_full_transfer_keeps_the_stored_items_and_lets_its_buffer_go() {
    let first = data_set(FIRST);
    let mut s = Store::new();
    s.apply(full(&first));
    let (_, derived) = s.data().get_with_derived(Kind::Flag, "a").unwrap();
    derived.set(7u32);

    let again = data_set(FIRST);
    let applied = s.apply(full(&again));
    assert!(applied.changed_flags.keys().is_empty());
    assert_eq!(applied.written, 4);
    // Nothing holds the second buffer: the stored items are the first ones, with what
    // was derived from them.
    assert!(again.is_unique());
    assert!(FIRST.iter().all(|(k, _)| raw_in(&s, k, &first)));
    let (_, derived) = s.data().get_with_derived(Kind::Flag, "a").unwrap();
    assert_eq!(derived.get::<u32>(), Some(&7));
}

#[test]
fn a_mostly_repeated_transfer_stores_copies_of_its_changes() {
    let first = data_set(FIRST);
    let mut s = Store::new();
    s.apply(full(&first));

    let second = data_set(&[("a", 1), ("b", 1), ("c", 1), ("d", 2), ("e", 1)]);
    let applied = s.apply(full(&second));
    assert_eq!(applied.changed_flags.keys(), ["d", "e"]);
    // The changed and new items are copies: the second buffer is not kept for them.
    assert!(second.is_unique());
    assert_eq!(s.data().get(Kind::Flag, "d").unwrap().version, 2);
    assert!(s.data().get(Kind::Flag, "e").is_some());
    assert!(raw_in(&s, "a", &first));
}

#[test]
fn a_mostly_new_transfer_is_stored_as_slices_of_its_buffer() {
    let first = data_set(FIRST);
    let mut s = Store::new();
    s.apply(full(&first));

    let second = data_set(&[("a", 2), ("b", 2), ("c", 2), ("d", 1)]);
    let applied = s.apply(full(&second));
    assert_eq!(applied.changed_flags.keys(), ["a", "b", "c"]);
    // No copies: every item is a slice of the second buffer, and the first is let go
    // (the unchanged item too is the new one).
    assert!(FIRST.iter().all(|(k, _)| raw_in(&s, k, &second)));
    assert!(first.is_unique());
}

#[test]
fn a_repeated_fdv2_transfer_keeps_the_stored_items_too() {
    let fdv2 = |body: &Bytes| ChangeSet {
        mode: ApplyMode::Fdv2,
        transfer: Transfer::Full,
        changes: split_all_data(body, false).unwrap(),
        selector: Some(Selector::default()),
    };
    let first = data_set(FIRST);
    let mut s = Store::new();
    s.apply(fdv2(&first));
    let again = data_set(FIRST);
    assert!(s.apply(fdv2(&again)).changed_flags.keys().is_empty());
    assert!(again.is_unique());
}
