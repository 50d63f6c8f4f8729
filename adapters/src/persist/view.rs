//! Reads served from a persistent store, key by key, through a cache with a time to
//! live — the way LaunchDarkly's SDKs read a persistent store (PROTOCOL.md B §4.3).
//!
//! The client's reads are synchronous and never wait for I/O, so a read that finds no
//! fresh entry is answered from what the view holds (the expired entry, or nothing)
//! and asks the fetch task for the key; the answer lands in the view a moment later
//! (stale while revalidating). An entry lives for the cache TTL from the moment it was
//! read or written: with the cache off every read asks again, with an infinite TTL an
//! entry never expires. Writes of this process (a full data set, an upsert) replace
//! the entries they touch, as the caching wrapper does.
//!
//! ```text
//!  Client::bool_variation ─► StoreView::touch(flag, key) ── fresh? ── yes ─► answer
//!                                 │ no (absent, expired, cache off)
//!                                 └─► fetch task ─► PersistentStore::get ─► entry, snapshot
//! ```
//!
//! Listings (`Client::snapshot`, `all_flags_state`) read each kind whole, cached apart
//! from the single items (as the reference caches `all` apart from `get`): the first
//! whole read is made before the client reports it is ready, later ones at most once
//! per TTL, in the background.
//!
//! The view serves reads while they come from the store: a warm start until memory
//! holds a full data set (FDv2 then hands reads over to memory), daemon mode for good,
//! and FDv1 with a persistent store for good (the store is the SDK's store there, as in
//! the reference SDKs: another process's change shows once the entry expires).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flagsync_core::store::{Change, ChangeSet, Store};
use flagsync_core::{Command, Kind, Snapshot};

use super::{CacheConfig, CacheTtl, CachingStore, Item, StoreError};
use crate::driver::{Msg, StoreReport, TaskGuard};
use crate::publish::Published;
use crate::runtime::race;

/// What the fetch task is asked for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Fetch {
    /// One item.
    Item(Kind, String),
    /// Every item of a kind.
    All(Kind),
}

#[derive(Debug, Clone)]
struct Entry {
    /// The item as stored (a tombstone reads as absent); `None`: the store has none.
    item: Option<Item>,
    at: Instant,
}

#[derive(Debug)]
struct State {
    /// Single items by kind and key, for point reads.
    entries: [HashMap<String, Entry>; 2],
    /// Each kind as last read whole (or written whole), kept apart from `entries`.
    lists: [HashMap<String, Item>; 2],
    /// When each kind was last read whole.
    all_at: [Option<Instant>; 2],
    /// When this process last wrote a full data set, and each kind last: a read that
    /// began before is older than what the view holds, and is dropped.
    reset_at: Option<Instant>,
    written_at: [Option<Instant>; 2],
    pending: HashSet<Fetch>,
    /// The items of `entries`, for point reads.
    snapshot: Snapshot,
    /// The items of `lists`, for listings.
    listing: Snapshot,
}

/// The per-key view of a persistent store (see the module docs).
#[derive(Debug)]
pub(crate) struct StoreView {
    config: CacheConfig,
    state: Mutex<State>,
    requests: async_channel::Sender<Fetch>,
}

fn slot(kind: Kind) -> usize {
    match kind {
        Kind::Segment => 0,
        Kind::Flag => 1,
    }
}

/// The longest time before its expiry that a read entry is read again: a tenth of the
/// TTL, at most 100 ms.
const REFRESH_AHEAD: Duration = Duration::from_millis(100);

/// True while an entry read at `at` may be served without asking again. An entry read
/// shortly before it expires ([`REFRESH_AHEAD`]) is asked for again already, so that a
/// steady reader sees the store's answer when the entry expires, not one read later.
fn fresh(ttl: CacheTtl, at: Instant, now: Instant) -> bool {
    match ttl {
        CacheTtl::Disabled => false,
        CacheTtl::Expires(d) => now.saturating_duration_since(at) + (d / 10).min(REFRESH_AHEAD) < d,
        CacheTtl::Infinite => true,
    }
}

