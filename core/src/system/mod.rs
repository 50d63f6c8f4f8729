//! The data system: the FDv1 source or the FDv2 coordinator feeding one store, with the
//! status rules, behind the `handle_input` / `poll_output` contract (DESIGN.md §2).
//!
//! This file holds [`DataSystem`]; `interface` its inputs and outputs, `shared` what the
//! FDv1 source and the FDv2 `coordinator` both write to, `sources` how sources are made,
//! `persist` the persistent store's side, `grid` the periodic deadlines.

mod availability;
mod coordinator;
mod external;
mod grid;
mod interface;
mod persist;
mod shared;
mod sources;

use std::collections::VecDeque;
use std::time::Instant;

pub use availability::DataAvailability;
pub use interface::{Command, Event, Input, Output, SourceFailure};
pub use persist::{Persist, PersistenceConfig, StoreMode, StoreStatus};

pub(crate) use grid::next_on_grid;

use crate::config::{Config, ConfigError, Mode};
use crate::source::SourceOutput;
use crate::status::{ErrorInfo, State, Status, StatusTracker};
use crate::store::{Selector, Snapshot, Store};
use coordinator::Coordinator;
use persist::Persistence;
use shared::Shared;

use sources::{AnySource, Factory};

/// The whole data system (FDv1, or FDv2 with its coordinator) as a deterministic state
/// machine.
///
/// ```
/// use std::time::{Duration, Instant};
/// use flagsync_core::{Action, Command, Config, DataSystem, Input, Output};
///
/// let now = Instant::now();
/// let mut config = Config::new("sdk-key");
/// config.stream_uri = "http://127.0.0.1:8030".into();
/// let mut system = DataSystem::new(config, 7, now).unwrap();
/// system.handle_input(now, Input::Command(Command::Start));
/// let Output::Action(Action::Connect { conn, request, .. }) = system.poll_output() else { panic!() };
/// assert!(request.starts_with(b"GET /all HTTP/1.1\r\n"));
///
/// system.handle_input(now, Input::Connected { conn });
/// let body = "event: put\ndata: {\"data\":{\"flags\":{\"f\":{\"key\":\"f\",\"version\":1}},\"segments\":{}}}\n\n";
/// let response = format!("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n{body}");
/// system.handle_input(now, Input::Data { conn, bytes: response.as_bytes() });
/// while !matches!(system.poll_output(), Output::Wait(_)) {}
/// assert_eq!(system.snapshot().get(flagsync_core::Kind::Flag, "f").unwrap().version, 1);
/// assert_eq!(system.status().state, flagsync_core::State::Valid);
/// ```
#[derive(Debug)]
pub struct DataSystem {
    engine: Engine,
    shared: Shared,
    mode: Mode,
    stopped: bool,
    /// Daemon mode: the persistent store was read and found initialized.
    daemon_store_initialized: bool,
    last_now: Instant,
}

#[derive(Debug)]
enum Engine {
    Fdv1(Box<AnySource>),
    Fdv2(Box<Coordinator>),
    /// [`Mode::External`]: data from an in-process source (`external.rs`).
    External,
}

impl DataSystem {
    /// A stopped data system; `seed` seeds every random choice (backoff jitter).
    pub fn new(config: Config, seed: u64, now: Instant) -> Result<Self, ConfigError> {
        config.validate()?;
        let mode = config.mode;
        let persistence = config.persistence;
        let fdv2 = mode == Mode::Fdv2;
        let mut factory = Factory::new(config, seed);
        let engine = if fdv2 {
            Engine::Fdv2(Box::new(Coordinator::new(factory)))
        } else if mode == Mode::External {
            Engine::External
        } else {
            Engine::Fdv1(Box::new(factory.fdv1()?))
        };
        Ok(Self {
            engine,
            shared: Shared {
                store: Store::new(),
                status: StatusTracker::new(now),
                out: VecDeque::new(),
                ready: false,
                environment_id: None,
                persist: persistence.map(Persistence::new),
            },
            mode,
            stopped: false,
            daemon_store_initialized: false,
            last_now: now,
        })
    }

