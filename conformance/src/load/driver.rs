//! The load loop of `sse-load`: one mio poll that drives the streams ([`Conn`]) and the
//! idle connections ([`IdleConns`]), samples the serving process, and writes the
//! changes.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

use crate::conn::{Conn, Failure, Happening, Marker};
use crate::idle::IdleConns;
use crate::measure::{ProcSample, Trigger};
use crate::tls::TlsClient;

/// Size of the one read buffer all streams share.
const READ_BUF: usize = 64 * 1024;
/// How often the serving process is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// How often progress is reported while connecting.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);
/// The first token of the idle connections (the streams' are their indexes).
const IDLE_TOKENS: usize = 1 << 30;

/// Prints the human-readable lines: to stdout, or to stderr when stdout is for JSON.
#[derive(Debug)]
pub struct Say {
    /// Standard output carries the JSON report.
    pub to_stderr: bool,
}

impl Say {
    /// Print one line.
    pub fn line(&self, text: &str) {
        if self.to_stderr {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    }
}

/// What was measured of one change.
#[derive(Debug, Default)]
pub struct Change {
    /// When the new data file was in place.
    t0: Option<Instant>,
    /// Latency of each stream that reached it within the timeout.
    pub latencies: Vec<Duration>,
    /// Of those, how many reached it only through a later change's event.
    pub superseded: usize,
    /// Streams that reached it after the timeout.
    pub late: usize,
}

/// How the load runs (from the command line).
#[derive(Debug)]
pub struct Settings {
    /// Streams to open.
    pub streams: usize,
    /// Read FDv2 events (else FDv1).
    pub fdv2: bool,
    /// TLS for the streams.
    pub tls: Option<TlsClient>,
    /// Most connects in flight at once.
    pub max_connecting: usize,
    /// Most connects started a second.
    pub rate: Option<f64>,
    /// How long after its write a change may take to reach a stream.
    pub change_timeout: Duration,
    /// The serving process to sample.
    pub serve_pid: Option<u32>,
}

/// The streams, the idle connections and the one poll that drives them.
pub struct Load {
    poll: Poll,
    events: Events,
    ready: Vec<(usize, bool, bool)>,
    conns: Vec<Option<Conn>>,
    addr: SocketAddr,
    fdv2: bool,
    tls: Option<TlsClient>,
    /// The requests streams send: stream `i` sends `requests[i % len]`.
    requests: Vec<Vec<u8>>,
    marker: Marker,
    buf: Vec<u8>,
    out: Vec<Happening>,
    /// Connections to open in all.
    total: usize,
    started: usize,
    in_flight: usize,
    max_connecting: usize,
    rate: Option<f64>,
    began: Instant,
    /// Connect + initial payload latency of each initialized stream.
    pub initial: Vec<Duration>,
    /// Streams that got their initial payload.
    pub initialized: usize,
    failed_before_init: usize,
    /// Streams that failed after their initial payload.
    pub failed_after_init: usize,
    /// Stream failures by label.
    pub failures: BTreeMap<String, usize>,
    /// Heartbeats received, all streams.
    pub heartbeats: u64,
    /// The changes made.
    pub changes: Vec<Change>,
    /// Streams that reached the last change.
    reached_last: usize,
    change_timeout: Duration,
    /// The serving process, sampled every [`SAMPLE_EVERY`] so that its peak is known
    /// even if it dies.
    serve_pid: Option<u32>,
    /// The largest figures seen of the serving process.
    pub serve_peak: Option<ProcSample>,
    /// The serving process could no longer be read.
    pub serve_gone: bool,
    next_sample: Instant,
    /// The idle connections (`--idle-conns`), once opened.
    pub idle: Option<IdleConns>,
}

impl Load {
    /// The loop, before any connection.
    pub fn new(
        settings: Settings,
        addr: SocketAddr,
        requests: Vec<Vec<u8>>,
        marker: Marker,
    ) -> io::Result<Self> {
        let total = settings.streams;
        Ok(Self {
            poll: Poll::new()?,
            events: Events::with_capacity(4096),
            ready: Vec::new(),
            conns: Vec::with_capacity(total),
            addr,
            fdv2: settings.fdv2,
            tls: settings.tls,
            requests,
            marker,
            buf: vec![0; READ_BUF],
            out: Vec::new(),
            total,
            started: 0,
            in_flight: 0,
            max_connecting: settings.max_connecting.max(1),
            rate: settings.rate.filter(|r| *r > 0.0),
            began: Instant::now(),
            initial: Vec::with_capacity(total),
            initialized: 0,
            failed_before_init: 0,
            failed_after_init: 0,
            failures: BTreeMap::new(),
            heartbeats: 0,
            changes: Vec::new(),
            reached_last: 0,
            change_timeout: settings.change_timeout,
            serve_pid: settings.serve_pid,
            serve_peak: None,
            serve_gone: false,
            next_sample: Instant::now(),
            idle: None,
        })
    }

