//! Your own event loop, for real: the sans-I/O core driven by one `mio` loop on one
//! thread, no async runtime. https is rustls' own sans-I/O `ClientConnection`; flags
//! are evaluated by the pure engine over the core's snapshot; analytics events go out
//! through the core's `EventProcessor` over the same loop.
//!
//! ```text
//! cargo run -p flagsync-core --example custom_loop -- --base-uri http://127.0.0.1:8030 \
//!     --sdk-key KEY [--fdv2] --flag FLAG --context KEY|JSON [--duration SECS] [--ca-file PEM]
//! ```
//!
//! The contract, the same for both machines (`DataSystem` and `EventProcessor`):
//!
//! ```text
//!  socket readiness ─► Input::{Connected, Data, Closed} ─┐
//!  deadline passed  ─► Input::Timeout                    ├─► handle_input(now, input)
//!  the application  ─► Command / Record / Close          ┘
//!  then poll_output() until Wait:  Action::Connect → open a socket, write the request
//!                                  Action::Close   → drop the socket
//!                                  Event           → for the application
//!                                  Wait(deadline)  → the loop's poll timeout
//! ```
//!
//! Stdout, one line each: `initialized`, `value FLAG JSON` (whenever the value changes),
//! `events-sent N` (events in each delivered payload), and at exit
//! `footprint vm_hwm_kb=N threads=N`. Errors go to stderr.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::ToSocketAddrs;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flagsync_core::endpoint::Endpoint;
use flagsync_core::events::{self, EventContext, EventProcessor, EventsConfig, Record};
use flagsync_core::{Action, CloseCause, Command, Config, ConnId, DataSystem, Event, Input};
use flagsync_core::{IoCause, Mode, Output};
use flagsync_eval::{Context, ContextBuilder, Options, SlotModels, evaluate_flag};
use mio::net::TcpStream;
use mio::{Interest, Poll, Token};
use serde_json::Value;

/// The driver owns the clock: the core is handed `now`.
#[allow(clippy::disallowed_methods, reason = "the driver reads the clock")]
fn now() -> Instant {
    Instant::now()
}

/// Wall-clock time, for the events' creation dates.
#[allow(clippy::disallowed_methods, reason = "the driver reads the clock")]
fn unix_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

// ---- The command line ----------------------------------------------------------------

/// The value of `--name VALUE` on the command line.
fn opt(name: &str) -> Option<String> {
    let mut args = std::env::args().skip_while(|a| a != name);
    args.nth(1)
}

fn need(name: &str) -> Result<String, String> {
    opt(name).ok_or(format!("{name} is required"))
}

/// `--context`: a key, or LaunchDarkly context JSON (`{"kind":"user","key":"u1",...}`).
fn context_arg() -> Result<Context, String> {
    let arg = need("--context")?;
    let context = match arg.starts_with('{') {
        true => serde_json::from_str(&arg).map_err(|e| e.to_string()),
        false => ContextBuilder::new(arg).build().map_err(|e| e.to_string()),
    };
    context.map_err(|e| format!("--context: {e}"))
}

// ---- Sockets: the I/O the machines ask for --------------------------------------------

/// Which machine a connection belongs to (each numbers its own connections).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Data = 0,
    Events = 1,
}

/// A connection's poll token: its machine in the low bit, its id above.
fn token(owner: Owner, conn: ConnId) -> Token {
    Token(((conn.0 as usize) << 1) | owner as usize)
}

fn owner_of(token: Token) -> (Owner, ConnId) {
    (
        [Owner::Data, Owner::Events][token.0 & 1],
        ConnId((token.0 >> 1) as u64),
    )
}

/// What a socket did, for the machine that owns it.
enum Happened {
    Connected,
    Bytes(Vec<u8>),
    Closed(CloseCause),
}

/// One connection: a non-blocking socket, TLS over it for https, the request until sent.
struct Conn {
    sock: TcpStream,
    tls: Option<rustls::ClientConnection>,
    request: Vec<u8>,
    open: bool,
    reported: bool,
}

/// `WouldBlock` is "nothing now", not an error.
fn nonblocking(r: io::Result<usize>) -> io::Result<usize> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
        other => other,
    }
}

