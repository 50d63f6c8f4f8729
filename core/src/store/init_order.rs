//! The order in which a persistent store that cannot write atomically receives a full
//! data set (PROTOCOL.md B §4.2).

use std::collections::{BTreeMap, HashSet};

use super::{DependencyIndex, Item, Kind, Snapshot, Store};

/// The items of `data`, tombstones included, in persistent-store init order: all
/// segments first (sorted by key), then flags with every prerequisite before the flag
/// that needs it (depth first, starting from the lowest remaining key; cycles are
/// safe). A reader of a half-written store then never sees a flag whose prerequisite
/// or segment is missing.
pub fn init_order(data: &Snapshot) -> Vec<(Kind, &str, &Item)> {
    order_with(data, |_, item| prerequisites(item))
}

impl Store {
    /// The whole store, tombstones included, in persistent-store init order (see
    /// [`init_order`]), with owned keys; prerequisites come from the dependency index,
    /// so no item is decoded again.
    pub fn persist_order(&self) -> Vec<(Kind, String, Item)> {
        let deps: &DependencyIndex = self.dependencies();
        order_with(self.data(), |key, _| {
            deps.dependencies(Kind::Flag, key)
                .filter(|(k, _)| *k == Kind::Flag)
                .map(|(_, key)| key.to_owned())
                .collect()
        })
        .into_iter()
        .map(|(kind, key, item)| (kind, key.to_owned(), item.clone()))
        .collect()
    }
}

fn order_with(
    data: &Snapshot,
    prerequisites: impl Fn(&str, &Item) -> Vec<String>,
) -> Vec<(Kind, &str, &Item)> {
    let mut out = Vec::new();
    for (key, item) in sorted_all(data, Kind::Segment) {
        out.push((Kind::Segment, key, item));
    }
    let flags: BTreeMap<&str, &Item> = sorted_all(data, Kind::Flag).into_iter().collect();
    let mut done: HashSet<&str> = HashSet::new();
    for &start in flags.keys() {
        // Iterative depth-first walk: (key, prerequisites visited yet?).
        let mut stack = vec![(start, false)];
        while let Some((key, expanded)) = stack.pop() {
            let Some(&item) = flags.get(key) else {
                continue;
            };
            if expanded {
                out.push((Kind::Flag, key, item));
                continue;
            }
            if !done.insert(key) {
                continue;
            }
            stack.push((key, true));
            for p in prerequisites(key, item).into_iter().rev() {
                if let Some((&k, _)) = flags.get_key_value(p.as_str())
                    && !done.contains(k)
                {
                    stack.push((k, false));
                }
            }
        }
    }
    out
}

fn sorted_all(data: &Snapshot, kind: Kind) -> Vec<(&str, &Item)> {
    let mut v: Vec<_> = data.iter_including_deleted(kind).collect();
    v.sort_unstable_by(|a, b| a.0.cmp(b.0));
    v
}

fn prerequisites(item: &Item) -> Vec<String> {
    if item.deleted {
        return Vec::new();
    }
    super::decode(Kind::Flag, item.raw.clone())
        .map(|d| {
            d.depends_on
                .into_iter()
                .filter(|(k, _)| *k == Kind::Flag)
                .map(|(_, key)| key)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::store::{Change, ChangeSet, Store};

    fn change(kind: Kind, json: &str) -> Change {
        Change::from_json(kind, Bytes::copy_from_slice(json.as_bytes())).unwrap()
    }

    #[test]
    fn segments_first_then_prerequisites_before_dependents() {
        let mut store = Store::new();
        store.apply(ChangeSet::fdv1_full(vec![
            change(
                Kind::Flag,
                r#"{"key":"a","version":1,"prerequisites":[{"key":"c"},{"key":"b"}]}"#,
            ),
            change(
                Kind::Flag,
                r#"{"key":"b","version":1,"prerequisites":[{"key":"c"}]}"#,
            ),
            change(Kind::Flag, r#"{"key":"c","version":1}"#),
            change(
                Kind::Flag,
                r#"{"key":"x","version":1,"prerequisites":[{"key":"y"}]}"#,
            ),
            change(
                Kind::Flag,
                r#"{"key":"y","version":1,"prerequisites":[{"key":"x"}]}"#,
            ),
            change(Kind::Segment, r#"{"key":"s2","version":1}"#),
            change(Kind::Segment, r#"{"key":"s1","version":1}"#),
        ]));
        let snap = store.snapshot();
        let order: Vec<_> = init_order(&snap)
            .into_iter()
            .map(|(k, key, _)| (k, key))
            .collect();
        let want = [
            (Kind::Segment, "s1"),
            (Kind::Segment, "s2"),
            (Kind::Flag, "c"),
            (Kind::Flag, "b"),
            (Kind::Flag, "a"),
            (Kind::Flag, "y"),
            (Kind::Flag, "x"),
        ];
        assert_eq!(order, want);
        // The store's own order, from its dependency index, is the same.
        let owned: Vec<_> = store
            .persist_order()
            .into_iter()
            .map(|(k, key, _)| (k, key))
            .collect();
        let owned: Vec<_> = owned.iter().map(|(k, key)| (*k, key.as_str())).collect();
        assert_eq!(owned, want);
    }
}
