//! [`TestData`]: flags set by a test, in process, pushed to every client that uses it,
//! as LaunchDarkly's test data source (Go `ldtestdata`, Python `TestData`, the
//! official Rust SDK's `TestData`) does.
//!
//! ```
//! use flagsync::test_data::TestData;
//!
//! # async fn demo() -> Result<(), flagsync::Error> {
//! let td = TestData::new();
//! td.update(td.flag("banner").variation_for_all(true));
//! td.update(
//!     td.flag("beta")
//!         .fallthrough_variation(false)
//!         .if_match("email", ["ann@example.com"])
//!         .then_return(true),
//! );
//! let client = flagsync::Client::builder("sdk-key")
//!     .data_source(td.clone())
//!     .send_events(false)
//!     .build()?;
//! client.start()?;
//! assert!(client.wait_for_initialization(std::time::Duration::from_secs(1)).await);
//! td.update(td.flag("banner").variation_for_all(false)); // the client sees it at once
//! # Ok(()) }
//! ```
//!
//! **How the data reaches a client.** `TestData` is a data source of the core's data
//! system ([`Mode::External`](crate::Mode::External)): when a client using it starts,
//! a task of the client's runtime (tokio, smol, async-std alike: it only awaits
//! channels) registers with the `TestData` and feeds the client's driver the whole
//! data set as one change set; the driver hands it to the core as
//! `Input::SourceData`, which applies it to the store, reports the status VALID and
//! makes the client ready, exactly as a stream's first `put` would. Each
//! [`TestData::update`] wakes every registered task (no timer, no socket), which
//! feeds the data set again: the core's store sees which flags' versions grew and
//! reports just those to [`Client::flag_changes`](crate::Client::flag_changes) and to
//! the value-change listeners. Updates made while a client is busy merge into one
//! feed, so nothing between a test and its clients grows without bound. A client
//! built before or after an update, or started later, gets the current data; one
//! `TestData` may serve any number of clients (clones share it).
//!
//! Why not a socket and the local flag server: no port, no HTTP, no runtime-specific
//! I/O, and an update reaches a subscriber in a few microseconds (see
//! `examples/test_data_latency.rs`). Why through the core and not written to the
//! published snapshot directly: status, readiness, availability, change events and
//! a persistent store then behave as with a real stream, with no second code path.

mod flag_builder;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use flagsync_core::Kind;
use flagsync_core::store::{Change, ChangeSet};
use serde_json::Value;

pub use flag_builder::{FlagBuilder, RuleBuilder};

use crate::external::{DataSource, ExternalSource, Feed};
use crate::runtime::{BoxFuture, Runtime};

/// Flags and segments for tests, set in code and pushed to every
/// [`Client`](crate::Client) built with
/// [`ClientBuilder::data_source`](crate::ClientBuilder::data_source)`(td.clone())`.
/// Cheap to clone; clones share the data and the clients. See the [module
/// docs](self).
#[derive(Debug, Clone, Default)]
pub struct TestData {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    /// The builders of flags set with [`TestData::update`].
    builders: BTreeMap<String, FlagBuilder>,
    flags: BTreeMap<String, Value>,
    segments: BTreeMap<String, Value>,
    /// One waker per running client: a pending wake means "feed the data again".
    clients: Vec<async_channel::Sender<()>>,
}

impl TestData {
    /// No flags, no segments, no clients yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the builder flag `key` was last updated with, or a new boolean flag
    /// (also for a flag set with [`TestData::use_preconfigured_flag`], which a builder
    /// cannot describe). Change it and give it to [`TestData::update`].
    pub fn flag(&self, key: &str) -> FlagBuilder {
        self.lock()
            .builders
            .get(key)
            .cloned()
            .unwrap_or_else(|| FlagBuilder::new(key))
    }

    /// Set the flag `builder` describes, at the flag's next version (1, 2, …), and
    /// push it to every client using this `TestData`.
    pub fn update(&self, builder: FlagBuilder) {
        let mut state = self.lock();
        let key = builder.key().to_owned();
        let version = next_version(&state.flags, &key);
        let flag = builder.build(version);
        state.builders.insert(key.clone(), builder);
        state.flags.insert(key, flag);
        state.wake();
    }

    /// Set a flag from its JSON as the flag delivery service sends it (for what the
    /// builders cannot express: prerequisites, rollouts, migrations, …). Its `version`
    /// is replaced by the flag's next one.
    ///
    /// # Panics
    ///
    /// If `flag` is not an object with a string `key`.
    pub fn use_preconfigured_flag(&self, flag: Value) {
        let mut state = self.lock();
        let key = item_key(&flag, "flag");
        let version = next_version(&state.flags, &key);
        state.builders.remove(&key);
        state.flags.insert(key, with_version(flag, version));
        state.wake();
    }

    /// Set a segment from its JSON; its `version` is replaced by the segment's next
    /// one.
    ///
    /// # Panics
    ///
    /// If `segment` is not an object with a string `key`.
    pub fn use_preconfigured_segment(&self, segment: Value) {
        let mut state = self.lock();
        let key = item_key(&segment, "segment");
        let version = next_version(&state.segments, &key);
        state.segments.insert(key, with_version(segment, version));
        state.wake();
    }

    /// The flag `key` as clients get it, if set.
    pub fn flag_json(&self, key: &str) -> Option<Value> {
        self.lock().flags.get(key).cloned()
    }

    /// The whole data set as one full transfer.
    fn change_set(&self) -> ChangeSet {
        let state = self.lock();
        let mut changes = Vec::with_capacity(state.flags.len() + state.segments.len());
        for (kind, map) in [(Kind::Segment, &state.segments), (Kind::Flag, &state.flags)] {
            for (key, item) in map {
                let raw = Bytes::from(serde_json::to_vec(item).unwrap_or_default());
                match Change::from_json(kind, raw) {
                    Ok(change) => changes.push(change),
                    // Only an item of `use_preconfigured_*` can be malformed.
                    Err(e) => tracing::warn!(key = %key, error = %e, "test data item skipped"),
                }
            }
        }
        ChangeSet::fdv1_full(changes)
    }
}

impl State {
    /// Tell every running client to take the data again; forget the ended ones.
    fn wake(&mut self) {
        self.clients.retain(|waker| {
            // Full: a wake is already pending, which will feed this change too.
            let _ = waker.try_send(());
            !waker.is_closed()
        });
    }
}

fn next_version(map: &BTreeMap<String, Value>, key: &str) -> u64 {
    map.get(key)
        .and_then(|item| item.get("version"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
        + 1
}

fn item_key(item: &Value, what: &str) -> String {
    match item.get("key") {
        Some(Value::String(key)) => key.clone(),
        _ => panic!("a preconfigured {what} needs a string \"key\": {item}"),
    }
}

fn with_version(mut item: Value, version: u64) -> Value {
    if let Value::Object(obj) = &mut item {
        obj.insert("version".into(), Value::from(version));
    }
    item
}

impl ExternalSource for TestData {
    fn run(&self, _rt: Arc<dyn Runtime>, feed: Feed) -> BoxFuture<'static, ()> {
        let (waker, woken) = async_channel::bounded(1);
        self.lock().clients.push(waker);
        let this = self.clone();
        Box::pin(async move {
            // Registered first: an update made while the first feed is built wakes us
            // again, so it is never missed.
            loop {
                if !feed.data(this.change_set()).await {
                    break;
                }
                if woken.recv().await.is_err() {
                    break;
                }
            }
        })
    }
}

impl From<TestData> for DataSource {
    fn from(td: TestData) -> Self {
        Self(Arc::new(td))
    }
}
