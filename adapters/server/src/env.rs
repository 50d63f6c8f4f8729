//! Environments: the data a server serves to the SDKs of one SDK key, whether it is
//! ready yet, and the changes made to it (each pushed to the environment's streams).
//!
//! A server always has its default environment (the builder's [`sdk_key`] and
//! [`data`]); [`ServerBuilder::environment`] adds more, each chosen by the SDK key a
//! request carries, as LaunchDarkly's Relay Proxy serves several environments on one
//! port. [`EnvironmentHandle`] changes an added environment as [`ServerHandle`]
//! changes the default one.
//!
//! [`sdk_key`]: crate::ServerBuilder::sdk_key
//! [`data`]: crate::ServerBuilder::data
//! [`ServerBuilder::environment`]: crate::ServerBuilder::environment
//! [`ServerHandle`]: crate::ServerHandle

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use flagsync_core::Kind;
use serde_json::Value;

use crate::client_side::notify::evaluate_change;
use crate::client_side::settings::ClientSettings;
use crate::data::{self, Change, Data, FlagData, ItemKind};
use crate::error::ServerError;
use crate::fdv2;
use crate::health::{ConnectionState, UpstreamError};
use crate::hub::Frame;
use crate::state::{Inner, Shared};

/// An environment served beside the default one, chosen by its SDK key.
///
/// Until it has data (given here, or later with [`EnvironmentHandle::replace_all`]),
/// its SDKs are answered as LaunchDarkly's Relay Proxy answers them before it has
/// connected: every stream and poll request gets `503` for the
/// [`init_timeout`](Self::init_timeout); after that, polls still get `503` while
/// streams are accepted and receive the data when it arrives.
///
/// ```
/// use std::time::Duration;
/// use flagsync_server::{Environment, Server};
/// use serde_json::json;
///
/// let server = Server::builder()
///     .environment(Environment::new("production", "sdk-prod").data(json!({"flagValues": {"x": 1}})))
///     .environment(Environment::new("staging", "sdk-staging").init_timeout(Duration::from_secs(5)))
///     .start()?;
/// let staging = server.environment("staging").expect("configured");
/// assert!(!staging.is_ready());
/// staging.replace_all(json!({"flagValues": {"x": 2}}))?;
/// assert!(staging.is_ready());
/// # Ok::<(), flagsync_server::ServerError>(())
/// ```
#[derive(Clone)]
#[must_use]
pub struct Environment {
    pub(crate) name: String,
    pub(crate) sdk_key: String,
    pub(crate) env_id: Option<String>,
    pub(crate) data: Option<FlagData>,
    pub(crate) init_timeout: Duration,
    pub(crate) filter: Option<String>,
    pub(crate) client: ClientSettings,
}

impl std::fmt::Debug for Environment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the SDK key.
        f.debug_struct("Environment")
            .field("name", &self.name)
            .field("env_id", &self.env_id)
            .field("has_data", &self.data.is_some())
            .field("init_timeout", &self.init_timeout)
            .field("filter", &self.filter)
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl Environment {
    /// An environment called `name` (in logs, events and [`ServerHandle::environment`](crate::ServerHandle::environment)),
    /// served to requests whose `Authorization` is `sdk_key`. No data yet; an
    /// initialization timeout of 10 s, as the Relay Proxy's `initTimeout`.
    pub fn new(name: impl Into<String>, sdk_key: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            sdk_key: sdk_key.into(),
            env_id: None,
            data: None,
            init_timeout: Duration::from_secs(10),
            filter: None,
            client: ClientSettings::default(),
        }
    }

    /// Serve this environment's data to requests for the payload filter `key`
    /// (`?filter=KEY`, as an SDK configured with that payload filter sends), instead of
    /// to unfiltered ones. Environments may share an SDK key when their filters differ:
    /// a request goes to the one for its key and filter. A request whose filter no
    /// environment of its key serves is answered `404` with a message naming the
    /// filter, never with the unfiltered data.
    ///
    /// ```
    /// use flagsync_server::{Environment, Server};
    /// use serde_json::json;
    ///
    /// let server = Server::builder()
    ///     .environment(Environment::new("prod", "sdk-1").data(json!({"flagValues": {"a": 1, "b": 2}})))
    ///     .environment(Environment::new("prod/mobile", "sdk-1").payload_filter("mobile")
    ///         .data(json!({"flagValues": {"a": 1}})))
    ///     .start()?;
    /// # Ok::<(), flagsync_server::ServerError>(())
    /// ```
    pub fn payload_filter(mut self, key: impl Into<String>) -> Self {
        self.filter = Some(key.into());
        self
    }

    /// Send this value in an `X-LD-EnvID` header on the environment's responses.
    pub fn env_id(mut self, env_id: impl Into<String>) -> Self {
        self.env_id = Some(env_id.into());
        self
    }

    /// Start ready, with this data (the shape of [`ServerBuilder::data`](crate::ServerBuilder::data)).
    pub fn data(mut self, data: impl Into<FlagData>) -> Self {
        self.data = Some(data.into());
        self
    }

    /// How long, without data, every stream and poll request gets `503` (default 10 s).
    pub fn init_timeout(mut self, timeout: Duration) -> Self {
        self.init_timeout = timeout;
        self
    }
}

