//! Reads served from a persistent store, key by key, through a cache with a time to
//! live — the way LaunchDarkly's SDKs read a persistent store (PROTOCOL.md B §4.3).
//!
//! A read that finds no live entry (none, expired, or the cache off) asks the fetch task
//! for the key and waits for its answer, as LaunchDarkly's SDKs block on the store —
//! but at most [`CacheConfig::read_wait`] (500 ms by default), and never on the thread
//! the fetch task last ran on (a single-threaded runtime would wait for itself): then
//! it is answered from what the view holds and the answer lands a moment later. An
//! entry read shortly before it expires is asked for again without waiting (stale while
//! revalidating), so a steady reader does not wait at all. An entry lives for the cache
//! TTL from the moment it was read or written: with the cache off every read asks
//! again, with an infinite TTL an entry never expires. Writes of this process (a full
//! data set, an upsert) replace the entries they touch, as the caching wrapper does.
//!
//! ```text
//!  Client::bool_variation ─► StoreView::touch(flag, key) ── fresh? ── yes ─► answer
//!                                 │ no: ask ─► fetch task ─► PersistentStore::get ─► entry
//!                                 └ live (refresh ahead)? answer now; else wait (bounded)
//! ```
//!
//! Before the client is ready, an evaluation asks the view whether the store holds a
//! data set ([`StoreView::store_initialized`], `$inited`), read and cached like an
//! item: a "yes" is kept for good, a "no" for the TTL (for good with an infinite cache,
//! read each time with the cache off), as the reference SDKs cache it.
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
//!
//! The fetch task is `task.rs`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use flagsync_core::store::{Change, ChangeSet, Store};
use flagsync_core::{Kind, Snapshot};

use super::{CacheConfig, CacheTtl, CachingStore, Item, StoreError};

mod task;
#[cfg(test)]
mod tests;

pub(crate) use task::run;

/// Where the view announces the flags that changed in the store: the client's
/// published state (`Published`), which holds the view and so is known to it only
/// through this trait.
pub(crate) trait FlagChangeTarget: Send + Sync + std::fmt::Debug {
    /// Flags read from the persistent store changed.
    fn flags_changed(&self, keys: Vec<String>);
}

/// What the fetch task is asked for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Fetch {
    /// One item.
    Item(Kind, String),
    /// Every item of a kind.
    All(Kind),
    /// Whether the store holds a data set (`$inited`).
    Inited,
}

/// What a read on the caller's thread needs (see [`State::link`]).
#[derive(Debug, Clone)]
struct Link {
    store: Arc<CachingStore>,
    published: std::sync::Weak<dyn FlagChangeTarget>,
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
    /// The store's last answer to `$inited`, and when it was read (`true` is kept).
    inited: Option<(bool, Instant)>,
    /// The thread the fetch task last ran on: a read there never waits for it.
    fetch_thread: Option<ThreadId>,
    /// While the fetch task runs: the store (for reads on the caller's thread) and
    /// where changes are announced. Nothing waits without it.
    link: Option<Link>,
    /// The items of `entries`, for point reads.
    snapshot: Snapshot,
    /// The items of `lists`, for listings.
    listing: Snapshot,
}

