//! Issue 33, item 2: evaluations that miss the membership cache for the same context at
//! once make one store query.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use flagsync_core::bigseg::{BigSegmentLookup, BigSegmentsStatus, LookupResult, context_hash};

use super::lookup::BigSegments;
use super::*;
use crate::runtime::BoxFuture;

/// A store whose membership queries are counted and held until the test releases them.
#[derive(Debug, Default)]
struct GatedStore {
    queries: AtomicUsize,
    /// Queries that returned an answer.
    answered: AtomicUsize,
    released: Mutex<bool>,
    release: Condvar,
    fail: bool,
    panic: bool,
    /// No blocking path: evaluations wait for its futures instead.
    async_only: bool,
}

impl GatedStore {
    fn open(&self) {
        *self.released.lock().unwrap() = true;
        self.release.notify_all();
    }

    fn queries(&self) -> usize {
        self.queries.load(Ordering::SeqCst)
    }
}

impl BigSegmentStore for GatedStore {
    fn metadata(&self) -> BoxFuture<'_, Result<StoreMetadata, StoreError>> {
        Box::pin(async { Ok(StoreMetadata::new(Some(u64::MAX))) })
    }

    fn membership<'a>(
        &'a self,
        hash: &'a str,
    ) -> BoxFuture<'a, Result<Option<Membership>, StoreError>> {
        Box::pin(async move { self.query(hash) })
    }

    fn membership_now(
        &self,
        hash: &str,
        _timeout: Duration,
    ) -> Option<Result<Option<Membership>, StoreError>> {
        (!self.async_only).then(|| self.query(hash))
    }

    fn metadata_now(&self, _timeout: Duration) -> Option<Result<StoreMetadata, StoreError>> {
        Some(Ok(StoreMetadata::new(Some(u64::MAX))))
    }
}

impl GatedStore {
    /// A membership query: counted, held until released.
    fn query(&self, hash: &str) -> Result<Option<Membership>, StoreError> {
        self.queries.fetch_add(1, Ordering::SeqCst);
        let released = self.released.lock().unwrap();
        drop(self.release.wait_while(released, |r| !*r).unwrap());
        if self.panic {
            panic!("deliberate");
        }
        if self.fail {
            return Err(StoreError::Backend("deliberate".into()));
        }
        assert_eq!(hash, context_hash("u1"));
        self.answered.fetch_add(1, Ordering::SeqCst);
        Ok(Some(Membership::from_refs(
            ["s.g1".to_owned()],
            Vec::<String>::new(),
        )))
    }
}

fn lookup(store: &Arc<GatedStore>) -> Arc<BigSegments> {
    Arc::new(BigSegments::new(
        &BigSegmentsOptions::new(store.clone()),
        16,
    ))
}

/// `n` evaluations of `u1` that start together; each thread's result.
fn evaluate(lookup: &Arc<BigSegments>, n: usize) -> Vec<thread::JoinHandle<LookupResult>> {
    let start = Arc::new(Barrier::new(n));
    (0..n)
        .map(|_| {
            let (lookup, start) = (lookup.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                lookup.membership("u1")
            })
        })
        .collect()
}

