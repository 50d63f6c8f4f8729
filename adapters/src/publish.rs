//! What the driver publishes for readers: the newest snapshot, the status, the
//! environment id, readiness, and change subscriptions. Readers take a lock only to
//! clone an `Arc`-like value, so they never hold up the driver.

use std::collections::{HashSet, VecDeque};
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
            state.keys.clear();
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
    items: VecDeque<T>,
    /// The keys of `items` that have one.
    keys: HashSet<String>,
    lagged: u64,
    /// The client closed: the stream ends once `items` are read.
    closed: bool,
    /// The subscription was dropped: the queue is forgotten.
    dropped: bool,
    waker: Option<Waker>,
}

impl<T> QueueState<T> {
    fn pop(&mut self, key_of: fn(&T) -> Option<&str>) -> Option<T> {
        let item = self.items.pop_front()?;
        if let Some(key) = key_of(&item) {
            self.keys.remove(key);
        }
        Some(item)
    }
}

impl<T: Coalesce> Queue<T> {
    fn new(capacity: usize) -> Self {
        Self {
            key_of: T::key,
            state: Mutex::new(QueueState {
                items: VecDeque::new(),
                keys: HashSet::new(),
                lagged: 0,
                closed: false,
                dropped: false,
                waker: None,
            }),
            capacity: capacity.max(1),
        }
    }

    /// Add `value` (merged with an unread item of the same key; the oldest dropped
    /// when full). False once the subscription is gone.
    fn push(&self, value: &T) -> bool {
        let mut state = self.lock();
        if state.dropped {
            return false;
        }
        if let Some(key) = value.key() {
            if state.keys.contains(key) {
                return true;
            }
            state.keys.insert(key.to_owned());
        }
        if state.items.len() >= self.capacity {
            state.pop(self.key_of);
            state.lagged += 1;
        }
        state.items.push_back(value.clone());
        if let Some(w) = state.waker.take() {
            w.wake();
        }
        true
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
        self.lock().pop(self.key_of)
    }

    fn poll_pop(&self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut state = self.lock();
        match state.pop(self.key_of) {
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

    pub(crate) fn send(&self, value: &T) {
        if let Some(list) = &mut *self.list.lock().unwrap_or_else(|e| e.into_inner()) {
            list.retain(|q| q.push(value));
        }
    }

    /// Send every value, taking the lock once.
    fn send_all(&self, values: impl IntoIterator<Item = T>) {
        if let Some(list) = &mut *self.list.lock().unwrap_or_else(|e| e.into_inner()) {
            for value in values {
                list.retain(|q| q.push(&value));
            }
        }
    }

    /// Send the values `make` returns, made only if someone subscribed.
    fn send_all_with<I: IntoIterator<Item = T>>(&self, make: impl FnOnce() -> I) {
        if let Some(list) = &mut *self.list.lock().unwrap_or_else(|e| e.into_inner())
            && !list.is_empty()
        {
            for value in make() {
                list.retain(|q| q.push(&value));
            }
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

/// Everything readers see, written only by the driver.
#[derive(Debug)]
pub(crate) struct Published {
    pub(crate) clock: Clock,
    snapshot: RwLock<Snapshot>,
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
            snapshot: RwLock::new(system.snapshot()),
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

    /// What reads see: memory, or while reads come from the persistent store, what its
    /// view holds.
    pub(crate) fn snapshot(&self) -> Snapshot {
        match self.view() {
            Some(view) => view.snapshot(),
            None => self.memory_snapshot(),
        }
    }

    /// What memory holds (the core's store), whatever reads are served from.
    pub(crate) fn memory_snapshot(&self) -> Snapshot {
        self.snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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
            .send_all(keys.into_iter().map(|key| FlagChange { key }));
    }

    /// Memory holds a full data set: serve reads from it from now on.
    fn hand_over(&self) {
        let _guard = self.snapshot.write().unwrap_or_else(|e| e.into_inner());
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
        }
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
                *p.snapshot.write().unwrap_or_else(|e| e.into_inner()) = system.snapshot();
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
                p.flag_subs.send_all_with(|| {
                    keys(changed_flags)
                        .into_iter()
                        .map(|key| FlagChange { key })
                });
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
        self.hand_over(system);
        self.published.publish_availability(system);
        self.published.publish_initialized(system);
    }

    fn finish(&mut self, system: &DataSystem) {
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