impl Conn {
    /// Move every byte that can move now (mio is edge-triggered: until `WouldBlock`).
    /// What happened goes to `out`; `Ok(true)` once the peer has closed.
    fn pump(&mut self, out: &mut Vec<Happened>) -> io::Result<bool> {
        if !self.open {
            if let Some(e) = self.sock.take_error()? {
                return Err(e);
            }
            match self.sock.peer_addr() {
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return Ok(false),
                connected => self.open = connected.is_ok(),
            }
        }
        let mut buf = [0u8; 16 * 1024];
        loop {
            // Write: the request (plain), or what TLS has to send (handshake, request).
            let wrote = nonblocking(match &mut self.tls {
                None if self.request.is_empty() => Ok(0),
                None => self.sock.write(&self.request),
                Some(tls) if tls.wants_write() => tls.write_tls(&mut self.sock),
                Some(_) => Ok(0),
            })?;
            if self.tls.is_none() {
                self.request.drain(..wrote);
            }
            let sent = match &self.tls {
                None => self.request.is_empty(),
                Some(tls) => !tls.is_handshaking() && !tls.wants_write(),
            };
            if sent && !self.reported {
                self.reported = true;
                out.push(Happened::Connected);
            }
            // Read: plain bytes, or TLS records to decrypt.
            let read = match &mut self.tls {
                None => self.sock.read(&mut buf),
                Some(tls) => tls.read_tls(&mut self.sock),
            };
            let eof = matches!(read, Ok(0));
            let read = nonblocking(read)?;
            match &mut self.tls {
                None if read > 0 => out.push(Happened::Bytes(buf[..read].to_vec())),
                None => {}
                Some(tls) => {
                    tls.process_new_packets().map_err(io::Error::other)?;
                    loop {
                        match tls.reader().read(&mut buf) {
                            Ok(0) => return Ok(true), // close_notify
                            Ok(n) => out.push(Happened::Bytes(buf[..n].to_vec())),
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock || eof => break,
                            Err(e) => return Err(e),
                        }
                    }
                }
            }
            if eof || wrote + read == 0 {
                return Ok(eof);
            }
        }
    }
}

/// The sockets of both machines, on one `mio::Poll`.
struct Net {
    poll: Poll,
    tls: Arc<rustls::ClientConfig>,
    conns: HashMap<Token, Conn>,
    /// Connections that failed before they had a socket, reported by the next `wait`.
    failed: Vec<(Token, Happened)>,
}

impl Net {
    fn new(tls: Arc<rustls::ClientConfig>) -> io::Result<Self> {
        let (conns, failed) = (HashMap::new(), Vec::new());
        Ok(Self {
            poll: Poll::new()?,
            tls,
            conns,
            failed,
        })
    }

    /// Perform an action of `owner`'s.
    fn act(&mut self, owner: Owner, action: Action) {
        match action {
            Action::Connect {
                conn,
                endpoint,
                request,
            } => {
                if let Err(e) = self.connect(token(owner, conn), &endpoint, &request) {
                    self.failed
                        .push((token(owner, conn), Happened::Closed(cause(&e))));
                }
            }
            Action::Close { conn } => self.close(token(owner, conn)),
            other => eprintln!("unsupported action {other:?}"),
        }
    }

    /// Open a non-blocking socket; the request is written once it is connected (for
    /// https, after the TLS handshake).
    fn connect(&mut self, token: Token, ep: &Endpoint, request: &[u8]) -> io::Result<()> {
        let addr = (ep.host.as_str(), ep.port).to_socket_addrs()?.next();
        let mut sock = TcpStream::connect(addr.ok_or(io::ErrorKind::NotFound)?)?;
        let (mut tls, mut request) = (None, request.to_vec());
        if ep.tls {
            let name = rustls::pki_types::ServerName::try_from(ep.host.clone());
            let name = name.map_err(io::Error::other)?;
            let conn = rustls::ClientConnection::new(self.tls.clone(), name);
            let mut conn = conn.map_err(io::Error::other)?;
            // rustls keeps it until the handshake is done.
            conn.writer().write_all(&std::mem::take(&mut request))?;
            tls = Some(conn);
        }
        let interest = Interest::READABLE | Interest::WRITABLE;
        self.poll.registry().register(&mut sock, token, interest)?;
        let (open, reported) = (false, false);
        self.conns.insert(
            token,
            Conn {
                sock,
                tls,
                request,
                open,
                reported,
            },
        );
        Ok(())
    }

    /// Drop the socket, which closes it.
    fn close(&mut self, token: Token) {
        if let Some(mut conn) = self.conns.remove(&token) {
            let _ = self.poll.registry().deregister(&mut conn.sock);
        }
    }

