//! Health: each environment's connection to where its data comes from, its data
//! store, and the age of its data, as `GET /status` reports them (in the shape of
//! LaunchDarkly's Relay Proxy's status resource), never with an SDK key.
//!
//! An environment is `connected` while its state is `VALID`, or `INTERRUPTED` for
//! less than the disconnected-status time ([`ServerBuilder::disconnected_status_time`],
//! one minute by default, as the Relay Proxy's `disconnectedStatusTime`): a brief
//! reconnection does not flap a load balancer's check. The server is `healthy` when
//! every environment is connected, else `degraded`; `/status` answers `200` either
//! way (as the Relay Proxy does), so a probe reads the `status` field.
//!
//! An environment with a data store (a relay's Redis) also says where what it serves
//! came from: `"servedFrom": "store"` while it serves the data the store held at start
//! (its upstream has not delivered yet), `"upstream"` once the upstream has.
//!
//! [`ServerBuilder::disconnected_status_time`]: crate::ServerBuilder::disconnected_status_time

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

/// The state of an environment's connection to its upstream (or other data source),
/// as the Relay Proxy's `/status` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionState {
    /// Not connected yet: no data so far.
    Initializing,
    /// Connected; the data is current.
    Valid,
    /// Was connected, and is trying to connect again (the last data is served).
    Interrupted,
    /// Gave up for good (e.g. the upstream rejected the SDK key).
    Off,
}

impl ConnectionState {
    fn name(self) -> &'static str {
        match self {
            Self::Initializing => "INITIALIZING",
            Self::Valid => "VALID",
            Self::Interrupted => "INTERRUPTED",
            Self::Off => "OFF",
        }
    }
}

/// Why an environment's upstream connection failed last: a kind (such as
/// `NETWORK_ERROR`, `ERROR_RESPONSE`, `INVALID_DATA`) and a message for people. Neither
/// may hold an SDK key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamError {
    /// The error's kind.
    pub kind: String,
    /// What happened.
    pub message: String,
}

impl UpstreamError {
    /// An error of `kind` with `message`.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            message: message.into(),
        }
    }
}

/// One environment's health.
#[derive(Debug, Clone)]
pub(crate) struct Health {
    pub(crate) connection: ConnectionState,
    pub(crate) since: SystemTime,
    pub(crate) last_error: Option<(UpstreamError, SystemTime)>,
    /// Whether its data store (Redis) is available, and since when; `None`: it has none.
    pub(crate) store: Option<(bool, SystemTime)>,
    /// When its data last changed, or was last confirmed current.
    pub(crate) data_updated: SystemTime,
    /// Whether what it serves came from its data store (`true`) or its upstream;
    /// `None`: not reported (it has no store).
    pub(crate) from_store: Option<bool>,
}

impl Health {
    pub(crate) fn new(connection: ConnectionState, now: SystemTime) -> Self {
        Self {
            connection,
            since: now,
            last_error: None,
            store: None,
            data_updated: now,
            from_store: None,
        }
    }

    /// A new connection state (and error, if any) reported at `now`.
    pub(crate) fn report(
        &mut self,
        state: ConnectionState,
        error: Option<UpstreamError>,
        now: SystemTime,
    ) {
        if state != self.connection {
            self.connection = state;
            self.since = now;
        }
        if state == ConnectionState::Valid {
            self.data_updated = now;
        }
        if let Some(e) = error {
            self.last_error = Some((e, now));
        }
    }

    pub(crate) fn report_store(&mut self, available: bool, now: SystemTime) {
        if self.store.is_none_or(|(was, _)| was != available) {
            self.store = Some((available, now));
        }
    }

    /// Whether the environment counts as connected at `now`.
    fn connected(&self, now: SystemTime, grace: Duration) -> bool {
        match self.connection {
            ConnectionState::Valid => true,
            ConnectionState::Interrupted => {
                now.duration_since(self.since).unwrap_or_default() < grace
            }
            ConnectionState::Initializing | ConnectionState::Off => false,
        }
    }
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What `/status` and `/metrics` show of one environment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EnvView<'a> {
    pub(crate) name: &'a str,
    pub(crate) env_id: Option<&'a str>,
    /// Its payload version.
    pub(crate) version: u64,
    pub(crate) health: &'a Health,
}

/// The `/status` document of `envs` (those a request can reach) at `now`.
pub(crate) fn status(envs: &[EnvView<'_>], now: SystemTime, grace: Duration) -> Value {
    let mut all = Map::new();
    let mut healthy = true;
    for e in envs {
        let h = e.health;
        let connected = h.connected(now, grace);
        healthy &= connected;
        let mut connection = json!({"state": h.connection.name(), "stateSince": millis(h.since)});
        if let Some((err, at)) = &h.last_error {
            connection["lastError"] =
                json!({"kind": err.kind, "message": err.message, "time": millis(*at)});
        }
        let mut env = json!({
            "status": if connected { "connected" } else { "disconnected" },
            "connectionStatus": connection,
            "dataVersion": e.version,
            "dataAgeMs": u64::try_from(now.duration_since(h.data_updated).unwrap_or_default().as_millis()).unwrap_or(u64::MAX),
        });
        if let Some(id) = e.env_id {
            env["envId"] = Value::from(id);
        }
        if let Some((available, since)) = h.store {
            env["dataStoreStatus"] = json!({
                "state": if available { "VALID" } else { "INTERRUPTED" },
                "stateSince": millis(since),
            });
        }
        if let Some(from_store) = h.from_store {
            env["servedFrom"] = Value::from(if from_store { "store" } else { "upstream" });
        }
        all.insert(e.name.to_owned(), env);
    }
    json!({
        "status": if healthy { "healthy" } else { "degraded" },
        "version": env!("CARGO_PKG_VERSION"),
        "environments": all,
    })
}
