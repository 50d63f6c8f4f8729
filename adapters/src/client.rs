//! [`Client`]: the running client, its connection's life (built, running, closed) and
//! the reads of its published data. Evaluation, events, hooks and the other features
//! add their own `impl Client` blocks in their modules.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flagsync_core::{Command, DataAvailability, DataSystem, Kind, Selector, Snapshot};

use crate::conn;
use crate::driver::{self, Finished, Msg, Sink, TaskGuard};
use crate::error::Error;
use crate::external::{self, DataSource};
use crate::flag::{Flag, Segment};
use crate::persist::{self, CachingStore, StoreStatus};
use crate::publish::{DataSink, DataSourceStatus, FlagChange, Published, StoreLink, Subscription};
use crate::runtime::{self, Runtime};
use crate::transport::Transport;
#[cfg(feature = "eval")]
use crate::{bigseg, eval, events, hooks};

/// A flag-delivery client: keeps an in-memory copy of the flags up to date.
///
/// Cheap to clone; clones share one connection. Dropping the last clone stops it (call
/// [`Client::close`] to wait until every socket is closed).
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) published: Arc<Published>,
    pub(crate) finished: Arc<Finished>,
    pub(crate) tx: async_channel::Sender<Msg<Command>>,
    pub(crate) close_timeout: Duration,
    pub(crate) instance_id: String,
    pub(crate) life: Mutex<Life>,
    /// Offline mode ([`crate::ClientBuilder::offline`]).
    pub(crate) offline: bool,
    #[cfg(feature = "eval")]
    pub(crate) models: eval::ModelCache,
    /// The SDK key's HMAC, for `secure_mode_hash` (its `Debug` is redacted).
    #[cfg(feature = "eval")]
    pub(crate) secure_mode: eval::SecureModeKey,
    /// The analytics event processor, if events are on.
    #[cfg(feature = "eval")]
    pub(crate) events: Option<events::client::ClientEvents>,
    /// The evaluation and track hooks.
    #[cfg(feature = "eval")]
    pub(crate) hooks: hooks::HookRunner,
    /// Big segments and their status poller, if configured.
    #[cfg(feature = "eval")]
    pub(crate) big_segments: Option<bigseg::BigSegmentsHandle>,
}

#[derive(Debug)]
pub(crate) enum Life {
    Built {
        system: Box<DataSystem>,
        rx: async_channel::Receiver<Msg<Command>>,
        transport: Transport,
        conn_config: Arc<conn::ConnConfig>,
        store: Option<(
            Arc<CachingStore>,
            async_channel::Receiver<persist::view::Fetch>,
        )>,
        /// The in-process data source (`Mode::External`), if any.
        external: Option<DataSource>,
    },
    Running(Arc<dyn Runtime>),
    Closed(Option<Arc<dyn Runtime>>),
}

impl Client {
    /// Start connecting in the background. Calling it again, or after
    /// [`Client::close`], does nothing.
    ///
    /// With tokio, call it inside a tokio runtime.
    pub fn start(&self) -> Result<(), Error> {
        let mut life = self.inner.lock();
        let Life::Built { transport, .. } = &*life else {
            return Ok(());
        };
        let rt = transport.runtime()?;
        let Life::Built {
            system,
            rx,
            conn_config,
            store,
            external,
            ..
        } = std::mem::replace(&mut *life, Life::Running(rt.clone()))
        else {
            unreachable!("checked above")
        };
        tracing::debug!(runtime = ?rt, "starting");
        #[cfg(feature = "eval")]
        if let Some(big_segments) = &self.inner.big_segments {
            big_segments.run_on(&rt);
        }
        // Every task holds the guard: `close()` waits for the store tasks too.
        let guard = Arc::new(TaskGuard(self.inner.finished.clone()));
        let link =
            store.map(|(store, fetches)| self.start_store_tasks(&rt, store, fetches, &guard));
        // The inbox is empty: this cannot fail.
        let _ = self.inner.tx.try_send(Msg::Command(Command::Start));
        #[cfg(feature = "eval")]
        if let Some(events) = &self.inner.events {
            events.start(&rt, conn_config.clone(), guard.clone());
        }
        let mut sink = DataSink::new(self.inner.published.clone(), link);
        if let Some(source) = &external {
            let (stop, stopped) = async_channel::bounded(1);
            external::spawn(source, &rt, self.inner.tx.clone(), stopped, guard.clone());
            sink = sink.with_source_stop(stop);
        }
        #[cfg(feature = "eval")]
        if let Some(events) = &self.inner.events {
            // Stream attempts are counted for diagnostic events.
            let sink = events::StreamInits::new(sink, events.recorder.clone());
            driver::spawn(
                rt,
                conn_config,
                *system,
                sink,
                self.inner.tx.clone(),
                rx,
                guard,
            );
            return Ok(());
        }
        driver::spawn(
            rt,
            conn_config,
            *system,
            sink,
            self.inner.tx.clone(),
            rx,
            guard,
        );
        Ok(())
    }

