//! The running server's shared state: its settings, its environments (each with its
//! data and readiness), faults, recorded requests and event subscribers, behind one
//! lock; and the stream hub.

use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::data::Data;
use crate::events::Subscribers;
use crate::fault::Faults;
use crate::hub::Hub;
use crate::recorded::RecordedRequest;

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) addr: SocketAddr,
    pub(crate) max_body: usize,
    pub(crate) shutting_down: AtomicBool,
    pub(crate) inner: Mutex<Inner>,
    pub(crate) unhang: Condvar,
    pub(crate) hub: Hub,
}

#[derive(Debug)]
pub(crate) struct Inner {
    /// The default environment first, then those added with
    /// `ServerBuilder::environment`.
    pub(crate) envs: Vec<Env>,
    /// Every open request connection, to close them at shutdown (streams are the hub's).
    pub(crate) conns: HashMap<u64, TcpStream>,
    pub(crate) threads: Vec<JoinHandle<()>>,
    pub(crate) next_id: u64,
    pub(crate) faults: Faults,
    pub(crate) requests: VecDeque<RecordedRequest>,
    pub(crate) request_count: u64,
    pub(crate) event_subs: Subscribers,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }
}

impl Inner {
    /// The environment a request with this `Authorization` header is for: an added
    /// environment whose key it names, else the default one when its key matches (or
    /// it has none and no environment was added). `None`: refused (`401`).
    pub(crate) fn env_for(&self, authorization: Option<&str>) -> Option<usize> {
        let key = authorization.map(|v| v.strip_prefix("api_key ").unwrap_or(v));
        if let Some(i) = key.and_then(|key| {
            self.envs[1..]
                .iter()
                .position(|e| e.sdk_key.as_deref() == Some(key))
        }) {
            return Some(i + 1);
        }
        match &self.envs[0].sdk_key {
            None if self.envs.len() == 1 => Some(0),
            None => None,
            Some(k) => (key == Some(k.as_str())).then_some(0),
        }
    }
}

/// An environment as the server holds it.
#[derive(Debug)]
pub(crate) struct Env {
    pub(crate) name: String,
    pub(crate) sdk_key: Option<String>,
    pub(crate) env_id: Option<String>,
    pub(crate) data: Data,
    /// `None`: it has data. `Some(t)`: no data yet; until `t`, every SDK request gets
    /// `503`.
    pub(crate) starting_until: Option<Instant>,
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
