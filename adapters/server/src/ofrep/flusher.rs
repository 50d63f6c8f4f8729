//! Delivering the OFREP analytics payloads: published to the server's event
//! subscriptions as a received `POST /bulk` is (`routes::serve_events`), by the
//! request that made them, by a timer thread of the server (the processors' periodic
//! flushes), and on shutdown.
//!
//! The timer thread starts with the first OFREP evaluation (a server never asked to
//! evaluate has none). It holds the server only weakly, sleeps until the earliest
//! processor deadline (at most a second), and ends with the server.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::events::EventPayload;
use crate::state::Shared;

/// The longest the timer sleeps between looks.
const MAX_SLEEP: Duration = Duration::from_secs(1);

/// Publish `payloads` to every event subscription.
pub(crate) fn publish(shared: &Shared, payloads: Vec<EventPayload>) {
    if payloads.is_empty() {
        return;
    }
    let mut inner = shared.lock();
    for payload in &payloads {
        inner.event_subs.publish(payload);
    }
}

/// Start the timer thread unless it runs.
pub(crate) fn ensure_timer(shared: &Arc<Shared>) {
    let mut timer = shared.ofrep.timer.lock().unwrap_or_else(|e| e.into_inner());
    if timer.is_some() {
        return;
    }
    let weak = Arc::downgrade(shared);
    let spawned = std::thread::Builder::new()
        .name("flagsync-ofrep-events".into())
        .spawn(move || run(&weak));
    if let Ok(handle) = spawned {
        *timer = Some(handle.thread().clone());
    }
}

fn run(weak: &Weak<Shared>) {
    loop {
        let sleep = {
            let Some(shared) = weak.upgrade() else {
                return;
            };
            if shared.is_shutting_down() {
                return;
            }
            let now = Instant::now();
            let (payloads, next) = shared.ofrep.analytics.due(now);
            publish(&shared, payloads);
            next.map_or(MAX_SLEEP, |n| n.saturating_duration_since(now))
                .min(MAX_SLEEP)
        };
        std::thread::park_timeout(sleep.max(Duration::from_millis(1)));
    }
}

/// Send every queued event now and publish them (shutdown, or
/// [`ServerHandle::flush_ofrep_events`](crate::ServerHandle::flush_ofrep_events)).
pub(crate) fn flush(shared: &Shared) {
    let payloads = shared.ofrep.analytics.flush(Instant::now());
    publish(shared, payloads);
}

/// The server is shutting down: flush, and wake the timer so that it ends.
pub(crate) fn shutdown(shared: &Shared) {
    flush(shared);
    let timer = shared.ofrep.timer.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(thread) = &*timer {
        thread.unpark();
    }
}