/// An item to insert: a JSON value, or its JSON text.
pub(crate) enum NewItem<'a> {
    Value(Value),
    Raw(&'a Bytes),
}

/// A change to environment `env`, shared by the default environment's methods on
/// [`ServerHandle`](crate::ServerHandle) and by [`EnvironmentHandle`].
pub(crate) fn upsert(
    shared: &Shared,
    env: usize,
    kind: ItemKind,
    key: &str,
    item: NewItem<'_>,
) -> Result<u64, ServerError> {
    let mut inner = shared.lock();
    let e = &mut inner.envs[env];
    let (version, raw) = match item {
        NewItem::Value(item) => e.data.upsert(kind, key, item),
        NewItem::Raw(raw) => e.data.upsert_raw(kind, key, raw),
    }
    .map_err(ServerError::InvalidData)?;
    e.health.data_updated = SystemTime::now();
    let patch = sse_event("patch", &data::patch_data(kind, key, &raw));
    let put = fdv2::put(data::put_object(kind, key, version, &raw));
    let changes = fdv2_changes(&inner, env, put);
    broadcast(shared, &mut inner, env, patch, changes);
    Ok(version)
}

pub(crate) fn delete(
    shared: &Shared,
    env: usize,
    kind: ItemKind,
    key: &str,
    version: Option<u64>,
) -> u64 {
    let mut inner = shared.lock();
    let version = inner.envs[env].data.delete(kind, key, version);
    inner.envs[env].health.data_updated = SystemTime::now();
    let path = format!("{}{key}", kind.path_prefix());
    let payload = serde_json::json!({ "path": path, "version": version });
    let delete = sse_event("delete", &payload.to_string());
    let changes = fdv2_changes(&inner, env, fdv2::delete_object(kind, key, version));
    broadcast(shared, &mut inner, env, delete, changes);
    version
}

/// More changes than this in one replacement go out as the whole data set (a `put`, an
/// FDv2 `xfer-full`); up to it, as changes (`patch` and `delete` events, one FDv2
/// `xfer-changes` payload), so a data file edit of one flag sends one flag.
pub(crate) const MAX_CHANGES: usize = 64;

pub(crate) fn replace_all(shared: &Shared, env: usize, data: FlagData) -> Result<(), ServerError> {
    let data = Data::new(data).map_err(ServerError::InvalidData)?;
    let mut inner = shared.lock();
    let e = &mut inner.envs[env];
    e.health.data_updated = SystemTime::now();
    if e.starting_until.is_some() {
        e.data.replace(data);
        e.starting_until = None;
    } else {
        let changes = e.data.replace_with_changes(data);
        if changes.is_empty() {
            return Ok(());
        }
        if changes.len() <= MAX_CHANGES {
            let (fdv1, fdv2) = change_events(&e.data, &changes);
            broadcast(shared, &mut inner, env, fdv1, fdv2);
            return Ok(());
        }
    }
    let put = e.data.rendered().put_event();
    let full = fdv2::full_transfer_frame(&e.data.fdv2_objects());
    evaluate_change(shared, e, env);
    shared.hub.broadcast(env, put, full);
    crate::ofrep::notices::notify(shared, &inner, env);
    Ok(())
}

/// `changes` as FDv1 `patch` and `delete` events, and as one FDv2 `xfer-changes`
/// payload bringing a client to `data`'s state.
fn change_events(data: &Data, changes: &[Change]) -> (String, String) {
    let mut fdv1 = String::new();
    let mut events = Vec::with_capacity(changes.len() + 1);
    for change in changes {
        match change {
            Change::Put(kind, key, version, raw) => {
                fdv1.push_str(&sse_event("patch", &data::patch_data(*kind, key, raw)));
                events.push(fdv2::put(data::put_object(*kind, key, *version, raw)));
            }
            Change::Delete(kind, key, version) => {
                let path = format!("{}{key}", kind.path_prefix());
                let payload = serde_json::json!({ "path": path, "version": version });
                fdv1.push_str(&sse_event("delete", &payload.to_string()));
                events.push(fdv2::delete_object(*kind, key, *version));
            }
        }
    }
    events.push(fdv2::payload_transferred(&data.state(), data.version()));
    (fdv1, fdv2::to_sse(&events))
}

/// The changes as one FDv2 payload on an open stream.
fn fdv2_changes(inner: &Inner, env: usize, change: fdv2::Event) -> String {
    let data = &inner.envs[env].data;
    let done = fdv2::payload_transferred(&data.state(), data.version());
    fdv2::to_sse(&[change, done])
}

/// Send the streams of `env` a change (sent while the lock is held, so changes reach
/// the hub in order). An environment without data yet sends nothing: its waiting
/// streams get the whole data set when it arrives.
fn broadcast(shared: &Shared, inner: &mut Inner, env: usize, fdv1: String, fdv2: String) {
    if inner.envs[env].starting_until.is_none() {
        evaluate_change(shared, &mut inner.envs[env], env);
        crate::ofrep::notices::notify(shared, inner, env);
        shared.hub.broadcast(
            env,
            Frame::new(fdv1.into_bytes()),
            Frame::new(fdv2.into_bytes()),
        );
    }
}