    /// Wait for readiness until `deadline`, then pump the ready sockets.
    fn wait(&mut self, deadline: Option<Instant>) -> io::Result<Vec<(Token, Happened)>> {
        let mut happened = std::mem::take(&mut self.failed);
        let timeout = if happened.is_empty() {
            deadline.map(|d| d.saturating_duration_since(now()))
        } else {
            Some(Duration::ZERO) // report the failed connections at once
        };
        let mut events = mio::Events::with_capacity(64);
        match self.poll.poll(&mut events, timeout) {
            Err(e) if e.kind() != io::ErrorKind::Interrupted => return Err(e),
            _ => {}
        }
        for token in events.iter().map(mio::event::Event::token) {
            let Some(conn) = self.conns.get_mut(&token) else {
                continue;
            };
            let mut out = Vec::new();
            let closed = match conn.pump(&mut out) {
                Ok(eof) => eof.then_some(CloseCause::Eof),
                Err(e) => Some(cause(&e)),
            };
            happened.extend(out.into_iter().map(|h| (token, h)));
            if let Some(c) = closed {
                self.close(token);
                happened.push((token, Happened::Closed(c)));
            }
        }
        Ok(happened)
    }
}

fn cause(e: &io::Error) -> CloseCause {
    let (kind, message) = (e.kind(), e.to_string());
    CloseCause::Io(IoCause { kind, message })
}

