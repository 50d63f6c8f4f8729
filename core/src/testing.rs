//! A virtual clock and a scripted fake server for driving a [`DataSystem`] in tests
//! (DESIGN.md §5, STYLE.md §3.10). A five-minute backoff takes microseconds.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::{Action, CloseCause, Command, ConnId, DataSystem, Event, Input, IoCause, Output};

/// A snapshot holding `flags` and `segments` (JSON objects with key and version), as a
/// full FDv1 data set applied to a fresh store leaves it: for tests of what reads
/// snapshots (the evaluation engine, the SDK's model cache).
///
/// # Panics
/// An item that is not a JSON object with a key.
pub fn snapshot_of(flags: &[serde_json::Value], segments: &[serde_json::Value]) -> crate::Snapshot {
    use crate::store::{Change, ChangeSet, Kind, Store};
    let changes = flags
        .iter()
        .map(|f| (Kind::Flag, f))
        .chain(segments.iter().map(|s| (Kind::Segment, s)))
        .map(|(kind, v)| Change::from_json(kind, Bytes::from(v.to_string())).expect("an item"))
        .collect();
    let mut store = Store::new();
    store.apply(ChangeSet::fdv1_full(changes));
    store.snapshot()
}

/// One real `Instant` to serve as the origin of virtual time.
#[allow(
    clippy::disallowed_methods,
    reason = "the virtual clock needs one real origin"
)]
pub fn origin() -> Instant {
    Instant::now()
}

/// How a scripted response ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The server closes the connection cleanly after the last chunk.
    Close,
    /// The connection stays open and silent.
    Hang,
    /// The connection breaks with an I/O error after the last chunk.
    Reset,
}

/// The server's answer to one connection attempt.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Accept the connection and send this response.
    Respond(Response),
    /// Refuse the connection (an I/O error before anything is sent).
    Refuse,
    /// Never complete the connection.
    Hang,
}

/// A scripted HTTP response: the head, then body chunks each after a delay.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Response headers.
    pub headers: Vec<(String, String)>,
    /// Body chunks with the delay before each.
    pub chunks: Vec<(Duration, Bytes)>,
    /// What happens after the last chunk.
    pub end: End,
}

impl Response {
    /// A `text/event-stream` response sending `body` at once, then `end`.
    pub fn sse(body: &str, end: End) -> Self {
        Self {
            status: 200,
            headers: vec![(
                "Content-Type".into(),
                "text/event-stream; charset=utf-8".into(),
            )],
            chunks: vec![(Duration::ZERO, Bytes::copy_from_slice(body.as_bytes()))],
            end,
        }
    }

    /// A response with `status`, a `Content-Length` body, closed afterwards.
    pub fn status(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("Content-Length".into(), body.len().to_string())],
            chunks: vec![(Duration::ZERO, Bytes::copy_from_slice(body.as_bytes()))],
            end: End::Close,
        }
    }

    /// Add a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Send another chunk `after` the previous one.
    pub fn then(mut self, after: Duration, chunk: &str) -> Self {
        self.chunks
            .push((after, Bytes::copy_from_slice(chunk.as_bytes())));
        self
    }

    fn head(&self) -> Bytes {
        let mut s = format!("HTTP/1.1 {} Scripted\r\n", self.status);
        for (n, v) in &self.headers {
            s.push_str(&format!("{n}: {v}\r\n"));
        }
        s.push_str("\r\n");
        Bytes::from(s)
    }
}

/// A request the system made, as the fake server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Virtual time since the start.
    pub at: Duration,
    /// The connection.
    pub conn: ConnId,
    /// Host and port.
    pub host: String,
    /// The request line, e.g. `GET /all HTTP/1.1`.
    pub line: String,
    /// Headers in order.
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// A header by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The request target (path and query).
    pub fn target(&self) -> &str {
        self.line.split(' ').nth(1).unwrap_or("")
    }

    /// The request path, without the query.
    pub fn path(&self) -> &str {
        self.target().split('?').next().unwrap_or("")
    }

    /// A query parameter's raw value.
    pub fn query(&self, name: &str) -> Option<&str> {
        let (_, q) = self.target().split_once('?')?;
        q.split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }
}

#[derive(Debug, Clone)]
enum Delivery {
    Connected,
    Data(Bytes),
    Closed(CloseCause),
}

/// An invariant check run after every drain, with the virtual time.
pub type DrainCheck = Box<dyn FnMut(&DataSystem, Duration)>;