    /// Spawn the store task (the core's requests, in order), the store reader (watches
    /// `$inited` while reads come from the store) and the view's fetch task (reads
    /// items key by key meanwhile).
    fn start_store_tasks(
        &self,
        rt: &Arc<dyn Runtime>,
        store: Arc<CachingStore>,
        fetches: async_channel::Receiver<persist::view::Fetch>,
        guard: &Arc<TaskGuard>,
    ) -> StoreLink {
        let (requests, requests_rx) = persist::writer::queue();
        let (stop_reader, stop_rx) = async_channel::bounded(1);
        let check_pending = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let view = self.inner.published.store_view();
        if let Some(view) = &view {
            view.started(
                store.clone(),
                Arc::<Published>::downgrade(&self.inner.published),
            );
            rt.spawn(Box::pin(persist::view::run(
                view.clone(),
                fetches,
                store.clone(),
                self.inner.published.clone(),
                stop_rx.clone(),
                self.inner.tx.clone(),
                guard.clone(),
            )));
        }
        rt.spawn(Box::pin(persist::writer::run(
            rt.clone(),
            store.clone(),
            view,
            requests_rx,
            self.inner.tx.clone(),
            check_pending.clone(),
            guard.clone(),
        )));
        rt.spawn(Box::pin(persist::reader::run(
            rt.clone(),
            store.clone(),
            self.inner.published.clone(),
            stop_rx,
            self.inner.tx.clone(),
            guard.clone(),
        )));
        StoreLink {
            store,
            requests,
            stop_reader: Some(stop_reader),
            check_pending,
        }
    }

    /// Wait until the client has a full data set (true), the source gives up for good,
    /// or `timeout` passes (false). With a persistent store it also waits for the
    /// first read of the store, and returns true as soon as that read found an
    /// initialized store (a warm start, see [`Client::initialized`]).
    pub async fn wait_for_initialization(&self, timeout: Duration) -> bool {
        if self.initialized() {
            return true;
        }
        let rt = match &*self.inner.lock() {
            Life::Running(rt) => rt.clone(),
            _ => return false,
        };
        let deadline = rt.now() + timeout;
        let published = &self.inner.published;
        // With a persistent store, also the first successful read of it (daemon mode
        // is ready at once, before any data is read; a failed read is not a load),
        // unless memory holds a full data set that was written to the store or while
        // the store is down (memory serves then); or that read alone if it found a
        // full data set (a warm start).
        let source_ready = async {
            published.ready().await;
            let memory_serves = || {
                published.memory_initialized()
                    && (published.store_status().is_some_and(|s| !s.available)
                        || published.store_view().is_some_and(|v| v.has_written()))
            };
            while !memory_serves() {
                let tick = rt.sleep_until(rt.now() + Duration::from_millis(50));
                if runtime::race(published.store_loaded(), tick).await.is_ok() {
                    break;
                }
            }
        };
        let store_ready = async {
            published.store_loaded().await;
            if !published.initialized() {
                std::future::pending::<()>().await;
            }
        };
        let ready = runtime::race(source_ready, store_ready);
        let _ = runtime::race(ready, rt.sleep_until(deadline)).await;
        self.initialized()
    }

    /// True once a full data set has been received, or, with a persistent store, while
    /// reads come from a store that is initialized (warm start, daemon mode).
    ///
    /// The reference SDKs' `is_initialized()` is
    /// `data_availability().at_least(DataAvailability::Cached)` instead, which also
    /// holds for data without a selector and in FDv2 daemon mode (PROTOCOL.md B §4.6).
    ///
    /// In offline mode ([`crate::ClientBuilder::offline`]) it is true at once, as in
    /// LaunchDarkly's SDKs.
    pub fn initialized(&self) -> bool {
        self.inner.offline || self.inner.published.initialized()
    }

    /// Whether the client is in offline mode ([`crate::ClientBuilder::offline`]).
    pub fn is_offline(&self) -> bool {
        self.inner.offline
    }

    /// How fresh the flag data is (PROTOCOL.md B §4.6, §5.10): `Defaults` (no data:
    /// evaluate to the application's defaults), `Cached` (data not vouched for by the
    /// service: FDv2 data after the FDv1 fallback, or FDv2 daemon mode) or `Refreshed`
    /// (FDv1: a full data set arrived; FDv2: the store holds the service's selector).
    /// Published by the client after each input it handles, together with the
    /// snapshot and the status.
    ///
    /// ```
    /// use flagsync::{Client, DataAvailability, Fdv2Config};
    ///
    /// // Daemon mode: another process keeps the data current; no data source runs.
    /// let client = Client::builder("sdk-key").fdv2(Fdv2Config::daemon()).build()?;
    /// let ready = client.data_availability().at_least(DataAvailability::Cached);
    /// assert!(ready);
    /// # Ok::<(), flagsync::Error>(())
    /// ```
    pub fn data_availability(&self) -> DataAvailability {
        self.inner.published.data_availability()
    }