/// Until every evaluation has either queried the store or is waiting for a query in
/// flight (today's code: each queries), for at most 5 s.
fn until_all_arrived(lookup: &BigSegments, store: &GatedStore, n: usize) {
    let end = Instant::now() + Duration::from_secs(5);
    while store.queries() + lookup.waiting() < n && Instant::now() < end {
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn concurrent_misses_for_one_context_make_one_store_query() {
    let store = Arc::new(GatedStore::default());
    let lookup = lookup(&store);
    let evaluations = evaluate(&lookup, 2);
    until_all_arrived(&lookup, &store, 2);
    assert_eq!(lookup.waiting(), 1, "the second evaluation waits");
    store.open();
    let results: Vec<LookupResult> = evaluations.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(store.queries(), 1);
    for r in &results {
        assert_eq!(r.status, BigSegmentsStatus::Healthy);
        assert_eq!(
            r.membership.as_ref().and_then(|m| m.check("s.g1")),
            Some(true)
        );
    }
    // Both got the one answer, which is cached.
    assert!(Arc::ptr_eq(
        results[0].membership.as_ref().unwrap(),
        results[1].membership.as_ref().unwrap()
    ));
    lookup.membership("u1");
    assert_eq!(store.queries(), 1);
    assert_eq!(lookup.waiting(), 0);
}

#[test]
fn many_concurrent_misses_make_one_store_query() {
    let store = Arc::new(GatedStore::default());
    let lookup = lookup(&store);
    let evaluations = evaluate(&lookup, 8);
    until_all_arrived(&lookup, &store, 8);
    store.open();
    for t in evaluations {
        assert_eq!(t.join().unwrap().status, BigSegmentsStatus::Healthy);
    }
    assert_eq!(store.queries(), 1);
}

#[test]
fn a_failed_query_fails_every_waiter_and_is_not_cached() {
    let store = Arc::new(GatedStore {
        fail: true,
        ..GatedStore::default()
    });
    let lookup = lookup(&store);
    let evaluations = evaluate(&lookup, 2);
    until_all_arrived(&lookup, &store, 2);
    store.open();
    for t in evaluations {
        let r = t.join().unwrap();
        assert_eq!(
            (r.membership, r.status),
            (None, BigSegmentsStatus::StoreError)
        );
    }
    assert_eq!(store.queries(), 1);
    // The next evaluation asks again.
    lookup.membership("u1");
    assert_eq!(store.queries(), 2);
}

#[test]
fn a_late_query_is_not_waited_for_past_the_bound() {
    let store = Arc::new(GatedStore::default());
    let lookup = Arc::new(
        BigSegments::new(&BigSegmentsOptions::new(store.clone()), 16)
            .with_leader_wait(Duration::from_millis(50)),
    );
    let evaluations = evaluate(&lookup, 2);
    // The waiter gives up after 50 ms and asks the store itself.
    let end = Instant::now() + Duration::from_secs(5);
    while store.queries() < 2 && Instant::now() < end {
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(store.queries(), 2);
    store.open();
    for t in evaluations {
        assert_eq!(t.join().unwrap().status, BigSegmentsStatus::Healthy);
    }
}

#[test]
fn a_panicking_store_does_not_leave_waiters_hanging() {
    let store = Arc::new(GatedStore {
        panic: true,
        ..GatedStore::default()
    });
    let lookup = lookup(&store);
    let evaluations = evaluate(&lookup, 2);
    until_all_arrived(&lookup, &store, 2);
    let started = Instant::now();
    store.open();
    let results: Vec<_> = evaluations.into_iter().map(|t| t.join()).collect();
    // The leader panicked; the waiter got a store error at once, not after the bound.
    assert_eq!(results.iter().filter(|r| r.is_err()).count(), 1);
    let waiter = results.into_iter().find_map(Result::ok).unwrap();
    assert_eq!(waiter.status, BigSegmentsStatus::StoreError);
    assert!(started.elapsed() < Duration::from_secs(4));
    assert_eq!(store.queries(), 1);
}

#[test]
fn concurrent_misses_make_one_query_of_an_async_only_store() {
    // Without a blocking path the leader waits for the store's future, run elsewhere
    // (here on a thread of its own: the lookup knows no runtime); the others wait for
    // the leader.
    let store = Arc::new(GatedStore {
        async_only: true,
        ..GatedStore::default()
    });
    let lookup = lookup(&store);
    let evaluations = evaluate(&lookup, 4);
    until_all_arrived(&lookup, &store, 4);
    assert_eq!(lookup.waiting(), 3);
    store.open();
    for t in evaluations {
        let r = t.join().unwrap();
        assert_eq!(r.status, BigSegmentsStatus::Healthy);
        assert_eq!(r.membership.and_then(|m| m.check("s.g1")), Some(true));
    }
    assert_eq!(store.queries(), 1);
}

#[test]
fn a_late_future_of_an_async_only_store_is_cached_when_it_answers() {
    let store = Arc::new(GatedStore {
        async_only: true,
        ..GatedStore::default()
    });
    let lookup = Arc::new(
        BigSegments::new(&BigSegmentsOptions::new(store.clone()), 16)
            .with_leader_wait(Duration::from_millis(50)),
    );
    // Not answered within the bound: a store error, not cached.
    let r = lookup.membership("u1");
    assert_eq!(
        (r.membership, r.status),
        (None, BigSegmentsStatus::StoreError)
    );
    store.open();
    // The query went on, and its answer fills the cache.
    let end = Instant::now() + Duration::from_secs(5);
    while store.answered.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < end, "the query never answered");
        thread::sleep(Duration::from_millis(1));
    }
    thread::sleep(Duration::from_millis(20));
    let r = lookup.membership("u1");
    assert_eq!(r.status, BigSegmentsStatus::Healthy);
    assert_eq!(r.membership.and_then(|m| m.check("s.g1")), Some(true));
    assert_eq!(store.queries(), 1, "served from the cache, not asked again");
}