    /// Which data system this is.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    /// A cheap immutable view of the store.
    pub fn snapshot(&self) -> Snapshot {
        self.shared.store.snapshot()
    }

    /// The data-source status.
    pub fn status(&self) -> &Status {
        self.shared.status.status()
    }

    /// The environment id the server reported, if any.
    pub fn environment_id(&self) -> Option<&str> {
        self.shared.environment_id.as_deref()
    }

    /// True once a full data set is stored.
    pub fn initialized(&self) -> bool {
        self.shared.store.initialized()
    }

    /// The persistent store's status, if one is configured.
    pub fn store_status(&self) -> Option<StoreStatus> {
        self.shared.persist.as_ref().map(Persistence::status)
    }

    /// True once waiting for initialization can end ([`Event::Ready`] was emitted).
    pub fn ready(&self) -> bool {
        self.shared.ready
    }

    /// How fresh the stored data is (PROTOCOL.md B §4.6, §5.10): FDv1 data is
    /// REFRESHED once a full data set arrived; FDv2 data is REFRESHED while the store
    /// holds a selector, CACHED when it holds data without one (after FDv1 fallback) or
    /// when no source is configured (daemon mode).
    pub fn data_availability(&self) -> DataAvailability {
        let store = &self.shared.store;
        match &self.engine {
            Engine::Fdv1(_) | Engine::External if store.initialized() => {
                DataAvailability::Refreshed
            }
            Engine::Fdv1(_) | Engine::External => DataAvailability::Defaults,
            Engine::Fdv2(_) if store.selector().is_defined() => DataAvailability::Refreshed,
            Engine::Fdv2(c) if c.has_no_sources() || store.initialized() => {
                DataAvailability::Cached
            }
            Engine::Fdv2(_) => DataAvailability::Defaults,
        }
    }

    /// FDv2: the selector (`state`, `version`) of the payload the store holds, from its
    /// last `payload-transferred` (PROTOCOL.md B §5.2, §5.8). Read-only.
    ///
    /// `None` before the first payload, under FDv1, and while the store holds data
    /// without a selector (after the FDv1 fallback, B §5.6). Intent `none` leaves it as
    /// it is; changes not yet committed by `payload-transferred` do not move it. The
    /// `state` is what the next request sends as `basis` (B §5.4, §5.5).
    ///
    /// For debugging (which payload a client is on, compared with the server's), and
    /// for callers that persist the data themselves and want to record which payload
    /// their copy is. It changes only in [`DataSystem::handle_input`] and has no event
    /// of its own (a payload that changes no item moves it without a
    /// [`Event::StoreChanged`]): read it after draining, as the adapters do.
    pub fn selector(&self) -> Option<&Selector> {
        Some(self.shared.store.selector()).filter(|s| s.is_defined())
    }

    /// The best availability this configuration can reach: REFRESHED with a data
    /// source, CACHED without one.
    pub fn target_availability(&self) -> DataAvailability {
        match &self.engine {
            Engine::Fdv2(c) if c.has_no_sources() => DataAvailability::Cached,
            _ => DataAvailability::Refreshed,
        }
    }