pub(crate) fn sse_event(name: &str, data: &str) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// Changes one environment added with
/// [`ServerBuilder::environment`](crate::ServerBuilder::environment): see
/// [`ServerHandle::environment`](crate::ServerHandle::environment).
#[derive(Debug, Clone)]
pub struct EnvironmentHandle {
    pub(crate) shared: Arc<Shared>,
    pub(crate) index: usize,
}

impl EnvironmentHandle {
    /// The environment's name.
    pub fn name(&self) -> String {
        self.shared.lock().envs[self.index].name.clone()
    }

    /// Whether it has data (its SDKs are served).
    pub fn is_ready(&self) -> bool {
        self.shared.lock().envs[self.index].starting_until.is_none()
    }

    /// Replace all its data, as [`ServerHandle::replace_all`](crate::ServerHandle::replace_all); the first call makes
    /// it ready, and its waiting streams receive the data.
    pub fn replace_all(&self, data: impl Into<FlagData>) -> Result<(), ServerError> {
        replace_all(&self.shared, self.index, data.into())
    }

    /// Insert or replace a flag, as [`ServerHandle::set_flag`](crate::ServerHandle::set_flag) (a `version` field is kept).
    pub fn set_flag(&self, key: &str, flag: Value) -> Result<u64, ServerError> {
        let flag = NewItem::Value(flag);
        upsert(&self.shared, self.index, ItemKind::Flag, key, flag)
    }

    /// Insert or replace a segment, as [`ServerHandle::set_segment`](crate::ServerHandle::set_segment).
    pub fn set_segment(&self, key: &str, segment: Value) -> Result<u64, ServerError> {
        let segment = NewItem::Value(segment);
        upsert(&self.shared, self.index, ItemKind::Segment, key, segment)
    }

    /// Insert or replace a flag or segment given as its JSON text, as
    /// [`set_flag`](Self::set_flag) does with a value: held as it is (not decoded, not
    /// copied) when it is compact and has its `key` and `version`, as items from a
    /// flag delivery service are.
    pub fn set_item_json(&self, kind: Kind, key: &str, json: &Bytes) -> Result<u64, ServerError> {
        let kind = match kind {
            Kind::Flag => ItemKind::Flag,
            Kind::Segment => ItemKind::Segment,
        };
        upsert(&self.shared, self.index, kind, key, NewItem::Raw(json))
    }

    /// Delete a flag with this tombstone version.
    pub fn delete_flag_version(&self, key: &str, version: u64) -> u64 {
        delete(&self.shared, self.index, ItemKind::Flag, key, Some(version))
    }

    /// Delete a segment with this tombstone version.
    pub fn delete_segment_version(&self, key: &str, version: u64) -> u64 {
        delete(
            &self.shared,
            self.index,
            ItemKind::Segment,
            key,
            Some(version),
        )
    }

    /// Its data as `{"flags":{…},"segments":{…}}`, exactly as polling serves it.
    pub fn data_json(&self) -> String {
        self.shared.lock().envs[self.index].data.rendered().text()
    }

    /// Its payload version: 1 for the initial data, plus one per change.
    pub fn payload_version(&self) -> u64 {
        self.shared.lock().envs[self.index].data.version()
    }

    /// Report its upstream connection: the state now and, if it failed, why. `GET
    /// /status` and `GET /metrics` show it (see the [`health`](crate::ConnectionState)
    /// rules); `Valid` also marks the data as current for its data age.
    ///
    /// ```
    /// use flagsync_server::{ConnectionState, Environment, Server, UpstreamError};
    ///
    /// let server = Server::builder().environment(Environment::new("prod", "sdk-1")).start()?;
    /// let prod = server.environment("prod").expect("configured");
    /// prod.report_upstream(ConnectionState::Interrupted,
    ///     Some(UpstreamError::new("NETWORK_ERROR", "connection refused")));
    /// # Ok::<(), flagsync_server::ServerError>(())
    /// ```
    pub fn report_upstream(&self, state: ConnectionState, error: Option<UpstreamError>) {
        self.shared.lock().envs[self.index]
            .health
            .report(state, error, SystemTime::now());
    }

    /// Count analytics event payloads a relay forwarded upstream for it (`forwarded`)
    /// and could not (`failed`), for `GET /metrics`.
    pub fn count_forwarded_events(&self, forwarded: u64, failed: u64) {
        self.shared.metrics.events_forwarded(forwarded, failed);
    }

    /// Report where the data it serves came from, for `GET /status` (`servedFrom`):
    /// its data store (`true`: read from it at start, the upstream has not delivered
    /// yet) or its upstream.
    pub fn report_served_from_store(&self, from_store: bool) {
        self.shared.lock().envs[self.index].health.from_store = Some(from_store);
    }

    /// Report whether its data store (such as Redis) is available, for `GET /status`.
    pub fn report_data_store(&self, available: bool) {
        self.shared.lock().envs[self.index]
            .health
            .report_store(available, SystemTime::now());
    }
}