/// Whether two readings of a flag differ for its subscribers.
fn differs(old: Option<&Item>, new: Option<&Item>) -> bool {
    let live = |i: Option<&Item>| i.filter(|i| !i.deleted).map(|i| i.version);
    live(old) != live(new)
}

/// A snapshot holding exactly `items`.
fn snapshot_of<'a>(items: impl Iterator<Item = (Kind, &'a String, &'a Item)>) -> Snapshot {
    let changes = items
        .map(|(kind, key, item)| Change {
            kind,
            key: key.clone(),
            item: item.clone(),
            depends_on: Vec::new(),
        })
        .collect();
    let mut store = Store::new();
    store.apply(ChangeSet::fdv1_full(changes));
    store.snapshot()
}

impl State {
    fn rebuild(&mut self) {
        let mut items = Vec::new();
        for (kind, map) in [Kind::Segment, Kind::Flag].into_iter().zip(&self.entries) {
            items.extend(
                map.iter()
                    .filter_map(|(key, e)| e.item.as_ref().map(|item| (kind, key, item))),
            );
        }
        self.snapshot = snapshot_of(items.into_iter());
    }

    fn rebuild_listing(&mut self) {
        let [segments, flags] = &self.lists;
        self.listing = snapshot_of(
            segments
                .iter()
                .map(|(k, i)| (Kind::Segment, k, i))
                .chain(flags.iter().map(|(k, i)| (Kind::Flag, k, i))),
        );
    }

    /// Replace the listing of `kind`; the keys of the flags whose reading changed.
    fn set_list(&mut self, kind: Kind, items: Vec<(String, Item)>) -> Vec<String> {
        let new: HashMap<String, Item> = items.into_iter().collect();
        let old = std::mem::replace(&mut self.lists[slot(kind)], new);
        if kind != Kind::Flag {
            return Vec::new();
        }
        let new = &self.lists[slot(kind)];
        let mut changed: Vec<String> = new
            .iter()
            .filter(|(k, i)| differs(old.get(*k), Some(i)))
            .map(|(k, _)| k.clone())
            .chain(
                old.iter()
                    .filter(|(k, i)| !new.contains_key(*k) && differs(Some(i), None))
                    .map(|(k, _)| k.clone()),
            )
            .collect();
        changed.sort_unstable();
        changed
    }

    /// Set one entry; the key of a flag whose reading changed. A key read for the first
    /// time is compared with the listing (the first one is made before the client is
    /// ready): the same item read again is not a change.
    fn set(&mut self, kind: Kind, key: &str, item: Option<Item>, at: Instant) -> Option<String> {
        let old = self.entries[slot(kind)].insert(
            key.to_owned(),
            Entry {
                item: item.clone(),
                at,
            },
        );
        let old = match old {
            Some(e) => e.item,
            None => self.lists[slot(kind)].get(key).cloned(),
        };
        (kind == Kind::Flag && differs(old.as_ref(), item.as_ref())).then(|| key.to_owned())
    }

    /// At most `capacity` entries: the oldest go first.
    fn evict(&mut self, capacity: usize) {
        let len = self.entries[0].len() + self.entries[1].len();
        if len <= capacity {
            return;
        }
        let mut by_age: Vec<(Instant, usize, String)> = self
            .entries
            .iter()
            .enumerate()
            .flat_map(|(s, map)| map.iter().map(move |(k, e)| (e.at, s, k.clone())))
            .collect();
        by_age.sort_unstable_by_key(|(at, _, _)| *at);
        for (_, s, key) in by_age.into_iter().take(len - capacity) {
            self.entries[s].remove(&key);
        }
    }
}

