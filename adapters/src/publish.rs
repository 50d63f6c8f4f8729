//! What the driver publishes for readers: the newest snapshot, the status, the
//! environment id, readiness, and change subscriptions. Readers take a lock only to
//! clone an `Arc`-like value, so they never hold up the driver.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::task::{Context, Poll, Waker};
use std::time::{Instant, SystemTime};

use flagsync_core::status::{Cause, StoreFaultKind};
use flagsync_core::store::ChangedFlags;
use flagsync_core::{
    DataAvailability, DataSystem, ErrorKind, Event, Kind, Persist, Selector, Snapshot, State,
    Status, StoreStatus,
};

use crate::driver::Sink;
use crate::persist::CachingStore;
use crate::persist::view::StoreView;

/// The data-source status, with wall-clock times.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DataSourceStatus {
    /// The current state.
    pub state: State,
    /// When the state last changed.
    pub since: SystemTime,
    /// The most recent error since start-up; it stays after a recovery.
    pub error: Option<DataSourceError>,
}

/// A data-source failure, as the status reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DataSourceError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// The HTTP status code, or 0.
    pub status_code: u16,
    /// When it happened.
    pub time: SystemTime,
    /// A description (never contains the SDK key, nor a store's password).
    pub message: String,
    /// For a persistent-store failure (kind STORE_ERROR), what kind it is, when the
    /// store said: [`StoreFaultKind::is_permanent`](crate::persist::StoreFaultKind::is_permanent) tells a wrong password or setting
    /// (which waiting will not clear) from an outage.
    pub store_fault: Option<StoreFaultKind>,
}

/// A flag whose data changed, directly or through a prerequisite or segment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct FlagChange {
    /// The flag key.
    pub key: String,
}

/// How many unread items a subscription holds by default
/// ([`crate::ClientBuilder::subscription_capacity`]): enough for one change of every
/// flag of any real environment (changes of one flag merge), so nothing is dropped
/// unless a subscriber stops reading through a flood; at most a few MiB per
/// subscription.
pub const DEFAULT_SUBSCRIPTION_CAPACITY: usize = 65_536;

/// A stream of changes (a [`futures_core::Stream`] usable on any runtime). It ends
/// when the client is closed.
///
/// Each subscription holds at most its capacity of unread items
/// ([`crate::ClientBuilder::subscription_capacity`], default
/// [`DEFAULT_SUBSCRIPTION_CAPACITY`]), so a subscriber that stops reading never makes
/// the client's memory grow. A flag change for a key that is already waiting to be read
/// is merged into it (the change is reported once). When a subscription is full, its
/// oldest unread item is dropped to make room for the newest, so the latest status is
/// always there, and the drop is counted: [`Subscription::lagged`] says how many items
/// a subscriber missed (as `tokio::sync::broadcast` does); one that lagged should read
/// again what it watches (for flags, the client's current values).
#[derive(Debug)]
pub struct Subscription<T>(Inner<T>);

#[derive(Debug)]
enum Inner<T> {
    /// A bounded, coalescing queue (flag changes, statuses).
    Queue(Arc<Queue<T>>),
    /// A channel (the SSE client's events).
    Channel(Pin<Box<async_channel::Receiver<T>>>),
}

impl<T> Subscription<T> {
    pub(crate) fn new(rx: async_channel::Receiver<T>) -> Self {
        Self(Inner::Channel(Box::pin(rx)))
    }

    /// The next change, or `None` once the client is closed.
    pub async fn recv(&self) -> Option<T> {
        match &self.0 {
            Inner::Queue(q) => std::future::poll_fn(|cx| q.poll_pop(cx)).await,
            Inner::Channel(rx) => rx.recv().await.ok(),
        }
    }

    /// The next change if one is buffered.
    pub fn try_recv(&self) -> Option<T> {
        match &self.0 {
            Inner::Queue(q) => q.pop(),
            Inner::Channel(rx) => rx.try_recv().ok(),
        }
    }

    /// How many unread items are held now (at most the capacity).
    pub fn len(&self) -> usize {
        match &self.0 {
            Inner::Queue(q) => q.lock().items.len(),
            Inner::Channel(rx) => rx.len(),
        }
    }

    /// No unread item is held now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many items were dropped unread because this subscription was full, since
    /// the last call (which resets the count). Merged flag changes are not counted:
    /// nothing was lost.
    pub fn lagged(&self) -> u64 {
        match &self.0 {
            Inner::Queue(q) => std::mem::take(&mut q.lock().lagged),
            Inner::Channel(_) => 0,
        }
    }
}

impl<T> Drop for Subscription<T> {
    fn drop(&mut self) {
        if let Inner::Queue(q) = &self.0 {
            let mut state = q.lock();
            state.dropped = true;
            state.items.clear();
            state.hashes.clear();
            state.keyed.clear();
        }
    }
}

impl<T> futures_core::Stream for Subscription<T> {
    type Item = T;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        match &mut self.0 {
            Inner::Queue(q) => q.poll_pop(cx),
            Inner::Channel(rx) => rx.as_mut().poll_next(cx),
        }
    }
}

/// What a subscription merges: items with the same key replace each other.
pub(crate) trait Coalesce: Clone {
    /// The key under which a newer item replaces an unread older one, if any.
    fn key(&self) -> Option<&str> {
        None
    }
}

impl Coalesce for FlagChange {
    fn key(&self) -> Option<&str> {
        Some(&self.key)
    }
}

impl Coalesce for DataSourceStatus {}
impl Coalesce for StoreStatus {}

