//! The caching wrapper around a persistent store (PROTOCOL.md B §4.3, §5.9).
//!
//! Reads from a database are cached for a time to live; writes go to the database
//! first and then update the cache. The `$inited` answer has its own rules: once true
//! it is latched for good; a false answer is trusted for one TTL (and with the cache
//! off, the database is asked until it says true). Once the process holds a full data
//! set in memory, the cache is switched off ([`CachingStore::disable_cache`]): memory
//! answers every read from then on, so the TTL only matters during a warm start and in
//! daemon mode.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flagsync_core::Kind;

use super::{Item, PersistentStore, StoreError, Upserted};

/// How long cached reads of a persistent store live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheTtl {
    /// No caching: every read asks the database.
    Disabled,
    /// A cached read lives this long from the moment it was stored.
    Expires(Duration),
    /// Cached reads never expire: only this process's own writes change them. Right
    /// when this process is the only writer, or for a daemon that may serve old flags.
    Infinite,
}

/// Settings of the cache in front of a persistent store.
///
/// The default matches the reference SDKs: a TTL of 15 s and at most 1,000 single-item
/// entries (B §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CacheConfig {
    /// How long entries live.
    pub ttl: CacheTtl,
    /// At most this many single-item entries; the oldest go first. The per-kind "all"
    /// entries and the `$inited` answer do not count.
    pub capacity: usize,
    /// While reads come from the store: how long a read that finds no live entry (none,
    /// expired, or the cache off) waits for the store's answer before it is served from
    /// what the view holds (default 500 ms; zero: never wait, the answer lands later).
    /// LaunchDarkly's SDKs block on such a read without a bound.
    pub read_wait: Duration,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            ttl: CacheTtl::Expires(Duration::from_secs(15)),
            capacity: 1000,
            read_wait: Duration::from_millis(500),
        }
    }
}

impl CacheConfig {
    /// Cache reads for `ttl`; a zero TTL disables the cache.
    pub fn ttl(ttl: Duration) -> Self {
        Self {
            ttl: if ttl.is_zero() {
                CacheTtl::Disabled
            } else {
                CacheTtl::Expires(ttl)
            },
            ..Self::default()
        }
    }

    /// No cache: every read asks the database.
    pub fn disabled() -> Self {
        Self {
            ttl: CacheTtl::Disabled,
            ..Self::default()
        }
    }

    /// Cached reads never expire.
    pub fn infinite() -> Self {
        Self {
            ttl: CacheTtl::Infinite,
            ..Self::default()
        }
    }

    /// At most `capacity` single-item entries (default 1,000).
    pub fn with_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// Wait at most `wait` for the store's answer to a read without a live entry (see
    /// [`CacheConfig::read_wait`]).
    pub fn with_read_wait(mut self, wait: Duration) -> Self {
        self.read_wait = wait;
        self
    }

    /// True unless the cache is disabled.
    pub fn is_enabled(&self) -> bool {
        self.ttl != CacheTtl::Disabled
    }
}

/// Live items of one kind, by key.
pub type ItemMap = BTreeMap<String, Item>;

/// The cache itself: plain data, every method takes `now` (so its rules are tested
/// without a clock).
#[derive(Debug)]
struct Cache {
    /// `None`: entries never expire.
    ttl: Option<Duration>,
    capacity: usize,
    /// `get` results (tombstones kept, `None` for absent), with when they were stored
    /// and an insertion number for eviction.
    items: HashMap<(Kind, String), (Option<Item>, Instant, u64)>,
    order: BTreeMap<u64, (Kind, String)>,
    next_seq: u64,
    /// `all` results per kind (live items only), indexed by `slot(kind)`.
    all: [Option<(Arc<ItemMap>, Instant)>; 2],
    inited: Option<(bool, Instant)>,
}

fn slot(kind: Kind) -> usize {
    match kind {
        Kind::Segment => 0,
        Kind::Flag => 1,
    }
}

impl Cache {
    fn new(config: &CacheConfig) -> Option<Self> {
        let ttl = match config.ttl {
            CacheTtl::Disabled => return None,
            CacheTtl::Expires(d) => Some(d),
            CacheTtl::Infinite => None,
        };
        Some(Self {
            ttl,
            capacity: config.capacity,
            items: HashMap::new(),
            order: BTreeMap::new(),
            next_seq: 0,
            all: [None, None],
            inited: None,
        })
    }

