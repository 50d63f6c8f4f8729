//! The lookup the evaluation engine calls (cache + store + status), and the status
//! poller.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use flagsync_core::bigseg::{
    BigSegmentLookup, BigSegmentStoreStatus, BigSegmentsStatus, LookupResult, Membership,
    MembershipCache, context_hash, evaluation_status, poll_interval, store_status,
};

use super::{BigSegmentStore, BigSegmentsOptions};
use crate::publish::{Coalesce, Subscribers, Subscription};

impl Coalesce for BigSegmentStoreStatus {}

/// How long an evaluation that misses the cache waits for the store query another
/// evaluation already made for the same context key. The store bounds that query
/// ([`BigSegmentStore`] calls carry their own timeouts: 2 s to connect and 2 s to answer
/// for [`super::RedisBigSegmentStore`]), so the wait normally ends with its answer;
/// past this bound (a store that ignores its timeouts) the evaluation asks the store
/// itself, as it would without the query in flight.
const LEADER_WAIT: Duration = Duration::from_secs(5);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One membership query in flight: evaluations that miss the same context key
/// meanwhile wait for its answer instead of asking the store again (single flight).
#[derive(Debug, Default)]
struct Flight {
    /// `Some(answer)` once the query is done; an answer of `None` is a failed query.
    answer: Mutex<Option<Option<Arc<Membership>>>>,
    done: Condvar,
}

impl Flight {
    fn finish(&self, answer: Option<Arc<Membership>>) {
        lock(&self.answer).get_or_insert(answer);
        self.done.notify_all();
    }

    /// The answer, or `None` if it did not come within `bound`.
    fn wait(&self, bound: Duration) -> Option<Option<Arc<Membership>>> {
        let answer = lock(&self.answer);
        let (answer, _) = self
            .done
            .wait_timeout_while(answer, bound, |a| a.is_none())
            .unwrap_or_else(|e| e.into_inner());
        answer.clone()
    }
}

/// The evaluation that queries the store for a key: when dropped (even by a panicking
/// store) it ends the flight, so no one waits for an answer that never comes.
struct Leader<'a> {
    flights: &'a Mutex<HashMap<Box<str>, Arc<Flight>>>,
    key: &'a str,
    flight: Arc<Flight>,
    answer: Option<Arc<Membership>>,
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        {
            let mut flights = lock(self.flights);
            if flights
                .get(self.key)
                .is_some_and(|f| Arc::ptr_eq(f, &self.flight))
            {
                flights.remove(self.key);
            }
        }
        self.flight.finish(self.answer.take());
    }
}

/// The client's big segments: store, membership cache, queries in flight, last known
/// status.
#[derive(Debug)]
pub(crate) struct BigSegments {
    store: Arc<dyn BigSegmentStore>,
    cache: Mutex<MembershipCache>,
    /// The membership queries in flight, by context key. Locked before `cache` when
    /// both are held, never after.
    flights: Mutex<HashMap<Box<str>, Arc<Flight>>>,
    /// Evaluations waiting for a query in flight.
    waiting: AtomicUsize,
    leader_wait: Duration,
    status: Mutex<Option<BigSegmentStoreStatus>>,
    stale_after: Duration,
    subs: Subscribers<BigSegmentStoreStatus>,
}

impl BigSegments {
    pub(crate) fn new(options: &BigSegmentsOptions, subscription_capacity: usize) -> Self {
        Self {
            store: options.store.clone(),
            cache: Mutex::new(MembershipCache::new(
                options.context_cache_size,
                options.context_cache_time,
            )),
            flights: Mutex::new(HashMap::new()),
            waiting: AtomicUsize::new(0),
            leader_wait: LEADER_WAIT,
            status: Mutex::new(None),
            stale_after: options.stale_after,
            subs: Subscribers::new(subscription_capacity),
        }
    }

    /// The same, with another bound on the wait for a query in flight.
    #[cfg(test)]
    pub(crate) fn with_leader_wait(mut self, wait: Duration) -> Self {
        self.leader_wait = wait;
        self
    }

    /// How many evaluations wait for a query in flight now.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, MembershipCache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn last_status(&self) -> Option<BigSegmentStoreStatus> {
        *self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The last known status; the store is asked now if it never was.
    pub(crate) fn status(&self) -> BigSegmentStoreStatus {
        match self.last_status() {
            Some(s) => s,
            None => self.poll_status(),
        }
    }

