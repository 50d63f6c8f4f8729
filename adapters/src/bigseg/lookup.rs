//! The lookup the evaluation engine calls (cache + store + status), and the status
//! poller (a task on the client's runtime).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use flagsync_core::bigseg::{
    BigSegmentLookup, BigSegmentStoreStatus, BigSegmentsStatus, LookupResult, Membership,
    MembershipCache, context_hash, evaluation_status, poll_interval, store_status,
};

use super::{BigSegmentStore, BigSegmentsOptions, StoreError, StoreMetadata};
use crate::publish::{Coalesce, Subscribers, Subscription};
use crate::runtime::{Runtime, race};

impl Coalesce for BigSegmentStoreStatus {}

/// How long a synchronous caller waits for a store answer: an evaluation for the store
/// query another evaluation already made for the same context key, and any caller for
/// a store future run on the runtime (a store without a blocking path). The store
/// bounds its calls ([`BigSegmentStore`] calls carry their own timeouts: 2 s to connect
/// and 2 s to answer for `flagsync_redis::RedisBigSegmentStore`), so the wait normally
/// ends with its answer; past this bound (a store that ignores its timeouts) a waiting
/// evaluation asks the store itself, as it would without the query in flight, and a
/// store future not done is a store error. It is also the `timeout` given to the
/// blocking path.
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
    /// Shared with the store queries run on the runtime, which cache their answer
    /// even when no one waits for it any more.
    cache: Arc<Mutex<MembershipCache>>,
    /// The membership queries in flight, by context key. Locked before `cache` when
    /// both are held, never after.
    flights: Mutex<HashMap<Box<str>, Arc<Flight>>>,
    /// Evaluations waiting for a query in flight.
    waiting: AtomicUsize,
    leader_wait: Duration,
    status: Mutex<Option<BigSegmentStoreStatus>>,
    stale_after: Duration,
    subs: Subscribers<BigSegmentStoreStatus>,
    /// The client's runtime, once known: store futures run there.
    runtime: Mutex<Option<Arc<dyn Runtime>>>,
    /// The thread a store future last ran on: a synchronous caller there does not wait
    /// for one (it may be a single-threaded runtime's only thread).
    ran_on: Arc<Mutex<Option<ThreadId>>>,
}

impl BigSegments {
    pub(crate) fn new(options: &BigSegmentsOptions, subscription_capacity: usize) -> Self {
        Self {
            store: options.store.clone(),
            cache: Arc::new(Mutex::new(MembershipCache::new(
                options.context_cache_size,
                options.context_cache_time,
            ))),
            flights: Mutex::new(HashMap::new()),
            waiting: AtomicUsize::new(0),
            leader_wait: LEADER_WAIT,
            status: Mutex::new(None),
            stale_after: options.stale_after,
            subs: Subscribers::new(subscription_capacity),
            runtime: Mutex::new(None),
            ran_on: Arc::new(Mutex::new(None)),
        }
    }

    /// The client's runtime, once known.
    fn runtime(&self) -> Option<Arc<dyn Runtime>> {
        lock(&self.runtime).clone()
    }

