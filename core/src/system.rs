//! The data system: one source feeding one store, with the status rules, behind the
//! `handle_input` / `poll_output` contract (DESIGN.md §2).

use std::collections::VecDeque;
use std::time::Instant;

use crate::config::{Config, ConfigError, Mode};
use crate::endpoint::Url;
use crate::io::{Action, CloseCause, ConnId};
use crate::source::{EventStreamConfig, Fdv1Poll, Fdv1Stream, PollConfig, SourceOutput};
use crate::status::{Status, StatusTracker};
use crate::store::{Snapshot, Store};

/// An instruction from the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Command {
    /// Start the data source.
    Start,
    /// Stop it for good: close every connection and report OFF.
    Stop,
}

/// Something that happened, fed to [`DataSystem::handle_input`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Input<'a> {
    /// An application command.
    Command(Command),
    /// The driver connected `conn` and wrote its request.
    Connected {
        /// The connection.
        conn: ConnId,
    },
    /// Bytes arrived on `conn`.
    Data {
        /// The connection.
        conn: ConnId,
        /// The bytes, borrowed; the core copies what it keeps.
        bytes: &'a [u8],
    },
    /// `conn` closed.
    Closed {
        /// The connection.
        conn: ConnId,
        /// Why.
        cause: CloseCause,
    },
    /// The deadline of the last [`Output::Wait`] passed (early calls are harmless).
    Timeout,
    /// The driver's persistent store failed to take a write the core asked for. The
    /// status becomes INTERRUPTED (INITIALIZING before the first success) with
    /// STORE_ERROR, and no vaguer error kind replaces it for this failure
    /// (PROTOCOL.md A.4.1).
    StoreFailed,
}

/// Something that happened, for the application.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The store was written (a rejected stale update writes nothing and reports
    /// nothing); `changed_flags` lists every flag whose data changed, directly or
    /// through a prerequisite or segment (may be empty).
    StoreChanged {
        /// Affected flag keys, sorted.
        changed_flags: Vec<String>,
    },
    /// The data-source status changed (PROTOCOL.md B §3.2).
    StatusChanged(Status),
    /// The store holds a full data set for the first time, or the source gave up for
    /// good before that: waiting for initialization can end.
    Ready,
    /// The server named its environment.
    EnvironmentId(String),
}

/// What to do next, from [`DataSystem::poll_output`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Perform this I/O.
    Action(Action),
    /// Tell the application.
    Event(Event),
    /// Nothing more now: wait for I/O, or until this deadline, then send
    /// [`Input::Timeout`]. `None`: wait for I/O or a command only.
    Wait(Option<Instant>),
}

#[derive(Debug)]
enum Source {
    Stream(Fdv1Stream),
    Poll(Fdv1Poll),
}

macro_rules! each_source {
    ($src:expr, $s:ident => $body:expr) => {
        match $src {
            Source::Stream($s) => $body,
            Source::Poll($s) => $body,
        }
    };
}

/// The whole FDv1 data system as a deterministic state machine.
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
    source: Source,
    store: Store,
    status: StatusTracker,
    out: VecDeque<Output>,
    ready: bool,
    environment_id: Option<String>,
    last_now: Instant,
}