/// Drives a [`DataSystem`] against scripted replies under virtual time.
pub struct Harness {
    /// The system under test.
    pub system: DataSystem,
    origin: Instant,
    now: Instant,
    replies: VecDeque<Reply>,
    routes: Vec<(String, VecDeque<Reply>)>,
    pending: BTreeMap<(Instant, u64), (ConnId, Delivery)>,
    seq: u64,
    open: HashSet<ConnId>,
    /// Every request made.
    pub requests: Vec<Request>,
    /// Every event, with its virtual time.
    pub events: Vec<(Duration, Event)>,
    /// Connections the system closed.
    pub closed: Vec<ConnId>,
    /// Every request to the persistent store, with its virtual time.
    pub persisted: Vec<(Duration, crate::Persist)>,
    /// Deliver received bytes in pieces of at most this size.
    pub split: Option<usize>,
    /// Fire each timeout this long after its deadline, as a loaded runtime does (its
    /// timers wake late; I/O due in between is delivered first). Zero by default: exact.
    pub timer_lateness: Duration,
    /// The most connections that were open at once.
    pub max_open: usize,
    /// Called after every drain with the system and the virtual time, to check
    /// invariants at every step.
    pub on_drain: Option<DrainCheck>,
    last_wait: Option<Instant>,
}

impl Harness {
    /// A harness for `system`, whose clock starts at `origin`.
    pub fn new(system: DataSystem, origin: Instant) -> Self {
        Self {
            system,
            origin,
            now: origin,
            replies: VecDeque::new(),
            routes: Vec::new(),
            pending: BTreeMap::new(),
            seq: 0,
            open: HashSet::new(),
            requests: Vec::new(),
            events: Vec::new(),
            closed: Vec::new(),
            persisted: Vec::new(),
            split: None,
            timer_lateness: Duration::ZERO,
            max_open: 0,
            on_drain: None,
            last_wait: None,
        }
    }

    /// Queue the reply to the next connection attempt. Attempts with no reply queued hang.
    pub fn reply(&mut self, reply: Reply) -> &mut Self {
        self.replies.push_back(reply);
        self
    }

    /// Queue the reply to the next attempt whose request path (without the query) is
    /// `path`. Routed replies are used before the shared queue of [`Harness::reply`];
    /// an attempt with no reply for it hangs.
    pub fn reply_to(&mut self, path: &str, reply: Reply) -> &mut Self {
        match self.routes.iter_mut().find(|(p, _)| p == path) {
            Some((_, q)) => q.push_back(reply),
            None => self.routes.push((path.to_owned(), VecDeque::from([reply]))),
        }
        self
    }

    /// Requests whose path (without the query) is `path`.
    pub fn requests_to(&self, path: &str) -> Vec<&Request> {
        self.requests.iter().filter(|r| r.path() == path).collect()
    }

    /// Virtual time elapsed.
    pub fn elapsed(&self) -> Duration {
        self.now - self.origin
    }

    /// Connections still open.
    pub fn open_connections(&self) -> usize {
        self.open.len()
    }

    /// Send `Command::Start` and run to `until` (virtual time since the origin).
    pub fn start(&mut self, until: Duration) {
        self.input(Input::Command(Command::Start));
        self.run_until(until);
    }

    /// Feed one input now and drain.
    pub fn input(&mut self, input: Input<'_>) {
        self.system.handle_input(self.now, input);
        self.drain();
    }

    /// Advance virtual time to `until`, delivering scripted I/O and timeouts in order.
    pub fn run_until(&mut self, until: Duration) {
        let until = self.origin + until;
        for _ in 0..1_000_000 {
            let io = self.pending.keys().next().map(|k| k.0);
            // A deadline already past fires at once; a future one, late by the lateness.
            let fire = self.last_wait.map(|d| {
                if d <= self.now {
                    self.now
                } else {
                    d + self.timer_lateness
                }
            });
            let fired = self.last_wait;
            let next = match (io, fire) {
                (Some(a), Some(b)) => a.min(b),
                (a, b) => match a.or(b) {
                    Some(t) => t,
                    None => break,
                },
            };
            if next > until {
                break;
            }
            self.now = self.now.max(next);
            if io == Some(next) {
                let Some((_, (conn, d))) = self.pending.pop_first() else {
                    break;
                };
                if !self.open.contains(&conn) {
                    continue;
                }
                match d {
                    Delivery::Connected => self.input(Input::Connected { conn }),
                    Delivery::Data(bytes) => {
                        let piece = self.split.unwrap_or(usize::MAX).max(1);
                        for chunk in bytes.chunks(piece) {
                            if self.open.contains(&conn) {
                                self.input(Input::Data { conn, bytes: chunk });
                            }
                        }
                    }
                    Delivery::Closed(cause) => {
                        self.open.remove(&conn);
                        self.input(Input::Closed { conn, cause });
                    }
                }
            } else {
                self.input(Input::Timeout);
                // A deadline always moves forward after it fires (DESIGN.md §2): past
                // `now`, or, when timers fire late, past the deadline that fired.
                let past = if self.timer_lateness.is_zero() {
                    Some(self.now)
                } else {
                    fired
                };
                assert!(
                    self.last_wait.is_none_or(|d| past.is_none_or(|p| d > p)),
                    "busy loop: deadline {:?} at {:?}",
                    self.last_wait,
                    self.now
                );
            }
        }
        self.now = self.now.max(until);
    }