    fn fresh(&self, now: Instant, stored: Instant) -> bool {
        self.ttl
            .is_none_or(|ttl| now.saturating_duration_since(stored) < ttl)
    }

    /// The cached `get` result: `Some(None)` is a cached "absent".
    fn item(&mut self, now: Instant, kind: Kind, key: &str) -> Option<Option<Item>> {
        let k = (kind, key.to_owned());
        if let Some((value, at, seq)) = self.items.get(&k) {
            if self.fresh(now, *at) {
                return Some(value.clone());
            }
            let seq = *seq;
            self.items.remove(&k);
            self.order.remove(&seq);
        }
        // A fresh "all" of the kind answers too: it holds every live item.
        self.all(now, kind).map(|all| all.get(key).cloned())
    }

    fn put_item(&mut self, now: Instant, kind: Kind, key: &str, value: Option<Item>) {
        if self.capacity == 0 {
            return;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        if let Some((_, _, old)) = self.items.insert((kind, key.to_owned()), (value, now, seq)) {
            self.order.remove(&old);
        }
        self.order.insert(seq, (kind, key.to_owned()));
        while self.items.len() > self.capacity {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.items.remove(&oldest);
        }
    }

    fn all(&mut self, now: Instant, kind: Kind) -> Option<Arc<ItemMap>> {
        let entry = &self.all[slot(kind)];
        match entry {
            Some((map, at)) if self.fresh(now, *at) => Some(map.clone()),
            Some(_) => {
                self.all[slot(kind)] = None;
                None
            }
            None => None,
        }
    }

    fn put_all(&mut self, now: Instant, kind: Kind, map: Arc<ItemMap>) {
        self.all[slot(kind)] = Some((map, now));
    }

    fn invalidate_all(&mut self, kind: Kind) {
        self.all[slot(kind)] = None;
    }

    fn inited(&mut self, now: Instant) -> Option<bool> {
        match self.inited {
            Some((v, at)) if self.fresh(now, at) => Some(v),
            Some(_) => {
                self.inited = None;
                None
            }
            None => None,
        }
    }

    fn put_inited(&mut self, now: Instant, value: bool) {
        self.inited = Some((value, now));
    }

    fn clear(&mut self) {
        self.items.clear();
        self.order.clear();
        self.all = [None, None];
        self.inited = None;
    }
}

#[derive(Debug)]
struct State {
    /// `None` when caching is off (configured off, or handed over to memory).
    cache: Option<Cache>,
    /// This process saw the store initialized: never ask again.
    inited: bool,
}

/// A persistent store behind a read cache, with the reference SDKs' rules
/// (PROTOCOL.md B §4.3):
///
/// - [`get`](Self::get) and [`all`](Self::all) return live items only (tombstones read
///   as absent); results, absent ones included, are cached for the TTL.
/// - [`init`](Self::init) writes first, then replaces the cache with the new data and
///   latches "initialized".
/// - [`upsert`](Self::upsert) writes first, then caches what the store now holds under
///   the key (the new item, or the newer one that rejected it) and drops the kind's
///   cached "all".
/// - [`initialized`](Self::initialized): true for good once seen true; a false answer
///   is cached for one TTL; uncached, the store is asked on every call until it says
///   true.
/// - [`disable_cache`](Self::disable_cache) (idempotent) switches to uncached reads,
///   once memory holds a full data set (B §5.9 cache handover).
///
/// The lock inside is held only to look up or update entries, never across I/O.
#[derive(Debug)]
pub struct CachingStore {
    inner: Arc<dyn PersistentStore>,
    config: CacheConfig,
    state: Mutex<State>,
    clock: fn() -> Instant,
}

impl CachingStore {
    /// Wrap `inner` with a cache configured by `config`.
    pub fn new(inner: Arc<dyn PersistentStore>, config: CacheConfig) -> Self {
        Self::with_clock(inner, config, Instant::now)
    }

