//! Compiled flag and segment models, keyed by (kind, key, version).
//!
//! The store keeps raw JSON (DESIGN.md §3). The first evaluation that needs an item
//! parses and compiles it ([`Flag::from_json`], [`Segment::from_json`]: missing optional
//! fields get their zero values, key lists become hash sets, clause values are parsed)
//! and leaves it here; every later evaluation of the
//! same version shares it through an `Arc`. A new version replaces the old entry the
//! first time it is evaluated; an evaluation on an older snapshot (a reader that took
//! its snapshot before an update) parses its version for itself and leaves the newer
//! entry alone. Entries of items that left the store are dropped by a sweep every
//! [`SWEEP_EVERY`] insertions.
//!
//! The first level is the snapshot itself ([`flagsync_eval::kept`]): each stored item has a
//! [`Derived`] slot beside it, shared by every snapshot that holds the item, where the
//! first evaluation leaves the model. A hit there costs no hashing, no lock and no
//! lookup beyond the item's own (the evaluation path reads the item and its slot in
//! one map lookup). The shelves below are the second level, by key and version, for
//! items stored again with the same version (a persistent store's cache refreshed,
//! a payload reapplied): those are compiled once, not once per stored copy.
//!
//! Concurrency: 16 shards, each a `RwLock`ed map. A hit takes one shard's read lock
//! for a hash lookup and an `Arc` clone; parsing happens outside any lock (two readers
//! may both parse a brand-new version; the second insertion is a no-op).
//!
//! The key is the item's version plus, as a free guard, the length of its JSON: FDv2
//! applies payloads without per-item version checks (PROTOCOL.md B §5.8), so the same
//! version with a different body is possible in principle (LaunchDarkly never sends
//! one); a body of another length is then never mistaken for the cached one.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use flagsync_core::store::{Derived, Item};
use flagsync_core::{Kind, Snapshot};
use rustc_hash::{FxBuildHasher, FxHashMap};

use flagsync_eval::{Flag, Models, Segment, kept};

/// Shards per kind (a power of two).
const SHARDS: usize = 16;
/// Sweep out entries of items that left the store after this many insertions.
const SWEEP_EVERY: usize = 4096;

/// The parsed models of one client's store.
#[derive(Default)]
pub(crate) struct ModelCache {
    flags: Shelf<Flag>,
    segments: Shelf<Segment>,
}

impl std::fmt::Debug for ModelCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelCache")
            .field("flags", &self.flags.len())
            .field("segments", &self.segments.len())
            .finish()
    }
}

impl Models for ModelCache {
    fn flag(
        &self,
        snapshot: &Snapshot,
        key: &str,
        item: &Item,
        derived: &Derived,
    ) -> Option<Arc<Flag>> {
        kept(derived, || {
            self.flags.shelved(snapshot, Kind::Flag, key, item, |raw| {
                Flag::from_json(raw, key)
                    .map_err(|e| tracing::debug!(flag = key, error = %e, "flag JSON the evaluation engine cannot read"))
                    .ok()
            })
        })
    }

    fn segment(
        &self,
        snapshot: &Snapshot,
        key: &str,
        item: &Item,
        derived: &Derived,
    ) -> Option<Arc<Segment>> {
        kept(derived, || {
            self.segments.shelved(snapshot, Kind::Segment, key, item, |raw| {
                Segment::from_json(raw, key)
                    .map_err(|e| tracing::debug!(segment = key, error = %e, "segment JSON the evaluation engine cannot read"))
                    .ok()
            })
        })
    }
}

impl ModelCache {
    /// Number of cached (flag, segment) versions.
    #[cfg(test)]
    pub(crate) fn len(&self) -> (usize, usize) {
        (self.flags.len(), self.segments.len())
    }
}

/// One kind's models.
struct Shelf<M> {
    shards: [RwLock<FxHashMap<Box<str>, Slot<M>>>; SHARDS],
    insertions: AtomicUsize,
}

/// A cached version: `model` is `None` when that version could not be parsed (so a
/// malformed item is not parsed again on every evaluation).
struct Slot<M> {
    version: u64,
    len: usize,
    model: Option<Arc<M>>,
}

impl<M> Default for Shelf<M> {
    fn default() -> Self {
        Self {
            shards: std::array::from_fn(|_| RwLock::default()),
            insertions: AtomicUsize::new(0),
        }
    }
}

impl<M: Send + Sync + 'static> Shelf<M> {
    fn shard(&self, key: &str) -> &RwLock<FxHashMap<Box<str>, Slot<M>>> {
        // The map hashes again with the same function; the shard takes the high bits.
        let hash = FxBuildHasher.hash_one(key);
        &self.shards[(hash >> 60) as usize % SHARDS]
    }

    /// The model of `item` from this shelf, parsed and shelved if new.
    fn shelved(
        &self,
        snapshot: &Snapshot,
        kind: Kind,
        key: &str,
        item: &Item,
        parse: impl FnOnce(&[u8]) -> Option<M>,
    ) -> Option<Arc<M>> {
        let shard = self.shard(key);
        let len = item.raw.len();
        {
            let map = shard.read().unwrap_or_else(|e| e.into_inner());
            if let Some(slot) = map.get(key)
                && slot.version == item.version
                && slot.len == len
            {
                return slot.model.clone();
            }
        }
        let model = parse(&item.raw).map(Arc::new);
        let slot = Slot {
            version: item.version,
            len,
            model: model.clone(),
        };
        let inserted = {
            let mut map = shard.write().unwrap_or_else(|e| e.into_inner());
            match map.get_mut(key) {
                // An evaluation on an older snapshot: keep the newer entry.
                Some(old) if old.version > item.version => false,
                Some(old) => {
                    *old = slot;
                    true
                }
                None => {
                    map.insert(key.into(), slot);
                    true
                }
            }
        };
        if inserted
            && self.insertions.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1
        {
            self.sweep(|key| snapshot.get(kind, key).is_some());
        }
        model
    }

    /// Drop the entries of keys that `live` says are gone.
    fn sweep(&self, live: impl Fn(&str) -> bool) {
        for shard in &self.shards {
            shard
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|key, _| live(key));
        }
    }

    fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.read().unwrap_or_else(|e| e.into_inner()).len())
            .sum()
    }
}