    /// The best [`Client::data_availability`] this configuration can reach:
    /// `Refreshed` with a data source, `Cached` without one (FDv2 daemon mode).
    ///
    /// ```
    /// use flagsync::{Client, DataAvailability, Fdv2Config};
    ///
    /// let client = Client::builder("sdk-key").fdv2(Fdv2Config::streaming()).build()?;
    /// assert_eq!(client.target_availability(), DataAvailability::Refreshed);
    /// // Not there yet: the client has not started.
    /// assert!(client.data_availability() < client.target_availability());
    /// # Ok::<(), flagsync::Error>(())
    /// ```
    pub fn target_availability(&self) -> DataAvailability {
        self.inner.published.target_availability()
    }

    /// FDv2: the source running now (`"streaming"`, `"polling"` or `"fdv1-polling"`,
    /// as [`SourceSpec::name`](crate::SourceSpec::name)), if any. Always `None` under FDv1 and once closed.
    ///
    /// ```
    /// use flagsync::{Client, Fdv2Config};
    ///
    /// let client = Client::builder("sdk-key").fdv2(Fdv2Config::default()).build()?;
    /// assert_eq!(client.active_source(), None); // not started
    /// # Ok::<(), flagsync::Error>(())
    /// ```
    pub fn active_source(&self) -> Option<&'static str> {
        self.inner.published.active_source()
    }

    /// FDv2: the selector (`state`, `version`) of the payload the client holds, as the
    /// service sent it with `payload-transferred` (PROTOCOL.md B §5.2). Read-only.
    ///
    /// `None` under FDv1, before the first FDv2 payload, and after the fallback to FDv1
    /// (its data has no selector, B §5.6); kept after [`Client::close`]. Its `state` is
    /// what the client sends as `basis` when it reconnects or polls (B §5.4, §5.5).
    ///
    /// Use it to debug which payload a client is on (compare it with the service's),
    /// or to record alongside data you persist yourself which payload that copy is.
    /// Published with the snapshot after each input the client handles, like
    /// [`Client::data_availability`].
    ///
    /// ```
    /// use flagsync::{Client, Fdv2Config};
    ///
    /// let client = Client::builder("sdk-key").fdv2(Fdv2Config::default()).build()?;
    /// assert_eq!(client.fdv2_selector(), None); // no payload yet
    /// # Ok::<(), flagsync::Error>(())
    /// ```
    pub fn fdv2_selector(&self) -> Option<Selector> {
        self.inner.published.selector()
    }

    /// Bytes received so far on data-source connections (HTTP heads and bodies, after
    /// TLS, before gzip decoding), over every connection since [`Client::start`]. A
    /// cheap counter, e.g. for showing the progress of a large initial payload.
    pub fn bytes_received(&self) -> u64 {
        self.inner.published.bytes_received()
    }

    /// The flag `key`, unless it is unknown or deleted.
    ///
    /// While reads come from a persistent store (see
    /// [`ClientBuilder::persistent_store`](crate::ClientBuilder::persistent_store)), a flag not read within the cache TTL is
    /// read from the store in the background: this call answers with what the client
    /// holds, and a later one with the store's answer.
    pub fn flag(&self, key: &str) -> Option<Flag> {
        if let Some(view) = self.inner.published.view() {
            view.touch(Kind::Flag, key);
        }
        let snapshot = self.inner.published.read();
        snapshot
            .get(Kind::Flag, key)
            .map(|item| Flag::from_item(key, item))
    }

    /// The segment `key`, unless it is unknown or deleted (read as [`Client::flag`]).
    pub fn segment(&self, key: &str) -> Option<Segment> {
        if let Some(view) = self.inner.published.view() {
            view.touch(Kind::Segment, key);
        }
        let snapshot = self.inner.published.read();
        snapshot
            .get(Kind::Segment, key)
            .map(|item| Segment::from_item(key, item))
    }

    /// Every flag, by key.
    pub fn all_flags(&self) -> BTreeMap<String, Flag> {
        let snapshot = self.snapshot();
        snapshot
            .iter(Kind::Flag)
            .map(|(key, item)| (key.to_owned(), Flag::from_item(key, item)))
            .collect()
    }

    /// An immutable view of the whole store (cheap: it shares structure): what the
    /// data source delivered, tombstones included.
    ///
    /// Before memory holds a full data set, with a persistent store (a warm start,
    /// daemon mode), this is every item of the store as last read whole: first before
    /// the client is ready, then again (asked for by this call, in the background) at
    /// most once per cache TTL.
    pub fn snapshot(&self) -> Snapshot {
        let published = &self.inner.published;
        match published.view() {
            Some(view) if !published.memory_initialized() => {
                view.touch_all(Kind::Segment);
                view.touch_all(Kind::Flag);
                view.listing()
            }
            _ => published.memory_snapshot(),
        }
    }

    /// The data-source status.
    pub fn status(&self) -> DataSourceStatus {
        self.inner.published.status()
    }

    /// Every later status change.
    pub fn status_changes(&self) -> Subscription<DataSourceStatus> {
        self.inner.published.status_subs.subscribe()
    }

    /// Every later change of a flag's data (one item per changed flag).
    pub fn flag_changes(&self) -> Subscription<FlagChange> {
        self.inner.published.flag_subs.subscribe()
    }

    /// The persistent store's status (`available`, `stale`), if one is configured. It
    /// turns unavailable when a store operation fails and available again once the
    /// store answers and has been given the in-memory data (PROTOCOL.md B §4.5, A.4.8).
    pub fn store_status(&self) -> Option<StoreStatus> {
        self.inner.published.store_status()
    }

    /// Every later change of [`Client::store_status`].
    pub fn store_status_changes(&self) -> Subscription<StoreStatus> {
        self.inner.published.store_status_subs.subscribe()
    }

    /// This client's instance id: a random UUID made when it was built (from the
    /// builder's [`seed`](crate::ClientBuilder::seed) when one is given), sent with every request
    /// as `X-LaunchDarkly-Instance-Id` so the service can tell SDK instances apart.
    pub fn instance_id(&self) -> &str {
        &self.inner.instance_id
    }

    /// The environment id the service reported, if any.
    pub fn environment_id(&self) -> Option<String> {
        self.inner.published.environment_id()
    }

    /// Stop: close every connection, report OFF, end the subscriptions, and wait (at
    /// most the close timeout) until every socket is closed. Idempotent.
    pub async fn close(&self) {
        if let Some(rt) = self.inner.begin_close() {
            let deadline = rt.now() + self.inner.close_timeout;
            let _ = runtime::race(self.inner.finished.wait(), rt.sleep_until(deadline)).await;
            self.inner.abort_events();
        }
    }

    /// [`Client::close`] for synchronous code: blocks the thread (at most the close
    /// timeout). Do not call it on a thread that runs the client's runtime.
    pub fn close_blocking(&self) {
        if self.inner.begin_close().is_some() {
            self.inner.finished.wait_blocking(self.inner.close_timeout);
            self.inner.abort_events();
        }
    }

    /// The runtime the client runs on, once started and until closed.
    #[cfg(feature = "eval")]
    pub(crate) fn running_runtime(&self) -> Option<Arc<dyn Runtime>> {
        match &*self.inner.lock() {
            Life::Running(rt) => Some(rt.clone()),
            _ => None,
        }
    }

    /// True once [`Client::close`] finished closing every connection.
    pub fn is_closed(&self) -> bool {
        self.inner.finished.is_done()
    }
}