impl StoreView {
    /// An empty view with `config`'s TTL and capacity, and the receiving side of its
    /// fetch requests (for [`run`]).
    pub(crate) fn new(config: CacheConfig) -> (Arc<Self>, async_channel::Receiver<Fetch>) {
        let (requests, rx) = async_channel::unbounded();
        let view = Self {
            config,
            state: Mutex::new(State {
                entries: [HashMap::new(), HashMap::new()],
                lists: [HashMap::new(), HashMap::new()],
                all_at: [None, None],
                reset_at: None,
                written_at: [None, None],
                pending: HashSet::new(),
                snapshot: Snapshot::default(),
                listing: Snapshot::default(),
            }),
            requests,
        };
        (Arc::new(view), rx)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the view holds now for point reads.
    pub(crate) fn snapshot(&self) -> Snapshot {
        self.lock().snapshot.clone()
    }

    /// Every item, as each kind was last read (or written) whole.
    pub(crate) fn listing(&self) -> Snapshot {
        self.lock().listing.clone()
    }

    /// Read every kind whole now (the first listing, before the client is ready).
    pub(crate) async fn load_all(&self, store: &CachingStore) -> Result<(), StoreError> {
        for kind in [Kind::Segment, Kind::Flag] {
            let fetch = Fetch::All(kind);
            let a = answer(store, &fetch).await?;
            self.fetched(&fetch, a, Instant::now());
        }
        Ok(())
    }

    fn request(&self, state: &mut State, fetch: Fetch) {
        if state.pending.insert(fetch.clone()) && self.requests.try_send(fetch.clone()).is_err() {
            // The fetch task has ended (the client is closing): nothing will answer.
            state.pending.remove(&fetch);
        }
    }

    /// A read of `key` is about to be served: ask the store again unless its entry is
    /// fresh.
    pub(crate) fn touch(&self, kind: Kind, key: &str) {
        let now = Instant::now();
        let mut state = self.lock();
        let stale = state.entries[slot(kind)]
            .get(key)
            .is_none_or(|e| !fresh(self.config.ttl, e.at, now));
        if stale {
            self.request(&mut state, Fetch::Item(kind, key.to_owned()));
        }
    }

    /// Every item of `kind` is about to be listed: read the kind whole again unless it
    /// was read within the TTL.
    pub(crate) fn touch_all(&self, kind: Kind) {
        let now = Instant::now();
        let mut state = self.lock();
        let stale = state.all_at[slot(kind)].is_none_or(|at| !fresh(self.config.ttl, at, now));
        if stale {
            self.request(&mut state, Fetch::All(kind));
        }
    }

    /// The answer to `fetch`, read from `at` on; the keys of the flags whose reading
    /// changed. An answer older than what the view holds (a write, or a later read, of
    /// the same item since `at`) is dropped.
    fn fetched(&self, fetch: &Fetch, answer: Answer, at: Instant) -> Vec<String> {
        let mut state = self.lock();
        state.pending.remove(fetch);
        let mut changed = Vec::new();
        let newer = |since: Option<Instant>| since.is_some_and(|t| t > at);
        let stale = match fetch {
            Fetch::Item(kind, key) => {
                newer(state.reset_at) || newer(state.entries[slot(*kind)].get(key).map(|e| e.at))
            }
            Fetch::All(kind) => newer(state.written_at[slot(*kind)]),
        };
        if stale {
            return changed;
        }
        match (fetch, answer) {
            (Fetch::Item(kind, key), Answer::Item(item)) => {
                changed.extend(state.set(*kind, key, item, at));
            }
            (Fetch::All(kind), Answer::All(items)) => {
                changed = state.set_list(*kind, items);
                state.all_at[slot(*kind)] = Some(at);
                state.rebuild_listing();
                return changed;
            }
            _ => return changed,
        }
        state.evict(self.config.capacity);
        state.rebuild();
        changed
    }

    /// This process has written a full data set to the store.
    pub(crate) fn has_written(&self) -> bool {
        self.lock().reset_at.is_some()
    }

    /// This process wrote a full data set: it replaces every entry.
    pub(crate) fn wrote_all(&self, items: &[(Kind, String, Item)]) {
        let at = Instant::now();
        let mut state = self.lock();
        state.entries = [HashMap::new(), HashMap::new()];
        state.lists = [HashMap::new(), HashMap::new()];
        for (kind, key, item) in items {
            state.set(*kind, key, Some(item.clone()), at);
            state.lists[slot(*kind)].insert(key.clone(), item.clone());
        }
        state.all_at = [Some(at), Some(at)];
        state.reset_at = Some(at);
        state.written_at = [Some(at), Some(at)];
        state.evict(self.config.capacity);
        state.rebuild();
        state.rebuild_listing();
    }

    /// This process wrote `item` (or learnt it is what the store holds).
    pub(crate) fn wrote(&self, kind: Kind, key: &str, item: &Item) {
        let mut state = self.lock();
        let at = Instant::now();
        state.set(kind, key, Some(item.clone()), at);
        state.written_at[slot(kind)] = Some(at);
        // The listing keeps the item too; the next listing reads the kind whole again.
        state.lists[slot(kind)].insert(key.to_owned(), item.clone());
        state.all_at[slot(kind)] = None;
        state.evict(self.config.capacity);
        state.rebuild();
        state.rebuild_listing();
    }
}

/// A fetch's answer.
enum Answer {
    Item(Option<Item>),
    All(Vec<(String, Item)>),
    /// The store holds no data set (`$inited` is missing: it lost its data, or was
    /// never written): the answer is dropped and the view keeps what it holds.
    NotInitialized,
}

async fn answer(store: &CachingStore, fetch: &Fetch) -> Result<Answer, StoreError> {
    // The store itself, not its cache: the view is the cache of these reads.
    let inner = store.inner();
    let answer = match fetch {
        Fetch::Item(kind, key) => Answer::Item(inner.get(*kind, key).await?),
        Fetch::All(kind) => Answer::All(inner.all(*kind).await?),
    };
    // A listing counts only from a store that holds a data set: a store without
    // `$inited` (a Redis restarted empty) is "not initialized", never an empty data
    // set (issue 19). A point read is taken as it is, as LaunchDarkly's SDKs take it
    // (their contract tests: a daemon reads flags written without `$inited`, and a
    // flag removed from the store reads as missing once its cache entry expires).
    let removes = matches!(answer, Answer::All(_));
    if removes && !inner.initialized().await? {
        return Ok(Answer::NotInitialized);
    }
    Ok(answer)
}

/// Answer the view's fetch requests, one at a time, until `stop` closes (the hand-over
/// to memory, or the client's end). Changed flags are published to the flag
/// subscribers; a failed read keeps what the view holds and is reported to the core
/// as a store failure (PROTOCOL.md A.4.4).
pub(crate) async fn run(
    view: Arc<StoreView>,
    requests: async_channel::Receiver<Fetch>,
    store: Arc<CachingStore>,
    published: Arc<Published>,
    stop: async_channel::Receiver<()>,
    inbox: async_channel::Sender<Msg<Command>>,
    _guard: Arc<TaskGuard>,
) {
    // The store was last found without a data set (reported once per loss).
    let mut lost = false;
    loop {
        let fetch = match race(requests.recv(), stop.recv()).await {
            Ok(Ok(fetch)) => fetch,
            _ => break,
        };
        let started = Instant::now();
        let changed = match answer(&store, &fetch).await {
            Ok(Answer::NotInitialized) => {
                if !lost && published.initialized() {
                    lost = true;
                    tracing::warn!(
                        "the persistent store holds no data set ($inited is missing): \
                         serving the data last read until it is written again"
                    );
                    let _ = inbox
                        .send(Msg::Store(StoreReport::Failed(
                            flagsync_core::status::StoreFault {
                                kind: flagsync_core::status::StoreFaultKind::DataLost,
                                message: "$inited is missing".into(),
                            },
                        )))
                        .await;
                }
                view.fetched(&fetch, Answer::NotInitialized, started)
            }
            Ok(a) => {
                lost = false;
                view.fetched(&fetch, a, started)
            }
            Err(error) => {
                tracing::debug!(%error, "reading the persistent store failed");
                view.lock().pending.remove(&fetch);
                let _ = inbox
                    .send(Msg::Store(StoreReport::Failed(error.fault())))
                    .await;
                Vec::new()
            }
        };
        if !changed.is_empty() {
            published.flags_changed(changed);
        }
    }
    requests.close();
    tracing::debug!("persistent store view ended");
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn item(key: &str, version: u64) -> Item {
        Item {
            version,
            deleted: false,
            raw: Bytes::from(format!(r#"{{"key":"{key}","version":{version}}}"#)),
        }
    }

    fn versions(view: &StoreView, kind: Kind) -> Vec<(String, u64)> {
        let snapshot = view.snapshot();
        let mut v: Vec<_> = snapshot
            .iter(kind)
            .map(|(k, i)| (k.to_owned(), i.version))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_read_without_a_fresh_entry_asks_once_until_answered() {
        let (view, rx) = StoreView::new(CacheConfig::ttl(Duration::from_secs(60)));
        view.touch(Kind::Flag, "f");
        view.touch(Kind::Flag, "f");
        assert_eq!(rx.try_recv(), Ok(Fetch::Item(Kind::Flag, "f".into())));
        assert!(rx.try_recv().is_err(), "one request in flight per key");
        let fetch = Fetch::Item(Kind::Flag, "f".into());
        let changed = view.fetched(&fetch, Answer::Item(Some(item("f", 3))), Instant::now());
        assert_eq!(changed, ["f"]);
        assert_eq!(versions(&view, Kind::Flag), [("f".into(), 3)]);
        view.touch(Kind::Flag, "f");
        assert!(rx.try_recv().is_err(), "fresh: not asked again");
    }

    #[test]
    fn an_absent_answer_is_cached_too() {
        let (view, rx) = StoreView::new(CacheConfig::infinite());
        let fetch = Fetch::Item(Kind::Segment, "s".into());
        view.touch(Kind::Segment, "s");
        assert!(rx.try_recv().is_ok());
        assert!(
            view.fetched(&fetch, Answer::Item(None), Instant::now())
                .is_empty()
        );
        view.touch(Kind::Segment, "s");
        assert!(rx.try_recv().is_err(), "the miss is cached");
        assert!(versions(&view, Kind::Segment).is_empty());
    }

    #[test]
    fn expired_and_uncached_entries_are_served_and_asked_again() {
        let (view, rx) = StoreView::new(CacheConfig::ttl(Duration::from_millis(50)));
        let fetch = Fetch::Item(Kind::Flag, "f".into());
        let long_ago = Instant::now() - Duration::from_secs(1);
        view.fetched(&fetch, Answer::Item(Some(item("f", 1))), long_ago);
        view.touch(Kind::Flag, "f");
        assert_eq!(rx.try_recv(), Ok(fetch.clone()), "expired: asked again");
        assert_eq!(
            versions(&view, Kind::Flag),
            [("f".into(), 1)],
            "and served meanwhile"
        );

        let (off, rx) = StoreView::new(CacheConfig::disabled());
        off.fetched(&fetch, Answer::Item(Some(item("f", 1))), Instant::now());
        off.touch(Kind::Flag, "f");
        assert_eq!(rx.try_recv(), Ok(fetch), "no cache: every read asks");
    }

    #[test]
    fn an_entry_is_read_again_shortly_before_it_expires() {
        let ttl = CacheTtl::Expires(Duration::from_secs(1));
        let t0 = Instant::now();
        assert!(fresh(ttl, t0, t0 + Duration::from_millis(899)));
        assert!(
            !fresh(ttl, t0, t0 + Duration::from_millis(900)),
            "100 ms ahead"
        );
        let short = CacheTtl::Expires(Duration::from_millis(200));
        assert!(fresh(short, t0, t0 + Duration::from_millis(179)));
        assert!(
            !fresh(short, t0, t0 + Duration::from_millis(180)),
            "a tenth ahead"
        );
        assert!(fresh(
            CacheTtl::Infinite,
            t0,
            t0 + Duration::from_secs(1 << 30)
        ));
        assert!(!fresh(CacheTtl::Disabled, t0, t0));
    }

    #[test]
    fn a_read_that_began_before_a_write_is_dropped() {
        let (view, _rx) = StoreView::new(CacheConfig::infinite());
        let fetch = Fetch::Item(Kind::Flag, "f".into());
        let began = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        view.wrote(Kind::Flag, "f", &item("f", 2));
        // The read saw the store before the write: absent.
        assert!(view.fetched(&fetch, Answer::Item(None), began).is_empty());
        assert_eq!(versions(&view, Kind::Flag), [("f".into(), 2)]);
        // A full write drops earlier reads of any key, and of whole kinds.
        let other = Fetch::Item(Kind::Flag, "g".into());
        let began = Instant::now();
        std::thread::sleep(Duration::from_millis(2));
        view.wrote_all(&[(Kind::Flag, "f".into(), item("f", 3))]);
        view.fetched(&other, Answer::Item(Some(item("g", 1))), began);
        view.fetched(&Fetch::All(Kind::Flag), Answer::All(Vec::new()), began);
        assert_eq!(versions(&view, Kind::Flag), [("f".into(), 3)]);
        assert_eq!(view.listing().len(Kind::Flag), 1);
    }

    #[test]
    fn writes_replace_entries_and_a_full_write_replaces_all() {
        let (view, _rx) = StoreView::new(CacheConfig::infinite());
        let fetch = Fetch::Item(Kind::Flag, "old".into());
        view.fetched(&fetch, Answer::Item(Some(item("old", 1))), Instant::now());
        view.wrote_all(&[
            (Kind::Flag, "a".into(), item("a", 1)),
            (Kind::Segment, "s".into(), item("s", 1)),
        ]);
        assert_eq!(versions(&view, Kind::Flag), [("a".into(), 1)]);
        view.wrote(Kind::Flag, "a", &item("a", 2));
        assert_eq!(versions(&view, Kind::Flag), [("a".into(), 2)]);
        assert_eq!(versions(&view, Kind::Segment), [("s".into(), 1)]);
    }

    #[test]
    fn listings_are_read_whole_and_kept_apart_from_point_reads() {
        let (view, rx) = StoreView::new(CacheConfig::infinite());
        view.wrote_all(&[(Kind::Flag, "a".into(), item("a", 1))]);
        view.touch_all(Kind::Flag);
        assert!(
            rx.try_recv().is_err(),
            "a full write counts as a whole read"
        );
        let (view, rx) = StoreView::new(CacheConfig::infinite());
        let fetch = Fetch::Item(Kind::Flag, "a".into());
        view.fetched(&fetch, Answer::Item(Some(item("a", 1))), Instant::now());
        view.touch_all(Kind::Flag);
        assert_eq!(rx.try_recv(), Ok(Fetch::All(Kind::Flag)));
        let all = Fetch::All(Kind::Flag);
        let changed = view.fetched(
            &all,
            Answer::All(vec![("b".into(), item("b", 1))]),
            Instant::now(),
        );
        assert_eq!(changed, ["b"]);
        let listed: Vec<_> = view
            .listing()
            .iter(Kind::Flag)
            .map(|(k, _)| k.to_owned())
            .collect();
        assert_eq!(listed, ["b"]);
        // Point reads keep their own entries: "b" is not cached for them, "a" still is.
        assert_eq!(versions(&view, Kind::Flag), [("a".into(), 1)]);
        view.touch(Kind::Flag, "b");
        assert_eq!(rx.try_recv(), Ok(Fetch::Item(Kind::Flag, "b".into())));
    }

    #[test]
    fn the_capacity_evicts_the_oldest_entries() {
        let (view, _rx) = StoreView::new(CacheConfig::infinite().with_capacity(2));
        let t0 = Instant::now();
        for (i, key) in ["a", "b", "c"].into_iter().enumerate() {
            let fetch = Fetch::Item(Kind::Flag, key.into());
            let at = t0 + Duration::from_millis(i as u64);
            view.fetched(&fetch, Answer::Item(Some(item(key, 1))), at);
        }
        assert_eq!(
            versions(&view, Kind::Flag),
            [("b".into(), 1), ("c".into(), 1)]
        );
    }
}
