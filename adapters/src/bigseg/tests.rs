use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use flagsync_core::bigseg::{BigSegmentsStatus, context_hash};

use super::*;
use crate::Client;
use crate::runtime::{BoxIo, Runtime};

/// A store in memory that counts its queries.
#[derive(Debug, Default)]
struct FakeStore {
    memberships: Mutex<HashMap<String, Membership>>,
    /// `None`: the metadata query fails.
    last_up_to_date: Mutex<Option<Option<u64>>>,
    fail_membership: Mutex<bool>,
    metadata_queries: AtomicUsize,
    membership_queries: Mutex<Vec<String>>,
}

impl FakeStore {
    fn healthy() -> Arc<Self> {
        let s = Self::default();
        *s.last_up_to_date.lock().unwrap() = Some(Some(now_ms()));
        Arc::new(s)
    }

    fn set(&self, key: &str, m: Membership) {
        self.memberships
            .lock()
            .unwrap()
            .insert(context_hash(key), m);
    }

    fn queries(&self) -> Vec<String> {
        self.membership_queries.lock().unwrap().clone()
    }
}

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// An async store only (no blocking path): its futures run on the client's runtime.
impl BigSegmentStore for FakeStore {
    fn metadata(&self) -> BoxFuture<'_, Result<StoreMetadata, StoreError>> {
        Box::pin(async move {
            self.metadata_queries.fetch_add(1, Ordering::SeqCst);
            match *self.last_up_to_date.lock().unwrap() {
                Some(last) => Ok(StoreMetadata::new(last)),
                None => Err(StoreError::Unreachable("down".into())),
            }
        })
    }

    fn membership<'a>(
        &'a self,
        context_hash: &'a str,
    ) -> BoxFuture<'a, Result<Option<Membership>, StoreError>> {
        Box::pin(async move {
            self.membership_queries
                .lock()
                .unwrap()
                .push(context_hash.to_owned());
            if *self.fail_membership.lock().unwrap() {
                return Err(StoreError::Backend("deliberate".into()));
            }
            Ok(self.memberships.lock().unwrap().get(context_hash).cloned())
        })
    }
}

/// A runtime of plain threads, whatever runtime features are enabled: each task and
/// each timer on a thread of its own. It counts the tasks it ran.
#[derive(Debug, Default)]
pub(super) struct ThreadRuntime {
    pub(super) spawned: AtomicUsize,
}

impl Runtime for ThreadRuntime {
    fn connect(&self, _: &str, _: u16) -> BoxFuture<'static, std::io::Result<BoxIo>> {
        Box::pin(async { Err(std::io::Error::other("no connections in these tests")) })
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        let (tx, rx) = async_channel::bounded::<()>(1);
        std::thread::spawn(move || {
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            let _ = tx.send_blocking(());
        });
        Box::pin(async move {
            let _ = rx.recv().await;
        })
    }

    fn spawn(&self, future: BoxFuture<'static, ()>) {
        self.spawned.fetch_add(1, Ordering::SeqCst);
        std::thread::spawn(move || futures_lite::future::block_on(future));
    }
}

fn client_with(
    store: &Arc<FakeStore>,
    change: impl FnOnce(BigSegmentsOptions) -> BigSegmentsOptions,
) -> Client {
    client_on(store, Arc::new(ThreadRuntime::default()), change)
}

fn client_on(
    store: &Arc<FakeStore>,
    rt: Arc<ThreadRuntime>,
    change: impl FnOnce(BigSegmentsOptions) -> BigSegmentsOptions,
) -> Client {
    let options = change(
        BigSegmentsOptions::new(store.clone()).status_poll_interval(Duration::from_secs(600)),
    );
    Client::builder("k")
        .send_events(false)
        .runtime(rt)
        .big_segments(options)
        .build()
        .expect("client")
}

fn included(r: &str) -> Membership {
    Membership::from_refs([r.to_owned()], Vec::<String>::new())
}

#[test]
fn a_miss_asks_the_store_once_then_the_cache_answers() {
    let store = FakeStore::healthy();
    store.set("u1", included("s.g1"));
    let client = client_with(&store, |o| o);
    let lookup = client.big_segment_lookup().expect("configured");
    let first = lookup.membership("u1");
    assert_eq!(first.status, BigSegmentsStatus::Healthy);
    assert_eq!(
        first.membership.as_ref().and_then(|m| m.check("s.g1")),
        Some(true)
    );
    store.set("u1", Membership::default());
    let second = lookup.membership("u1");
    assert_eq!(second.membership, first.membership, "from the cache");
    assert_eq!(store.queries(), [context_hash("u1")]);
    // Unknown to the store: an empty membership, cached too.
    let unknown = lookup.membership("nobody");
    assert!(unknown.membership.expect("read").is_empty());
    lookup.membership("nobody");
    assert_eq!(store.queries().len(), 2);
}

#[test]
fn the_cache_time_and_size_are_honoured() {
    let store = FakeStore::healthy();
    let client = client_with(&store, |o| o.context_cache_time(Duration::from_millis(20)));
    let lookup = client.big_segment_lookup().expect("configured");
    lookup.membership("a");
    std::thread::sleep(Duration::from_millis(30));
    lookup.membership("a");
    assert_eq!(store.queries().len(), 2, "expired after 20 ms");

    let store = FakeStore::healthy();
    let client = client_with(&store, |o| o.context_cache_size(1));
    let lookup = client.big_segment_lookup().expect("configured");
    lookup.membership("a");
    lookup.membership("b");
    lookup.membership("a");
    assert_eq!(store.queries().len(), 3, "b evicted a");
}