impl Inner {
    /// End the event processor's driver now (after the close timeout).
    fn abort_events(&self) {
        #[cfg(feature = "eval")]
        if let Some(events) = &self.events {
            events.abort();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Life> {
        self.life.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Move to `Closed`; the runtime to wait on if the driver ran.
    fn begin_close(&self) -> Option<Arc<dyn Runtime>> {
        #[cfg(feature = "eval")]
        if let Some(big_segments) = &self.big_segments {
            big_segments.stop();
        }
        let mut life = self.lock();
        match std::mem::replace(&mut *life, Life::Closed(None)) {
            Life::Built { system, .. } => {
                tracing::debug!("closed before start");
                DataSink::new(self.published.clone(), None).finish(&system);
                drop(driver::TaskGuard(self.finished.clone()));
                None
            }
            Life::Running(rt) => {
                tracing::debug!("closing");
                // Never blocks; the driver stops at the next message.
                let _ = self.tx.force_send(Msg::Shutdown);
                // The events go out first, within the close timeout.
                #[cfg(feature = "eval")]
                if let Some(events) = &self.events {
                    events.close();
                }
                *life = Life::Closed(Some(rt.clone()));
                Some(rt)
            }
            Life::Closed(rt) => {
                *life = Life::Closed(rt.clone());
                rt
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Life::Running(_) = &*self.lock() {
            let _ = self.tx.force_send(Msg::Shutdown);
            self.abort_events();
        }
    }
}