    /// Read the serving process now (`None` without `--serve-pid` or once it is gone),
    /// keeping its peak figures.
    pub fn sample_serve(&mut self) -> Option<ProcSample> {
        let pid = self.serve_pid.filter(|_| !self.serve_gone)?;
        self.next_sample = Instant::now() + SAMPLE_EVERY;
        match ProcSample::read(Some(pid)) {
            Ok(sample) if !sample.is_zombie => {
                let peak = self.serve_peak.get_or_insert(sample);
                peak.hwm_kb = peak.hwm_kb.max(sample.hwm_kb);
                peak.rss_kb = peak.rss_kb.max(sample.rss_kb);
                peak.threads = peak.threads.max(sample.threads);
                Some(sample)
            }
            _ => {
                self.serve_gone = true;
                None
            }
        }
    }

    /// Streams that got their initial payload and are still open.
    pub fn alive(&self) -> usize {
        self.initialized - self.failed_after_init
    }

    /// Open every connection and wait until each has its initial payload or failed,
    /// until `deadline`; streams still waiting then fail.
    pub fn connect_all(&mut self, say: &Say, deadline: Instant) -> Result<(), String> {
        self.began = Instant::now();
        let mut next_progress = self.began + PROGRESS_EVERY;
        while self.initialized + self.failed_before_init < self.total {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            if now >= next_progress {
                next_progress = now + PROGRESS_EVERY;
                say.line(&format!(
                    "  … {:.0} s: {} started, {} connecting, {} initialized, {} failed",
                    (now - self.began).as_secs_f64(),
                    self.started,
                    self.in_flight,
                    self.initialized,
                    self.failed_before_init
                ));
            }
            self.turn(deadline.min(next_progress))?;
        }
        // Whatever is left missed the deadline, started or not.
        for i in 0..self.conns.len() {
            if self.conns[i].as_ref().is_some_and(|c| !c.is_initialized()) {
                self.fail(i, Failure::Timeout);
            }
        }
        let never_started = self.total - self.started;
        if never_started > 0 {
            *self.failures.entry(Failure::Timeout.label()).or_default() += never_started;
            self.failed_before_init += never_started;
            self.started = self.total;
        }
        Ok(())
    }

    /// Keep reading every stream until `deadline`.
    pub fn run_until(&mut self, deadline: Instant) -> Result<(), String> {
        while Instant::now() < deadline {
            self.turn(deadline)?;
        }
        Ok(())
    }

    /// Open `count` idle connections, at most `max_connecting` connects in flight, and
    /// wait until each has connected or failed, until `deadline`.
    pub fn open_idle(&mut self, count: usize, deadline: Instant) -> Result<(), String> {
        self.idle = Some(IdleConns::new(count, IDLE_TOKENS));
        while Instant::now() < deadline && !self.idle.as_ref().is_some_and(IdleConns::settled) {
            self.turn(deadline)?;
        }
        Ok(())
    }

    /// Write `count` changes `interval` apart and wait for them to reach every stream.
    pub fn make_changes(
        &mut self,
        count: usize,
        interval: Duration,
        trigger: &Trigger,
    ) -> Result<(), String> {
        self.changes = (0..count).map(|_| Change::default()).collect();
        let mut at = Instant::now();
        for k in 0..count {
            // Counted from the previous write, so that a busy loop never writes two
            // changes closer together than the interval.
            self.run_until(at)?;
            let index = u32::try_from(k + 1).unwrap_or(u32::MAX);
            trigger
                .write(&self.marker.value(index))
                .map_err(|e| format!("cannot write the trigger file: {e}"))?;
            let t0 = Instant::now();
            self.changes[k].t0 = Some(t0);
            at = t0 + interval;
        }
        let last = self.changes.last().and_then(|c| c.t0);
        if let Some(last) = last {
            let deadline = last + self.change_timeout;
            while Instant::now() < deadline && self.reached_last < self.alive() {
                self.turn(deadline)?;
            }
        }
        Ok(())
    }

    /// Start what may be started, wait for readiness until `until` at the latest, and
    /// handle it.
    fn turn(&mut self, until: Instant) -> Result<(), String> {
        let mut wake = until;
        if let Some(next) = self.start_connections() {
            wake = wake.min(next);
        }
        if let Some(idle) = &mut self.idle {
            idle.start(self.poll.registry(), self.addr, self.max_connecting);
        }
        if self.serve_pid.is_some() && !self.serve_gone {
            if Instant::now() >= self.next_sample {
                self.sample_serve();
            }
            wake = wake.min(self.next_sample);
        }
        let timeout = wake.saturating_duration_since(Instant::now());
        match self.poll.poll(&mut self.events, Some(timeout)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(format!("poll: {e}")),
        }
        self.ready.clear();
        for event in &self.events {
            let readable = event.is_readable() || event.is_read_closed() || event.is_error();
            self.ready
                .push((event.token().0, readable, event.is_writable()));
        }
        for r in 0..self.ready.len() {
            let (i, readable, writable) = self.ready[r];
            self.handle(i, readable, writable);
        }
        Ok(())
    }