/// The per-key view of a persistent store (see the module docs).
#[derive(Debug)]
pub(crate) struct StoreView {
    config: CacheConfig,
    /// The client only reads the store (daemon mode, [`StoreMode::ReadOnly`]): a
    /// listing is what the store holds, `$inited` or not.
    ///
    /// [`StoreMode::ReadOnly`]: flagsync_core::StoreMode::ReadOnly
    reader: bool,
    state: Mutex<State>,
    /// Signalled whenever a fetch is answered (or given up).
    answered: Condvar,
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

/// True while an entry read at `at` is live: not yet expired (no refresh ahead).
fn live(ttl: CacheTtl, at: Instant, now: Instant) -> bool {
    match ttl {
        CacheTtl::Disabled => false,
        CacheTtl::Expires(d) => now.saturating_duration_since(at) < d,
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
    /// fetch requests (for [`run`]); `reader` for a client that never writes the store
    /// (see [`answer`]).
    pub(crate) fn new(
        config: CacheConfig,
        reader: bool,
    ) -> (Arc<Self>, async_channel::Receiver<Fetch>) {
        let (requests, rx) = async_channel::unbounded();
        let view = Self {
            config,
            reader,
            state: Mutex::new(State {
                entries: [HashMap::new(), HashMap::new()],
                lists: [HashMap::new(), HashMap::new()],
                all_at: [None, None],
                reset_at: None,
                written_at: [None, None],
                pending: HashSet::new(),
                inited: None,
                fetch_thread: None,
                link: None,
                snapshot: Snapshot::default(),
                listing: Snapshot::default(),
            }),
            answered: Condvar::new(),
            requests,
        };
        (Arc::new(view), rx)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait until `fetch` is answered, at most [`CacheConfig::read_wait`]; not at all on
    /// the fetch task's own thread.
    fn wait_for<'a>(
        &self,
        mut state: MutexGuard<'a, State>,
        fetch: &Fetch,
    ) -> MutexGuard<'a, State> {
        let wait = self.config.read_wait;
        if wait.is_zero()
            || state.link.is_none()
            || state.fetch_thread == Some(std::thread::current().id())
        {
            return state;
        }
        let deadline = Instant::now() + wait;
        while state.pending.contains(fetch) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::debug!(?fetch, "the persistent store did not answer in time");
                break;
            }
            state = match self.answered.wait_timeout(state, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        state
    }

    /// Whether the store holds a data set (`$inited`), asked of the store unless the
    /// last answer is live (see the module docs); waits as a read does.
    #[cfg_attr(
        not(feature = "eval"),
        allow(dead_code, reason = "only evaluations ask it")
    )]
    pub(crate) fn store_initialized(&self) -> bool {
        let now = Instant::now();
        let state = self.lock();
        match state.inited {
            Some((true, _)) => return true,
            Some((false, at)) if live(self.config.ttl, at, now) => return false,
            _ => {}
        }
        let state = self.ask(state, Fetch::Inited, true);
        matches!(state.inited, Some((true, _)))
    }

    /// The cached answer to `$inited` while it is live: `(answer, time left)`, `None`
    /// left meaning for good. The reader task keeps to it, so that the store's answer
    /// is cached once for the TTL, whoever read it.
    pub(crate) fn inited_answer(&self) -> Option<(bool, Option<Duration>)> {
        let now = Instant::now();
        match self.lock().inited {
            Some((true, _)) => Some((true, None)),
            Some((false, at)) if live(self.config.ttl, at, now) => Some((
                false,
                match self.config.ttl {
                    CacheTtl::Expires(d) => {
                        Some(d.saturating_sub(now.saturating_duration_since(at)))
                    }
                    _ => None,
                },
            )),
            _ => None,
        }
    }

    /// The store answered `$inited` to a read begun at `at` (the reader task's).
    pub(crate) fn record_inited(&self, inited: bool, at: Instant) {
        self.fetched(&Fetch::Inited, Answer::Inited(inited), at);
    }

    /// Ask the store for `fetch`; with `wait`, answer before returning if the store
    /// reads on the caller's thread, or else wait (bounded) for the fetch task.
    fn ask<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        fetch: Fetch,
        wait: bool,
    ) -> MutexGuard<'a, State> {
        let wait = wait && !self.config.read_wait.is_zero();
        if wait
            && !state.pending.contains(&fetch)
            && let Some(link) = state.link.clone()
        {
            drop(state);
            if self.read_now(&link, &fetch) {
                return self.lock();
            }
            state = self.lock();
        }
        self.request(&mut state, fetch.clone());
        if wait {
            state = self.wait_for(state, &fetch);
        }
        state
    }

    /// Read `fetch` on this thread, if the store can; true if it was answered.
    fn read_now(&self, link: &Link, fetch: &Fetch) -> bool {
        let started = Instant::now();
        let store = link.store.inner();
        let timeout = self.config.read_wait;
        let answer = match fetch {
            Fetch::Item(kind, key) => store
                .get_now(*kind, key, timeout)
                .map(|r| r.map(Answer::Item)),
            Fetch::Inited => store
                .initialized_now(timeout)
                .map(|r| r.map(Answer::Inited)),
            Fetch::All(_) => None,
        };
        match answer {
            None => false,
            Some(Err(error)) => {
                // The fetch task reads again and reports the failure to the core.
                tracing::debug!(%error, "reading the persistent store failed");
                false
            }
            Some(Ok(answer)) => {
                let changed = self.fetched(fetch, answer, started);
                if !changed.is_empty()
                    && let Some(published) = link.published.upgrade()
                {
                    published.flags_changed(changed);
                }
                true
            }
        }
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
            let a = answer(store, &fetch, self.reader).await?;
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
    /// fresh, and wait for the answer unless the entry is still live.
    pub(crate) fn touch(&self, kind: Kind, key: &str) {
        let now = Instant::now();
        let state = self.lock();
        let entry = state.entries[slot(kind)].get(key);
        if entry.is_some_and(|e| fresh(self.config.ttl, e.at, now)) {
            return;
        }
        let wait = entry.is_none_or(|e| !live(self.config.ttl, e.at, now));
        drop(self.ask(state, Fetch::Item(kind, key.to_owned()), wait));
    }

    /// Every item of `kind` is about to be listed: read the kind whole again unless it
    /// was read within the TTL.
    pub(crate) fn touch_all(&self, kind: Kind) {
        let now = Instant::now();
        let state = self.lock();
        let at = state.all_at[slot(kind)];
        if at.is_some_and(|at| fresh(self.config.ttl, at, now)) {
            return;
        }
        let wait = at.is_none_or(|at| !live(self.config.ttl, at, now));
        drop(self.ask(state, Fetch::All(kind), wait));
    }

    /// A fetch failed, or will never be answered: readers waiting for it go on.
    fn given_up(&self, fetch: &Fetch) {
        self.lock().pending.remove(fetch);
        self.answered.notify_all();
    }

    /// The fetch task runs on the calling thread now.
    fn fetching_on_this_thread(&self) {
        self.lock().fetch_thread = Some(std::thread::current().id());
    }

    /// The fetch task is started ([`run`]; call this first): reads may wait for it, or
    /// read `store` themselves.
    pub(crate) fn started(
        &self,
        store: Arc<CachingStore>,
        published: std::sync::Weak<dyn FlagChangeTarget>,
    ) {
        self.lock().link = Some(Link { store, published });
    }

    /// The fetch task ended: nothing pending will be answered.
    fn ended(&self) {
        let mut state = self.lock();
        state.pending.clear();
        state.fetch_thread = None;
        state.link = None;
        drop(state);
        self.answered.notify_all();
    }

    /// The answer to `fetch`, read from `at` on; the keys of the flags whose reading
    /// changed. An answer older than what the view holds (a write, or a later read, of
    /// the same item since `at`) is dropped.
    fn fetched(&self, fetch: &Fetch, answer: Answer, at: Instant) -> Vec<String> {
        let changed = self.apply(fetch, answer, at);
        self.answered.notify_all();
        changed
    }

    fn apply(&self, fetch: &Fetch, answer: Answer, at: Instant) -> Vec<String> {
        let mut state = self.lock();
        state.pending.remove(fetch);
        let mut changed = Vec::new();
        let newer = |since: Option<Instant>| since.is_some_and(|t| t > at);
        let stale = match fetch {
            Fetch::Item(kind, key) => {
                newer(state.reset_at) || newer(state.entries[slot(*kind)].get(key).map(|e| e.at))
            }
            Fetch::All(kind) => newer(state.written_at[slot(*kind)]),
            Fetch::Inited => newer(state.reset_at),
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
            (Fetch::Inited, Answer::Inited(inited)) => {
                if !matches!(state.inited, Some((true, _))) {
                    state.inited = Some((inited, at));
                }
                return changed;
            }
            _ => return changed,
        }
        state.evict(self.config.capacity);
        state.rebuild();
        changed
    }

    /// The client only reads the store (see [`StoreView::new`]).
    pub(crate) fn is_reader(&self) -> bool {
        self.reader
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
        state.inited = Some((true, at));
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
    Inited(bool),
    /// The store holds no data set (`$inited` is missing: it lost its data, or was
    /// never written): the answer is dropped and the view keeps what it holds.
    NotInitialized,
}

async fn answer(store: &CachingStore, fetch: &Fetch, reader: bool) -> Result<Answer, StoreError> {
    // The store itself, not its cache: the view is the cache of these reads.
    let inner = store.inner();
    let answer = match fetch {
        Fetch::Item(kind, key) => Answer::Item(inner.get(*kind, key).await?),
        Fetch::All(kind) => Answer::All(inner.all(*kind).await?),
        Fetch::Inited => return Ok(Answer::Inited(inner.initialized().await?)),
    };
    // A reader lists what the store holds, `$inited` or not, as LaunchDarkly's SDKs
    // list it (their persistent-store wrappers' `GetAll`/`all` never ask `$inited`:
    // it says whether a writer's data set is complete, it does not gate reads).
    //
    // A writer's view (a warm start, FDv1 with a persistent store) counts a listing
    // only from a store that holds a data set: a store without `$inited` (a Redis
    // restarted empty) is "not initialized", never an empty data set (issue 19), and
    // the writer writes its data set again. A point read is taken as it is, as
    // LaunchDarkly's SDKs take it.
    let removes = matches!(answer, Answer::All(_));
    if removes && !reader && !inner.initialized().await? {
        return Ok(Answer::NotInitialized);
    }
    Ok(answer)
}