    /// Events of one shape, e.g. every status change.
    pub fn statuses(&self) -> Vec<crate::Status> {
        self.events
            .iter()
            .filter_map(|(_, e)| match e {
                Event::StatusChanged(s) => Some(s.clone()),
                _ => None,
            })
            .collect()
    }

    fn schedule(&mut self, at: Instant, conn: ConnId, d: Delivery) {
        self.seq += 1;
        self.pending.insert((at, self.seq), (conn, d));
    }

    fn drain(&mut self) {
        loop {
            match self.system.poll_output() {
                Output::Wait(deadline) => {
                    self.last_wait = deadline;
                    let elapsed = self.now - self.origin;
                    if let Some(check) = self.on_drain.as_mut() {
                        check(&self.system, elapsed);
                    }
                    return;
                }
                Output::Event(e) => self.events.push((self.now - self.origin, e)),
                Output::Persist(p) => self.persisted.push((self.now - self.origin, p)),
                Output::Action(Action::Connect {
                    conn,
                    endpoint,
                    request,
                }) => {
                    self.record(
                        conn,
                        format!("{}:{}", endpoint.host, endpoint.port),
                        &request,
                    );
                    self.open.insert(conn);
                    self.max_open = self.max_open.max(self.open.len());
                    let path = self.requests.last().map(|r| r.path().to_owned());
                    self.connect(conn, path.as_deref().unwrap_or(""));
                }
                Output::Action(Action::Close { conn }) => {
                    self.open.remove(&conn);
                    self.closed.push(conn);
                }
            }
        }
    }

    fn connect(&mut self, conn: ConnId, path: &str) {
        let now = self.now;
        let routed = self
            .routes
            .iter_mut()
            .find(|(p, _)| p == path)
            .and_then(|(_, q)| q.pop_front());
        match routed
            .or_else(|| self.replies.pop_front())
            .unwrap_or(Reply::Hang)
        {
            Reply::Hang => {}
            Reply::Refuse => {
                let cause = CloseCause::Io(IoCause {
                    kind: std::io::ErrorKind::ConnectionRefused,
                    message: "connection refused".into(),
                });
                self.schedule(now, conn, Delivery::Closed(cause));
            }
            Reply::Respond(r) => {
                self.schedule(now, conn, Delivery::Connected);
                self.schedule(now, conn, Delivery::Data(r.head()));
                let mut at = now;
                for (delay, chunk) in r.chunks {
                    at += delay;
                    self.schedule(at, conn, Delivery::Data(chunk));
                }
                match r.end {
                    End::Close => self.schedule(at, conn, Delivery::Closed(CloseCause::Eof)),
                    End::Reset => {
                        let cause = CloseCause::Io(IoCause {
                            kind: std::io::ErrorKind::ConnectionReset,
                            message: "connection reset".into(),
                        });
                        self.schedule(at, conn, Delivery::Closed(cause));
                    }
                    End::Hang => {}
                }
            }
        }
    }

    fn record(&mut self, conn: ConnId, host: String, request: &[u8]) {
        let text = String::from_utf8_lossy(request);
        let head = text.split("\r\n\r\n").next().unwrap_or("");
        let mut lines = head.split("\r\n");
        let line = lines.next().unwrap_or("").to_owned();
        let headers = lines
            .filter_map(|l| l.split_once(": "))
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect();
        self.requests.push(Request {
            at: self.now - self.origin,
            conn,
            host,
            line,
            headers,
        });
    }
}

/// One step of an input script: advance virtual time, then feed one input.
///
/// Scripts are what the `data_system` fuzz target generates and what conformance
/// scenarios replay: a crashing fuzz input is a scenario, and a scenario is a seed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Step {
    /// Milliseconds of virtual time before the input.
    pub advance_ms: u32,
    /// The input.
    pub input: ScriptInput,
}

/// An input in a script. Connections are named by the index of the `Connect` action
/// that opened them (modulo the number opened so far).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum ScriptInput {
    /// `Command::Start`.
    Start,
    /// `Command::Stop`.
    Stop,
    /// The connection completed.
    Connected(u8),
    /// A response head with this status and an SSE or JSON content type.
    Head(u8, u16, bool),
    /// The same, with `X-LD-FD-Fallback: true` and an `X-LD-EnvID` (FDv2 directs FDv1
    /// fallback).
    FallbackHead(u8, u16, bool),
    /// Raw bytes.
    Data(u8, Vec<u8>),
    /// The connection closed (cleanly if `true`).
    Closed(u8, bool),
    /// `Input::Timeout`.
    Timeout,
}

