use bytes::Bytes;
use proptest::prelude::*;

use super::*;
use crate::store::{Change, ChangeSet};

fn change(kind: Kind, json: &str) -> Change {
    Change::from_json(kind, Bytes::copy_from_slice(json.as_bytes())).unwrap()
}

fn flag(key: &str, version: u64) -> Change {
    change(
        Kind::Flag,
        &format!(r#"{{"key":"{key}","version":{version}}}"#),
    )
}

fn delete(kind: Kind, key: &str, version: u64) -> Change {
    Change {
        kind,
        key: key.into(),
        item: Item::tombstone(key, version),
        depends_on: Vec::new(),
    }
}

fn store_with(changes: Vec<Change>) -> Store {
    let mut s = Store::new();
    s.apply(ChangeSet::fdv1_full(changes));
    s
}

fn version(s: &Store, kind: Kind, key: &str) -> Option<u64> {
    s.data().get(kind, key).map(|i| i.version)
}

#[test]
fn starts_uninitialized_and_full_set_initializes() {
    let mut s = Store::new();
    assert!(!s.initialized());
    s.apply(ChangeSet::fdv1_full(Vec::new()));
    assert!(s.initialized());
}

#[test]
fn fdv1_upsert_applies_only_newer_versions() {
    for kind in Kind::ALL {
        let mut s = store_with(vec![change(kind, r#"{"key":"x","version":100}"#)]);
        for (v, applied) in [(99, false), (100, false), (101, true)] {
            let a = s.apply(ChangeSet::fdv1_upsert(change(
                kind,
                &format!(r#"{{"key":"x","version":{v}}}"#),
            )));
            assert_eq!(a.written == 1, applied, "{kind} version {v}");
        }
        assert_eq!(version(&s, kind, "x"), Some(101));
    }
}

#[test]
fn fdv1_delete_applies_only_newer_versions_and_hides_the_item() {
    let mut s = store_with(vec![flag("x", 100)]);
    assert_eq!(
        s.apply(ChangeSet::fdv1_upsert(delete(Kind::Flag, "x", 100)))
            .written,
        0
    );
    assert_eq!(version(&s, Kind::Flag, "x"), Some(100));
    let a = s.apply(ChangeSet::fdv1_upsert(delete(Kind::Flag, "x", 101)));
    assert_eq!(a.changed_flags.keys(), ["x"]);
    assert_eq!(version(&s, Kind::Flag, "x"), None);
    assert_eq!(
        s.data()
            .get_including_deleted(Kind::Flag, "x")
            .unwrap()
            .version,
        101
    );
    assert_eq!(s.data().len(Kind::Flag), 0);
}

#[test]
fn delete_of_unknown_key_keeps_a_tombstone_that_blocks_older_upserts() {
    let mut s = store_with(vec![]);
    s.apply(ChangeSet::fdv1_upsert(delete(Kind::Segment, "gone", 100)));
    let older = change(Kind::Segment, r#"{"key":"gone","version":100}"#);
    assert_eq!(s.apply(ChangeSet::fdv1_upsert(older)).written, 0);
    assert_eq!(version(&s, Kind::Segment, "gone"), None);
    let newer = change(Kind::Segment, r#"{"key":"gone","version":101}"#);
    assert_eq!(s.apply(ChangeSet::fdv1_upsert(newer)).written, 1);
    assert_eq!(version(&s, Kind::Segment, "gone"), Some(101));
}

#[test]
fn patch_for_a_missing_item_is_applied() {
    let mut s = store_with(vec![]);
    s.apply(ChangeSet::fdv1_upsert(flag("new", 1)));
    assert_eq!(version(&s, Kind::Flag, "new"), Some(1));
}

#[test]
fn full_replace_removes_absent_items_and_reports_each_change_once() {
    // PROTOCOL.md B §3.4 test_is_called_once_per_flag_during_init: a version bump, two
    // deletions and one addition give four events.
    let mut s = store_with(vec![
        flag("a", 1),
        flag("b", 1),
        flag("c", 1),
        flag("same", 5),
    ]);
    let a = s.apply(ChangeSet::fdv1_full(vec![
        flag("a", 2),
        flag("d", 1),
        flag("same", 5),
    ]));
    assert_eq!(a.changed_flags.keys(), ["a", "b", "c", "d"]);
    assert_eq!(version(&s, Kind::Flag, "b"), None);
}

#[test]
fn fdv1_full_with_lower_version_is_stored_but_not_reported() {
    let mut s = store_with(vec![flag("a", 5)]);
    let a = s.apply(ChangeSet::fdv1_full(vec![flag("a", 3)]));
    assert!(a.changed_flags.keys().is_empty());
    assert_eq!(version(&s, Kind::Flag, "a"), Some(3));
}

#[test]
fn rejected_writes_report_no_change() {
    let mut s = store_with(vec![flag("a", 5)]);
    assert!(
        s.apply(ChangeSet::fdv1_upsert(flag("a", 5)))
            .changed_flags
            .keys()
            .is_empty()
    );
    assert!(
        s.apply(ChangeSet::fdv1_upsert(flag("a", 4)))
            .changed_flags
            .keys()
            .is_empty()
    );
}

/// The worked examples of PROTOCOL.md B §3.4.
#[test]
fn changes_reach_every_dependent_flag() {
    let base = || {
        store_with(vec![
            change(
                Kind::Flag,
                r#"{"key":"flag1","version":1,"prerequisites":[{"key":"flag2"}]}"#,
            ),
            change(
                Kind::Flag,
                r#"{"key":"flag2","version":1,"prerequisites":[{"key":"flag3"},{"key":"flag4"},{"key":"flag6"}]}"#,
            ),
            flag("flag3", 1),
            flag("flag4", 1),
            change(
                Kind::Flag,
                r#"{"key":"flag6","version":1,"rules":[{"clauses":[{"op":"segmentMatch","values":["segment2"]}]}]}"#,
            ),
            change(Kind::Segment, r#"{"key":"segment1","version":1}"#),
            change(
                Kind::Segment,
                r#"{"key":"segment2","version":1,"rules":[{"clauses":[{"op":"segmentMatch","values":["segment1"]}]}]}"#,
            ),
        ])
    };
    let seg1 = change(Kind::Segment, r#"{"key":"segment1","version":2}"#);
    assert_eq!(
        base()
            .apply(ChangeSet::fdv1_upsert(seg1))
            .changed_flags
            .keys(),
        ["flag1", "flag2", "flag6"]
    );
    assert_eq!(
        base()
            .apply(ChangeSet::fdv1_upsert(flag("flag4", 2)))
            .changed_flags
            .keys(),
        ["flag1", "flag2", "flag4"]
    );
    assert_eq!(
        base()
            .apply(ChangeSet::fdv1_upsert(delete(Kind::Flag, "flag4", 2)))
            .changed_flags
            .keys(),
        ["flag1", "flag2", "flag4"]
    );
    let f3 = change(
        Kind::Flag,
        r#"{"key":"flag3","version":2,"prerequisites":[{"key":"flag4"}]}"#,
    );
    assert_eq!(
        base()
            .apply(ChangeSet::fdv1_upsert(f3))
            .changed_flags
            .keys(),
        ["flag1", "flag2", "flag3"]
    );
    let f2 = change(
        Kind::Flag,
        r#"{"key":"flag2","version":2,"prerequisites":[{"key":"flag3"}]}"#,
    );
    let mut s = base();
    assert_eq!(
        s.apply(ChangeSet::fdv1_upsert(f2)).changed_flags.keys(),
        ["flag1", "flag2"]
    );
    // flag4 is no longer a prerequisite of flag2.
    assert_eq!(
        s.apply(ChangeSet::fdv1_upsert(flag("flag4", 3)))
            .changed_flags
            .keys(),
        ["flag4"]
    );
}

fn fdv2(transfer: Transfer, changes: Vec<Change>, state: &str) -> ChangeSet {
    ChangeSet {
        mode: ApplyMode::Fdv2,
        transfer,
        changes,
        selector: Some(Selector {
            state: state.into(),
            version: 1,
        }),
    }
}

#[test]
fn fdv2_changes_ignore_item_versions() {
    let mut s = Store::new();
    s.apply(fdv2(Transfer::Full, vec![flag("a", 100)], "s1"));
    let a = s.apply(fdv2(Transfer::Changes, vec![flag("a", 1)], "s2"));
    assert_eq!(a.changed_flags.keys(), ["a"]);
    assert_eq!(version(&s, Kind::Flag, "a"), Some(1));
    assert_eq!(s.selector().state, "s2");
    // Written, but listed for the data system's warning.
    assert_eq!(
        a.not_newer,
        [Stale {
            kind: Kind::Flag,
            key: "a".into(),
            version: 1,
            deleted: false,
            stored: 100,
        }]
    );
}

/// Every FDv2 change at or below the stored version is listed, deletions and equal
/// versions included; newer ones and new keys are not.
#[test]
fn fdv2_changes_not_newer_are_listed() {
    let mut s = Store::new();
    s.apply(fdv2(
        Transfer::Full,
        vec![flag("a", 5), flag("b", 5), flag("c", 5)],
        "s1",
    ));
    let a = s.apply(fdv2(
        Transfer::Changes,
        vec![
            flag("a", 5),
            delete(Kind::Flag, "b", 4),
            flag("c", 6),
            flag("new", 1),
        ],
        "s2",
    ));
    let listed: Vec<(&str, u64, bool, u64)> = a
        .not_newer
        .iter()
        .map(|n| (n.key.as_str(), n.version, n.deleted, n.stored))
        .collect();
    assert_eq!(listed, [("a", 5, false, 5), ("b", 4, true, 5)]);
    assert_eq!(a.written, 4);
    assert_eq!(
        version(&s, Kind::Flag, "b"),
        None,
        "the deletion was applied"
    );
}

/// FDv1 ignores the same changes, and lists them too.
#[test]
fn fdv1_changes_not_newer_are_ignored_and_listed() {
    let mut s = store_with(vec![flag("a", 5)]);
    let a = s.apply(ChangeSet::fdv1_upsert(delete(Kind::Flag, "a", 5)));
    assert_eq!(a.written, 0);
    assert_eq!(a.not_newer.len(), 1);
    assert!(a.not_newer[0].deleted);
    assert_eq!(version(&s, Kind::Flag, "a"), Some(5));
}

#[test]
fn fdv2_none_is_a_no_op() {
    let mut s = Store::new();
    s.apply(fdv2(Transfer::Full, vec![flag("a", 1)], "s1"));
    let a = s.apply(fdv2(Transfer::None, vec![flag("a", 2)], "s2"));
    assert_eq!(a, Applied::default());
    assert_eq!(s.selector().state, "s1");
    assert_eq!(version(&s, Kind::Flag, "a"), Some(1));
}

#[test]
fn fdv2_full_reports_any_version_difference() {
    let mut s = Store::new();
    s.apply(fdv2(Transfer::Full, vec![flag("a", 5), flag("b", 1)], "s1"));
    let a = s.apply(fdv2(Transfer::Full, vec![flag("a", 3), flag("b", 1)], "s2"));
    assert_eq!(a.changed_flags.keys(), ["a"]);
}

#[test]
fn snapshots_do_not_see_later_writes() {
    let mut s = store_with(vec![flag("a", 1)]);
    let snap = s.snapshot();
    s.apply(ChangeSet::fdv1_upsert(flag("a", 2)));
    assert_eq!(snap.get(Kind::Flag, "a").unwrap().version, 1);
    assert_eq!(version(&s, Kind::Flag, "a"), Some(2));
}

#[test]
fn derived_values_are_shared_by_snapshots_and_go_with_their_item() {
    let mut s = store_with(vec![flag("a", 1), flag("b", 1)]);
    let first = s.snapshot();
    let (_, derived) = first.get_with_derived(Kind::Flag, "a").unwrap();
    assert!(derived.get::<u32>().is_none());
    assert_eq!(derived.set(7u32), Some(&7));
    // The first value kept stays; a value of another type reads as absent.
    assert_eq!(derived.set(8u32), Some(&7));
    assert!(derived.get::<String>().is_none());
    s.apply(ChangeSet::fdv1_upsert(flag("b", 2)));
    let second = s.snapshot();
    // "a" is the same stored item in both snapshots: what was derived is there.
    let (_, derived) = second.get_with_derived(Kind::Flag, "a").unwrap();
    assert_eq!(derived.get::<u32>(), Some(&7));
    // "b" was replaced: nothing derived from the new version yet.
    let (item, derived) = second.get_with_derived(Kind::Flag, "b").unwrap();
    assert_eq!(item.version, 2);
    assert!(derived.get::<u32>().is_none());
    let kept: Vec<_> = second
        .iter_with_derived(Kind::Flag)
        .filter_map(|(k, _, d)| d.get::<u32>().map(|v| (k, *v)))
        .collect();
    assert_eq!(kept, [("a", 7)]);
    s.apply(ChangeSet::fdv1_upsert(delete(Kind::Flag, "a", 3)));
    assert!(s.snapshot().get_with_derived(Kind::Flag, "a").is_none());
}

#[derive(Debug, Clone)]
enum Op {
    Upsert(u8, u64),
    Delete(u8, u64),
    Full(Vec<(u8, u64)>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..6, 0u64..20).prop_map(|(k, v)| Op::Upsert(k, v)),
        (0u8..6, 0u64..20).prop_map(|(k, v)| Op::Delete(k, v)),
        proptest::collection::vec((0u8..6, 0u64..20), 0..6).prop_map(Op::Full),
    ]
}

proptest! {
    /// Under FDv1 rules, a patch or delete never moves an item's version backwards; only
    /// a full replacement may.
    #[test]
    fn fdv1_version_never_goes_backwards(ops in proptest::collection::vec(op(), 1..40)) {
        let mut s = Store::new();
        for op in ops {
            let before = s.snapshot();
            let full = matches!(op, Op::Full(_));
            match op {
                Op::Upsert(k, v) => { s.apply(ChangeSet::fdv1_upsert(flag(&format!("k{k}"), v))); }
                Op::Delete(k, v) => { s.apply(ChangeSet::fdv1_upsert(delete(Kind::Flag, &format!("k{k}"), v))); }
                Op::Full(items) => { s.apply(ChangeSet::fdv1_full(items.into_iter().map(|(k, v)| flag(&format!("k{k}"), v)).collect())); }
            }
            if !full {
                for (key, old) in before.iter_including_deleted(Kind::Flag) {
                    let new = s.data().get_including_deleted(Kind::Flag, key).unwrap();
                    prop_assert!(new.version >= old.version);
                }
            }
        }
    }
}

#[test]
fn first_put_reports_a_repeated_key_by_its_last_item() {
    let mut s = Store::new();
    let a = s.apply(ChangeSet::fdv1_full(vec![
        flag("x", 1),
        delete(Kind::Flag, "x", 2),
        flag("y", 1),
        flag("y", 2),
    ]));
    assert_eq!(a.changed_flags.keys(), ["y"]);
    assert_eq!(version(&s, Kind::Flag, "y"), Some(2));
}

#[test]
fn a_repeated_key_takes_the_references_of_its_last_item() {
    let with_prereq = || {
        change(
            Kind::Flag,
            r#"{"key":"a","version":1,"prerequisites":[{"key":"b"}]}"#,
        )
    };
    let deps = |s: &Store| {
        s.dependencies()
            .dependencies(Kind::Flag, "a")
            .map(|(kind, key)| (kind, key.to_owned()))
            .collect::<Vec<_>>()
    };
    let dropped = store_with(vec![with_prereq(), flag("b", 1), flag("a", 2)]);
    assert_eq!(deps(&dropped), []);
    let mut s = dropped;
    assert_eq!(
        s.apply(ChangeSet::fdv1_upsert(flag("b", 2)))
            .changed_flags
            .keys(),
        ["b"]
    );
    let kept = store_with(vec![flag("a", 2), flag("b", 1), with_prereq()]);
    assert_eq!(deps(&kept), [(Kind::Flag, "b".to_owned())]);
    let mut s = kept;
    assert_eq!(
        s.apply(ChangeSet::fdv1_upsert(flag("b", 2)))
            .changed_flags
            .keys(),
        ["a", "b"]
    );
}

proptest! {
    /// The prefix-keyed sort of a first put's keys orders them as `sort_unstable`.
    #[test]
    fn first_put_reports_keys_sorted(keys in proptest::collection::vec("(abcdefghijklmnop){0,2}[a\\x00b]{0,3}", 0..30)) {
        let mut s = Store::new();
        let changes = keys.iter().map(|k| Change {
            kind: Kind::Flag,
            key: k.clone(),
            item: Item { version: 1, deleted: false, raw: Bytes::from_static(b"{}") },
            depends_on: Vec::new(),
        });
        let a = s.apply(ChangeSet::fdv1_full(changes.collect()));
        let mut expected = keys.clone();
        expected.sort_unstable();
        expected.dedup();
        prop_assert_eq!(a.changed_flags.keys(), expected);
    }
}

#[test]
fn a_large_put_keeps_every_item_in_order_while_its_list_is_given_back() {
    // Enough changes for the list to shrink several times as it is taken.
    let mut changes: Vec<Change> = (0..5_000).map(|i| flag(&format!("f{i}"), 1)).collect();
    changes.push(flag("f0", 9));
    changes.push(flag("f4999", 3));
    let s = store_with(changes);
    assert_eq!(s.data().flags.len(), 5_000);
    assert_eq!(version(&s, Kind::Flag, "f0"), Some(9));
    assert_eq!(version(&s, Kind::Flag, "f4999"), Some(3));
    assert_eq!(version(&s, Kind::Flag, "f2500"), Some(1));
}
