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

/// The full transfer of `body` as the data system applies it to `s`: its items
/// compacted against what `s` holds.
fn full(s: &Store, body: &Bytes) -> ChangeSet {
    let mut cs = ChangeSet::fdv1_full(split_all_data(body, false).unwrap());
    cs.compact_against(s.data());
    cs
}

/// Where `key`'s stored JSON is.
fn raw_ptr(s: &Store, key: &str) -> *const u8 {
    s.data().get(Kind::Flag, key).unwrap().raw.as_ptr()
}

const FIRST: &[(&str, u64)] = &[("a", 1), ("b", 1), ("c", 1), ("d", 1)];

#[test]
fn a_repeated_full_transfer_keeps_the_stored_items_and_lets_its_buffer_go() {
    let mut s = Store::new();
    let first = data_set(FIRST);
    s.apply(full(&s, &first));
    let stored: Vec<_> = FIRST.iter().map(|(k, _)| raw_ptr(&s, k)).collect();
    let (_, derived) = s.data().get_with_derived(Kind::Flag, "a").unwrap();
    derived.set(7u32);

    let again = data_set(FIRST);
    let cs = full(&s, &again);
    // Nothing holds the second buffer once its items are compacted: they share the
    // stored items' buffers (no copy).
    assert!(again.is_unique());
    let applied = s.apply(cs);
    assert!(applied.changed_flags.keys().is_empty());
    assert_eq!(applied.written, 4);
    let now: Vec<_> = FIRST.iter().map(|(k, _)| raw_ptr(&s, k)).collect();
    assert_eq!(now, stored);
    // The entries are the stored ones, with what was derived from them.
    let (_, derived) = s.data().get_with_derived(Kind::Flag, "a").unwrap();
    assert_eq!(derived.get::<u32>(), Some(&7));
}

#[test]
fn a_changed_item_of_a_repeated_transfer_is_a_copy_of_its_own() {
    let mut s = Store::new();
    let first = data_set(FIRST);
    s.apply(full(&s, &first));
    let a = raw_ptr(&s, "a");
    let (_, derived) = s.data().get_with_derived(Kind::Flag, "d").unwrap();
    derived.set(7u32);

    let second = data_set(&[("a", 1), ("b", 1), ("c", 1), ("d", 2), ("e", 1)]);
    let cs = full(&s, &second);
    assert!(second.is_unique());
    let applied = s.apply(cs);
    assert_eq!(applied.changed_flags.keys(), ["d", "e"]);
    assert_eq!(raw_ptr(&s, "a"), a);
    let (d, derived) = s.data().get_with_derived(Kind::Flag, "d").unwrap();
    assert_eq!(d.version, 2);
    assert_eq!(
        derived.get::<u32>(),
        None,
        "a new item is derived from again"
    );
    assert!(s.data().get(Kind::Flag, "e").is_some());
    // A flag gone from the transfer is gone from the store.
    let third = data_set(&[("a", 1)]);
    let applied = s.apply(full(&s, &third));
    assert_eq!(applied.changed_flags.keys(), ["b", "c", "d", "e"]);
    assert_eq!(raw_ptr(&s, "a"), a);
}

#[test]
fn a_repeated_fdv2_transfer_keeps_the_stored_items_too() {
    let fdv2 = |s: &Store, body: &Bytes| {
        let mut cs = ChangeSet {
            mode: ApplyMode::Fdv2,
            transfer: Transfer::Full,
            changes: split_all_data(body, false).unwrap(),
            selector: Some(Selector::default()),
        };
        cs.compact_against(s.data());
        cs
    };
    let mut s = Store::new();
    let first = data_set(FIRST);
    s.apply(fdv2(&s, &first));
    let a = raw_ptr(&s, "a");
    let again = data_set(FIRST);
    let cs = fdv2(&s, &again);
    assert!(again.is_unique());
    assert!(s.apply(cs).changed_flags.keys().is_empty());
    assert_eq!(raw_ptr(&s, "a"), a);
}