/// One subscription's unread items.
pub(crate) struct Queue<T> {
    state: Mutex<QueueState<T>>,
    capacity: usize,
    /// [`Coalesce::key`] of `T`.
    key_of: fn(&T) -> Option<&str>,
    /// Hashes keys for [`QueueState::keyed`].
    hasher: RandomState,
}

impl<T> std::fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Queue")
            .field("len", &state.items.len())
            .field("capacity", &self.capacity)
            .field("lagged", &state.lagged)
            .field("closed", &state.closed)
            .finish()
    }
}

struct QueueState<T> {
    /// Unread items, oldest first.
    items: VecDeque<T>,
    /// The hash of each unread item's key, if it has one, in the same order (a deque of
    /// its own, so that a batch given to an empty queue becomes `items` as it is).
    hashes: VecDeque<Option<u64>>,
    /// The number of `items[0]` (item `i` is number `head + i`).
    head: u64,
    /// For the hash of an unread item's key, that item's number: a newer item with the
    /// same key merges into it. No key is copied for this. Two unread keys with the
    /// same hash are simply not merged with each other (the later one takes the entry).
    keyed: HashMap<u64, u64, BuildHasherDefault<HashIsKey>>,
    lagged: u64,
    /// The client closed: the stream ends once `items` are read.
    closed: bool,
    /// The subscription was dropped: the queue is forgotten.
    dropped: bool,
    waker: Option<Waker>,
}

/// The hasher of [`QueueState::keyed`], whose keys are hashes already.
#[derive(Default)]
struct HashIsKey(u64);

impl Hasher for HashIsKey {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl<T> QueueState<T> {
    /// Wake the reader waiting for an item, if one waits and an item is there.
    fn wake_reader(&mut self) {
        if !self.items.is_empty()
            && let Some(w) = self.waker.take()
        {
            w.wake();
        }
    }

    fn pop(&mut self) -> Option<T> {
        let item = self.items.pop_front()?;
        if let Some(hash) = self.hashes.pop_front().flatten()
            && self.keyed.get(&hash) == Some(&self.head)
        {
            self.keyed.remove(&hash);
        }
        self.head += 1;
        Some(item)
    }

    /// Add `value` whose key hashes to `hash` (merged with an unread item of the same
    /// key; the oldest dropped when full).
    fn push(
        &mut self,
        value: T,
        hash: Option<u64>,
        capacity: usize,
        key_of: fn(&T) -> Option<&str>,
    ) {
        if let Some(hash) = hash
            && let Some(&number) = self.keyed.get(&hash)
            && let Some(unread) = number
                .checked_sub(self.head)
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| self.items.get(i))
            && key_of(unread) == key_of(&value)
        {
            return;
        }
        if self.items.len() >= capacity {
            self.pop();
            self.lagged += 1;
        }
        let number = self.head + self.items.len() as u64;
        self.items.push_back(value);
        self.hashes.push_back(hash);
        if let Some(hash) = hash {
            self.keyed.insert(hash, number);
        }
    }
}

impl<T: Coalesce> Queue<T> {
    fn new(capacity: usize) -> Self {
        Self {
            key_of: T::key,
            state: Mutex::new(QueueState {
                items: VecDeque::new(),
                hashes: VecDeque::new(),
                head: 0,
                keyed: HashMap::default(),
                lagged: 0,
                closed: false,
                dropped: false,
                waker: None,
            }),
            capacity: capacity.max(1),
            hasher: RandomState::new(),
        }
    }

    /// Add `values` in order, taking the lock and waking the reader once (each merged
    /// with an unread item of the same key; the oldest dropped when full). False once
    /// the subscription is gone.
    fn push_all(&self, values: impl IntoIterator<Item = T>) -> bool {
        let mut state = self.lock();
        if state.dropped {
            return false;
        }
        let values = values.into_iter();
        // A large batch (a first data set: one change per flag) is given its room at
        // once, not by doubling: growing would copy the queue and rehash its index,
        // each with the old and the new table alive.
        let room = values
            .size_hint()
            .0
            .min(self.capacity.saturating_sub(state.items.len()));
        state.items.reserve(room);
        state.hashes.reserve(room);
        state.keyed.reserve(room);
        for value in values {
            let hash = self.hash_of(&value);
            state.push(value, hash, self.capacity, self.key_of);
        }
        state.wake_reader();
        true
    }

    /// The hash of `value`'s key, if it has one ([`QueueState::keyed`]).
    fn hash_of(&self, value: &T) -> Option<u64> {
        value.key().map(|key| self.hasher.hash_one(key))
    }

    /// [`Queue::push_all`] for values given by value: a batch that an empty queue can
    /// hold whole but has no room for yet, with no key twice, becomes the queue's items
    /// as it is (a first data set at 50,000 flags: 1.2 MB not copied). Anything else is
    /// pushed one by one, into the room the queue has.
    fn push_batch(&self, values: Vec<T>) -> bool {
        {
            let mut state = self.lock();
            if state.dropped {
                return false;
            }
            if state.items.is_empty()
                && values.len() > state.items.capacity()
                && values.len() <= self.capacity
                && let Some(hashes) = self.index_batch(&mut state, &values)
            {
                state.items = VecDeque::from(values);
                state.hashes = hashes;
                state.wake_reader();
                return true;
            }
        }
        self.push_all(values)
    }

