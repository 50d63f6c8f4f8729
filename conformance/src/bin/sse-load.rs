//! `sse-load`: hold many downstream SSE streams of one flag server from one thread, and
//! measure its fan-out.
//!
//! ```text
//! sse-load --url http://127.0.0.1:PORT --streams N [--fdv2] [--sdk-key KEY]
//!          [--connect-rate R] [--max-connecting C] [--initial-timeout-secs T]
//!          [--serve-pid PID] [--idle-secs S]
//!          [--trigger-file PATH --changes K --interval-ms M --change-timeout-ms D]
//!          [--json]
//! ```
//!
//! Phases, in order:
//!
//! 1. **connect**: open N connections (`GET /all`, or `GET /sdk/stream` with `--fdv2`),
//!    at most C connects in flight, at most R started a second if given, and wait for
//!    each one's first full payload (FDv1 `put`; FDv2 `payload-transferred`). Latency:
//!    from the start of the connect to the end of that payload.
//! 2. **idle** (S seconds; 10 by default with `--serve-pid`): every stream keeps being
//!    read; heartbeats are counted; the server's RSS and CPU ticks are sampled at the
//!    start and the end.
//! 3. **changes** (with `--trigger-file`): K times, M ms apart, the data file that
//!    `flagsync serve --data` watches is rewritten with flag `load-flag`'s `salt` set to
//!    a marker unique to this run and change; t0 is the time the new file is in place.
//!    A stream reaches change k when it applies an event that carries marker k or a
//!    later one (FDv1 `put` or `patch`; FDv2 the `payload-transferred` after the
//!    `put-object`). Reached through a later marker only, the change is "superseded".
//!
//! The server's memory is read from `/proc/PID/status` (VmRSS, VmHWM, Threads) and its
//! CPU time from `/proc/PID/stat` (utime + stime). The exit status is 0 only if every
//! stream got its initial payload, none failed later, and every change reached every
//! stream within the change timeout. With `--json` one JSON object goes to standard
//! output and the human-readable lines to standard error.
#![forbid(unsafe_code)]

#[path = "../load/conn.rs"]
mod conn;
#[path = "../load/measure.rs"]
mod measure;

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use flagsync_core::endpoint::Url;
use flagsync_core::http1::{Method, RequestHead};
use mio::{Events, Interest, Poll, Token};
use serde_json::json;

use conn::{Conn, Failure, Happening, Marker};
use measure::{Percentiles, ProcSample, Trigger, cpu_percent, cpu_seconds, listen_overflows};

/// Size of the one read buffer all streams share.
const READ_BUF: usize = 64 * 1024;
/// File descriptors kept for everything but the streams.
const SPARE_FDS: u64 = 64;
/// How often the serving process is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// How often progress is reported while connecting.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// The command line.
#[derive(Debug, clap::Parser)]
#[command(
    name = "sse-load",
    about = "Hold many SSE streams of a flag server from one thread and measure its fan-out"
)]
struct Args {
    /// Base URL of the server (http only), e.g. http://127.0.0.1:8030.
    #[arg(long)]
    url: String,
    /// How many streams to hold.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    streams: u32,
    /// Use FDv2 (`GET /sdk/stream`) instead of FDv1 (`GET /all`).
    #[arg(long)]
    fdv2: bool,
    /// The SDK key, sent as the Authorization header.
    #[arg(long, value_name = "KEY")]
    sdk_key: Option<String>,
    /// Start at most this many connections a second (default: all at once, bounded by
    /// --max-connecting).
    #[arg(long, value_name = "PER_SEC")]
    connect_rate: Option<f64>,
    /// Most connections whose TCP connect and request are still in flight.
    #[arg(long, value_name = "C", default_value_t = 1000)]
    max_connecting: usize,
    /// Streams without their initial payload after this long count as failed.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    initial_timeout_secs: u64,
    /// The serving process: sample its RSS, peak RSS and CPU time from /proc.
    #[arg(long, value_name = "PID")]
    serve_pid: Option<u32>,
    /// Seconds to hold every stream idle after connecting (default 10 with --serve-pid,
    /// else 0).
    #[arg(long, value_name = "SECS")]
    idle_secs: Option<u64>,
    /// The JSON data file the server watches (`flagsync serve --data FILE`): rewritten
    /// for each change, other flags kept.
    #[arg(long, value_name = "PATH")]
    trigger_file: Option<PathBuf>,
    /// How many changes to make (with --trigger-file).
    #[arg(long, value_name = "K", default_value_t = 3, requires = "trigger_file")]
    changes: u32,
    /// Milliseconds between changes.
    #[arg(long, value_name = "M", default_value_t = 1000)]
    interval_ms: u64,
    /// How long after its write a change may take to reach a stream.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    change_timeout_ms: u64,
    /// Print one JSON object on standard output (the other lines go to standard error).
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("sse-load: {message}");
            ExitCode::from(2)
        }
    }
}

