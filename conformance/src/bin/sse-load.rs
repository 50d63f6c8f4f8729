//! `sse-load`: hold many downstream SSE streams of one flag server from one thread, and
//! measure its fan-out.
//!
//! ```text
//! sse-load --url http[s]://127.0.0.1:PORT --streams N [--fdv2 | --client-side ENV_ID] [--sdk-key KEY]
//!          [--tls-ca PEM] [--connect-rate R] [--max-connecting C]
//!          [--initial-timeout-secs T] [--serve-pid PID] [--idle-conns I] [--idle-secs S]
//!          [--metrics-scrapes K --scrape-interval-ms M]
//!          [--trigger-file PATH --changes K --interval-ms M --change-timeout-ms D]
//!          [--json]
//! ```
//!
//! With `--tls-ca PEM` (and an `https://` URL) every stream and scrape is TLS (rustls,
//! ring provider, trusting only the CAs in PEM, no session resumption: each connection
//! makes a full handshake), driven in the same loop as plain streams; RSS per stream is
//! then RSS per TLS stream. `conformance/tools/test-cert.sh DIR` makes a test CA and a
//! certificate for 127.0.0.1 and localhost to serve with.
//!
//! Phases, in order:
//!
//! 1. **connect**: open N connections (`GET /all`, `GET /sdk/stream` with `--fdv2`, or
//!    client-side streams `GET /eval/ENV_ID/{context}` with `--client-side ENV_ID`),
//!    at most C connects in flight, at most R started a second if given, and wait for
//!    each one's first full payload (FDv1 `put`; FDv2 `payload-transferred`). Latency:
//!    from the start of the connect to the end of that payload.
//! 2. **idle connections** (`--idle-conns I`): open I plain TCP connections that send
//!    nothing (at most C connects in flight) and keep them open to the end. The server
//!    closes them at its request-head deadline (10 s by default: run it with
//!    `--head-timeout 3600`); closed ones are counted. Once all are connected, the
//!    server's `/metrics` is polled (up to 10 s) until its open request connections
//!    include them all, then its RSS is read: RSS per idle connection is the growth
//!    over the sample before opening them. The server's thread count is reported
//!    before the streams, after them and after the idle connections.
//! 3. **idle** (S seconds; 10 by default with `--serve-pid`): every stream keeps being
//!    read; heartbeats are counted; the server's RSS and CPU ticks are sampled at the
//!    start and the end. RSS per stream is the growth over the baseline, less the idle
//!    connections' growth. With `--metrics-scrapes K`, `GET /metrics` is sent K times,
//!    M ms apart (100 by default) from the start of the phase, each on a fresh
//!    connection (TLS with `--tls-ca`), blocking, timed from the connect to the last
//!    byte of the body; the phase lasts at least as long as the scrapes.
//! 4. **changes** (with `--trigger-file`): K times, M ms apart, the data file that
//!    `flagsync serve --data` watches is rewritten with flag `load-flag`'s `salt` set to
//!    a marker unique to this run and change; t0 is the time the new file is in place.
//!    A stream reaches change k when it applies an event that carries marker k or a
//!    later one (FDv1 `put` or `patch`; FDv2 the `payload-transferred` after the
//!    `put-object`). Reached through a later marker only, the change is "superseded".
//!
//! The server's memory is read from `/proc/PID/status` (VmRSS, VmHWM, Threads) and its
//! CPU time from `/proc/PID/stat` (utime + stime). The exit status is 0 only if every
//! stream got its initial payload, none failed later, every change reached every
//! stream within the change timeout, every idle connection connected and stayed open,
//! and every scrape succeeded. With `--json` one JSON object goes to standard
//! output and the human-readable lines to standard error.
#![forbid(unsafe_code)]

#[path = "../load/conn.rs"]
mod conn;
#[path = "../load/driver.rs"]
mod driver;
#[path = "../load/idle.rs"]
mod idle;
#[path = "../load/measure.rs"]
mod measure;
#[path = "../load/scrape.rs"]
mod scrape;
#[path = "../load/tls.rs"]
mod tls;

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use clap::Parser;
use flagsync_core::endpoint::Url;
use flagsync_core::http1::{Method, RequestHead};
use serde_json::{Value, json};

use conn::Marker;
use driver::{Load, Say, Settings};
use measure::{Percentiles, ProcSample, Trigger, cpu_percent, cpu_seconds, listen_overflows};
use scrape::{Scraper, open_request_conns};
use tls::TlsClient;

/// File descriptors kept for everything but the streams and idle connections.
const SPARE_FDS: u64 = 64;
/// How long the server may take to show every idle connection in `/metrics`.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long each step of a scrape (connect, write, each read) may take.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);