    /// Index `values` as the unread items of an empty queue: the hash of each key, and
    /// its number in `keyed`. `None`, with `keyed` left empty, if a key is there twice.
    fn index_batch(
        &self,
        state: &mut QueueState<T>,
        values: &[T],
    ) -> Option<VecDeque<Option<u64>>> {
        debug_assert!(state.keyed.is_empty());
        let mut hashes = VecDeque::with_capacity(values.len());
        state.keyed.reserve(values.len());
        for (i, value) in values.iter().enumerate() {
            let hash = self.hash_of(value);
            if let Some(hash) = hash {
                let number = state.head + i as u64;
                if let Some(earlier) = state.keyed.insert(hash, number)
                    && let Ok(earlier) = usize::try_from(earlier - state.head)
                    && values[earlier].key() == value.key()
                {
                    state.keyed.clear();
                    return None;
                }
            }
            hashes.push_back(hash);
        }
        Some(hashes)
    }

    fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        if let Some(w) = state.waker.take() {
            w.wake();
        }
    }
}

impl<T> Queue<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pop(&self) -> Option<T> {
        self.lock().pop()
    }

    fn poll_pop(&self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut state = self.lock();
        match state.pop() {
            Some(item) => Poll::Ready(Some(item)),
            None if state.closed => Poll::Ready(None),
            None => {
                state.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// A broadcast to every live subscription; a dropped subscription is forgotten.
#[derive(Debug)]
pub(crate) struct Subscribers<T> {
    list: Mutex<Option<Vec<Arc<Queue<T>>>>>,
    capacity: usize,
}

impl<T: Coalesce> Subscribers<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            list: Mutex::new(Some(Vec::new())),
            capacity,
        }
    }

    pub(crate) fn subscribe(&self) -> Subscription<T> {
        let queue = Arc::new(Queue::new(self.capacity));
        match &mut *self.list.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(list) => list.push(queue.clone()),
            None => queue.close(), // closed: the stream ends at once
        }
        Subscription(Inner::Queue(queue))
    }

    /// True while someone is subscribed.
    fn any(&self) -> bool {
        self.list
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|list| !list.is_empty())
    }

    pub(crate) fn send(&self, value: &T) {
        self.send_all(vec![value.clone()]);
    }

    /// Send every value to every subscription as one batch: each subscription's lock
    /// is taken, and its reader woken, once. The last subscription gets the values
    /// themselves, the others copies.
    fn send_all(&self, values: Vec<T>) {
        if values.is_empty() {
            return;
        }
        if let Some(list) = &mut *self.list.lock().unwrap_or_else(|e| e.into_inner()) {
            let last = list.len().saturating_sub(1);
            let mut values = Some(values);
            let mut i = 0;
            list.retain(|q| {
                let kept = if i == last {
                    q.push_batch(values.take().unwrap_or_default())
                } else {
                    q.push_all(values.iter().flatten().cloned())
                };
                i += 1;
                kept
            });
        }
    }

    pub(crate) fn close(&self) {
        if let Some(list) = self.list.lock().unwrap_or_else(|e| e.into_inner()).take() {
            for q in list {
                q.close();
            }
        }
    }
}

/// Maps the core's `Instant`s to wall-clock time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    instant: Instant,
    system: SystemTime,
}

impl Clock {
    pub(crate) fn new(instant: Instant) -> Self {
        Self {
            instant,
            system: SystemTime::now() - instant.elapsed(),
        }
    }

    pub(crate) fn to_system(self, at: Instant) -> SystemTime {
        match at.checked_duration_since(self.instant) {
            Some(d) => self.system + d,
            None => self.system - self.instant.duration_since(at),
        }
    }

    pub(crate) fn status(self, s: &Status) -> DataSourceStatus {
        DataSourceStatus {
            state: s.state,
            since: self.to_system(s.since),
            error: s.error.as_ref().map(|e| DataSourceError {
                kind: e.kind,
                status_code: e.status_code,
                time: self.to_system(e.at),
                message: e.cause.to_string(),
                store_fault: match &e.cause {
                    Cause::StoreFault(fault) => Some(fault.kind),
                    _ => None,
                },
            }),
        }
    }
}

/// A snapshot for one read: lent by [`Published`] or copied from a persistent store's
/// view.
pub(crate) enum SnapshotRef {
    /// Memory's snapshot, as published.
    Lent(arc_swap::Guard<Arc<Snapshot>>),
    /// A copy (cheap: structure is shared).
    Owned(Snapshot),
}

impl std::ops::Deref for SnapshotRef {
    type Target = Snapshot;

    fn deref(&self) -> &Snapshot {
        match self {
            Self::Lent(guard) => guard,
            Self::Owned(snapshot) => snapshot,
        }
    }
}

/// Everything readers see, written only by the driver.
#[derive(Debug)]
pub(crate) struct Published {
    pub(crate) clock: Clock,
    /// What memory holds. Readers load it without a lock or a reference-count
    /// update in the common case (`arc_swap`'s per-thread debt slots): an evaluation
    /// pays one atomic swap for it, where a read lock and a clone of the two maps paid
    /// six atomic read-modify-writes (≈ 60 ns on this project's VM).
    snapshot: arc_swap::ArcSwap<Snapshot>,
    status: RwLock<DataSourceStatus>,
    environment_id: RwLock<Option<String>>,
    initialized: AtomicBool,
    ready: AtomicBool,
    bytes_received: AtomicU64,
    /// [`DataSystem::data_availability`], as [`availability_code`].
    data_availability: AtomicU8,
    /// [`DataSystem::target_availability`], as [`availability_code`].
    target_availability: AtomicU8,
    active_source: RwLock<Option<&'static str>>,
    /// [`DataSystem::selector`].
    selector: RwLock<Option<Selector>>,
    // Closed once ready: waiters wake on `recv` failing.
    ready_tx: async_channel::Sender<()>,
    ready_rx: async_channel::Receiver<()>,
    pub(crate) status_subs: Subscribers<DataSourceStatus>,
    pub(crate) flag_subs: Subscribers<FlagChange>,
    /// True while reads are served from the persistent store (memory holds no full data
    /// set yet, or never takes over). Changed only under the snapshot's write lock.
    store_reads: AtomicBool,
    /// The per-key view of the persistent store that serves reads meanwhile.
    view: Option<Arc<StoreView>>,
    /// Memory takes reads over once it holds a full data set (FDv2); under FDv1 the
    /// persistent store stays the store reads come from, as in the reference SDKs.
    hands_over: bool,
    /// The persistent store said it is initialized (`$inited`) when last read.
    store_initialized: AtomicBool,
    // Closed once the first read of the persistent store ended (or at once without
    // persistent reads).
    store_loaded_tx: async_channel::Sender<()>,
    store_loaded_rx: async_channel::Receiver<()>,
    store_status: RwLock<Option<StoreStatus>>,
    pub(crate) store_status_subs: Subscribers<StoreStatus>,
}