    /// FDv2: the name of the running synchronizer or initializer (`streaming`,
    /// `polling`, `fdv1-polling`), if any.
    pub fn active_source(&self) -> Option<&'static str> {
        match &self.engine {
            Engine::Fdv2(c) => c.active_name(),
            Engine::Fdv1(_) | Engine::External => None,
        }
    }

    /// Feed one input. Afterwards, drain [`DataSystem::poll_output`] until it returns
    /// [`Output::Wait`].
    pub fn handle_input(&mut self, now: Instant, input: Input<'_>) {
        debug_assert!(now >= self.last_now, "time went backwards");
        let now = now.max(self.last_now);
        self.last_now = now;
        match input {
            Input::StoreFailed | Input::StoreFault(_) => {
                let cause = match input {
                    Input::StoreFault(fault) => crate::status::Cause::StoreFault(fault),
                    _ => crate::status::Cause::Store,
                };
                let error = ErrorInfo::new(now, crate::ErrorKind::StoreError, cause);
                self.shared.report(now, State::Interrupted, Some(error));
                if let Some(p) = self.shared.persist.as_mut() {
                    let fx = p.failed(now);
                    self.shared.persist_effects(now, fx);
                }
                return;
            }
            Input::StoreAvailable(available) => {
                if let Some(p) = self.shared.persist.as_mut() {
                    let fx = p.answered(now, available);
                    self.shared.persist_effects(now, fx);
                }
                if available
                    && self.daemon_store_initialized
                    && self.shared.status.status().state != State::Off
                {
                    // Daemon mode: the store that was read is back.
                    self.shared.report(now, State::Valid, None);
                }
                return;
            }
            Input::StoreInitialized => {
                if matches!(&self.engine, Engine::Fdv2(c) if c.has_no_sources())
                    && self.shared.status.status().state != State::Off
                {
                    self.daemon_store_initialized = true;
                    self.shared.report(now, State::Valid, None);
                }
                return;
            }
            Input::Timeout => {
                if let Some(p) = self.shared.persist.as_mut() {
                    let fx = p.timeout(now);
                    self.shared.persist_effects(now, fx);
                }
            }
            _ => {}
        }
        match &mut self.engine {
            Engine::Fdv1(source) => {
                match input {
                    // Stop is for good (like the FDv2 coordinator's).
                    Input::Command(Command::Start) if !self.stopped => source.handle_start(now),
                    Input::Command(Command::Start) => {}
                    Input::Command(Command::Stop) => {
                        self.stopped = true;
                        source.handle_stop(now);
                    }
                    Input::Connected { conn } => source.handle_connected(now, conn),
                    Input::Data { conn, bytes } => {
                        source.handle_data(now, conn, bytes, self.shared.store.data());
                    }
                    Input::Closed { conn, cause } => source.handle_closed(now, conn, cause),
                    Input::Timeout => source.handle_timeout(now),
                    Input::StoreFailed
                    | Input::StoreFault(_)
                    | Input::StoreAvailable(_)
                    | Input::StoreInitialized
                    | Input::SourceData(_)
                    | Input::SourceFailed(_) => {}
                }
                pump_fdv1(source, &mut self.shared, now);
            }
            Engine::Fdv2(c) => c.handle_input(now, input, &mut self.shared),
            Engine::External => {
                let stopped = self.stopped;
                self.stopped |= input == Input::Command(Command::Stop);
                external::handle(&mut self.shared, now, input, stopped);
            }
        }
    }

    /// The next output. Ends with [`Output::Wait`] once everything is drained, and
    /// keeps returning it until the next input.
    pub fn poll_output(&mut self) -> Output {
        self.shared.out.pop_front().unwrap_or_else(|| {
            let engine = match &self.engine {
                Engine::Fdv1(s) => s.poll_timeout(),
                Engine::Fdv2(c) => c.poll_timeout(),
                Engine::External => None,
            };
            let store = self
                .shared
                .persist
                .as_ref()
                .and_then(Persistence::poll_timeout);
            Output::Wait(match (engine, store) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            })
        })
    }
}

fn pump_fdv1(source: &mut AnySource, shared: &mut Shared, now: Instant) {
    while let Some(o) = source.poll_output() {
        match o {
            SourceOutput::Action(a) => shared.out.push_back(Output::Action(a)),
            SourceOutput::Apply(cs) => shared.apply(cs),
            SourceOutput::Status(state, error) => {
                shared.report(now, state, error);
                if state == State::Off || shared.store.initialized() {
                    shared.set_ready();
                }
            }
            SourceOutput::EnvironmentId(id) => shared.set_environment_id(id),
            // FDv1 sources never send it.
            SourceOutput::FallbackToFdv1 => {}
        }
    }
}