#[test]
fn a_failed_membership_query_is_a_store_error_and_is_not_cached() {
    let store = FakeStore::healthy();
    *store.fail_membership.lock().unwrap() = true;
    let client = client_with(&store, |o| o);
    let lookup = client.big_segment_lookup().expect("configured");
    let r = lookup.membership("a");
    assert_eq!(
        (r.membership, r.status),
        (None, BigSegmentsStatus::StoreError)
    );
    *store.fail_membership.lock().unwrap() = false;
    assert_eq!(lookup.membership("a").status, BigSegmentsStatus::Healthy);
    assert_eq!(store.queries().len(), 2);
}

#[test]
fn a_stale_store_makes_evaluations_stale() {
    let store = FakeStore::healthy();
    *store.last_up_to_date.lock().unwrap() = Some(Some(1));
    let client = client_with(&store, |o| o);
    assert_eq!(
        client.big_segment_store_status(),
        Some(BigSegmentStoreStatus {
            available: true,
            stale: true
        })
    );
    let lookup = client.big_segment_lookup().expect("configured");
    assert_eq!(lookup.membership("a").status, BigSegmentsStatus::Stale);
}

#[test]
fn the_status_is_read_once_then_polled_and_changes_are_announced() {
    let store = FakeStore::healthy();
    let client = client_with(&store, |o| {
        o.status_poll_interval(Duration::from_millis(10))
    });
    let changes = client.big_segment_store_status_changes();
    // Unknown until the first poll: asked for, it is read at once.
    let first = client.big_segment_store_status().expect("configured");
    assert!(first.available && !first.stale);
    *store.last_up_to_date.lock().unwrap() = None;
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while client
        .big_segment_store_status()
        .is_some_and(|s| s.available)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the poller saw no change"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(changes.try_recv(), Some(first));
    assert_eq!(
        changes.try_recv(),
        Some(BigSegmentStoreStatus {
            available: false,
            stale: false
        })
    );
    assert!(store.metadata_queries.load(Ordering::SeqCst) >= 2);
}

#[test]
fn close_stops_the_poller_and_ends_the_subscriptions() {
    let store = FakeStore::healthy();
    let client = client_with(&store, |o| o.status_poll_interval(Duration::from_millis(5)));
    let changes = client.big_segment_store_status_changes();
    assert!(
        client
            .inner
            .big_segments
            .as_ref()
            .is_some_and(|b| b.polling())
    );
    client.close_blocking();
    assert!(
        !client
            .inner
            .big_segments
            .as_ref()
            .is_some_and(|b| b.polling())
    );
    std::thread::sleep(Duration::from_millis(30));
    let after_close = store.metadata_queries.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(store.metadata_queries.load(Ordering::SeqCst), after_close);
    while changes.try_recv().is_some() {}
    assert_eq!(futures_lite::future::block_on(changes.recv()), None);
}

#[test]
fn a_long_poll_interval_polls_nothing_before_it_passes() {
    let store = FakeStore::healthy();
    let client = client_with(&store, |o| o);
    client.big_segment_store_status();
    for i in 0..10 {
        client
            .big_segment_lookup()
            .expect("configured")
            .membership(&format!("user-{i}"));
    }
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(store.metadata_queries.load(Ordering::SeqCst), 1);
}

#[test]
fn store_futures_and_the_poller_run_on_the_clients_runtime() {
    let store = FakeStore::healthy();
    store.set("u1", included("s.g1"));
    let rt = Arc::new(ThreadRuntime::default());
    let client = client_on(&store, rt.clone(), |o| {
        o.status_poll_interval(Duration::from_millis(10))
    });
    // The poller is one task on the runtime (not a thread of the client's own).
    let polled = rt.spawned.load(Ordering::SeqCst);
    assert_eq!(polled, 1);
    let lookup = client.big_segment_lookup().expect("configured");
    // A miss waits for the store's future, run on the runtime: the answer is there
    // on the first evaluation.
    let r = lookup.membership("u1");
    assert_eq!(r.status, BigSegmentsStatus::Healthy);
    assert_eq!(r.membership.and_then(|m| m.check("s.g1")), Some(true));
    // One task for the membership, one for the status (never read before).
    assert_eq!(rt.spawned.load(Ordering::SeqCst), polled + 2);
    // Cached: no store query, no task.
    lookup.membership("u1");
    assert_eq!(rt.spawned.load(Ordering::SeqCst), polled + 2);
    let deadline = Instant::now() + Duration::from_secs(2);
    while store.metadata_queries.load(Ordering::SeqCst) < 2 {
        assert!(Instant::now() < deadline, "the poller did not poll");
        std::thread::sleep(Duration::from_millis(5));
    }
    client.close_blocking();
}

#[test]
fn without_big_segments_there_is_no_status_or_lookup() {
    let client = Client::builder("k")
        .send_events(false)
        .build()
        .expect("client");
    assert_eq!(client.big_segment_store_status(), None);
    assert!(client.big_segment_lookup().is_none());
    let changes = client.big_segment_store_status_changes();
    assert_eq!(futures_lite::future::block_on(changes.recv()), None);
}