/// Prints the human-readable lines: to stdout, or to stderr when stdout is for JSON.
struct Say {
    to_stderr: bool,
}

impl Say {
    fn line(&self, text: &str) {
        if self.to_stderr {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    }
}

/// Run every phase; `Ok(false)` when a stream failed or missed a change.
fn run(args: &Args) -> Result<bool, String> {
    let say = Say {
        to_stderr: args.json,
    };
    let streams = args.streams as usize;
    let nofile = raise_nofile(streams)?;
    say.line(&format!(
        "file descriptors: soft limit {} (hard {})",
        nofile.0, nofile.1
    ));
    let (addr, request) = request(args)?;
    let run_id = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ (u64::from(std::process::id()) << 40);
    let marker = Marker::new(&format!("sse-load-{run_id:016x}-"));
    let trigger = args
        .trigger_file
        .as_deref()
        .map(Trigger::load)
        .transpose()?;
    let baseline = args
        .serve_pid
        .map(|pid| {
            ProcSample::read(Some(pid))
                .map_err(|e| format!("--serve-pid: cannot read /proc/{pid}: {e}"))
        })
        .transpose()?;
    let mut load = Load::new(args, addr, request, marker).map_err(|e| e.to_string())?;
    load.serve_peak = baseline;
    let mut report = json!({
        "url": args.url, "protocol": if args.fdv2 { "fdv2" } else { "fdv1" },
        "streams": streams, "nofile_soft_limit": nofile.0,
    });

    // 1. Connect.
    let overflows = listen_overflows();
    let began = Instant::now();
    load.connect_all(&say, began + Duration::from_secs(args.initial_timeout_secs))?;
    let connect_secs = began.elapsed().as_secs_f64();
    let overflows = overflows
        .zip(listen_overflows())
        .map(|(before, after)| after.saturating_sub(before));
    let initial = Percentiles::of(&mut load.initial);
    say.line(&format!(
        "connect: {}/{streams} streams got their initial payload in {connect_secs:.2} s; connect + initial payload {}",
        load.initialized,
        initial.describe()
    ));
    if let Some(n) = overflows.filter(|n| *n > 0) {
        say.line(&format!(
            "  {n} listen-queue overflows while connecting (TcpExt ListenOverflows, whole host: a dropped handshake is retried a second or more later)"
        ));
    }
    if !load.failures.is_empty() {
        say.line(&format!("  failures: {}", describe_counts(&load.failures)));
    }
    let after_connect = load.sample_serve();
    report["connect"] = json!({
        "initialized": load.initialized, "seconds": round3(connect_secs),
        "latency_ms": initial.to_json(), "failures": load.failures.clone(),
        "listen_overflows": overflows,
    });

    // 2. Idle.
    let idle_secs = args
        .idle_secs
        .unwrap_or(if args.serve_pid.is_some() { 10 } else { 0 });
    if idle_secs > 0 {
        let heartbeats = load.heartbeats;
        let start = load.sample_serve();
        let from = Instant::now();
        load.run_until(from + Duration::from_secs(idle_secs))?;
        let elapsed = from.elapsed();
        let end = load.sample_serve();
        let beats = load.heartbeats - heartbeats;
        let alive = load.alive();
        report["idle"] = json!({
            "seconds": round3(elapsed.as_secs_f64()), "heartbeats": beats, "streams": alive,
        });
        let mut line = format!(
            "idle: {:.1} s, {alive} streams open, {beats} heartbeats received",
            elapsed.as_secs_f64()
        );
        if let (Some(base), Some(start), Some(end)) = (baseline, start, end) {
            let per_stream = end.rss_kb.saturating_sub(base.rss_kb) as f64 / alive.max(1) as f64;
            let cpu = cpu_percent(start, end, elapsed);
            report["idle"]["serve"] = json!({
                "baseline_rss_kb": base.rss_kb, "rss_kb": end.rss_kb, "threads": end.threads,
                "rss_per_stream_kb": round3(per_stream), "cpu_percent_of_one_core": cpu,
            });
            line += &format!(
                "; serve RSS {} kB (baseline {} kB: {per_stream:.1} kB per stream), CPU {cpu} % of one core, {} threads",
                end.rss_kb, base.rss_kb, end.threads
            );
        }
        say.line(&line);
    }

    // 3. Changes.
    let mut changes_ok = true;
    if let Some(trigger) = &trigger {
        let expected = load.alive();
        load.make_changes(args, trigger)?;
        let mut all = Vec::new();
        let mut list = Vec::new();
        for (i, change) in load.changes.iter_mut().enumerate() {
            let received = change.latencies.len();
            let missed = expected.saturating_sub(received);
            changes_ok &= missed == 0;
            all.extend_from_slice(&change.latencies);
            let p = Percentiles::of(&mut change.latencies);
            say.line(&format!(
                "change {}: {received}/{expected} streams within {} ms ({} superseded, {} late); {}",
                i + 1,
                args.change_timeout_ms,
                change.superseded,
                change.late,
                p.describe()
            ));
            list.push(json!({
                "index": i + 1, "expected": expected, "received": received,
                "superseded": change.superseded, "late": change.late, "missed": missed,
                "latency_ms": p.to_json(),
            }));
        }
        let overall = Percentiles::of(&mut all);
        say.line(&format!(
            "changes: {} of {} deliveries within {} ms; {}",
            overall.count,
            expected * list.len(),
            args.change_timeout_ms,
            overall.describe()
        ));
        report["changes"] = json!({
            "count": list.len(), "interval_ms": args.interval_ms,
            "timeout_ms": args.change_timeout_ms, "data_file_bytes": trigger.len(),
            "per_change": list, "overall": {"received": overall.count, "latency_ms": overall.to_json()},
        });
    }

    // Totals.
    let end = load.sample_serve();
    if let (Some(pid), Some(peak)) = (args.serve_pid, load.serve_peak) {
        if load.serve_gone {
            say.line(&format!(
                "serve (pid {pid}) EXITED during the run; the most it was seen to use: VmHWM {} kB, {} threads",
                peak.hwm_kb, peak.threads
            ));
        }
        report["serve_exited"] = json!(load.serve_gone);
        report["serve_peak_seen"] = peak.to_json();
    }
    if let (Some(base), Some(connected), Some(end)) = (baseline, after_connect, end) {
        say.line(&format!(
            "serve peak RSS (VmHWM): {} kB at the start, {} kB after connecting, {} kB at the end; RSS now {} kB, {} threads",
            base.hwm_kb, connected.hwm_kb, end.hwm_kb, end.rss_kb, end.threads
        ));
        report["serve"] = json!({
            "baseline": base.to_json(), "after_connect": connected.to_json(), "end": end.to_json(),
        });
    }
    let own = ProcSample::read(None).unwrap_or_default();
    let own_cpu = round3(cpu_seconds(own));
    say.line(&format!(
        "sse-load: peak RSS {} kB, {own_cpu} s of CPU; {} heartbeats in all; {} streams failed after their initial payload",
        own.hwm_kb, load.heartbeats, load.failed_after_init
    ));
    let ok = load.initialized == streams
        && load.failed_after_init == 0
        && changes_ok
        && !load.serve_gone;
    report["heartbeats"] = json!(load.heartbeats);
    report["failed_after_initial_payload"] = json!(load.failed_after_init);
    report["failures"] = json!(load.failures);
    report["sse_load_hwm_kb"] = json!(own.hwm_kb);
    report["sse_load_cpu_seconds"] = json!(own_cpu);
    report["ok"] = json!(ok);
    if args.json {
        println!("{report}");
    }
    say.line(if ok { "ok" } else { "FAILED" });
    Ok(ok)
}

/// Raise the soft RLIMIT_NOFILE to the hard limit; fail if `streams` do not fit.
fn raise_nofile(streams: usize) -> Result<(u64, u64), String> {
    let (_, hard) = rlimit::Resource::NOFILE
        .get()
        .map_err(|e| format!("cannot read RLIMIT_NOFILE: {e}"))?;
    let soft = rlimit::increase_nofile_limit(hard)
        .map_err(|e| format!("cannot raise RLIMIT_NOFILE: {e}"))?;
    let needed = streams as u64 + SPARE_FDS;
    if soft < needed {
        return Err(format!(
            "{streams} streams need {needed} file descriptors, but the limit is {soft} (hard {hard}): \
             raise the hard limit (ulimit -Hn) or lower --streams"
        ));
    }
    Ok((soft, hard))
}

/// The address to connect to and the request every stream sends.
fn request(args: &Args) -> Result<(SocketAddr, Vec<u8>), String> {
    let url = Url::parse(&args.url).map_err(|e| format!("--url {}: {e}", args.url))?;
    if url.endpoint.tls {
        return Err("--url: only http:// is supported".to_owned());
    }
    let addr = (url.endpoint.host.as_str(), url.endpoint.port)
        .to_socket_addrs()
        .map_err(|e| format!("--url {}: {e}", args.url))?
        .next()
        .ok_or_else(|| format!("--url {}: no address", args.url))?;
    let path = if args.fdv2 { "/sdk/stream" } else { "/all" };
    let mut headers = vec![
        ("Accept".to_owned(), "text/event-stream".to_owned()),
        ("User-Agent".to_owned(), "sse-load".to_owned()),
    ];
    if let Some(key) = &args.sdk_key {
        headers.push(("Authorization".to_owned(), key.clone()));
    }
    let head = RequestHead {
        method: Method::Get,
        target: url.with_path(path, &[]).target(),
        host: url.endpoint.host_header(),
        headers,
    };
    let mut out = Vec::new();
    head.write_to(None, &mut out);
    Ok((addr, out))
}

/// `label: n, label: n` in label order.
fn describe_counts(counts: &BTreeMap<String, usize>) -> String {
    let parts: Vec<String> = counts.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    parts.join(", ")
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// What was measured of one change.
#[derive(Debug, Default)]
struct Change {
    /// When the new data file was in place.
    t0: Option<Instant>,
    /// Latency of each stream that reached it within the timeout.
    latencies: Vec<Duration>,
    /// Of those, how many reached it only through a later change's event.
    superseded: usize,
    /// Streams that reached it after the timeout.
    late: usize,
}

/// The streams and the one poll that drives them.
struct Load {
    poll: Poll,
    events: Events,
    ready: Vec<(usize, bool, bool)>,
    conns: Vec<Option<Conn>>,
    addr: SocketAddr,
    fdv2: bool,
    request: Vec<u8>,
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
    initial: Vec<Duration>,
    initialized: usize,
    failed_before_init: usize,
    failed_after_init: usize,
    failures: BTreeMap<String, usize>,
    heartbeats: u64,
    changes: Vec<Change>,
    /// Streams that reached the last change.
    reached_last: usize,
    change_timeout: Duration,
    /// The serving process, sampled every [`SAMPLE_EVERY`] so that its peak is known
    /// even if it dies.
    serve_pid: Option<u32>,
    /// The largest figures seen of the serving process.
    serve_peak: Option<ProcSample>,
    /// The serving process could no longer be read.
    serve_gone: bool,
    next_sample: Instant,
}

impl Load {
    fn new(args: &Args, addr: SocketAddr, request: Vec<u8>, marker: Marker) -> io::Result<Self> {
        let total = args.streams as usize;
        Ok(Self {
            poll: Poll::new()?,
            events: Events::with_capacity(4096),
            ready: Vec::new(),
            conns: Vec::with_capacity(total),
            addr,
            fdv2: args.fdv2,
            request,
            marker,
            buf: vec![0; READ_BUF],
            out: Vec::new(),
            total,
            started: 0,
            in_flight: 0,
            max_connecting: args.max_connecting.max(1),
            rate: args.connect_rate.filter(|r| *r > 0.0),
            began: Instant::now(),
            initial: Vec::with_capacity(total),
            initialized: 0,
            failed_before_init: 0,
            failed_after_init: 0,
            failures: BTreeMap::new(),
            heartbeats: 0,
            changes: Vec::new(),
            reached_last: 0,
            change_timeout: Duration::from_millis(args.change_timeout_ms),
            serve_pid: args.serve_pid,
            serve_peak: None,
            serve_gone: false,
            next_sample: Instant::now(),
        })
    }

    /// Read the serving process now (`None` without `--serve-pid` or once it is gone),
    /// keeping its peak figures.
    fn sample_serve(&mut self) -> Option<ProcSample> {
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
    fn alive(&self) -> usize {
        self.initialized - self.failed_after_init
    }

    /// Open every connection and wait until each has its initial payload or failed,
    /// until `deadline`; streams still waiting then fail.
    fn connect_all(&mut self, say: &Say, deadline: Instant) -> Result<(), String> {
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
    fn run_until(&mut self, deadline: Instant) -> Result<(), String> {
        while Instant::now() < deadline {
            self.turn(deadline)?;
        }
        Ok(())
    }

    /// Write the changes at their times and wait for them to reach every stream.
    fn make_changes(&mut self, args: &Args, trigger: &Trigger) -> Result<(), String> {
        let count = args.changes as usize;
        self.changes = (0..count).map(|_| Change::default()).collect();
        let interval = Duration::from_millis(args.interval_ms);
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
            let conn = Conn::connect(now, self.addr, self.fdv2).and_then(|mut conn| {
                self.poll.registry().register(
                    &mut conn.stream,
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

    /// Handle readiness of stream `i`.
    fn handle(&mut self, i: usize, readable: bool, writable: bool) {
        let Some(Some(conn)) = self.conns.get_mut(i) else {
            return;
        };
        let was_connecting = conn.is_connecting();
        if writable && was_connecting {
            conn.handle_writable(&self.request, &mut self.out);
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
            let _ = self.poll.registry().deregister(&mut conn.stream);
        }
    }
}
