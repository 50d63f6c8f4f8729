//! Which items depend on which, so a change names every affected flag
//! (PROTOCOL.md B §3.4).
//!
//! The index names each item once: a node with an id, its key, the ids it depends on
//! and the ids that depend on it. Most lists have one to four ids and are held in the
//! node. At 50,000 flags (13,500 with references, 27,000 edges) this takes 2.1 MB in
//! 14,000 blocks, where maps from every key to lists of keys took 4.8 MB in 78,000; and
//! a patch that keeps its references changes nothing here.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use rustc_hash::{FxBuildHasher, FxHashSet as HashSet};
use smallvec::SmallVec;

use super::Kind;

/// A stored item's identity.
pub type ItemRef = (Kind, String);

/// A short list of node ids, inline up to four.
type Ids = SmallVec<[u32; 4]>;

/// A two-way graph of item references: a flag depends on its prerequisites and on the
/// segments its `segmentMatch` clauses name; a segment depends on the segments its own
/// rules name.
#[derive(Debug, Default, Clone)]
pub struct DependencyIndex {
    /// Every item the index names, by id; a free node has an empty key and no edges.
    nodes: Vec<Node>,
    /// Ids of free nodes, for reuse.
    free: Vec<u32>,
    /// Ids freed since the last [`Self::affected`]: reused only after the next one, so
    /// that an [`Affected`] never meets a reused id.
    freed: Vec<u32>,
    /// The id of each named item, hashed by its node's kind and key.
    ids: HashTable<u32>,
}

/// One item of the index.
#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    key: Box<str>,
    /// What this item depends on: sorted, no id twice.
    out: Ids,
    /// Who depends on this item: no id twice, in no order.
    inc: Ids,
}

/// What a change reaches through [`DependencyIndex::add_affected`]: every item once,
/// and the keys of the flags among them. Made by [`DependencyIndex::affected`], and
/// valid until its next call: nodes freed meanwhile keep their ids.
#[derive(Debug, Default)]
pub struct Affected {
    seen: HashSet<u32>,
    stack: Vec<u32>,
    flags: Vec<String>,
}

impl Affected {
    /// True if no flag was reached.
    pub fn is_empty(&self) -> bool {
        self.flags.is_empty()
    }

    /// The keys of the flags reached, sorted, each once.
    pub fn into_flags(mut self) -> Vec<String> {
        self.flags.sort_unstable();
        self.flags.dedup();
        self.flags
    }
}

fn hash(kind: Kind, key: &str) -> u64 {
    FxBuildHasher.hash_one((kind, key))
}

/// The hash of an id's node, for the id table when it grows.
fn rehash(nodes: &[Node]) -> impl Fn(&u32) -> u64 + '_ {
    |&id| {
        let n = &nodes[id as usize];
        hash(n.kind, &n.key)
    }
}

