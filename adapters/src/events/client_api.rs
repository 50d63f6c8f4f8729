//! The [`Client`]'s analytics event methods (`track`, `identify`, `flush`) and the
//! sink its migrators report to.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::client::ClientEvents;
use super::{Command, FlushWaiter, Recorder};
use crate::Client;
use crate::eval::Context;

/// Hands migration op events to the client's event processor.
#[derive(Debug)]
struct RecorderSink(Arc<Recorder>);

impl crate::migration::EventSink for RecorderSink {
    fn migration_op(&self, event: crate::migration::MigrationOpEvent) {
        match serde_json::to_value(&event) {
            Ok(json) => self
                .0
                .migration_op(&event.context, event.sampling_ratio, json),
            Err(e) => tracing::warn!(error = %e, "a migration op event that cannot be written"),
        }
    }
}

impl Client {
    /// Where a [`crate::migration::Migrator`] of this client reports by default: the
    /// client's events, or nowhere when they are off.
    pub(crate) fn migration_sink(&self) -> Arc<dyn crate::migration::EventSink> {
        match self.events() {
            Some(events) => Arc::new(RecorderSink(events.recorder.clone())),
            None => Arc::new(crate::migration::DiscardSink),
        }
    }
}

/// Analytics events (see [`crate::events`]). Every method returns at once; the events
/// go out with the next flush. With events off they do nothing.
impl Client {
    /// Report a custom event `key` for `context` (LaunchDarkly's `track`), with
    /// optional `data` and a numeric `metric_value` (for experiments and metrics).
    /// Then the hooks' `after_track` stages run (see [`crate::hooks`]).
    ///
    /// ```no_run
    /// # fn demo(client: &flagsync::Client) {
    /// use flagsync::eval::ContextBuilder;
    ///
    /// let context = ContextBuilder::new("user-123").build().expect("valid");
    /// client.track("checkout-completed", &context, Some(serde_json::json!({"items": 3})), Some(59.9));
    /// # }
    /// ```
    pub fn track(
        &self,
        key: &str,
        context: &Context,
        data: Option<Value>,
        metric_value: Option<f64>,
    ) {
        self.track_series(key, context, data, metric_value, |data| {
            if let Some(events) = self.events() {
                events.recorder.custom(key, context, data, metric_value);
            }
        });
    }

    /// [`Client::track`] with neither data nor a metric value (the official SDK's
    /// `track_event`).
    pub fn track_event(&self, key: &str, context: &Context) {
        self.track(key, context, None, None);
    }

    /// [`Client::track`] with `data` serialized to JSON and no metric value (the official
    /// SDK's `track_data`).
    ///
    /// # Errors
    /// `data` cannot be serialized to JSON; nothing is tracked then.
    pub fn track_data(
        &self,
        key: &str,
        context: &Context,
        data: impl serde::Serialize,
    ) -> serde_json::Result<()> {
        let data = serde_json::to_value(data)?;
        self.track(key, context, Some(data), None);
        Ok(())
    }

    /// [`Client::track`] with a metric value and optional data (the official SDK's
    /// `track_metric`).
    pub fn track_metric(
        &self,
        key: &str,
        context: &Context,
        metric_value: f64,
        data: Option<Value>,
    ) {
        self.track(key, context, data, Some(metric_value));
    }

    /// Report `context` (an `identify` event), so that it can be targeted before it
    /// evaluated any flag.
    pub fn identify(&self, context: &Context) {
        if let Some(events) = self.events() {
            events.recorder.identify(context);
        }
    }

    /// Send the queued events now instead of at the next flush interval. Returns at
    /// once; [`Client::flush_and_wait`] waits for the delivery, [`Client::close`] for
    /// the last events.
    pub fn flush(&self) {
        if let Some(events) = self.events() {
            events.recorder.command(Command::Flush);
        }
    }

    /// Send the queued events now and wait, at most `timeout`, until every payload
    /// has been delivered (the official SDKs' `flush_blocking` / `FlushAndWait`).
    ///
    /// True once nothing is left to send and no payload was dropped since the call:
    /// events recorded meanwhile are waited for too. False if `timeout` passes
    /// first, if a payload failed (after its one retry), if the events service
    /// refused the SDK key, or if the client is not running (before
    /// [`Client::start`], after [`Client::close`]). True at once for a client that
    /// sends no events.
    ///
    /// ```no_run
    /// # async fn demo(client: &flagsync::Client) {
    /// use std::time::Duration;
    ///
    /// if !client.flush_and_wait(Duration::from_secs(2)).await {
    ///     eprintln!("some analytics events were not delivered");
    /// }
    /// # }
    /// ```
    pub async fn flush_and_wait(&self, timeout: Duration) -> bool {
        let Some(waiter) = self.flush_waiter() else {
            return !self.sends_events();
        };
        let Some(rt) = self.running_runtime() else {
            return false;
        };
        let deadline = rt.now() + timeout;
        let _ = crate::runtime::race(waiter.wait(), rt.sleep_until(deadline)).await;
        waiter.result().unwrap_or(false)
    }

    /// [`Client::flush_and_wait`] for synchronous code: blocks the thread (at most
    /// `timeout`). Do not call it on a thread that runs the client's runtime.
    pub fn flush_and_wait_blocking(&self, timeout: Duration) -> bool {
        match self.flush_waiter() {
            Some(waiter) => waiter.wait_blocking(timeout).unwrap_or(false),
            None => !self.sends_events(),
        }
    }

    /// Ask the running processor for a flush with a waiter; `None` without events or
    /// while the client is not running.
    fn flush_waiter(&self) -> Option<Arc<FlushWaiter>> {
        let events = self.events()?;
        self.running_runtime()?;
        let waiter = FlushWaiter::new();
        events
            .recorder
            .command(Command::FlushWait(waiter.clone()))
            .then_some(waiter)
    }

    /// Report the operation `tracker` followed (the official SDKs'
    /// `track_migration_op`): its migration op event goes to this client's analytics
    /// events, as a [`Migrator`](crate::migration::Migrator)'s do. For a tracker used
    /// by hand rather than through a migrator.
    ///
    /// # Errors
    /// The tracker cannot make an event (no operation set, nothing invoked, a
    /// measurement of an origin that was not invoked: see
    /// [`OpTracker::build`](crate::migration::OpTracker::build)); nothing is sent then.
    pub fn track_migration_op(
        &self,
        tracker: &crate::migration::OpTracker,
    ) -> Result<(), crate::migration::TrackerError> {
        tracker.track(&*self.migration_sink())
    }

    /// The event processor, if events are on.
    pub(crate) fn events(&self) -> Option<&ClientEvents> {
        self.inner.events.as_ref()
    }

    /// Whether this client sends analytics events.
    pub fn sends_events(&self) -> bool {
        self.events().is_some()
    }
}