/// A script replay that checks the core's invariants after every drain: a deadline
/// that fired moves forward, `poll_output` keeps returning `Wait` once drained, at most
/// one connection is open at a time (one source runs at a time, and it closes a
/// connection before it opens the next), under FDv1 rules an item's version never goes
/// backwards (or disappears) without a full replacement, nothing connects after `Stop`,
/// and nothing panics.
pub struct ScriptRun {
    /// The system.
    pub system: DataSystem,
    now: Instant,
    conns: Vec<ConnId>,
    open: HashSet<ConnId>,
    stopped: bool,
    /// Every output, for transcripts.
    pub outputs: Vec<Output>,
}

impl ScriptRun {
    /// Start replaying against `system`, whose clock starts at `origin`.
    pub fn new(system: DataSystem, origin: Instant) -> Self {
        Self {
            system,
            now: origin,
            conns: Vec::new(),
            open: HashSet::new(),
            stopped: false,
            outputs: Vec::new(),
        }
    }

    /// Feed one step and check the invariants.
    pub fn step(&mut self, step: &Step) {
        self.now += Duration::from_millis(u64::from(step.advance_ms));
        let conn =
            |conns: &[ConnId], i: u8| conns.get(usize::from(i) % conns.len().max(1)).copied();
        let head;
        let input = match &step.input {
            ScriptInput::Start => Input::Command(Command::Start),
            ScriptInput::Stop => {
                self.stopped = true;
                Input::Command(Command::Stop)
            }
            ScriptInput::Timeout => Input::Timeout,
            ScriptInput::Connected(i) => match conn(&self.conns, *i) {
                Some(conn) => Input::Connected { conn },
                None => return,
            },
            ScriptInput::Head(i, status, sse) | ScriptInput::FallbackHead(i, status, sse) => {
                let Some(conn) = conn(&self.conns, *i) else {
                    return;
                };
                let ct = if *sse {
                    "text/event-stream"
                } else {
                    "application/json"
                };
                let extra = if matches!(step.input, ScriptInput::FallbackHead(..)) {
                    "X-LD-FD-Fallback: true\r\nX-LD-EnvID: env-1\r\n"
                } else {
                    ""
                };
                head = format!("HTTP/1.1 {status} X\r\nContent-Type: {ct}\r\n{extra}\r\n");
                Input::Data {
                    conn,
                    bytes: head.as_bytes(),
                }
            }
            ScriptInput::Data(i, bytes) => match conn(&self.conns, *i) {
                Some(conn) => Input::Data { conn, bytes },
                None => return,
            },
            ScriptInput::Closed(i, clean) => match conn(&self.conns, *i) {
                Some(conn) => {
                    self.open.remove(&conn);
                    Input::Closed {
                        conn,
                        cause: if *clean {
                            CloseCause::Eof
                        } else {
                            CloseCause::Io(IoCause {
                                kind: std::io::ErrorKind::ConnectionReset,
                                message: "reset".into(),
                            })
                        },
                    }
                }
                None => return,
            },
        };
        let timeout = matches!(input, Input::Timeout);
        let before = self.system.snapshot();
        let full_transfers = self.system.store().full_transfers();
        self.system.handle_input(self.now, input);
        let fdv1_rules = self.system.mode() != crate::Mode::Fdv2;
        if fdv1_rules && self.system.store().full_transfers() == full_transfers {
            // Without a full replacement, FDv1 rules never move a version backwards.
            for kind in crate::Kind::ALL {
                for (key, old) in before.iter_including_deleted(kind) {
                    let new = self.system.store().data().get_including_deleted(kind, key);
                    assert!(
                        new.is_some_and(|n| n.version >= old.version),
                        "{kind}/{key} went from version {} to {:?}",
                        old.version,
                        new.map(|n| n.version)
                    );
                }
            }
        }
        loop {
            let out = self.system.poll_output();
            match &out {
                Output::Wait(deadline) => {
                    if timeout && let Some(d) = deadline {
                        assert!(
                            *d > self.now,
                            "deadline {d:?} did not move past {:?}",
                            self.now
                        );
                    }
                    assert_eq!(
                        self.system.poll_output(),
                        out,
                        "Wait must repeat until the next input"
                    );
                    self.outputs.push(out);
                    return;
                }
                Output::Action(Action::Connect { conn, .. }) => {
                    assert!(!self.stopped, "a connection after Stop, which is for good");
                    self.conns.push(*conn);
                    self.open.insert(*conn);
                    assert!(
                        self.open.len() <= 1,
                        "two connections open at once: {:?}",
                        self.open
                    );
                }
                Output::Action(Action::Close { conn }) => {
                    self.open.remove(conn);
                }
                _ => {}
            }
            self.outputs.push(out);
        }
    }
}