/// Trust webpki's roots, and the certificates of `--ca-file` (a local test CA).
fn tls_config(ca_file: Option<&str>) -> Result<rustls::ClientConfig, Box<dyn std::error::Error>> {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_file {
        for cert in CertificateDer::pem_file_iter(path)? {
            roots.add(cert?)?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}

// ---- The loop: two machines, one socket set, one clock ----------------------------

struct Driver {
    data: DataSystem,
    events: EventProcessor,
    net: Net,
    /// The watched flag, who it is evaluated for, and the last value printed.
    flag: String,
    context: Context,
    event_context: Arc<EventContext>,
    last: Option<Value>,
}

impl Driver {
    /// Drain the data system: perform its actions, handle its events; its deadline.
    fn drain_data(&mut self, at: Instant) -> Option<Instant> {
        let mut changed = false;
        loop {
            match self.data.poll_output() {
                Output::Action(action) => self.net.act(Owner::Data, action),
                Output::Event(Event::Ready) if self.data.initialized() => println!("initialized"),
                Output::Event(Event::Ready) => eprintln!("gave up: {:?}", self.data.status()),
                Output::Event(Event::StoreChanged { .. }) => changed = true,
                Output::Event(Event::StatusChanged(s)) if s.error.is_some() => {
                    eprintln!("status {:?}: {:?}", s.state, s.error);
                }
                Output::Event(_) | Output::Persist(_) => {} // no persistent store here
                Output::Wait(deadline) => {
                    if changed && self.data.initialized() {
                        self.evaluate(at);
                    }
                    return deadline;
                }
            }
        }
    }

    /// Drain the event processor: perform its actions; its deadline, and whether it
    /// has closed.
    fn drain_events(&mut self) -> (Option<Instant>, bool) {
        let mut closed = false;
        loop {
            match self.events.poll_output() {
                events::Output::Action(action) => self.net.act(Owner::Events, action),
                events::Output::Event(events::Event::Delivered { events: n }) => {
                    println!("events-sent {n}");
                }
                events::Output::Event(events::Event::Closed) => closed = true,
                events::Output::Event(other) => eprintln!("events: {other:?}"),
                events::Output::Wait(deadline) => return (deadline, closed),
                _ => {}
            }
        }
    }

    /// Hand what a socket did to the machine that owns it.
    fn feed(&mut self, token: Token, what: Happened) {
        use Happened::{Bytes, Closed, Connected};
        use events::Input as EvIn;
        let (at, (owner, conn)) = (now(), owner_of(token));
        let (data, ev) = (&mut self.data, &mut self.events);
        match (owner, what) {
            (Owner::Data, Connected) => data.handle_input(at, Input::Connected { conn }),
            (Owner::Data, Bytes(b)) => data.handle_input(at, Input::Data { conn, bytes: &b }),
            (Owner::Data, Closed(cause)) => data.handle_input(at, Input::Closed { conn, cause }),
            (Owner::Events, Connected) => ev.handle_input(at, EvIn::Connected { conn }),
            (Owner::Events, Bytes(b)) => ev.handle_input(at, EvIn::Data { conn, bytes: &b }),
            (Owner::Events, Closed(cause)) => ev.handle_input(at, EvIn::Closed { conn, cause }),
        }
    }

    /// Evaluate the flag over the data system's snapshot with the pure engine, record
    /// the evaluation for analytics, and print the value if it changed.
    fn evaluate(&mut self, at: Instant) {
        let (flag, context) = (self.flag.as_str(), &self.context);
        let snapshot = self.data.snapshot();
        let options = Options::default();
        let (value, record) =
            evaluate_flag(&snapshot, &SlotModels, flag, context, options, |f, d| {
                let value = d.value.and_then(|v| v.as_json()).unwrap_or(Value::Null);
                let record = events::Evaluation {
                    creation_date: unix_ms(),
                    context: self.event_context.clone(),
                    key: flag.to_owned(),
                    version: f.map(|f| f.version),
                    variation: d.variation_index.and_then(|i| usize::try_from(i).ok()),
                    value: value.clone(),
                    default: Value::Null,
                    reason: None,
                    prereq_of: None,
                    // The flag's, a tracked rule or fallthrough, or an experiment.
                    track_events: f
                        .is_some_and(|f| f.track_events || f.is_experimentation_enabled(&d.reason)),
                    debug_events_until_date: f.and_then(|f| f.debug_events_until_date),
                    sampling_ratio: f.and_then(|f| f.sampling_ratio).map(u64::from),
                    exclude_from_summaries: f.is_some_and(|f| f.exclude_from_summaries),
                    summarized: false,
                };
                (value, record)
            });
        let record = events::Input::Record(Record::Evaluation(record));
        self.events.handle_input(at, record);
        if self.last.as_ref() != Some(&value) {
            println!("value {flag} {value}");
            self.last = Some(value);
        }
    }

    fn record(&mut self, at: Instant, record: Record) {
        self.events.handle_input(at, events::Input::Record(record));
    }

    /// Run until `end`, then stop the data system and close the event processor, which
    /// sends what is queued first (given `grace` at most).
    fn run(&mut self, end: Option<Instant>, grace: Duration) -> io::Result<()> {
        let context = self.event_context.clone();
        let at = now();
        self.data.handle_input(at, Input::Command(Command::Start));
        let creation_date = unix_ms();
        self.record(
            at,
            Record::Identify(events::Identify {
                creation_date,
                context,
            }),
        );
        let mut give_up = None;
        loop {
            let at = now();
            let data_wait = self.drain_data(at);
            let (events_wait, closed) = self.drain_events();
            if closed || give_up.is_some_and(|t| at >= t) {
                return Ok(());
            }
            if give_up.is_none() && end.is_some_and(|end| at >= end) {
                give_up = Some(at + grace);
                self.data.handle_input(at, Input::Command(Command::Stop));
                self.record(at, Record::Custom(self.exit_event()));
                self.events.handle_input(at, events::Input::Close);
                continue;
            }
            let deadline = [data_wait, events_wait, give_up.or(end)]
                .into_iter()
                .flatten();
            for (token, what) in self.net.wait(deadline.min())? {
                self.feed(token, what);
            }
            let at = now();
            if data_wait.is_some_and(|d| at >= d) {
                self.data.handle_input(at, Input::Timeout);
            }
            if events_wait.is_some_and(|d| at >= d) {
                self.events.handle_input(at, events::Input::Timeout);
            }
        }
    }

    /// A custom event, sent at exit.
    fn exit_event(&self) -> events::Custom {
        events::Custom {
            creation_date: unix_ms(),
            context: self.event_context.clone(),
            key: "custom-loop-exit".into(),
            data: None,
            metric_value: None,
        }
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("custom_loop: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let (base_uri, sdk_key, flag) = (need("--base-uri")?, need("--sdk-key")?, need("--flag")?);
    let duration = opt("--duration").map(|s| s.parse::<f64>()).transpose()?;
    let start = now();
    let seed = unix_ms() ^ u64::from(std::process::id()); // backoff jitter, payload ids
    let mut config = Config::new(sdk_key.clone());
    config.stream_uri.clone_from(&base_uri);
    config.polling_uri.clone_from(&base_uri);
    if std::env::args().any(|a| a == "--fdv2") {
        config.mode = Mode::Fdv2; // its default data system (else FDv1 streaming)
    }
    let mut events = EventsConfig::new(sdk_key);
    events.events_uri = base_uri;
    let tls = Arc::new(tls_config(opt("--ca-file").as_deref())?);
    let context = context_arg()?;
    let mut driver = Driver {
        data: DataSystem::new(config, seed, start)?,
        events: EventProcessor::new(events, seed, start, unix_ms()),
        net: Net::new(tls)?,
        event_context: Arc::new(context.to_event_context()?),
        flag,
        context,
        last: None,
    };
    let end = duration.map(|d| start + Duration::from_secs_f64(d));
    driver.run(end, Duration::from_secs(5))?;
    // Peak resident memory and threads, as the kernel counts them.
    let status = std::fs::read_to_string("/proc/self/status")?;
    let field = |name| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or("?")
    };
    let hwm = field("VmHWM:").trim().trim_end_matches(" kB");
    println!(
        "footprint vm_hwm_kb={hwm} threads={}",
        field("Threads:").trim()
    );
    Ok(())
}
