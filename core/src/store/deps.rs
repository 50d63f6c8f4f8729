//! Which items depend on which, so a change names every affected flag
//! (PROTOCOL.md B §3.4).

use std::collections::BTreeSet;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use super::Kind;

/// A stored item's identity.
pub type ItemRef = (Kind, String);

/// A two-way graph of item references: a flag depends on its prerequisites and on the
/// segments its `segmentMatch` clauses name; a segment depends on the segments its own
/// rules name.
#[derive(Debug, Default, Clone)]
pub struct DependencyIndex {
    /// Outgoing edges: what each item depends on.
    children: HashMap<ItemRef, Vec<ItemRef>>,
    /// Incoming edges: who depends on each item.
    parents: HashMap<ItemRef, HashSet<ItemRef>>,
}

impl DependencyIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forget every edge.
    pub fn clear(&mut self) {
        self.children.clear();
        self.parents.clear();
    }

    /// Replace the outgoing edges of `from` with `to` (empty for a deleted item).
    pub fn set(&mut self, from: &ItemRef, to: Vec<ItemRef>) {
        if let Some(old) = self.children.remove(from) {
            for child in &old {
                if let Some(set) = self.parents.get_mut(child) {
                    set.remove(from);
                    if set.is_empty() {
                        self.parents.remove(child);
                    }
                }
            }
        }
        if to.is_empty() {
            return;
        }
        for child in &to {
            // Clone the child's key only for a new entry.
            match self.parents.get_mut(child) {
                Some(set) => {
                    set.insert(from.clone());
                }
                None => {
                    let mut set = HashSet::default();
                    set.insert(from.clone());
                    self.parents.insert(child.clone(), set);
                }
            }
        }
        self.children.insert(from.clone(), to);
    }

    /// Add the edges of items that have none yet (`from` must not be in the index: a
    /// full data set into a cleared index), with room made for all of them at once.
    pub(crate) fn extend_new(&mut self, items: Vec<(ItemRef, Vec<ItemRef>)>) {
        self.children.reserve(items.len());
        self.parents.reserve(items.len() / 2);
        for (from, to) in items {
            for child in &to {
                match self.parents.get_mut(child) {
                    Some(set) => {
                        set.insert(from.clone());
                    }
                    None => {
                        let mut set = HashSet::default();
                        set.insert(from.clone());
                        self.parents.insert(child.clone(), set);
                    }
                }
            }
            self.children.insert(from, to);
        }
    }

    /// Add `item` and everything that depends on it, transitively, to `out`.
    /// Cycles are safe.
    pub fn add_affected(&self, item: &ItemRef, out: &mut BTreeSet<ItemRef>) {
        let mut stack = vec![item.clone()];
        while let Some(next) = stack.pop() {
            if let Some(parents) = self.parents.get(&next) {
                for p in parents {
                    if !out.contains(p) {
                        stack.push(p.clone());
                    }
                }
            }
            out.insert(next);
        }
    }

    /// True if some item depends on `item`.
    pub(crate) fn has_dependents(&self, item: &ItemRef) -> bool {
        self.parents.contains_key(item)
    }

    /// What `item` depends on directly.
    pub fn dependencies(&self, item: &ItemRef) -> &[ItemRef] {
        self.children.get(item).map_or(&[], Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(k: &str) -> ItemRef {
        (Kind::Flag, k.to_owned())
    }
    fn s(k: &str) -> ItemRef {
        (Kind::Segment, k.to_owned())
    }

    /// The worked example of PROTOCOL.md B §3.4.
    fn example() -> DependencyIndex {
        let mut d = DependencyIndex::new();
        d.set(&f("flag1"), vec![f("flag2")]);
        d.set(&f("flag2"), vec![f("flag3"), f("flag4"), f("flag6")]);
        d.set(&f("flag6"), vec![s("segment2")]);
        d.set(&s("segment2"), vec![s("segment1")]);
        d
    }

    fn affected(d: &DependencyIndex, item: ItemRef) -> Vec<String> {
        let mut out = BTreeSet::new();
        d.add_affected(&item, &mut out);
        out.into_iter()
            .filter(|(k, _)| *k == Kind::Flag)
            .map(|(_, key)| key)
            .collect()
    }

    #[test]
    fn segment_change_reaches_flags_through_nested_segments_and_prerequisites() {
        assert_eq!(
            affected(&example(), s("segment1")),
            ["flag1", "flag2", "flag6"]
        );
    }

    #[test]
    fn prerequisite_change_reaches_dependents() {
        assert_eq!(
            affected(&example(), f("flag4")),
            ["flag1", "flag2", "flag4"]
        );
    }

    #[test]
    fn replacing_edges_removes_old_parents() {
        let mut d = example();
        d.set(&f("flag2"), vec![f("flag3")]);
        assert_eq!(affected(&d, f("flag4")), ["flag4"]);
        assert_eq!(affected(&d, f("flag3")), ["flag1", "flag2", "flag3"]);
    }

    #[test]
    fn cycles_terminate() {
        let mut d = DependencyIndex::new();
        d.set(&f("a"), vec![f("b")]);
        d.set(&f("b"), vec![f("a")]);
        assert_eq!(affected(&d, f("a")), ["a", "b"]);
    }
}
