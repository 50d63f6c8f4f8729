//! The in-memory store: versioned items, tombstones, snapshots and the dependency
//! index, under FDv1 or FDv2 rules.

use super::change_set::{ApplyMode, ChangeSet, Selector, Transfer};
use super::deps::{DependencyIndex, ItemRef};
use super::snapshot::Snapshot;
use super::{Item, Kind};

/// What applying a change set did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// The flags whose data changed, directly or through a prerequisite or a segment
    /// they use. Only writes that were applied count (PROTOCOL.md A.4.5).
    pub changed_flags: ChangedFlags,
    /// Number of items written.
    pub written: usize,
    /// The changes whose version was not newer than the stored item's (tombstones
    /// included), in order: ignored under FDv1 (PROTOCOL.md B §4.1), written under FDv2
    /// (see [`ApplyMode::Fdv2`]).
    pub not_newer: Vec<Stale>,
}

/// A change whose version is not newer than the stored item's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    /// The item's kind.
    pub kind: Kind,
    /// Its key.
    pub key: String,
    /// The change's version.
    pub version: u64,
    /// True if the change was a deletion.
    pub deleted: bool,
    /// The version that was stored (and stays, under FDv1).
    pub stored: u64,
}

/// Which flags a write changed; [`keys`](Self::keys) lists them, sorted.
///
/// A first full data set changes every flag it holds: rather than sorting the keys of
/// tens of thousands of flags at start-up for nobody (most applications listen to no
/// flag changes), the store hands out the data as written (an O(1) snapshot) and the
/// list is made only when asked for.
///
/// ```
/// use bytes::Bytes;
/// use flagsync_core::store::{decode, Change, ChangeSet, Kind, Store};
///
/// let flag = |key: &str, version: u64| {
///     let raw = Bytes::from(format!(r#"{{"key":"{key}","version":{version}}}"#));
///     let d = decode(Kind::Flag, raw).unwrap();
///     Change { kind: Kind::Flag, key: key.into(), item: d.item, depends_on: d.depends_on }
/// };
/// let mut store = Store::new();
/// let first = store.apply(ChangeSet::fdv1_full(vec![flag("b", 1), flag("a", 1)]));
/// assert_eq!(first.changed_flags.keys(), ["a", "b"]);
/// let patch = store.apply(ChangeSet::fdv1_upsert(flag("b", 2)));
/// assert_eq!(patch.changed_flags.keys(), ["b"]);
/// ```
#[derive(Clone)]
pub enum ChangedFlags {
    /// These flags, sorted (possibly none).
    Keys(Vec<String>),
    /// Every flag of `data`, the data as the write left it: a full data set written
    /// over an empty store.
    Every {
        /// The data right after the write.
        data: Snapshot,
        /// Deleted flags count too (FDv2 rules: a new tombstone counts as present).
        tombstones: bool,
    },
}

impl ChangedFlags {
    /// The keys of the changed flags, sorted.
    pub fn keys(&self) -> Vec<String> {
        match self {
            Self::Keys(keys) => keys.clone(),
            Self::Every { data, tombstones } => {
                let mut keyed: Vec<(u128, &str)> = data
                    .iter_including_deleted(Kind::Flag)
                    .filter(|(_, item)| *tombstones || !item.deleted)
                    .map(|(key, _)| (sort_prefix(key), key))
                    .collect();
                keyed.sort_unstable();
                keyed.into_iter().map(|(_, key)| key.to_owned()).collect()
            }
        }
    }

    /// The keys of the changed flags, sorted (no copy of a list already made).
    pub fn into_keys(self) -> Vec<String> {
        match self {
            Self::Keys(keys) => keys,
            every => every.keys(),
        }
    }
}

impl Default for ChangedFlags {
    fn default() -> Self {
        Self::Keys(Vec::new())
    }
}

/// Equal when they name the same flags.
impl PartialEq for ChangedFlags {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Keys(a), Self::Keys(b)) => a == b,
            _ => self.keys() == other.keys(),
        }
    }
}

impl Eq for ChangedFlags {}

impl std::fmt::Debug for ChangedFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.keys()).finish()
    }
}