    pub(crate) fn with_clock(
        inner: Arc<dyn PersistentStore>,
        config: CacheConfig,
        clock: fn() -> Instant,
    ) -> Self {
        Self {
            state: Mutex::new(State {
                cache: Cache::new(&config),
                inited: false,
            }),
            inner,
            config,
            clock,
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &Arc<dyn PersistentStore> {
        &self.inner
    }

    /// The cache settings this wrapper was made with.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// True while reads are cached (configured on, and not yet handed over).
    pub fn cache_enabled(&self) -> bool {
        self.lock().cache.is_some()
    }

    /// Stop caching and drop every entry; later reads ask the store. Idempotent.
    pub fn disable_cache(&self) {
        self.lock().cache = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn with_cache<R>(&self, f: impl FnOnce(&mut Cache, Instant) -> Option<R>) -> Option<R> {
        let now = (self.clock)();
        self.lock().cache.as_mut().and_then(|c| f(c, now))
    }

    /// The live item of `kind` named `key`; `None` if absent or deleted.
    pub async fn get(&self, kind: Kind, key: &str) -> Result<Option<Item>, StoreError> {
        let value = match self.with_cache(|c, now| c.item(now, kind, key)) {
            Some(hit) => hit,
            None => {
                let value = self.inner.get(kind, key).await?;
                self.with_cache(|c, now| {
                    c.put_item(now, kind, key, value.clone());
                    Some(())
                });
                value
            }
        };
        Ok(value.filter(|i| !i.deleted))
    }

    /// Every live item of `kind`, by key.
    pub async fn all(&self, kind: Kind) -> Result<Arc<ItemMap>, StoreError> {
        if let Some(hit) = self.with_cache(|c, now| c.all(now, kind)) {
            return Ok(hit);
        }
        let map: ItemMap = self
            .inner
            .all(kind)
            .await?
            .into_iter()
            .filter(|(_, i)| !i.deleted)
            .collect();
        let map = Arc::new(map);
        self.with_cache(|c, now| {
            c.put_all(now, kind, map.clone());
            Some(())
        });
        Ok(map)
    }

    /// Replace everything in the store with `items` (in this order), then the cache.
    pub async fn init(&self, items: &[(Kind, String, Item)]) -> Result<(), StoreError> {
        self.inner.init(items).await?;
        let now = (self.clock)();
        let mut state = self.lock();
        state.inited = true;
        if let Some(cache) = state.cache.as_mut() {
            cache.clear();
            let mut maps = [ItemMap::new(), ItemMap::new()];
            for (kind, key, item) in items.iter().filter(|(_, _, i)| !i.deleted) {
                maps[slot(*kind)].insert(key.clone(), item.clone());
            }
            let [segments, flags] = maps;
            cache.put_all(now, Kind::Segment, Arc::new(segments));
            cache.put_all(now, Kind::Flag, Arc::new(flags));
            cache.put_inited(now, true);
        }
        Ok(())
    }

    /// Write `item` unless the store holds `key` at the same or a higher version.
    pub async fn upsert(&self, kind: Kind, key: &str, item: &Item) -> Result<Upserted, StoreError> {
        let result = self.inner.upsert(kind, key, item).await?;
        self.with_cache(|c, now| {
            let stored = match &result {
                Upserted::Written => item.clone(),
                Upserted::Rejected { stored } => stored.clone(),
            };
            c.put_item(now, kind, key, Some(stored));
            c.invalidate_all(kind);
            Some(())
        });
        Ok(result)
    }

    /// True once the store holds a full data set written by any process.
    pub async fn initialized(&self) -> Result<bool, StoreError> {
        if self.lock().inited {
            return Ok(true);
        }
        if let Some(hit) = self.with_cache(|c, now| c.inited(now)) {
            return Ok(hit);
        }
        let value = self.inner.initialized().await?;
        let now = (self.clock)();
        let mut state = self.lock();
        state.inited |= value;
        if let Some(cache) = state.cache.as_mut() {
            cache.put_inited(now, value);
        }
        Ok(value)
    }

    /// The latched answer of [`initialized`](Self::initialized): true once this wrapper
    /// saw the store initialized, with no I/O.
    pub fn known_initialized(&self) -> bool {
        self.lock().inited
    }

    /// True if the store answers now. Never fails.
    pub async fn is_available(&self) -> bool {
        self.inner.is_available().await
    }
}

#[cfg(test)]
mod tests;