/// The command line.
#[derive(Debug, clap::Parser)]
#[command(
    name = "sse-load",
    about = "Hold many SSE streams of a flag server from one thread and measure its fan-out"
)]
struct Args {
    /// Base URL of the server, e.g. http://127.0.0.1:8030 (https:// with --tls-ca).
    #[arg(long)]
    url: String,
    /// Connect with TLS, trusting the CA certificates in this PEM file (the URL is
    /// https://…).
    #[arg(long, value_name = "PEM")]
    tls_ca: Option<PathBuf>,
    /// How many streams to hold.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    streams: u32,
    /// Use FDv2 (`GET /sdk/stream`) instead of FDv1 (`GET /all`).
    #[arg(long)]
    fdv2: bool,
    /// The SDK key, sent as the Authorization header.
    #[arg(long, value_name = "KEY")]
    sdk_key: Option<String>,
    /// Open client-side streams (`GET /eval/ENV_ID/{context}`, a context of its own for
    /// each stream, `{"kind":"user","key":"load-N"}`) instead of server-side ones. With
    /// --trigger-file, each change's marker is the value flag `load-flag` serves
    /// (made available to client-side SDKs), so a stream reaches it by the `patch` that
    /// carries the flag evaluated.
    #[arg(long, value_name = "ENV_ID", conflicts_with = "fdv2")]
    client_side: Option<String>,
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
    /// Also open this many plain TCP connections that send nothing, after the streams,
    /// and keep them open to the end (serve with --head-timeout 3600).
    #[arg(long, value_name = "N", default_value_t = 0)]
    idle_conns: u32,
    /// GET /metrics this many times during the idle phase, each on a fresh connection.
    #[arg(long, value_name = "K", default_value_t = 0)]
    metrics_scrapes: u32,
    /// Milliseconds between scrapes.
    #[arg(long, value_name = "MS", default_value_t = 100)]
    scrape_interval_ms: u64,
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

/// Run every phase; `Ok(false)` when a stream failed or missed a change.
fn run(args: &Args) -> Result<bool, String> {
    let say = Say {
        to_stderr: args.json,
    };
    let streams = args.streams as usize;
    let nofile = raise_nofile(streams + args.idle_conns as usize)?;
    say.line(&format!(
        "file descriptors: soft limit {} (hard {})",
        nofile.0, nofile.1
    ));
    let target = target(args)?;
    let run_id = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ (u64::from(std::process::id()) << 40);
    let marker = Marker::new(&format!("sse-load-{run_id:016x}-"));
    let trigger = args
        .trigger_file
        .as_deref()
        .map(|path| Trigger::load(path, args.client_side.is_some()))
        .transpose()?;
    let baseline = args
        .serve_pid
        .map(|pid| {
            ProcSample::read(Some(pid))
                .map_err(|e| format!("--serve-pid: cannot read /proc/{pid}: {e}"))
        })
        .transpose()?;
    let settings = Settings {
        streams,
        fdv2: args.fdv2,
        tls: target.tls.clone(),
        max_connecting: args.max_connecting,
        rate: args.connect_rate,
        change_timeout: Duration::from_millis(args.change_timeout_ms),
        serve_pid: args.serve_pid,
    };
    let scraper = Scraper::new(target.addr, &target.host, target.tls, SCRAPE_TIMEOUT);
    let mut load =
        Load::new(settings, target.addr, target.requests, marker).map_err(|e| e.to_string())?;
    load.serve_peak = baseline;
    let mut report = json!({
        "url": args.url, "protocol": if args.client_side.is_some() { "client-side" } else if args.fdv2 { "fdv2" } else { "fdv1" },
        "tls": args.tls_ca.is_some(), "streams": streams, "nofile_soft_limit": nofile.0,
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

    // 2. Idle connections.
    let mut idle_growth_kb = 0;
    let mut after_idle = None;
    if args.idle_conns > 0 {
        let (json, growth, sample) = open_idle(&mut load, args, &say, &scraper, after_connect)?;
        report["idle_conns"] = json;
        (idle_growth_kb, after_idle) = (growth, sample);
    }
    if let (Some(base), Some(connected)) = (baseline, after_connect) {
        let idle = after_idle.map(|s| s.threads);
        say.line(&format!(
            "serve threads: {} before the streams, {} after them{}",
            base.threads,
            connected.threads,
            idle.map_or_else(String::new, |n| format!(", {n} after the idle connections"))
        ));
        report["serve_threads"] = json!({
            "before_streams": base.threads, "after_streams": connected.threads,
            "after_idle_conns": idle,
        });
    }

    // 3. Idle.
    let idle_secs = args
        .idle_secs
        .unwrap_or(if args.serve_pid.is_some() { 10 } else { 0 });
    let scrape_every = Duration::from_millis(args.scrape_interval_ms);
    let mut scrapes_ok = true;
    if idle_secs > 0 || args.metrics_scrapes > 0 {
        let heartbeats = load.heartbeats;
        let start = load.sample_serve();
        let from = Instant::now();
        let mut took = Vec::new();
        let mut errors = BTreeMap::new();
        let mut body_bytes = BTreeMap::<usize, usize>::new();
        for k in 0..args.metrics_scrapes {
            load.run_until(from + scrape_every * k)?;
            match scraper.scrape() {
                Ok(scrape) => {
                    took.push(scrape.took);
                    *body_bytes.entry(scrape.body.len()).or_default() += 1;
                }
                Err(e) => *errors.entry(e).or_default() += 1,
            }
        }
        load.run_until(from + Duration::from_secs(idle_secs))?;
        let elapsed = from.elapsed();
        if args.metrics_scrapes > 0 {
            scrapes_ok = errors.is_empty();
            let p = Percentiles::of(&mut took);
            let (smallest, largest) = (body_bytes.keys().next(), body_bytes.keys().last());
            say.line(&format!(
                "metrics: {}/{} scrapes of /metrics{}, connect to last byte: median {:.1} ms, max {:.1} ms; body {} bytes{}",
                p.count,
                args.metrics_scrapes,
                if args.tls_ca.is_some() { " (TLS)" } else { "" },
                measure::ms(p.p50),
                measure::ms(p.max),
                smallest.unwrap_or(&0),
                if smallest == largest { String::new() } else { format!(" to {}", largest.unwrap_or(&0)) }
            ));
            if !errors.is_empty() {
                say.line(&format!("  scrape failures: {}", describe_counts(&errors)));
            }
            report["metrics"] = json!({
                "scrapes": args.metrics_scrapes, "ok": p.count, "interval_ms": args.scrape_interval_ms,
                "median_ms": measure::ms(p.p50), "max_ms": measure::ms(p.max),
                "latency_ms": p.to_json(), "body_bytes_min": smallest, "body_bytes_max": largest,
                "failures": errors,
            });
        }
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
            let growth = end.rss_kb as i64 - base.rss_kb as i64 - idle_growth_kb;
            let per_stream = growth.max(0) as f64 / alive.max(1) as f64;
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

    // 4. Changes.
    let mut changes_ok = true;
    if let Some(trigger) = &trigger {
        let expected = load.alive();
        let interval = Duration::from_millis(args.interval_ms);
        load.make_changes(args.changes as usize, interval, trigger)?;
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
    let mut idle_ok = true;
    if let Some(idle) = &load.idle {
        idle_ok = idle.failed_count() == 0 && idle.closed == 0;
        say.line(&format!(
            "idle connections: {} open at the end of {}; {} closed by the server ({} after an answer){}",
            idle.open(),
            args.idle_conns,
            idle.closed,
            idle.answered,
            if idle.closed > 0 {
                ": its request-head deadline? (serve --head-timeout 3600)"
            } else {
                ""
            }
        ));
        report["idle_conns"]["open_at_end"] = json!(idle.open());
        report["idle_conns"]["closed_by_server"] = json!(idle.closed);
        report["idle_conns"]["answered_before_close"] = json!(idle.answered);
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
        && idle_ok
        && scrapes_ok
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

/// Raise the soft RLIMIT_NOFILE to the hard limit; fail if `conns` (streams and idle
/// connections) do not fit.
fn raise_nofile(conns: usize) -> Result<(u64, u64), String> {
    let (_, hard) = rlimit::Resource::NOFILE
        .get()
        .map_err(|e| format!("cannot read RLIMIT_NOFILE: {e}"))?;
    let soft = rlimit::increase_nofile_limit(hard)
        .map_err(|e| format!("cannot raise RLIMIT_NOFILE: {e}"))?;
    let needed = conns as u64 + SPARE_FDS;
    if soft < needed {
        return Err(format!(
            "{conns} connections need {needed} file descriptors, but the limit is {soft} (hard {hard}): \
             raise the hard limit (ulimit -Hn) or lower --streams or --idle-conns"
        ));
    }
    Ok((soft, hard))
}

/// Where the streams connect, and what they send.
struct Target {
    addr: SocketAddr,
    /// The Host header.
    host: String,
    /// The requests streams send (stream `i` the `i % len`th).
    requests: Vec<Vec<u8>>,
    tls: Option<TlsClient>,
}

/// The address to connect to, the request every stream sends, and TLS.
fn target(args: &Args) -> Result<Target, String> {
    let url = Url::parse(&args.url).map_err(|e| format!("--url {}: {e}", args.url))?;
    let tls = match (&args.tls_ca, url.endpoint.tls) {
        (Some(ca), true) => Some(TlsClient::new(ca, &url.endpoint.host)?),
        (None, false) => None,
        (Some(_), false) => return Err("--tls-ca wants an https:// --url".to_owned()),
        (None, true) => return Err("an https:// --url wants --tls-ca PEM".to_owned()),
    };
    let addr = (url.endpoint.host.as_str(), url.endpoint.port)
        .to_socket_addrs()
        .map_err(|e| format!("--url {}: {e}", args.url))?
        .next()
        .ok_or_else(|| format!("--url {}: no address", args.url))?;
    let paths: Vec<String> = match &args.client_side {
        Some(env) => (0..args.streams)
            .map(|i| {
                let context = json!({"kind": "user", "key": format!("load-{i}")}).to_string();
                format!("/eval/{env}/{}", URL_SAFE_NO_PAD.encode(context))
            })
            .collect(),
        None if args.fdv2 => vec!["/sdk/stream".to_owned()],
        None => vec!["/all".to_owned()],
    };
    let mut headers = vec![
        ("Accept".to_owned(), "text/event-stream".to_owned()),
        ("User-Agent".to_owned(), "sse-load".to_owned()),
    ];
    if let Some(key) = &args.sdk_key {
        headers.push(("Authorization".to_owned(), key.clone()));
    }
    let requests = paths
        .iter()
        .map(|path| {
            let head = RequestHead {
                method: Method::Get,
                target: url.with_path(path, &[]).target(),
                host: url.endpoint.host_header(),
                headers: headers.clone(),
            };
            let mut request = Vec::new();
            head.write_to(None, &mut request);
            request
        })
        .collect();
    Ok(Target {
        addr,
        host: url.endpoint.host_header(),
        requests,
        tls,
    })
}

/// Phase 2: open the idle connections, wait until the server shows them all in
/// `/metrics`, and read its RSS. Returns the report, the RSS growth in kB and the
/// sample after.
fn open_idle(
    load: &mut Load,
    args: &Args,
    say: &Say,
    scraper: &Scraper,
    before: Option<ProcSample>,
) -> Result<(Value, i64, Option<ProcSample>), String> {
    let began = Instant::now();
    load.open_idle(
        args.idle_conns as usize,
        began + Duration::from_secs(args.initial_timeout_secs),
    )?;
    let connect_secs = began.elapsed().as_secs_f64();
    let Some(idle) = &load.idle else {
        return Ok((Value::Null, 0, None));
    };
    let want = idle.open() as u64 + 1;
    let mut seen = None;
    let settle = Instant::now();
    while seen.is_none_or(|n| n < want) && settle.elapsed() < SETTLE_TIMEOUT {
        load.run_until(Instant::now() + Duration::from_millis(100))?;
        seen = scraper
            .scrape()
            .ok()
            .and_then(|s| open_request_conns(&s.body));
    }
    let settle_secs = settle.elapsed().as_secs_f64();
    let after = load.sample_serve();
    let Some(idle) = &load.idle else {
        return Ok((Value::Null, 0, None));
    };
    let connected = idle.connected;
    let mut line = format!(
        "idle connections: {connected}/{} connected in {connect_secs:.2} s; the server showed {} open request connections (this scrape's included) after {settle_secs:.1} s",
        args.idle_conns,
        seen.map_or_else(|| "no".to_owned(), |n| n.to_string())
    );
    if !idle.failed.is_empty() {
        line += &format!("; failed: {}", describe_counts(&idle.failed));
    }
    let mut report = json!({
        "requested": args.idle_conns, "connected": connected, "failed": idle.failed,
        "seconds": round3(connect_secs), "server_request_conns_seen": seen,
        "settle_seconds": round3(settle_secs),
    });
    let mut growth = 0;
    if let (Some(before), Some(after)) = (before, after) {
        growth = after.rss_kb as i64 - before.rss_kb as i64;
        let per_conn = (growth * 1024) as f64 / connected.max(1) as f64;
        line += &format!(
            "; serve RSS {} kB before, {} kB after: {per_conn:.0} bytes per idle connection, {} threads",
            before.rss_kb, after.rss_kb, after.threads
        );
        report["rss_before_kb"] = json!(before.rss_kb);
        report["rss_after_kb"] = json!(after.rss_kb);
        report["rss_per_conn_bytes"] = json!(per_conn.round());
        report["threads_after"] = json!(after.threads);
    }
    say.line(&line);
    Ok((report, growth, after))
}

/// `label: n, label: n` in label order.
fn describe_counts(counts: &BTreeMap<String, usize>) -> String {
    let parts: Vec<String> = counts.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    parts.join(", ")
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