    /// Read the store's metadata, record the status, and announce it if it changed
    /// (or is the first).
    pub(crate) fn poll_status(&self) -> BigSegmentStoreStatus {
        let metadata = self.store.metadata();
        if let Err(e) = &metadata {
            tracing::debug!(error = %e, "big-segment store metadata query failed");
        }
        let status = store_status(
            metadata.map(|m| m.last_up_to_date),
            crate::events::clock::unix_ms(),
            self.stale_after,
        );
        let old = self
            .status
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(status);
        if old != Some(status) {
            tracing::debug!(?old, new = ?status, "big-segment store status changed");
            self.subs.send(&status);
        }
        status
    }

    pub(crate) fn subscribe(&self) -> Subscription<BigSegmentStoreStatus> {
        self.subs.subscribe()
    }
}

impl BigSegments {
    /// Ask the store for the membership of `context_key` and cache it; `None` if the
    /// query failed (not cached).
    fn query(&self, context_key: &str) -> Option<Arc<Membership>> {
        match self.store.membership(&context_hash(context_key)) {
            Ok(m) => {
                let m = Arc::new(m.unwrap_or_default());
                self.cache().insert(Instant::now(), context_key, m.clone());
                Some(m)
            }
            Err(e) => {
                tracing::debug!(error = %e, "big-segment membership query failed");
                None
            }
        }
    }

    /// The membership of `context_key` after a cache miss: asked of the store once
    /// however many evaluations miss it at the same time.
    fn fetch(&self, context_key: &str) -> Option<Arc<Membership>> {
        let flight = {
            let mut flights = lock(&self.flights);
            // A query that ended since the miss has filled the cache.
            if let Some(m) = self.cache().get(Instant::now(), context_key) {
                return Some(m);
            }
            match flights.get(context_key) {
                Some(flight) => Err(flight.clone()),
                None => {
                    let flight = Arc::new(Flight::default());
                    flights.insert(context_key.into(), flight.clone());
                    Ok(flight)
                }
            }
        };
        match flight {
            Ok(flight) => {
                let mut leader = Leader {
                    flights: &self.flights,
                    key: context_key,
                    flight,
                    answer: None,
                };
                leader.answer = self.query(context_key);
                leader.answer.clone()
            }
            Err(flight) => {
                self.waiting.fetch_add(1, Ordering::SeqCst);
                let answer = flight.wait(self.leader_wait);
                self.waiting.fetch_sub(1, Ordering::SeqCst);
                answer.unwrap_or_else(|| {
                    tracing::debug!("big-segment membership query in flight is late: asking again");
                    self.query(context_key)
                })
            }
        }
    }
}

impl BigSegmentLookup for BigSegments {
    fn membership(&self, context_key: &str) -> LookupResult {
        let cached = self.cache().get(Instant::now(), context_key);
        let Some(membership) = cached.or_else(|| self.fetch(context_key)) else {
            return LookupResult {
                membership: None,
                status: BigSegmentsStatus::StoreError,
            };
        };
        LookupResult {
            membership: Some(membership),
            status: evaluation_status(true, Some(self.status())),
        }
    }
}

/// The client's big segments and their status poller (a thread, stopped by
/// [`BigSegmentsHandle::stop`] or when the handle is dropped).
#[derive(Debug)]
pub(crate) struct BigSegmentsHandle {
    pub(crate) shared: Arc<BigSegments>,
    stop: Mutex<Option<mpsc::Sender<()>>>,
}

impl BigSegmentsHandle {
    /// Set up the big segments of `options` and start polling the store's status: the
    /// first poll one interval from now (a status asked for earlier is read at once).
    pub(crate) fn start(options: &BigSegmentsOptions, subscription_capacity: usize) -> Self {
        let shared = Arc::new(BigSegments::new(options, subscription_capacity));
        let interval = poll_interval(options.status_poll_interval, options.stale_after);
        let (tx, rx) = mpsc::channel::<()>();
        let poller = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("flagsync-big-segments".into())
            .spawn(move || {
                // Until stopped, or the client is gone (the sender dropped).
                while let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(interval) {
                    poller.poll_status();
                }
                tracing::debug!("big-segment status poller stopped");
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the big-segment status poller");
        }
        Self {
            shared,
            stop: Mutex::new(Some(tx)),
        }
    }

    /// Stop the poller and end the status subscriptions. Idempotent.
    pub(crate) fn stop(&self) {
        if let Some(tx) = self.stop.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = tx.send(());
        }
        self.shared.subs.close();
    }

    /// True while the poller runs.
    #[cfg(test)]
    pub(crate) fn polling(&self) -> bool {
        self.stop
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }
}
