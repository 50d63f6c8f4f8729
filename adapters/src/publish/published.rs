//! [`Published`]: everything readers see (snapshot, status, availability, readiness,
//! the persistent store's view and status), written only by the driver.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use flagsync_core::{DataAvailability, DataSystem, Selector, Snapshot, StoreStatus};

use super::status::{Clock, DataSourceStatus, FlagChange};
use super::subscription::Subscribers;
use crate::persist::view::{FlagChangeTarget, StoreView};

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
    pub(super) status: RwLock<DataSourceStatus>,
    pub(super) environment_id: RwLock<Option<String>>,
    initialized: AtomicBool,
    ready: AtomicBool,
    pub(super) bytes_received: AtomicU64,
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
    pub(super) hands_over: bool,
    /// The persistent store said it is initialized (`$inited`) when last read.
    store_initialized: AtomicBool,
    // Closed once the first read of the persistent store ended (or at once without
    // persistent reads).
    store_loaded_tx: async_channel::Sender<()>,
    store_loaded_rx: async_channel::Receiver<()>,
    pub(super) store_status: RwLock<Option<StoreStatus>>,
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
    pub(super) fn set_snapshot(&self, snapshot: Snapshot) {
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
    pub(super) fn hand_over(&self) {
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
    pub(super) fn publish_availability(&self, system: &DataSystem) {
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
    pub(super) fn publish_initialized(&self, system: &DataSystem) {
        if system.initialized() && !self.initialized.load(Ordering::Relaxed) {
            self.initialized.store(true, Ordering::Release);
        }
    }

    /// Completes once ready (initialized, or the source gave up, or the client closed).
    pub(crate) async fn ready(&self) {
        let _ = self.ready_rx.recv().await;
    }

    pub(super) fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
        self.ready_tx.close();
    }
}

impl FlagChangeTarget for Published {
    fn flags_changed(&self, keys: Vec<String>) {
        Self::flags_changed(self, keys);
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