    /// Run `task` (a store call) for a synchronous caller and wait for its answer at
    /// most [`LEADER_WAIT`]: on the client's runtime, or before the client knows it on a
    /// thread of its own. [`StoreError::Unreachable`] if it did not answer in time, or
    /// at once when called on the thread where store futures last ran (the runtime may
    /// have no other: the task still runs, and whatever it caches stays).
    fn answer_now<T: Send + 'static>(
        &self,
        task: impl Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.answer_in_time(task).unwrap_or_else(|| {
            Err(StoreError::Unreachable(
                "the big-segment store did not answer in time".into(),
            ))
        })
    }

    /// [`Self::answer_now`]'s wait: `None` if there was no answer in time.
    fn answer_in_time<T: Send + 'static>(
        &self,
        task: impl Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let ran_on = self.ran_on.clone();
        let task = async move {
            *lock(&ran_on) = Some(std::thread::current().id());
            let _ = tx.send(task.await);
        };
        match self.runtime() {
            Some(rt) => {
                let here = *lock(&self.ran_on) == Some(std::thread::current().id());
                rt.spawn(Box::pin(task));
                if here {
                    tracing::debug!("big-segment store query runs on this thread: not waiting");
                    return None;
                }
            }
            None => {
                let spawned = std::thread::Builder::new()
                    .name("flagsync-big-segments".into())
                    .spawn(move || futures_lite::future::block_on(task));
                if let Err(e) = spawned {
                    tracing::warn!(error = %e, "no thread for a big-segment store query");
                    return None;
                }
            }
        }
        let answer = rx.recv_timeout(self.leader_wait).ok();
        if answer.is_none() {
            tracing::debug!("the big-segment store did not answer in time");
        }
        answer
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

    fn last_status(&self) -> Option<BigSegmentStoreStatus> {
        *lock(&self.status)
    }

    /// The last known status; the store is asked now if it never was (its blocking
    /// path, or its future waited for at most [`LEADER_WAIT`]).
    pub(crate) fn status(&self) -> BigSegmentStoreStatus {
        if let Some(s) = self.last_status() {
            return s;
        }
        let metadata = match self.store.metadata_now(self.leader_wait) {
            Some(answer) => answer,
            None => {
                let store = self.store.clone();
                self.answer_now(async move { store.metadata().await })
            }
        };
        self.record_status(metadata)
    }

    /// Read the store's metadata, record the status, and announce it if it changed
    /// (or is the first).
    pub(crate) async fn poll_status(&self) -> BigSegmentStoreStatus {
        let metadata = self.store.metadata().await;
        self.record_status(metadata)
    }

    /// Record the status `metadata` says, and announce it if it changed (or is the
    /// first).
    fn record_status(&self, metadata: Result<StoreMetadata, StoreError>) -> BigSegmentStoreStatus {
        if let Err(e) = &metadata {
            tracing::debug!(error = %e, "big-segment store metadata query failed");
        }
        let status = store_status(
            metadata.map(|m| m.last_up_to_date),
            crate::events::clock::unix_ms(),
            self.stale_after,
        );
        let old = lock(&self.status).replace(status);
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
    /// query failed (not cached) or did not answer in time (then its answer is cached
    /// when it comes). The store's blocking path answers on this thread; without one
    /// the store's future runs on the runtime, waited for at most [`LEADER_WAIT`].
    fn query(&self, context_key: &str) -> Option<Arc<Membership>> {
        let hash = context_hash(context_key);
        let answer = match self.store.membership_now(&hash, self.leader_wait) {
            Some(answer) => answer.map(|m| {
                let m = Arc::new(m.unwrap_or_default());
                lock(&self.cache).insert(Instant::now(), context_key, m.clone());
                m
            }),
            None => {
                let (store, cache, key) = (
                    self.store.clone(),
                    self.cache.clone(),
                    context_key.to_owned(),
                );
                self.answer_now(async move {
                    let m = Arc::new(store.membership(&hash).await?.unwrap_or_default());
                    lock(&cache).insert(Instant::now(), &key, m.clone());
                    Ok(m)
                })
            }
        };
        answer
            .inspect_err(|e| tracing::debug!(error = %e, "big-segment membership query failed"))
            .ok()
    }

    /// The membership of `context_key` after a cache miss: asked of the store once
    /// however many evaluations miss it at the same time.
    fn fetch(&self, context_key: &str) -> Option<Arc<Membership>> {
        let flight = {
            let mut flights = lock(&self.flights);
            // A query that ended since the miss has filled the cache.
            if let Some(m) = lock(&self.cache).get(Instant::now(), context_key) {
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
        let cached = lock(&self.cache).get(Instant::now(), context_key);
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

/// The client's big segments and their status poller (a task on the client's runtime,
/// started once the runtime is known, stopped by [`BigSegmentsHandle::stop`] or when the
/// handle is dropped).
#[derive(Debug)]
pub(crate) struct BigSegmentsHandle {
    pub(crate) shared: Arc<BigSegments>,
    interval: Duration,
    /// Closed to stop the poller; `None` once stopped.
    stop: Mutex<Option<async_channel::Sender<()>>>,
    stopped: async_channel::Receiver<()>,
}

impl BigSegmentsHandle {
    /// Set up the big segments of `options`; the status poller starts with
    /// [`run_on`](Self::run_on).
    pub(crate) fn new(options: &BigSegmentsOptions, subscription_capacity: usize) -> Self {
        let (stop, stopped) = async_channel::bounded(1);
        Self {
            shared: Arc::new(BigSegments::new(options, subscription_capacity)),
            interval: poll_interval(options.status_poll_interval, options.stale_after),
            stop: Mutex::new(Some(stop)),
            stopped,
        }
    }

    /// Run store futures on `rt` from now on, and start polling the store's status
    /// there: the first poll one interval from now (a status asked for earlier is read
    /// at once). Only the first call does anything.
    pub(crate) fn run_on(&self, rt: &Arc<dyn Runtime>) {
        {
            // The runtime is set once: by the call that starts the poller.
            let mut runtime = lock(&self.shared.runtime);
            if runtime.is_some() || lock(&self.stop).is_none() {
                return;
            }
            *runtime = Some(rt.clone());
        }
        let (poller, stopped, interval, timer) = (
            self.shared.clone(),
            self.stopped.clone(),
            self.interval,
            rt.clone(),
        );
        rt.spawn(Box::pin(async move {
            // Until stopped, or the client is gone (the sender dropped).
            while race(stopped.recv(), timer.sleep_until(timer.now() + interval))
                .await
                .is_err()
            {
                poller.poll_status().await;
            }
            tracing::debug!("big-segment status poller stopped");
        }));
    }

    /// Stop the poller and end the status subscriptions. Idempotent.
    pub(crate) fn stop(&self) {
        if let Some(tx) = lock(&self.stop).take() {
            tx.close();
        }
        self.shared.subs.close();
    }

    /// True while the poller runs.
    #[cfg(test)]
    pub(crate) fn polling(&self) -> bool {
        self.shared.runtime().is_some() && lock(&self.stop).is_some()
    }
}