impl Published {
    /// What `system` shows now; with a `view`, reads are served from the persistent
    /// store through it, until memory holds a full data set if `hands_over`, else for
    /// good.
    pub(crate) fn new(
        system: &DataSystem,
        clock: Clock,
        view: Option<Arc<StoreView>>,
        hands_over: bool,
        subscription_capacity: usize,
    ) -> Self {
        let store_reads = view.is_some();
        let (ready_tx, ready_rx) = async_channel::bounded(1);
        let (store_loaded_tx, store_loaded_rx) = async_channel::bounded(1);
        if !store_reads {
            store_loaded_tx.close();
        }
        Self {
            clock,
            snapshot: arc_swap::ArcSwap::from_pointee(system.snapshot()),
            status: RwLock::new(clock.status(system.status())),
            environment_id: RwLock::new(None),
            initialized: AtomicBool::new(false),
            ready: AtomicBool::new(false),
            bytes_received: AtomicU64::new(0),
            data_availability: AtomicU8::new(availability_code(system.data_availability())),
            target_availability: AtomicU8::new(availability_code(system.target_availability())),
            active_source: RwLock::new(system.active_source()),
            selector: RwLock::new(system.selector().cloned()),
            ready_tx,
            ready_rx,
            status_subs: Subscribers::new(subscription_capacity),
            flag_subs: Subscribers::new(subscription_capacity),
            store_reads: AtomicBool::new(store_reads),
            view,
            hands_over,
            store_initialized: AtomicBool::new(false),
            store_loaded_tx,
            store_loaded_rx,
            store_status: RwLock::new(system.store_status()),
            store_status_subs: Subscribers::new(subscription_capacity),
        }
    }

    /// What reads see: memory's snapshot, lent; or while reads come from the
    /// persistent store, a copy of what its view holds. For one read.
    pub(crate) fn read(&self) -> SnapshotRef {
        match self.view() {
            Some(view) => SnapshotRef::Owned(view.snapshot()),
            None => SnapshotRef::Lent(self.snapshot.load()),
        }
    }

    /// What memory holds (the core's store), whatever reads are served from.
    pub(crate) fn memory_snapshot(&self) -> Snapshot {
        Snapshot::clone(&self.snapshot.load())
    }

    /// Publish `snapshot` as what memory holds. The one it replaces is dropped here
    /// unless a reader still holds it (dropping frees the map nodes the store copied
    /// since).
    fn set_snapshot(&self, snapshot: Snapshot) {
        let old = self.snapshot.swap(Arc::new(snapshot));
        drop(old);
    }

    /// Memory holds a full data set.
    pub(crate) fn memory_initialized(&self) -> bool {
        self.initialized.load(Ordering::Acquire)
    }

    /// The persistent store's view, if a store is configured (whether or not reads
    /// come from it now).
    pub(crate) fn store_view(&self) -> Option<Arc<StoreView>> {
        self.view.clone()
    }

    /// The persistent store's view, while reads come from it: not during a store
    /// outage once memory holds a full data set (FDv1: memory, which the data source
    /// keeps current, serves until the store is back and has been given the data).
    pub(crate) fn view(&self) -> Option<&StoreView> {
        let view = self.view.as_deref()?;
        if !self.reads_from_store() {
            return None;
        }
        let outage = self.store_status().is_some_and(|s| !s.available);
        if outage && self.initialized.load(Ordering::Acquire) {
            return None;
        }
        Some(view)
    }

