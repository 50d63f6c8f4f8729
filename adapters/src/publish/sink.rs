//! [`DataSink`]: the driver's sink for the data system, which publishes its events to
//! [`Published`] in the order readers must see them.

use std::sync::atomic::{AtomicBool, Ordering};

use flagsync_core::store::ChangedFlags;
use flagsync_core::{DataSystem, Event, Persist};

use super::diff::{ServedByStore, changed_since_store};
use super::published::Published;
use super::status::FlagChange;
use crate::driver::Sink;
use crate::persist::CachingStore;

/// The driver's sink for the data system.
#[derive(Debug)]
pub(crate) struct DataSink {
    published: std::sync::Arc<Published>,
    store: Option<StoreLink>,
    /// Until memory holds a full data set while reads come from the store: what the
    /// store served, taken before the store task may write the first data set over it.
    served: Option<ServedByStore>,
    /// The flags changed by the store changes of this round, not yet published (the
    /// snapshot neither): see [`Sink::drained`].
    pending: Option<Vec<String>>,
    /// Dropped when the driver ends: the in-process data source's task ends.
    source_stop: Option<async_channel::Sender<()>>,
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
            pending: None,
            source_stop: None,
        }
    }

    /// End the in-process data source's task (through `stop`) when the driver ends.
    pub(crate) fn with_source_stop(mut self, stop: async_channel::Sender<()>) -> Self {
        self.source_stop = Some(stop);
        self
    }

    /// Publish the store changes held since the last flush, if any: the snapshot once,
    /// then every flag they changed, to each flag-change subscriber as one batch.
    fn flush(&mut self, system: &DataSystem) {
        let Some(keys) = self.pending.take() else {
            return;
        };
        self.hand_over(system);
        let p = &*self.published;
        // Memory is published even while reads come from a persistent store's view: it
        // serves them during a store outage.
        p.set_snapshot(system.snapshot());
        p.publish_availability(system);
        tracing::trace!(changed = keys.len(), "store changed");
        p.flag_subs
            .send_all(keys.into_iter().map(|key| FlagChange { key }).collect());
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

impl Sink<DataSystem> for DataSink {
    fn publish(&mut self, system: &DataSystem, event: Event) {
        // A change of some items (a patch, a delete, an FDv2 change set) is published
        // at the end of the round with the others of the round: one snapshot, and one
        // batch of flag changes for each subscriber. Any other event publishes what is
        // held first, so that readers see everything in the order it happened.
        if let Event::StoreChanged {
            changed_flags: ChangedFlags::Keys(keys),
        } = event
        {
            match &mut self.pending {
                Some(pending) => pending.extend(keys),
                None => self.pending = Some(keys),
            }
            return;
        }
        self.flush(system);
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
                p.set_snapshot(system.snapshot());
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
                if p.flag_subs.any() {
                    p.flag_subs.send_all(
                        keys(changed_flags)
                            .into_iter()
                            .map(|key| FlagChange { key })
                            .collect(),
                    );
                }
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
        // FDv1 with a persistent store reads the store for good, through the view: the
        // view takes what is written now, as the reference's caching wrapper fills its
        // cache on `Init` and `Upsert`, so that a reader who sees the client ready (or a
        // flag change) reads this data, not a store the writer has not reached yet. The
        // writer corrects the view with what the store answers (an upsert it rejects).
        if !self.published.hands_over
            && let Some(view) = self.published.store_view()
        {
            match &request {
                Persist::Init(items) => view.wrote_all(items),
                Persist::Upsert(kind, key, item) => view.wrote(*kind, key, item),
                _ => {}
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
        self.flush(system);
        self.hand_over(system);
        self.published.publish_availability(system);
        self.published.publish_initialized(system);
    }

    fn finish(&mut self, system: &DataSystem) {
        self.flush(system);
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
        self.source_stop = None;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use flagsync_core::{Action, Command, ConnId, Input, Kind, Output};

    use super::*;
    use crate::publish::{Clock, Subscription};

    fn unread(s: &Subscription<FlagChange>) -> Vec<String> {
        std::iter::from_fn(|| s.try_recv()).map(|c| c.key).collect()
    }

    /// A data system streaming from a connection, and its connection.
    fn streaming() -> (DataSystem, ConnId, Instant) {
        let mut config = flagsync_core::Config::new("sdk-key");
        config.stream_uri = "http://127.0.0.1:1".into();
        let now = Instant::now();
        let mut system = DataSystem::new(config, 1, now).unwrap();
        system.handle_input(now, Input::Command(Command::Start));
        let mut conn = None;
        loop {
            match system.poll_output() {
                Output::Action(Action::Connect { conn: c, .. }) => conn = Some(c),
                Output::Wait(_) => break,
                _ => {}
            }
        }
        let conn = conn.expect("a connection");
        system.handle_input(now, Input::Connected { conn });
        (system, conn, now)
    }

    /// One read handled and drained into `sink`, as the driver does within a round.
    fn read(system: &mut DataSystem, sink: &mut DataSink, conn: ConnId, now: Instant, s: &str) {
        system.handle_input(
            now,
            Input::Data {
                conn,
                bytes: s.as_bytes(),
            },
        );
        loop {
            match system.poll_output() {
                Output::Event(e) => sink.publish(system, e),
                Output::Wait(_) => break,
                _ => {}
            }
        }
    }

    fn patch(key: &str, version: u64) -> String {
        format!(
            "event: patch\ndata: {{\"path\":\"/flags/{key}\",\"data\":{{\"key\":\"{key}\",\"version\":{version}}}}}\n\n"
        )
    }

    #[test]
    fn the_changes_of_a_round_are_published_at_once_at_its_end() {
        let (mut system, conn, now) = streaming();
        let published = Arc::new(Published::new(&system, Clock::new(now), None, false, 64));
        let mut sink = DataSink::new(published.clone(), None);
        let changes = published.flag_subs.subscribe();
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
        let put = r#"event: put
data: {"path":"/","data":{"flags":{"a":{"key":"a","version":1},"b":{"key":"b","version":1},"c":{"key":"c","version":1}},"segments":{}}}

"#;
        read(&mut system, &mut sink, conn, now, &(head.to_owned() + put));
        sink.drained(&system);
        assert_eq!(unread(&changes), ["a", "b", "c"]);
        let version = |key: &str| {
            published
                .memory_snapshot()
                .get(Kind::Flag, key)
                .map(|i| i.version)
        };
        assert_eq!((version("a"), version("b")), (Some(1), Some(1)));

        // Two reads in one round: nothing is published until the round ends...
        read(
            &mut system,
            &mut sink,
            conn,
            now,
            &(patch("a", 2) + &patch("b", 2)),
        );
        read(
            &mut system,
            &mut sink,
            conn,
            now,
            &(patch("a", 3) + &patch("c", 2)),
        );
        assert_eq!(
            (version("a"), version("b"), version("c")),
            (Some(1), Some(1), Some(1))
        );
        assert!(changes.is_empty());
        // ...then all of it: one snapshot with every write, and every changed flag.
        sink.drained(&system);
        assert_eq!(
            (version("a"), version("b"), version("c")),
            (Some(3), Some(2), Some(2))
        );
        assert_eq!(unread(&changes), ["a", "b", "c"]);

        // Any other event publishes what the round changed before it: a status
        // subscriber that sees the interruption sees the data that came before it.
        read(&mut system, &mut sink, conn, now, &patch("b", 3));
        system.handle_input(
            now,
            Input::Closed {
                conn,
                cause: flagsync_core::CloseCause::Eof,
            },
        );
        loop {
            match system.poll_output() {
                Output::Event(e @ Event::StatusChanged(_)) => {
                    sink.publish(&system, e);
                    assert_eq!(version("b"), Some(3));
                }
                Output::Event(e) => sink.publish(&system, e),
                Output::Wait(_) => break,
                _ => {}
            }
        }
        assert_eq!(version("b"), Some(3));
        assert_eq!(unread(&changes), ["b"]);
    }
}
