//! The running server's shared state: its settings, its environments (each with its
//! data and readiness), faults, recorded requests and event subscribers, behind one
//! lock; and the stream hub.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mio::Waker;

use crate::client_side::settings::ClientSettings;
use crate::data::Data;
use crate::events::Subscribers;
use crate::fault::Faults;
use crate::health::{EnvView, Health};
use crate::hub::Hub;
use crate::metrics::Metrics;
use crate::recorded::RecordedRequest;

#[derive(Debug)]
pub(crate) struct Shared {
    /// The bound addresses, in the order they were given.
    pub(crate) addrs: Vec<SocketAddr>,
    /// Whether the listeners speak TLS.
    pub(crate) tls: bool,
    pub(crate) max_body: usize,
    pub(crate) shutting_down: AtomicBool,
    pub(crate) inner: Mutex<Inner>,
    /// Wakes the request loop (a fault lifted, shutdown).
    pub(crate) wake: Arc<Waker>,
    pub(crate) hub: Hub,
    pub(crate) metrics: Arc<Metrics>,
    /// How long an interrupted environment still counts as connected in `/status`.
    pub(crate) disconnected_grace: Duration,
    /// The most connections served at once.
    pub(crate) max_connections: usize,
    /// The OFREP endpoints' event processors and change channels.
    pub(crate) ofrep: crate::ofrep::shared::OfrepState,
}

#[derive(Debug)]
pub(crate) struct Inner {
    /// The default environment first, then those added with
    /// `ServerBuilder::environment`.
    pub(crate) envs: Vec<Env>,
    pub(crate) faults: Faults,
    pub(crate) requests: VecDeque<RecordedRequest>,
    pub(crate) request_count: u64,
    pub(crate) event_subs: Subscribers,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An events payload an SDK posted to environment `env`: counted, named with the
    /// environment (all but the default one) and handed to the event subscriptions
    /// (never waiting for them).
    pub(crate) fn publish_received(&self, env: usize, mut payload: crate::events::EventPayload) {
        self.metrics
            .events_received(payload.kind == crate::events::PayloadKind::Diagnostic);
        let mut inner = self.lock();
        if env > 0 {
            payload.environment = Some(inner.envs[env].name.clone());
        }
        inner.event_subs.publish(&payload);
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Have the request loop look at its held connections again (a hang fault was
    /// lifted) or stop (shutdown).
    pub(crate) fn wake_requests(&self) {
        let _ = self.wake.wake();
    }
}

impl Inner {
    /// Whether environments were added beside the default one (not counting its
    /// filtered variants).
    fn has_added_envs(&self) -> bool {
        self.envs[1..].iter().any(|e| !e.default_variant)
    }

    /// The environments a request can reach: all but a default one that has no SDK
    /// key beside added ones (it answers nobody).
    pub(crate) fn reachable_envs(&self) -> Vec<EnvView<'_>> {
        let skip_default = self.has_added_envs() && self.envs[0].sdk_key.is_none();
        self.envs
            .iter()
            .skip(usize::from(skip_default))
            .map(|e| EnvView {
                name: &e.name,
                env_id: e.env_id.as_deref(),
                version: e.data.version(),
                health: &e.health,
            })
            .collect()
    }

    /// The environment a request with this `Authorization` header and payload
    /// `filter` is for: an added environment whose key it names (and that serves the
    /// filter), else the default one when its key matches (or it has none and no
    /// environment was added).
    pub(crate) fn env_for(
        &self,
        authorization: Option<&str>,
        filter: Option<&str>,
    ) -> Result<usize, EnvRefusal> {
        let key = authorization.map(|v| v.strip_prefix("api_key ").unwrap_or(v));
        let mut key_known = false;
        if let Some(key) = key {
            for (i, e) in self.envs.iter().enumerate().skip(1) {
                if !e.default_variant && e.sdk_key.as_deref() == Some(key) {
                    if e.filter.as_deref() == filter {
                        return Ok(i);
                    }
                    key_known = true;
                }
            }
        }
        let default = match &self.envs[0].sdk_key {
            None => !self.has_added_envs(),
            Some(k) => key == Some(k.as_str()),
        };
        if default
            && let Some(i) = self
                .envs
                .iter()
                .position(|e| e.default_variant && e.filter.as_deref() == filter)
        {
            return Ok(i);
        }
        match filter {
            None if default => Ok(0),
            Some(_) if default || key_known => Err(EnvRefusal::UnknownFilter),
            _ => Err(EnvRefusal::Unauthorized),
        }
    }
}

/// Why no environment answers a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EnvRefusal {
    /// No environment has its SDK key: `401`.
    Unauthorized,
    /// Its key is served, but not with its payload filter: `404`.
    UnknownFilter,
}

/// An environment as the server holds it.
#[derive(Debug)]
pub(crate) struct Env {
    pub(crate) name: String,
    pub(crate) sdk_key: Option<String>,
    /// The payload filter it serves (`None`: unfiltered requests).
    pub(crate) filter: Option<String>,
    /// It serves a filter of the default environment (same SDK key, or any key when
    /// the default has none).
    pub(crate) default_variant: bool,
    pub(crate) env_id: Option<String>,
    pub(crate) data: Data,
    /// `None`: it has data. `Some(t)`: no data yet; until `t`, every SDK request gets
    /// `503`.
    pub(crate) starting_until: Option<Instant>,
    pub(crate) health: Health,
    /// What its client-side and mobile SDKs need (see [`crate::client_side`]).
    pub(crate) client: ClientSettings,
}

/// How an environment answers an SDK's stream or poll request now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Readiness {
    Ready,
    /// No data, within the initialization timeout: `503` for all.
    Starting,
    /// No data, past it: polls `503`, streams open without data.
    Waiting,
}

impl Env {
    pub(crate) fn readiness(&self, now: Instant) -> Readiness {
        match self.starting_until {
            None => Readiness::Ready,
            Some(t) if now < t => Readiness::Starting,
            Some(_) => Readiness::Waiting,
        }
    }
}