/// The in-memory flag store.
///
/// Writes go through [`Store::apply`]; readers take a [`Snapshot`] (an O(1) clone).
///
/// ```
/// use bytes::Bytes;
/// use flagsync_core::store::{decode, Change, ChangeSet, Kind, Store};
///
/// let mut store = Store::new();
/// let raw = Bytes::from_static(br#"{"key":"f","version":2,"on":true}"#);
/// let d = decode(Kind::Flag, raw).unwrap();
/// let change = Change { kind: Kind::Flag, key: "f".into(), item: d.item, depends_on: d.depends_on };
/// let applied = store.apply(ChangeSet::fdv1_full(vec![change]));
/// assert_eq!(applied.changed_flags.keys(), ["f"]);
/// assert_eq!(store.snapshot().get(Kind::Flag, "f").unwrap().version, 2);
/// ```
#[derive(Debug, Default, Clone)]
pub struct Store {
    data: Snapshot,
    deps: DependencyIndex,
    selector: Selector,
    full_transfers: u64,
}

impl Store {
    /// An empty, uninitialized store.
    pub fn new() -> Self {
        Self::default()
    }

    /// A cheap immutable view of the current data.
    pub fn snapshot(&self) -> Snapshot {
        self.data.clone()
    }

    /// The current data, borrowed.
    pub fn data(&self) -> &Snapshot {
        &self.data
    }

    /// True once a full data set has been applied.
    pub fn initialized(&self) -> bool {
        self.data.initialized
    }

    /// The FDv2 selector of the stored payload (empty until an FDv2 payload arrives).
    pub fn selector(&self) -> &Selector {
        &self.selector
    }

    /// How many full data sets have been applied: only these may move an item's version
    /// backwards under FDv1 rules.
    pub fn full_transfers(&self) -> u64 {
        self.full_transfers
    }

    /// The dependency index.
    pub fn dependencies(&self) -> &DependencyIndex {
        &self.deps
    }

    /// Apply `cs` under its mode's rules and report what changed.
    pub fn apply(&mut self, cs: ChangeSet) -> Applied {
        match cs.transfer {
            Transfer::None => Applied::default(),
            Transfer::Full => self.apply_full(cs),
            Transfer::Changes => self.apply_changes(cs),
        }
    }

    fn apply_full(&mut self, cs: ChangeSet) -> Applied {
        self.full_transfers += 1;
        let old = std::mem::take(&mut self.data);
        let mut new = Snapshot {
            initialized: true,
            ..Snapshot::default()
        };
        self.deps.clear();
        let written = cs.changes.len();
        // PROTOCOL.md B §3.4 (FDv1: changed if missing on one side or the version grew)
        // and B §5.8 (FDv2: versions differ; a new tombstone counts as present).
        let mode = cs.mode;
        let visible_new = |i: &Item| mode == ApplyMode::Fdv2 || !i.deleted;
        let nothing_stored = old.flags.is_empty() && old.segments.is_empty();
        let mut repeated = false;
        let mut edges = Vec::new();
        // Taken in order from the back of the reversed list, which gives its memory
        // back as it empties: the list (a hundred bytes an item) and the map it
        // becomes are not both whole at the end of a large put.
        let mut changes = cs.changes;
        changes.reverse();
        while let Some(c) = changes.pop() {
            if changes.capacity() >= 1024 && changes.len() <= changes.capacity() / 4 {
                changes.shrink_to_fit();
            }
            // The index was just cleared: only items with references need an entry.
            if !c.item.deleted && !c.depends_on.is_empty() {
                edges.push(((c.kind, c.key.clone()), c.depends_on));
            }
            // An unchanged item keeps its entry (and the model compiled from it).
            repeated |= new
                .map_mut(c.kind)
                .insert_reusing(c.key, c.item, old.map(c.kind));
        }
        if repeated {
            // A key given twice (never seen from a flag service): its last item decides
            // its edges, read again from the items stored.
            edges = stored_edges(&new);
        }
        self.deps.extend_new(edges);
        if nothing_stored {
            // Every visible flag of the new data changed, and nothing else can be.
            self.data = new;
            if let Some(sel) = cs.selector {
                self.selector = sel;
            }
            return Applied {
                changed_flags: ChangedFlags::Every {
                    data: self.data.clone(),
                    tombstones: mode == ApplyMode::Fdv2,
                },
                written,
                not_newer: Vec::new(),
            };
        }
        let mut affected = self.deps.affected();
        for kind in Kind::ALL {
            let (old_map, new_map) = (old.map(kind), new.map(kind));
            for (key, n) in new_map.iter().filter(|(_, i)| visible_new(i)) {
                let changed = match old_map.get(key).filter(|i| !i.deleted) {
                    None => true,
                    Some(o) => match cs.mode {
                        ApplyMode::Fdv1 => o.version < n.version,
                        ApplyMode::Fdv2 => o.version != n.version || o.deleted != n.deleted,
                    },
                };
                if changed {
                    self.deps.add_affected(kind, key, &mut affected);
                }
            }
            for (key, _) in old_map.iter().filter(|(_, i)| !i.deleted) {
                if !new_map.get(key).is_some_and(visible_new) {
                    self.deps.add_affected(kind, key, &mut affected);
                }
            }
        }
        self.data = new;
        if let Some(sel) = cs.selector {
            self.selector = sel;
        }
        Applied {
            changed_flags: ChangedFlags::Keys(affected.into_flags()),
            written,
            not_newer: Vec::new(),
        }
    }