    /// Start connections while the limits allow; when the rate holds the next one back,
    /// the time it may start.
    fn start_connections(&mut self) -> Option<Instant> {
        while self.started < self.total && self.in_flight < self.max_connecting {
            let now = Instant::now();
            if let Some(rate) = self.rate {
                let due = self.began + Duration::from_secs_f64(self.started as f64 / rate);
                if due > now {
                    return Some(due);
                }
            }
            let i = self.conns.len();
            self.started += 1;
            let conn =
                Conn::connect(now, self.addr, self.tls.as_ref(), self.fdv2).and_then(|mut conn| {
                    self.poll.registry().register(
                        conn.stream.socket(),
                        Token(i),
                        Interest::READABLE | Interest::WRITABLE,
                    )?;
                    Ok(conn)
                });
            match conn {
                Ok(conn) => {
                    self.conns.push(Some(conn));
                    self.in_flight += 1;
                }
                Err(e) => {
                    self.conns.push(None);
                    self.count_failure(&Failure::Connect(e.kind()), false);
                }
            }
        }
        None
    }

    /// Handle readiness of stream `i` (or of an idle connection).
    fn handle(&mut self, i: usize, readable: bool, writable: bool) {
        if let Some(idle) = self.idle.as_mut().filter(|idle| idle.owns(i)) {
            idle.handle(self.poll.registry(), i, writable, &mut self.buf);
            return;
        }
        let Some(Some(conn)) = self.conns.get_mut(i) else {
            return;
        };
        let was_connecting = conn.is_connecting();
        if writable {
            let request = &self.requests[i % self.requests.len()];
            conn.handle_writable(request, &mut self.out);
        }
        if readable {
            conn.handle_readable(&mut self.buf, &self.marker, &mut self.out);
        }
        if was_connecting && !conn.is_connecting() {
            self.in_flight -= 1;
        }
        let now = Instant::now();
        let mut out = std::mem::take(&mut self.out);
        for happening in out.drain(..) {
            self.apply(i, now, happening);
        }
        self.out = out;
    }

    /// Record what stream `i` reported.
    fn apply(&mut self, i: usize, now: Instant, happening: Happening) {
        let Some(Some(conn)) = self.conns.get_mut(i) else {
            return;
        };
        match happening {
            Happening::Initialized => {
                self.initialized += 1;
                self.initial.push(now - conn.started);
            }
            Happening::Heartbeat => self.heartbeats += 1,
            Happening::Reached(index) => {
                let written = self.changes.iter().take_while(|c| c.t0.is_some()).count();
                let index = (index as usize).min(written);
                let from = conn.reached as usize;
                for k in from..index {
                    let change = &mut self.changes[k];
                    let latency = change.t0.map_or(Duration::ZERO, |t0| now - t0);
                    if latency > self.change_timeout {
                        change.late += 1;
                        continue;
                    }
                    change.latencies.push(latency);
                    if k + 1 < index {
                        change.superseded += 1;
                    }
                }
                if index > from {
                    conn.reached = u32::try_from(index).unwrap_or(u32::MAX);
                    if index == self.changes.len() {
                        self.reached_last += 1;
                    }
                }
            }
            Happening::Failed(failure) => {
                let initialized = conn.is_initialized();
                self.count_failure(&failure, initialized);
                self.close(i);
            }
        }
    }

    /// Fail stream `i` from outside (a timeout).
    fn fail(&mut self, i: usize, failure: Failure) {
        if let Some(Some(conn)) = self.conns.get_mut(i) {
            if conn.is_connecting() {
                self.in_flight -= 1;
            }
            let initialized = conn.is_initialized();
            self.count_failure(&failure, initialized);
            self.close(i);
        }
    }

    fn count_failure(&mut self, failure: &Failure, initialized: bool) {
        *self.failures.entry(failure.label()).or_default() += 1;
        if initialized {
            self.failed_after_init += 1;
        } else {
            self.failed_before_init += 1;
        }
    }

    /// Drop stream `i`'s socket.
    fn close(&mut self, i: usize) {
        if let Some(mut conn) = self.conns.get_mut(i).and_then(Option::take) {
            let _ = self.poll.registry().deregister(conn.stream.socket());
        }
    }
}