    pub(crate) fn status(&self) -> DataSourceStatus {
        self.status
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn environment_id(&self) -> Option<String> {
        self.environment_id
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Memory holds a full data set, or reads come from an initialized persistent
    /// store.
    pub(crate) fn initialized(&self) -> bool {
        self.initialized.load(Ordering::Acquire)
            || (self.reads_from_store() && self.store_initialized.load(Ordering::Acquire))
    }

    pub(crate) fn bytes_received(&self) -> u64 {
        self.bytes_received.load(Ordering::Relaxed)
    }

    /// The core's answer, raised from DEFAULTS to CACHED while reads come from a
    /// persistent store that is initialized (the core cannot know that, B §4.6, §5.10).
    pub(crate) fn data_availability(&self) -> DataAvailability {
        let core = availability_from_code(self.data_availability.load(Ordering::Acquire));
        if core == DataAvailability::Defaults
            && self.reads_from_store()
            && self.store_initialized.load(Ordering::Acquire)
        {
            DataAvailability::Cached
        } else {
            core
        }
    }

    /// True while reads are served from the persistent store.
    pub(crate) fn reads_from_store(&self) -> bool {
        self.store_reads.load(Ordering::Acquire)
    }

    /// What the persistent store last said of `$inited`.
    pub(crate) fn set_store_initialized(&self, inited: bool) {
        self.store_initialized.store(inited, Ordering::Release);
    }

    /// Flags read from the persistent store changed.
    pub(crate) fn flags_changed(&self, keys: Vec<String>) {
        tracing::debug!(
            changed = keys.len(),
            "flags changed in the persistent store"
        );
        self.flag_subs
            .send_all(keys.into_iter().map(|key| FlagChange { key }).collect());
    }

    /// Memory holds a full data set: serve reads from it from now on.
    /// The snapshot holding that data set is published before (the driver's
    /// `set_snapshot`), so a reader that sees this sees it.
    fn hand_over(&self) {
        self.store_reads.store(false, Ordering::Release);
    }

    /// The first read of the persistent store ended (successfully or not).
    pub(crate) fn store_load_done(&self) {
        self.store_loaded_tx.close();
    }

    /// Completes once the first read of the persistent store ended (at once without
    /// persistent reads).
    pub(crate) async fn store_loaded(&self) {
        let _ = self.store_loaded_rx.recv().await;
    }

    /// The persistent store's status, if one is configured.
    pub(crate) fn store_status(&self) -> Option<StoreStatus> {
        *self.store_status.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn target_availability(&self) -> DataAvailability {
        availability_from_code(self.target_availability.load(Ordering::Acquire))
    }

    pub(crate) fn active_source(&self) -> Option<&'static str> {
        *self.active_source.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn selector(&self) -> Option<Selector> {
        self.selector
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Publish the data availability, the active source and the selector. Called after the snapshot
    /// is published and before a status is sent, so a reader that sees an availability
    /// also sees the data it describes, and a status subscriber sees the availability
    /// the same input produced.
    fn publish_availability(&self, system: &DataSystem) {
        *self
            .active_source
            .write()
            .unwrap_or_else(|e| e.into_inner()) = system.active_source();
        let selector = system.selector();
        // Written only when it changed: this runs after every drain.
        if self.selector().as_ref() != selector {
            *self.selector.write().unwrap_or_else(|e| e.into_inner()) = selector.cloned();
        }
        self.data_availability.store(
            availability_code(system.data_availability()),
            Ordering::Release,
        );
        self.target_availability.store(
            availability_code(system.target_availability()),
            Ordering::Release,
        );
    }

    /// Publish `initialized` (only ever false → true). Called once everything the
    /// store change produced has been published: readers that see it true have the
    /// snapshot, and every subscription has the change events, of the initial data.
    fn publish_initialized(&self, system: &DataSystem) {
        if system.initialized() && !self.initialized.load(Ordering::Relaxed) {
            self.initialized.store(true, Ordering::Release);
        }
    }

    /// Completes once ready (initialized, or the source gave up, or the client closed).
    pub(crate) async fn ready(&self) {
        let _ = self.ready_rx.recv().await;
    }

    fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
        self.ready_tx.close();
    }
}

/// The driver's sink for the data system.
#[derive(Debug)]
pub(crate) struct DataSink {
    published: std::sync::Arc<Published>,
    store: Option<StoreLink>,
    /// Until memory holds a full data set while reads come from the store: what the
    /// store served, taken before the store task may write the first data set over it.
    served: Option<ServedByStore>,
    /// The flags changed by the store changes of this round, not yet published (the
    /// snapshot neither): see [`Sink::drained`].
    pending: Option<Vec<String>>,
}

/// The driver's side of a persistent store.
#[derive(Debug)]
pub(crate) struct StoreLink {
    /// The store, for the hand-over (its cache is switched off).
    pub(crate) store: std::sync::Arc<CachingStore>,
    /// Requests for the store task, in order.
    pub(crate) requests: crate::persist::writer::WriteSender,
    /// Dropped at the hand-over: the store reader ends.
    pub(crate) stop_reader: Option<async_channel::Sender<()>>,
    /// An availability check is queued or running: another is not sent (a store that
    /// hangs answers more slowly than the core asks).
    pub(crate) check_pending: std::sync::Arc<AtomicBool>,
}

impl DataSink {
    pub(crate) fn new(published: std::sync::Arc<Published>, store: Option<StoreLink>) -> Self {
        Self {
            published,
            store,
            served: None,
            pending: None,
        }
    }

    /// Publish the store changes held since the last flush, if any: the snapshot once,
    /// then every flag they changed, to each flag-change subscriber as one batch.
    fn flush(&mut self, system: &DataSystem) {
        let Some(keys) = self.pending.take() else {
            return;
        };
        self.hand_over(system);
        let p = &*self.published;
        // Memory is published even while reads come from a persistent store's view: it
        // serves them during a store outage.
        p.set_snapshot(system.snapshot());
        p.publish_availability(system);
        tracing::trace!(changed = keys.len(), "store changed");
        p.flag_subs
            .send_all(keys.into_iter().map(|key| FlagChange { key }).collect());
    }

    /// What readers were served from the store, while memory holds no full data set.
    fn served_by_store(&mut self) -> Option<ServedByStore> {
        let p = &self.published;
        if !p.reads_from_store() || p.memory_initialized() {
            self.served = None;
            return None;
        }
        self.served
            .take()
            .or_else(|| p.store_view().map(|v| ServedByStore::of(&v)))
    }

    /// Once memory holds a full data set, serve reads from it and stop reading (and
    /// caching) the persistent store (PROTOCOL.md B §5.8–5.9).
    fn hand_over(&mut self, system: &DataSystem) {
        if !system.initialized() || !self.published.reads_from_store() || !self.published.hands_over
        {
            return;
        }
        self.published.hand_over();
        if let Some(link) = self.store.as_mut() {
            link.store.disable_cache();
            link.stop_reader = None;
        }
        tracing::debug!("reads served from memory");
    }
}

/// What the persistent store's view served, taken before this process wrote a full
/// data set over it.
#[derive(Debug)]
struct ServedByStore {
    points: Snapshot,
    listing: Snapshot,
}

impl ServedByStore {
    fn of(view: &StoreView) -> Self {
        Self {
            points: view.snapshot(),
            listing: view.listing(),
        }
    }
}

/// What readers were served from the persistent store before a first full data set:
/// the flags whose live version the data set changes, or `None` if a segment changed
/// too (then flags may have changed through it: every flag is reported).
fn changed_since_store(served: &ServedByStore, now: &Snapshot) -> Option<Vec<String>> {
    let (points, listing) = (&served.points, &served.listing);
    let served = |kind: Kind, key: &str| {
        points
            .get(kind, key)
            .or_else(|| listing.get(kind, key))
            .map(|i| i.version)
    };
    let live = |snapshot: &Snapshot, kind: Kind| -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = snapshot
            .iter(kind)
            .map(|(k, i)| (k.to_owned(), i.version))
            .collect();
        v.sort_unstable();
        v
    };
    if live(listing, Kind::Segment) != live(now, Kind::Segment) {
        return None;
    }
    let mut changed: Vec<String> = now
        .iter(Kind::Flag)
        .filter(|(k, i)| served(Kind::Flag, k) != Some(i.version))
        .map(|(k, _)| k.to_owned())
        .chain(
            listing
                .iter(Kind::Flag)
                .filter(|(k, _)| now.get(Kind::Flag, k).is_none())
                .map(|(k, _)| k.to_owned()),
        )
        .collect();
    changed.sort_unstable();
    changed.dedup();
    Some(changed)
}

impl Sink<DataSystem> for DataSink {
    fn publish(&mut self, system: &DataSystem, event: Event) {
        // A change of some items (a patch, a delete, an FDv2 change set) is published
        // at the end of the round with the others of the round: one snapshot, and one
        // batch of flag changes for each subscriber. Any other event publishes what is
        // held first, so that readers see everything in the order it happened.
        if let Event::StoreChanged {
            changed_flags: ChangedFlags::Keys(keys),
        } = event
        {
            match &mut self.pending {
                Some(pending) => pending.extend(keys),
                None => self.pending = Some(keys),
            }
            return;
        }
        self.flush(system);
        // What readers were served from the store until this event, if they were.
        let served_from_store = match &event {
            Event::StoreChanged {
                changed_flags: ChangedFlags::Every { .. },
            } => self.served_by_store(),
            _ => None,
        };
        self.hand_over(system);
        let p = &*self.published;
        match event {
            Event::StoreChanged { changed_flags } => {
                // Order matters: the snapshot, then the change events; `initialized`
                // only once the drain ends or readiness is reported (after the status),
                // so `wait_for_initialization` returning means every change event of
                // the initial data is already in each earlier subscription. Memory is
                // published even while reads come from a persistent store's view: it
                // serves them during a store outage.
                p.set_snapshot(system.snapshot());
                p.publish_availability(system);
                tracing::debug!("store changed");
                // The keys are listed only for subscribers (a first data set changes
                // every flag).
                // A first full data set after reads from the persistent store (a warm
                // start): only the flags that differ from what readers were served
                // changed for them.
                let keys = |changed_flags: ChangedFlags| match (&changed_flags, &served_from_store)
                {
                    (ChangedFlags::Every { .. }, Some(view)) => {
                        changed_since_store(view, &system.snapshot())
                            .unwrap_or_else(|| changed_flags.into_keys())
                    }
                    _ => changed_flags.into_keys(),
                };
                if p.flag_subs.any() {
                    p.flag_subs.send_all(
                        keys(changed_flags)
                            .into_iter()
                            .map(|key| FlagChange { key })
                            .collect(),
                    );
                }
            }
            Event::StatusChanged(status) => {
                p.publish_availability(system);
                let status = p.clock.status(&status);
                tracing::debug!(state = status.state.as_str(), error = ?status.error, "status");
                *p.status.write().unwrap_or_else(|e| e.into_inner()) = status.clone();
                p.status_subs.send(&status);
            }
            Event::Ready => {
                p.publish_availability(system);
                p.publish_initialized(system);
                p.set_ready();
            }
            Event::EnvironmentId(id) => {
                *p.environment_id.write().unwrap_or_else(|e| e.into_inner()) = Some(id);
            }
            Event::StoreStatusChanged(status) => {
                tracing::debug!(status.available, status.stale, "data store status");
                *p.store_status.write().unwrap_or_else(|e| e.into_inner()) = Some(status);
                p.store_status_subs.send(&status);
            }
            other => tracing::trace!(event = ?other, "ignored event"),
        }
    }

    fn persist(&mut self, request: Persist) {
        if matches!(request, Persist::Init(_)) && self.served.is_none() {
            // The store task may write this over the view before the store change is
            // published: keep what readers were served until now.
            let p = &self.published;
            if p.reads_from_store() && !p.memory_initialized() {
                self.served = p.store_view().map(|v| ServedByStore::of(&v));
            }
        }
        match &self.store {
            Some(link) => {
                if matches!(request, Persist::CheckAvailable)
                    && link.check_pending.swap(true, Ordering::AcqRel)
                {
                    tracing::trace!("an availability check is already pending");
                    return;
                }
                // The driver never waits for the store; queued writes merge (at most
                // one full data set is pending).
                link.requests.send(request);
            }
            // Not `?request`: an init holds the whole data set.
            None => tracing::debug!("no persistent store: request dropped"),
        }
    }

    fn received(&mut self, bytes: usize) {
        self.published
            .bytes_received
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    fn drained(&mut self, system: &DataSystem) {
        self.flush(system);
        self.hand_over(system);
        self.published.publish_availability(system);
        self.published.publish_initialized(system);
    }

    fn finish(&mut self, system: &DataSystem) {
        self.flush(system);
        let p = &*self.published;
        p.publish_availability(system);
        p.publish_initialized(system);
        p.set_ready();
        p.store_load_done();
        p.status_subs.close();
        p.flag_subs.close();
        p.store_status_subs.close();
        // The store task finishes what is queued, then ends; the reader ends.
        self.store = None;
    }
}

/// [`DataAvailability`] as a byte, for an atomic.
fn availability_code(a: DataAvailability) -> u8 {
    match a {
        DataAvailability::Defaults => 0,
        DataAvailability::Cached => 1,
        DataAvailability::Refreshed => 2,
    }
}

fn availability_from_code(code: u8) -> DataAvailability {
    match code {
        2 => DataAvailability::Refreshed,
        1 => DataAvailability::Cached,
        _ => DataAvailability::Defaults,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use flagsync_core::{Action, Command, ConnId, Input, Output};

    use super::*;

    fn change(key: &str) -> FlagChange {
        FlagChange { key: key.into() }
    }

    fn unread(s: &Subscription<FlagChange>) -> Vec<String> {
        std::iter::from_fn(|| s.try_recv()).map(|c| c.key).collect()
    }

    #[test]
    fn a_batch_reaches_every_subscriber_merged() {
        let subs = Subscribers::<FlagChange>::new(8);
        let (a, b) = (subs.subscribe(), subs.subscribe());
        subs.send_all(vec![change("x"), change("y"), change("x")]);
        subs.send_all(vec![change("y"), change("z")]);
        for s in [&a, &b] {
            assert_eq!(unread(s), ["x", "y", "z"]);
            assert_eq!(s.lagged(), 0);
        }
        // Read changes are reported again; a dropped subscription is forgotten.
        drop(b);
        subs.send_all(vec![change("x")]);
        assert_eq!(unread(&a), ["x"]);
        assert_eq!(subs.list.lock().unwrap().as_ref().map(Vec::len), Some(1));
    }

    #[test]
    fn a_full_subscription_keeps_the_newest_of_a_batch_and_counts_the_rest() {
        let subs = Subscribers::<FlagChange>::new(2);
        let s = subs.subscribe();
        subs.send_all(["a", "b", "c", "d", "e"].map(change).to_vec());
        assert_eq!(s.len(), 2);
        assert_eq!(s.lagged(), 3);
        assert_eq!(unread(&s), ["d", "e"]);
        // The keys of dropped items merge nothing any more.
        subs.send_all(vec![change("a"), change("e")]);
        assert_eq!(unread(&s), ["a", "e"]);
    }

    #[test]
    fn a_large_batch_gets_its_room_at_once_within_the_capacity() {
        // 1,025 changes: grown by doubling, the queue would hold room for 2,048.
        let keys: Vec<String> = (0..1025).map(|i| format!("flag-{i}")).collect();
        let changes = || keys.iter().map(|k| change(k)).collect::<Vec<_>>();
        let queue = Queue::<FlagChange>::new(100_000);
        assert!(queue.push_all(changes()));
        {
            let state = queue.lock();
            assert_eq!(state.items.len(), 1025);
            assert!(state.items.capacity() < 1100, "{}", state.items.capacity());
            assert!(state.keyed.capacity() >= 1025);
        }
        // Never more room than the capacity allows: the oldest are dropped as before.
        let small = Queue::<FlagChange>::new(100);
        assert!(small.push_all(changes()));
        let state = small.lock();
        assert_eq!(state.items.len(), 100);
        assert!(state.items.capacity() < 200, "{}", state.items.capacity());
        assert_eq!(state.lagged, 925);
        assert_eq!(
            state.items.front().map(|c| c.key.as_str()),
            Some("flag-925")
        );
    }

    #[test]
    fn a_batch_for_an_empty_queue_becomes_its_items_as_it_is() {
        let queue = Queue::<FlagChange>::new(8);
        let batch = vec![change("a"), change("b"), change("c")];
        let first = batch.as_ptr();
        assert!(queue.push_batch(batch));
        {
            let mut state = queue.lock();
            // The batch's own memory, not a copy.
            assert_eq!(state.items.make_contiguous().as_ptr(), first);
            assert_eq!(state.keyed.len(), 3);
        }
        // Its items merge later changes as pushed ones do.
        assert!(queue.push_all(vec![change("b"), change("d")]));
        let keys: Vec<String> = std::iter::from_fn(|| queue.pop()).map(|c| c.key).collect();
        assert_eq!(keys, ["a", "b", "c", "d"]);
        assert!(queue.lock().keyed.is_empty());
    }

    proptest::proptest! {
        /// A batch by value ends as pushing its values one by one would: merged, the
        /// oldest dropped when full, the same count of dropped ones, whatever the queue
        /// held before.
        #[test]
        fn a_batch_by_value_is_pushed_as_one_by_one(
            before in proptest::collection::vec(0u8..6, 0..4),
            batch in proptest::collection::vec(0u8..12, 0..12),
            capacity in 1usize..10,
            later in proptest::collection::vec(0u8..12, 0..4),
        ) {
            let keys = |v: &[u8]| v.iter().map(|k| change(&format!("k{k}"))).collect::<Vec<_>>();
            let (fast, slow) = (Queue::<FlagChange>::new(capacity), Queue::<FlagChange>::new(capacity));
            for q in [&fast, &slow] {
                q.push_all(keys(&before));
            }
            fast.push_batch(keys(&batch));
            for c in keys(&batch) {
                slow.push_all([c]);
            }
            for q in [&fast, &slow] {
                q.push_all(keys(&later));
            }
            let drain = |q: &Queue<FlagChange>| {
                let lagged = q.lock().lagged;
                let keys: Vec<String> = std::iter::from_fn(|| q.pop()).map(|c| c.key).collect();
                let state = q.lock();
                (keys, lagged, state.keyed.len(), state.hashes.len())
            };
            proptest::prop_assert_eq!(drain(&fast), drain(&slow));
        }
    }

    #[test]
    fn keys_with_the_same_hash_are_never_merged_or_lost() {
        let mut state = QueueState {
            items: VecDeque::new(),
            hashes: VecDeque::new(),
            head: 0,
            keyed: HashMap::default(),
            lagged: 0,
            closed: false,
            dropped: false,
            waker: None,
        };
        let key_of: fn(&FlagChange) -> Option<&str> = FlagChange::key;
        for key in ["a", "b", "a", "b"] {
            state.push(change(key), Some(7), 16, key_of);
        }
        let keys: Vec<String> = std::iter::from_fn(|| state.pop()).map(|c| c.key).collect();
        // Each took the hash's entry from the other, so nothing merged: a key may be
        // reported twice, none is lost.
        assert_eq!(keys, ["a", "b", "a", "b"]);
        for key in ["a", "a"] {
            state.push(change(key), Some(7), 16, key_of);
        }
        let keys: Vec<String> = std::iter::from_fn(|| state.pop()).map(|c| c.key).collect();
        assert_eq!(keys, ["a"]);
        assert!(state.keyed.is_empty());
    }

    /// A data system streaming from a connection, and its connection.
    fn streaming() -> (DataSystem, ConnId, Instant) {
        let mut config = flagsync_core::Config::new("sdk-key");
        config.stream_uri = "http://127.0.0.1:1".into();
        let now = Instant::now();
        let mut system = DataSystem::new(config, 1, now).unwrap();
        system.handle_input(now, Input::Command(Command::Start));
        let mut conn = None;
        loop {
            match system.poll_output() {
                Output::Action(Action::Connect { conn: c, .. }) => conn = Some(c),
                Output::Wait(_) => break,
                _ => {}
            }
        }
        let conn = conn.expect("a connection");
        system.handle_input(now, Input::Connected { conn });
        (system, conn, now)
    }

    /// One read handled and drained into `sink`, as the driver does within a round.
    fn read(system: &mut DataSystem, sink: &mut DataSink, conn: ConnId, now: Instant, s: &str) {
        system.handle_input(
            now,
            Input::Data {
                conn,
                bytes: s.as_bytes(),
            },
        );
        loop {
            match system.poll_output() {
                Output::Event(e) => sink.publish(system, e),
                Output::Wait(_) => break,
                _ => {}
            }
        }
    }

    fn patch(key: &str, version: u64) -> String {
        format!(
            "event: patch\ndata: {{\"path\":\"/flags/{key}\",\"data\":{{\"key\":\"{key}\",\"version\":{version}}}}}\n\n"
        )
    }

    #[test]
    fn the_changes_of_a_round_are_published_at_once_at_its_end() {
        let (mut system, conn, now) = streaming();
        let published = Arc::new(Published::new(&system, Clock::new(now), None, false, 64));
        let mut sink = DataSink::new(published.clone(), None);
        let changes = published.flag_subs.subscribe();
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
        let put = r#"event: put
data: {"path":"/","data":{"flags":{"a":{"key":"a","version":1},"b":{"key":"b","version":1},"c":{"key":"c","version":1}},"segments":{}}}

"#;
        read(&mut system, &mut sink, conn, now, &(head.to_owned() + put));
        sink.drained(&system);
        assert_eq!(unread(&changes), ["a", "b", "c"]);
        let version = |key: &str| {
            published
                .memory_snapshot()
                .get(Kind::Flag, key)
                .map(|i| i.version)
        };
        assert_eq!((version("a"), version("b")), (Some(1), Some(1)));

        // Two reads in one round: nothing is published until the round ends...
        read(
            &mut system,
            &mut sink,
            conn,
            now,
            &(patch("a", 2) + &patch("b", 2)),
        );
        read(
            &mut system,
            &mut sink,
            conn,
            now,
            &(patch("a", 3) + &patch("c", 2)),
        );
        assert_eq!(
            (version("a"), version("b"), version("c")),
            (Some(1), Some(1), Some(1))
        );
        assert!(changes.is_empty());
        // ...then all of it: one snapshot with every write, and every changed flag.
        sink.drained(&system);
        assert_eq!(
            (version("a"), version("b"), version("c")),
            (Some(3), Some(2), Some(2))
        );
        assert_eq!(unread(&changes), ["a", "b", "c"]);

        // Any other event publishes what the round changed before it: a status
        // subscriber that sees the interruption sees the data that came before it.
        read(&mut system, &mut sink, conn, now, &patch("b", 3));
        system.handle_input(
            now,
            Input::Closed {
                conn,
                cause: flagsync_core::CloseCause::Eof,
            },
        );
        loop {
            match system.poll_output() {
                Output::Event(e @ Event::StatusChanged(_)) => {
                    sink.publish(&system, e);
                    assert_eq!(version("b"), Some(3));
                }
                Output::Event(e) => sink.publish(&system, e),
                Output::Wait(_) => break,
                _ => {}
            }
        }
        assert_eq!(version("b"), Some(3));
        assert_eq!(unread(&changes), ["b"]);
    }
}
