//! The environment's data as the evaluation engine reads it: a copy of the core's
//! versioned store ([`flagsync_core::store::Store`]) kept beside the server's items,
//! made when an endpoint first evaluates (client-side, mobile and OFREP requests) and
//! then kept up to date with every change.
//!
//! The store shares each item's bytes with the server's maps (a [`Bytes`] clone, no
//! copy), and the engine compiles an item once, when an evaluation first needs it,
//! into the item's [`Derived`](flagsync_core::store::Derived) slot
//! ([`flagsync_eval::SlotModels`]): every later snapshot holding the item shares the
//! model, so a one-flag change compiles one flag. A server that is never asked to
//! evaluate builds nothing.
//!
//! Each change also says which flags it changed, dependants included (a segment's
//! change changes every flag that uses it, through the core's dependency index), for
//! the streams that send evaluated flags.

use bytes::Bytes;
use flagsync_core::Snapshot;
use flagsync_core::store::{ApplyMode, Change, ChangeSet, Item, Kind, Store, Transfer};

/// The store the engine reads, once something has asked for it, and the flags the
/// last change changed.
#[derive(Debug, Default)]
pub(super) struct Evaluated {
    store: Option<Store>,
    /// The flags the last change changed; `None` when unknown (nothing was built yet).
    last_changed: Option<Vec<String>>,
}

impl Evaluated {
    /// The current data for the engine, building the store from `live` (every live
    /// item) the first time.
    pub(super) fn snapshot(&mut self, live: impl FnOnce() -> Vec<Change>) -> Snapshot {
        if let Some(store) = &self.store {
            return store.snapshot();
        }
        let mut store = Store::new();
        store.apply(ChangeSet::fdv1_full(live()));
        let snapshot = store.snapshot();
        self.store = Some(store);
        snapshot
    }

    /// Whether the store has been built (and so follows every change).
    pub(super) fn is_built(&self) -> bool {
        self.store.is_some()
    }

    /// The flags the last change changed, dependants included; `None` when the store
    /// was not built then (nothing had evaluated yet, so no evaluated stream is open).
    pub(super) fn changed_flags(&self) -> Option<&[String]> {
        self.last_changed.as_deref()
    }

    /// Item `key` was added or changed.
    pub(super) fn upsert(&mut self, kind: Kind, key: &str, version: u64, raw: &Bytes) {
        self.changes(vec![live_change(kind, key, version, raw)]);
    }

    /// Item `key` was deleted at `version`.
    pub(super) fn delete(&mut self, kind: Kind, key: &str, version: u64) {
        let change = Change {
            kind,
            key: key.to_owned(),
            item: Item::tombstone(key, version),
            depends_on: Vec::new(),
        };
        self.changes(vec![change]);
    }

    /// Every item was replaced by `live`'s (a full replacement): the models of
    /// unchanged items are kept.
    pub(super) fn replace(&mut self, live: impl FnOnce() -> Vec<Change>) {
        let Some(store) = &mut self.store else {
            self.last_changed = None;
            return;
        };
        let applied = store.apply(ChangeSet::fdv1_full(live()));
        self.last_changed = Some(applied.changed_flags.into_keys());
    }

    /// Forget the store (it is built again when next asked for): the same content
    /// arrived in new bytes, and the store must not keep the old ones alive.
    pub(super) fn forget(&mut self) {
        self.store = None;
        self.last_changed = Some(Vec::new());
    }

    /// Write `changes` whatever their versions: the server's maps decided already.
    fn changes(&mut self, changes: Vec<Change>) {
        let Some(store) = &mut self.store else {
            self.last_changed = None;
            return;
        };
        let applied = store.apply(ChangeSet {
            mode: ApplyMode::Fdv2,
            transfer: Transfer::Changes,
            changes,
            selector: None,
        });
        self.last_changed = Some(applied.changed_flags.into_keys());
    }
}

/// A live item as a change for [`Evaluated`].
pub(super) fn live_change(kind: Kind, key: &str, version: u64, raw: &Bytes) -> Change {
    Change {
        kind,
        key: key.to_owned(),
        item: Item {
            version,
            deleted: false,
            raw: raw.clone(),
        },
        depends_on: flagsync_core::store::decode(kind, raw.clone())
            .map(|d| d.depends_on)
            .unwrap_or_default(),
    }
}
