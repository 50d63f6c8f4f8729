//! The lookup the evaluation engine calls (cache + store + status), and the status
//! poller.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flagsync_core::bigseg::{
    BigSegmentLookup, BigSegmentStoreStatus, BigSegmentsStatus, LookupResult, MembershipCache,
    context_hash, evaluation_status, poll_interval, store_status,
};

use super::{BigSegmentStore, BigSegmentsOptions};
use crate::publish::{Coalesce, Subscribers, Subscription};

impl Coalesce for BigSegmentStoreStatus {}

/// The client's big segments: store, membership cache, last known status.
#[derive(Debug)]
pub(crate) struct BigSegments {
    store: Arc<dyn BigSegmentStore>,
    cache: Mutex<MembershipCache>,
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
            status: Mutex::new(None),
            stale_after: options.stale_after,
            subs: Subscribers::new(subscription_capacity),
        }
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

impl BigSegmentLookup for BigSegments {
    fn membership(&self, context_key: &str) -> LookupResult {
        let cached = self.cache().get(Instant::now(), context_key);
        let membership = match cached {
            Some(m) => m,
            None => {
                let hash = context_hash(context_key);
                match self.store.membership(&hash) {
                    Ok(m) => {
                        let m = Arc::new(m.unwrap_or_default());
                        self.cache().insert(Instant::now(), context_key, m.clone());
                        m
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "big-segment membership query failed");
                        return LookupResult {
                            membership: None,
                            status: BigSegmentsStatus::StoreError,
                        };
                    }
                }
            }
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
