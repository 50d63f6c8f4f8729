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
    parents: HashMap<ItemRef, Parents>,
}

/// The items that depend on one item: most items have one (a segment used by one
/// flag), which needs no set of its own.
#[derive(Debug, Clone)]
enum Parents {
    One(ItemRef),
    Many(HashSet<ItemRef>),
}

impl Parents {
    fn insert(&mut self, from: &ItemRef) {
        match self {
            Self::One(one) if one == from => {}
            Self::One(one) => {
                let mut set = HashSet::default();
                set.insert((one.0, std::mem::take(&mut one.1)));
                set.insert(from.clone());
                *self = Self::Many(set);
            }
            Self::Many(set) => {
                if !set.contains(from) {
                    set.insert(from.clone());
                }
            }
        }
    }

    /// Remove `from`; true when no parent is left.
    fn remove(&mut self, from: &ItemRef) -> bool {
        match self {
            Self::One(one) => one == from,
            Self::Many(set) => {
                set.remove(from);
                set.is_empty()
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = &ItemRef> {
        let (one, many) = match self {
            Self::One(one) => (Some(one), None),
            Self::Many(set) => (None, Some(set.iter())),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
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
                if let Some(parents) = self.parents.get_mut(child)
                    && parents.remove(from)
                {
                    self.parents.remove(child);
                }
            }
        }
        if to.is_empty() {
            return;
        }
        add_parents(&mut self.parents, from, &to);
        self.children.insert(from.clone(), to);
    }

    /// Add the edges of items that have none yet (`from` must not be in the index: a
    /// full data set into a cleared index), with room made for all of them at once.
    ///
    /// At the end of a large put the heap peaks here, so the work is ordered for
    /// memory: the list is moved into the outgoing edges from its back, shrunk each time
    /// three quarters of it are taken, and the incoming edges are built only then, from
    /// the outgoing ones, when the list is gone. Adding a parent twice changes nothing,
    /// so edges already in the index are harmless.
    pub(crate) fn extend_new(&mut self, mut items: Vec<(ItemRef, Vec<ItemRef>)>) {
        self.children.reserve(items.len());
        while let Some((from, to)) = items.pop() {
            if items.capacity() >= 1024 && items.len() <= items.capacity() / 4 {
                items.shrink_to_fit();
            }
            self.children.insert(from, to);
        }
        drop(items);
        let Self { children, parents } = self;
        parents.reserve(children.len() / 2);
        for (from, to) in children.iter() {
            add_parents(parents, from, to);
        }
    }

    /// Add `item` and everything that depends on it, transitively, to `out`.
    /// Cycles are safe.
    pub fn add_affected(&self, item: &ItemRef, out: &mut BTreeSet<ItemRef>) {
        let mut stack = vec![item.clone()];
        while let Some(next) = stack.pop() {
            if let Some(parents) = self.parents.get(&next) {
                for p in parents.iter() {
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

/// Record `from` as a parent of each of `to` in `parents`.
fn add_parents(parents: &mut HashMap<ItemRef, Parents>, from: &ItemRef, to: &[ItemRef]) {
    for child in to {
        // Clone the child's key only for a new entry.
        match parents.get_mut(child) {
            Some(p) => p.insert(from),
            None => {
                parents.insert(child.clone(), Parents::One(from.clone()));
            }
        }
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
    fn parents_come_and_go_one_at_a_time() {
        let mut d = DependencyIndex::new();
        d.set(&f("a"), vec![s("seg")]);
        assert!(d.has_dependents(&s("seg")));
        d.set(&f("a"), vec![s("seg")]);
        d.set(&f("b"), vec![s("seg")]);
        d.set(&f("c"), vec![s("seg")]);
        assert_eq!(affected(&d, s("seg")), ["a", "b", "c"]);
        d.set(&f("a"), vec![]);
        d.set(&f("c"), vec![]);
        assert_eq!(affected(&d, s("seg")), ["b"]);
        d.set(&f("b"), vec![]);
        assert!(!d.has_dependents(&s("seg")));
        assert_eq!(affected(&d, s("seg")), Vec::<String>::new());
    }

    #[test]
    fn cycles_terminate() {
        let mut d = DependencyIndex::new();
        d.set(&f("a"), vec![f("b")]);
        d.set(&f("b"), vec![f("a")]);
        assert_eq!(affected(&d, f("a")), ["a", "b"]);
    }
}