impl DataSystem {
    /// A stopped data system; `seed` seeds every random choice (backoff jitter).
    pub fn new(config: Config, seed: u64, now: Instant) -> Result<Self, ConfigError> {
        config.validate()?;
        let filter: Vec<(&str, &str)> = config
            .payload_filter
            .as_deref()
            .filter(|f| !f.is_empty())
            .map(|f| vec![("filter", f)])
            .unwrap_or_default();
        let headers = config.identity.headers();
        let source = match config.mode {
            Mode::Streaming => {
                let base = Url::parse(&config.stream_uri).map_err(ConfigError::StreamUri)?;
                let mut sc = EventStreamConfig::new(base.with_path("/all", &filter));
                sc.headers = headers;
                sc.connect_timeout = config.connect_timeout;
                sc.read_timeout = config.stream_read_timeout;
                sc.backoff = config.backoff;
                sc.unrecoverable = config.unrecoverable;
                sc.sse = config.limits.sse;
                sc.http = config.limits.http;
                Source::Stream(Fdv1Stream::new(sc, seed, 0))
            }
            Mode::Polling => {
                let base = Url::parse(&config.polling_uri).map_err(ConfigError::PollingUri)?;
                let mut http = config.limits.http;
                http.max_body_len = Some(config.limits.max_poll_body);
                Source::Poll(Fdv1Poll::new(
                    PollConfig {
                        url: base.with_path("/sdk/latest-all", &filter),
                        headers,
                        interval: config.poll_interval.max(config.min_poll_interval),
                        connect_timeout: config.connect_timeout,
                        read_timeout: config.read_timeout,
                        unrecoverable: config.unrecoverable,
                        backoff: config.backoff,
                        http,
                        max_redirects: 3,
                    },
                    seed,
                    0,
                ))
            }
        };
        Ok(Self {
            source,
            store: Store::new(),
            status: StatusTracker::new(now),
            out: VecDeque::new(),
            ready: false,
            environment_id: None,
            last_now: now,
        })
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// A cheap immutable view of the store.
    pub fn snapshot(&self) -> Snapshot {
        self.store.snapshot()
    }

    /// The data-source status.
    pub fn status(&self) -> &Status {
        self.status.status()
    }

    /// The environment id the server reported, if any.
    pub fn environment_id(&self) -> Option<&str> {
        self.environment_id.as_deref()
    }

    /// True once a full data set is stored.
    pub fn initialized(&self) -> bool {
        self.store.initialized()
    }

    /// Feed one input. Afterwards, drain [`DataSystem::poll_output`] until it returns
    /// [`Output::Wait`].
    pub fn handle_input(&mut self, now: Instant, input: Input<'_>) {
        debug_assert!(now >= self.last_now, "time went backwards");
        let now = now.max(self.last_now);
        self.last_now = now;
        match input {
            Input::Command(Command::Start) => {
                each_source!(&mut self.source, s => s.handle_start(now))
            }
            Input::Command(Command::Stop) => {
                each_source!(&mut self.source, s => s.handle_stop(now))
            }
            Input::Connected { conn } => {
                each_source!(&mut self.source, s => s.handle_connected(now, conn))
            }
            Input::Data { conn, bytes } => {
                each_source!(&mut self.source, s => s.handle_data(now, conn, bytes))
            }
            Input::Closed { conn, cause } => {
                each_source!(&mut self.source, s => s.handle_closed(now, conn, cause))
            }
            Input::Timeout => each_source!(&mut self.source, s => s.handle_timeout(now)),
            Input::StoreFailed => {
                let error = crate::ErrorInfo::new(
                    now,
                    crate::ErrorKind::StoreError,
                    crate::status::Cause::Store,
                );
                if let Some(st) = self
                    .status
                    .update(now, crate::State::Interrupted, Some(error))
                {
                    self.out
                        .push_back(Output::Event(Event::StatusChanged(st.clone())));
                }
            }
        }
        self.pump(now);
    }

    /// The next output. Ends with [`Output::Wait`] once everything is drained, and
    /// keeps returning it until the next input.
    pub fn poll_output(&mut self) -> Output {
        self.out
            .pop_front()
            .unwrap_or_else(|| Output::Wait(each_source!(&self.source, s => s.poll_timeout())))
    }

    fn pump(&mut self, now: Instant) {
        while let Some(o) = each_source!(&mut self.source, s => s.poll_output()) {
            match o {
                SourceOutput::Action(a) => self.out.push_back(Output::Action(a)),
                SourceOutput::Apply(cs) => {
                    let full = cs.transfer == crate::store::Transfer::Full;
                    let applied = self.store.apply(cs);
                    if applied.written > 0 || full {
                        self.out.push_back(Output::Event(Event::StoreChanged {
                            changed_flags: applied.changed_flags,
                        }));
                    }
                }
                SourceOutput::Status(state, error) => {
                    let terminal = state == crate::State::Off;
                    if let Some(st) = self.status.update(now, state, error) {
                        self.out
                            .push_back(Output::Event(Event::StatusChanged(st.clone())));
                    }
                    if (terminal || self.store.initialized()) && !self.ready {
                        self.ready = true;
                        self.out.push_back(Output::Event(Event::Ready));
                    }
                }
                SourceOutput::EnvironmentId(id) => {
                    self.environment_id = Some(id.clone());
                    self.out.push_back(Output::Event(Event::EnvironmentId(id)));
                }
            }
        }
    }
}
