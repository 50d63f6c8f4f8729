//! A persistent store in this process's memory, for tests and examples.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use flagsync_core::Kind;

use super::{Item, PersistentStore, StoreError, Upserted, decode_stored, stored_json};
use crate::runtime::BoxFuture;

/// A [`PersistentStore`] in process memory that behaves like a database: it keeps the
/// JSON a database would hold (tombstones in the Go SDK's shape), applies the version
/// check on upsert, counts the operations it serves, and can be taken offline
/// ([`set_available`](Self::set_available)) to rehearse an outage.
///
/// Share it between clients with an `Arc` to stand in for a database shared by many
/// processes.
#[derive(Debug, Default)]
pub struct InMemoryStore {
    data: Mutex<Data>,
    offline: AtomicBool,
    counts: [AtomicU64; 5],
}

#[derive(Debug, Default)]
struct Data {
    /// Stored JSON by key, per kind (segments, flags).
    kinds: [BTreeMap<String, Bytes>; 2],
    inited: bool,
}

/// How many operations of each kind an [`InMemoryStore`] served (failed ones included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpCounts {
    /// `init` calls.
    pub init: u64,
    /// `get` calls.
    pub get: u64,
    /// `all` calls.
    pub all: u64,
    /// `upsert` calls.
    pub upsert: u64,
    /// `initialized` calls.
    pub initialized: u64,
}

const INIT: usize = 0;
const GET: usize = 1;
const ALL: usize = 2;
const UPSERT: usize = 3;
const INITIALIZED: usize = 4;

fn slot(kind: Kind) -> usize {
    match kind {
        Kind::Segment => 0,
        Kind::Flag => 1,
    }
}

impl InMemoryStore {
    /// An empty, uninitialized store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Take the store offline (`false`: every operation fails as unreachable) or bring
    /// it back.
    pub fn set_available(&self, available: bool) {
        self.offline.store(!available, Ordering::SeqCst);
    }

    /// The operations served so far.
    pub fn op_counts(&self) -> OpCounts {
        let c = |i: usize| self.counts[i].load(Ordering::SeqCst);
        OpCounts {
            init: c(INIT),
            get: c(GET),
            all: c(ALL),
            upsert: c(UPSERT),
            initialized: c(INITIALIZED),
        }
    }

    /// The stored JSON of every item of `kind`, by key, as a database would hold it.
    pub fn raw(&self, kind: Kind) -> BTreeMap<String, Bytes> {
        self.lock().kinds[slot(kind)].clone()
    }

    /// Store raw JSON under `key` as another process would, with no checks (for
    /// example a tombstone in another SDK's shape).
    pub fn put_raw(&self, kind: Kind, key: &str, json: impl Into<Bytes>) {
        self.lock().kinds[slot(kind)].insert(key.to_owned(), json.into());
    }

    /// Set or clear the `$inited` marker directly.
    pub fn set_initialized(&self, inited: bool) {
        self.lock().inited = inited;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Data> {
        self.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn op(&self, which: usize) -> Result<std::sync::MutexGuard<'_, Data>, StoreError> {
        self.counts[which].fetch_add(1, Ordering::SeqCst);
        if self.offline.load(Ordering::SeqCst) {
            return Err(StoreError::Unreachable(
                "the in-memory store is offline".into(),
            ));
        }
        Ok(self.lock())
    }
}

impl PersistentStore for InMemoryStore {
    fn init<'a>(
        &'a self,
        items: &'a [(Kind, String, Item)],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut data = self.op(INIT)?;
            let mut kinds: [BTreeMap<String, Bytes>; 2] = Default::default();
            for (kind, key, item) in items {
                kinds[slot(*kind)].insert(key.clone(), stored_json(item));
            }
            data.kinds = kinds;
            data.inited = true;
            Ok(())
        })
    }

    fn get<'a>(
        &'a self,
        kind: Kind,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Item>, StoreError>> {
        Box::pin(async move {
            let data = self.op(GET)?;
            Ok(data.kinds[slot(kind)]
                .get(key)
                .and_then(|raw| decode_stored(kind, key, raw.clone())))
        })
    }

    fn all(&self, kind: Kind) -> BoxFuture<'_, Result<Vec<(String, Item)>, StoreError>> {
        Box::pin(async move {
            let data = self.op(ALL)?;
            Ok(data.kinds[slot(kind)]
                .iter()
                .filter_map(|(k, raw)| decode_stored(kind, k, raw.clone()).map(|i| (k.clone(), i)))
                .collect())
        })
    }

    fn upsert<'a>(
        &'a self,
        kind: Kind,
        key: &'a str,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<Upserted, StoreError>> {
        Box::pin(async move {
            let mut data = self.op(UPSERT)?;
            let map = &mut data.kinds[slot(kind)];
            if let Some(stored) = map
                .get(key)
                .and_then(|raw| decode_stored(kind, key, raw.clone()))
                && stored.version >= item.version
            {
                return Ok(Upserted::Rejected { stored });
            }
            map.insert(key.to_owned(), stored_json(item));
            Ok(Upserted::Written)
        })
    }

    fn initialized(&self) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(async move { Ok(self.op(INITIALIZED)?.inited) })
    }

    fn is_available(&self) -> BoxFuture<'_, bool> {
        Box::pin(async move { !self.offline.load(Ordering::SeqCst) })
    }

    fn get_now(
        &self,
        kind: Kind,
        key: &str,
        _timeout: std::time::Duration,
    ) -> Option<Result<Option<Item>, StoreError>> {
        Some(self.op(GET).map(|data| {
            data.kinds[slot(kind)]
                .get(key)
                .and_then(|raw| decode_stored(kind, key, raw.clone()))
        }))
    }

    fn initialized_now(&self, _timeout: std::time::Duration) -> Option<Result<bool, StoreError>> {
        Some(self.op(INITIALIZED).map(|data| data.inited))
    }
}