    fn apply_changes(&mut self, cs: ChangeSet) -> Applied {
        // Items nothing depends on (most of them) go straight to `direct`; the index
        // walk and its set are only for the others.
        let mut affected = self.deps.affected();
        let mut direct = Vec::new();
        let mut written = 0;
        let mut not_newer = Vec::new();
        for c in cs.changes {
            let map = self.data.map_mut(c.kind);
            if let Some(old) = map.get(&c.key).filter(|o| o.version >= c.item.version) {
                not_newer.push(Stale {
                    kind: c.kind,
                    key: c.key.clone(),
                    version: c.item.version,
                    deleted: c.item.deleted,
                    stored: old.version,
                });
                // FDv1 rule (PROTOCOL.md B §4.1): write only if nothing is stored or the
                // stored version (tombstones included) is lower. FDv2 writes anyway.
                if cs.mode == ApplyMode::Fdv1 {
                    continue;
                }
            }
            let r: ItemRef = (c.kind, c.key);
            self.deps.set(
                &r,
                if c.item.deleted {
                    Vec::new()
                } else {
                    c.depends_on
                },
            );
            if self.deps.has_dependents(r.0, &r.1) {
                self.deps.add_affected(r.0, &r.1, &mut affected);
            } else if r.0 == Kind::Flag {
                direct.push(r.1.clone());
            }
            self.data.map_mut(r.0).insert(r.1, c.item);
            written += 1;
        }
        if let Some(sel) = cs.selector {
            self.selector = sel;
        }
        if !affected.is_empty() {
            direct.extend(affected.into_flags());
        }
        if direct.len() > 1 {
            direct.sort_unstable();
            direct.dedup();
        }
        Applied {
            changed_flags: ChangedFlags::Keys(direct),
            written,
            not_newer,
        }
    }
}

/// The references of every live item of `data`, read from their JSON.
fn stored_edges(data: &Snapshot) -> Vec<(ItemRef, Vec<ItemRef>)> {
    Kind::ALL
        .into_iter()
        .flat_map(|kind| {
            data.map(kind)
                .iter()
                .filter(|(_, item)| !item.deleted)
                .filter_map(move |(key, item)| {
                    let decoded = super::decode(kind, item.raw.clone()).ok()?;
                    (!decoded.depends_on.is_empty())
                        .then(|| ((kind, key.to_owned()), decoded.depends_on))
                })
        })
        .collect()
}

/// The first 16 bytes of `key` as an integer, for sorting keys as `sort_unstable`
/// would: `(prefix, key)` pairs compare as the keys do, mostly without reading the
/// strings (far fewer cache misses on a large put). Taken while the key is in cache.
fn sort_prefix(key: &str) -> u128 {
    let mut prefix = [0u8; 16];
    let n = key.len().min(16);
    prefix[..n].copy_from_slice(&key.as_bytes()[..n]);
    u128::from_be_bytes(prefix)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod reuse_tests;