impl DependencyIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Forget every edge.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// How many items the index names.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True if the index names no item.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    fn lookup(&self, kind: Kind, key: &str) -> Option<u32> {
        let nodes = &self.nodes;
        self.ids
            .find(hash(kind, key), |&id| {
                let n = &nodes[id as usize];
                n.kind == kind && *n.key == *key
            })
            .copied()
    }

    /// The id of `(kind, key)`, named now if it was not.
    fn intern(&mut self, kind: Kind, key: String) -> u32 {
        if let Some(id) = self.lookup(kind, &key) {
            return id;
        }
        let node = Node {
            kind,
            key: key.into_boxed_str(),
            out: Ids::new(),
            inc: Ids::new(),
        };
        let h = hash(node.kind, &node.key);
        let id = match self.free.pop() {
            Some(id) => {
                self.nodes[id as usize] = node;
                id
            }
            None => {
                // Unreachable: 4 billion nodes of 72 bytes each would take 300 GB
                // first. Saturating keeps this function total.
                let id = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX);
                self.nodes.push(node);
                id
            }
        };
        self.ids.insert_unique(h, id, rehash(&self.nodes));
        id
    }

    /// Free `id`'s node if it has no edge left (once: a free node is in no table).
    fn release(&mut self, id: u32) {
        let n = &self.nodes[id as usize];
        if !n.out.is_empty() || !n.inc.is_empty() {
            return;
        }
        let Ok(entry) = self.ids.find_entry(hash(n.kind, &n.key), |&i| i == id) else {
            return;
        };
        entry.remove();
        let n = &mut self.nodes[id as usize];
        n.key = Box::default();
        n.out = Ids::new();
        n.inc = Ids::new();
        self.freed.push(id);
    }

    /// Replace the outgoing edges of `from` with `to` (empty for a deleted item).
    pub fn set(&mut self, from: &ItemRef, to: Vec<ItemRef>) {
        let f = match self.lookup(from.0, &from.1) {
            Some(f) => f,
            None if to.is_empty() => return,
            None => self.intern(from.0, from.1.clone()),
        };
        let mut new: Ids = to
            .into_iter()
            .map(|(kind, key)| self.intern(kind, key))
            .collect();
        new.sort_unstable();
        new.dedup();
        self.set_ids(f, new);
    }

    /// Replace the outgoing edges of node `f` with `new` (sorted, no id twice), and
    /// free the nodes left without edges.
    fn set_ids(&mut self, f: u32, new: Ids) {
        let old = std::mem::take(&mut self.nodes[f as usize].out);
        if old == new {
            self.nodes[f as usize].out = old;
            return;
        }
        let (mut i, mut j) = (0, 0);
        let mut released = SmallVec::<[u32; 8]>::new();
        loop {
            let gone = match (old.get(i).copied(), new.get(j).copied()) {
                (None, None) => break,
                (Some(o), Some(n)) if o == n => {
                    i += 1;
                    j += 1;
                    continue;
                }
                (Some(o), Some(n)) if o < n => o,
                (Some(o), None) => o,
                (_, Some(n)) => {
                    self.nodes[n as usize].inc.push(f);
                    j += 1;
                    continue;
                }
            };
            let inc = &mut self.nodes[gone as usize].inc;
            if let Some(at) = inc.iter().position(|&p| p == f) {
                inc.swap_remove(at);
            }
            released.push(gone);
            i += 1;
        }
        self.nodes[f as usize].out = new;
        for id in released {
            self.release(id);
        }
        self.release(f);
    }

    /// Set the edges of many items at once: a full data set, into a cleared index.
    ///
    /// At the end of a large put the heap is near its peak here, so the list is taken
    /// from its back and shrunk each time three quarters of it are taken.
    pub(crate) fn extend_new(&mut self, mut items: Vec<(ItemRef, Vec<ItemRef>)>) {
        self.nodes.reserve(items.len());
        self.ids.reserve(items.len(), rehash(&self.nodes));
        while let Some((from, to)) = items.pop() {
            if items.capacity() >= 1024 && items.len() <= items.capacity() / 4 {
                items.shrink_to_fit();
            }
            self.set(&from, to);
        }
        self.nodes.shrink_to_fit();
    }

    /// A new set of affected items, for [`Self::add_affected`]. Nodes freed before
    /// this call may be reused from now on.
    pub fn affected(&mut self) -> Affected {
        self.free.append(&mut self.freed);
        Affected::default()
    }

    /// Add `(kind, key)` and everything that depends on it, transitively, to `out`.
    /// Cycles are safe.
    pub fn add_affected(&self, kind: Kind, key: &str, out: &mut Affected) {
        let Some(id) = self.lookup(kind, key) else {
            if kind == Kind::Flag {
                out.flags.push(key.to_owned());
            }
            return;
        };
        if !out.seen.insert(id) {
            return;
        }
        out.stack.push(id);
        while let Some(next) = out.stack.pop() {
            let n = &self.nodes[next as usize];
            if n.kind == Kind::Flag {
                out.flags.push(n.key.to_string());
            }
            for &p in &n.inc {
                if out.seen.insert(p) {
                    out.stack.push(p);
                }
            }
        }
    }

    /// True if some item depends on `(kind, key)`.
    pub fn has_dependents(&self, kind: Kind, key: &str) -> bool {
        self.lookup(kind, key)
            .is_some_and(|id| !self.nodes[id as usize].inc.is_empty())
    }

    /// What `(kind, key)` depends on directly, in no particular order.
    pub fn dependencies(&self, kind: Kind, key: &str) -> impl Iterator<Item = (Kind, &str)> {
        let out = match self.lookup(kind, key) {
            Some(id) => &self.nodes[id as usize].out[..],
            None => &[],
        };
        out.iter().map(|&id| {
            let n = &self.nodes[id as usize];
            (n.kind, &*n.key)
        })
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

    fn affected(d: &mut DependencyIndex, item: ItemRef) -> Vec<String> {
        let mut out = d.affected();
        d.add_affected(item.0, &item.1, &mut out);
        out.into_flags()
    }

    #[test]
    fn segment_change_reaches_flags_through_nested_segments_and_prerequisites() {
        assert_eq!(
            affected(&mut example(), s("segment1")),
            ["flag1", "flag2", "flag6"]
        );
    }

    #[test]
    fn prerequisite_change_reaches_dependents() {
        assert_eq!(
            affected(&mut example(), f("flag4")),
            ["flag1", "flag2", "flag4"]
        );
    }

    #[test]
    fn replacing_edges_removes_old_parents() {
        let mut d = example();
        d.set(&f("flag2"), vec![f("flag3")]);
        assert_eq!(affected(&mut d, f("flag4")), ["flag4"]);
        assert_eq!(affected(&mut d, f("flag3")), ["flag1", "flag2", "flag3"]);
    }

    #[test]
    fn parents_come_and_go_one_at_a_time() {
        let mut d = DependencyIndex::new();
        d.set(&f("a"), vec![s("seg")]);
        assert!(d.has_dependents(Kind::Segment, "seg"));
        d.set(&f("a"), vec![s("seg")]);
        d.set(&f("b"), vec![s("seg")]);
        d.set(&f("c"), vec![s("seg")]);
        assert_eq!(affected(&mut d, s("seg")), ["a", "b", "c"]);
        d.set(&f("a"), vec![]);
        d.set(&f("c"), vec![]);
        assert_eq!(affected(&mut d, s("seg")), ["b"]);
        d.set(&f("b"), vec![]);
        assert!(!d.has_dependents(Kind::Segment, "seg"));
        assert_eq!(affected(&mut d, s("seg")), Vec::<String>::new());
    }

    #[test]
    fn cycles_terminate() {
        let mut d = DependencyIndex::new();
        d.set(&f("a"), vec![f("b")]);
        d.set(&f("b"), vec![f("a")]);
        assert_eq!(affected(&mut d, f("a")), ["a", "b"]);
    }

    #[test]
    fn nodes_without_edges_are_freed_and_their_ids_reused() {
        let mut d = DependencyIndex::new();
        for round in 0..100 {
            let (a, seg) = (f(&format!("a{round}")), s(&format!("seg{round}")));
            d.set(&a, vec![seg.clone()]);
            assert_eq!(d.len(), 2);
            assert_eq!(affected(&mut d, seg), [format!("a{round}")]);
            d.set(&a, vec![]);
            assert!(d.is_empty());
        }
        // Two nodes at a time, reused round after round.
        assert!(d.nodes.len() <= 4, "{} nodes", d.nodes.len());
    }

    #[test]
    fn keeping_the_same_references_changes_nothing() {
        let mut d = example();
        let before = format!("{:?}", d.nodes);
        d.set(
            &f("flag2"),
            vec![f("flag6"), f("flag3"), f("flag4"), f("flag3")],
        );
        assert_eq!(format!("{:?}", d.nodes), before);
    }

    #[test]
    fn a_flag_reached_then_deleted_in_the_same_change_keeps_its_key() {
        let mut d = DependencyIndex::new();
        d.set(&f("p"), vec![s("seg")]);
        let mut out = d.affected();
        d.add_affected(Kind::Segment, "seg", &mut out);
        // `p` is deleted: both nodes are freed, and a new item must not take an id
        // `out` has seen.
        d.set(&f("p"), vec![]);
        d.set(&f("q"), vec![s("other")]);
        d.add_affected(Kind::Segment, "other", &mut out);
        assert_eq!(out.into_flags(), ["p", "q"]);
    }

    proptest::proptest! {
        /// Any sequence of edge changes: the index answers as a plain map from each
        /// item to its references would.
        #[test]
        fn answers_as_a_map_of_references_does(
            ops in proptest::collection::vec(
                (0..8usize, proptest::collection::vec(0..8usize, 0..4), proptest::bool::ANY),
                1..40,
            )
        ) {
            use std::collections::{BTreeMap, BTreeSet};
            let item = |i: usize| if i < 5 { f(&format!("f{i}")) } else { s(&format!("s{i}")) };
            let mut d = DependencyIndex::new();
            let mut model: BTreeMap<ItemRef, BTreeSet<ItemRef>> = BTreeMap::new();
            for (from, to, check_now) in ops {
                let to: Vec<ItemRef> = to.into_iter().map(item).collect();
                d.set(&item(from), to.clone());
                let to: BTreeSet<ItemRef> = to.into_iter().collect();
                if to.is_empty() {
                    model.remove(&item(from));
                } else {
                    model.insert(item(from), to);
                }
                if !check_now {
                    continue;
                }
                let named: BTreeSet<&ItemRef> =
                    model.iter().flat_map(|(k, v)| std::iter::once(k).chain(v)).collect();
                proptest::prop_assert_eq!(d.len(), named.len());
                for i in 0..8 {
                    let it = item(i);
                    let deps: BTreeSet<ItemRef> = d
                        .dependencies(it.0, &it.1)
                        .map(|(k, key)| (k, key.to_owned()))
                        .collect();
                    let none = BTreeSet::new();
                    proptest::prop_assert_eq!(&deps, model.get(&it).unwrap_or(&none));
                    let dependents = model.values().any(|v| v.contains(&it));
                    proptest::prop_assert_eq!(d.has_dependents(it.0, &it.1), dependents);
                    // Everything that reaches `it`, by a walk of the model.
                    let mut want = BTreeSet::from([it.clone()]);
                    loop {
                        let more: Vec<ItemRef> = model
                            .iter()
                            .filter(|(k, v)| !want.contains(*k) && v.iter().any(|c| want.contains(c)))
                            .map(|(k, _)| k.clone())
                            .collect();
                        if more.is_empty() {
                            break;
                        }
                        want.extend(more);
                    }
                    let want: Vec<String> = want
                        .into_iter()
                        .filter(|(k, _)| *k == Kind::Flag)
                        .map(|(_, key)| key)
                        .collect();
                    proptest::prop_assert_eq!(affected(&mut d, it), want);
                }
            }
        }
    }
}
