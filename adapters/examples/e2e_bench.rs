//! End to end over loopback, every contender a fresh process, side by side in one run
//! (issue 18, BENCHMARKS.md "End to end, per runtime"):
//!
//! ```text
//! cargo build --release -p flagsync --all-features --example e2e_bench
//! cargo build --release --manifest-path peers/Cargo.toml --example e2e_official   # optional
//! target/release/examples/e2e_bench                # every cell, 100 and 50,000 flags
//! target/release/examples/e2e_bench --runs 7 --patches 50000 --flags 100,50000 --cells core,raw,tokio,tokio-sub
//! ```
//!
//! This process is the stand-in flag server (one thread per connection on 127.0.0.1):
//! a stream request gets a `put` of the payload (`target/payloads/flags-N.json`, made by
//! `../shared/tools/gen_payload.py` on first use), then, once the client asks for them
//! with `GET /go` on a second connection, `--patches` `patch` events (each flag in turn
//! gets its version bumped and `on` flipped; the last event patches the marker flag
//! `bench-marker` to version 2, serving "final"). Each cell runs `--runs` times, the cells
//! interleaved round by round (so ratios of one round share the load), each run a new
//! child process (this binary with `client MODE …`, or the official SDK's binary):
//!
//! - `core`: no sockets. The same response bytes fed to `flagsync_core::DataSystem` in
//!   64 KiB reads, outputs drained after each (the core's own rate on the same bytes);
//! - `raw`: a plain TCP reader receiving the same bytes (the floor for init);
//! - `tokio`, `smol`, `async-std`: the flagsync client; the end of the patches is seen by
//!   polling `Client::flag(MARKER)` every 100 µs from another thread (no subscriber);
//! - `tokio-sub`, `smol-sub`, `async-std-sub`: the same with a `flag_changes` subscriber
//!   task that reads every change (and the marker flag when it changes, `Client::flag`);
//!   the end is when it sees the marker's version 2;
//! - `official`: the official Rust SDK (`launchdarkly-server-sdk` 3.2.0, its streaming
//!   source over hyper), if `peers/…/examples/e2e_official` is built (or `E2E_OFFICIAL`
//!   names it); the end is seen by evaluating the marker every 100 µs;
//! - `base-MODE`: MODE run by another build of this bench named by `E2E_BASE` (a build
//!   before a change, for before/after in one run).
//!
//! Per run a client reports: init (start → initialized; raw: connect → last byte of the
//! put), the patch time (the `GET /go` → the last patch applied), and its peak RSS
//! (`VmHWM`) once initialized and at the end. The table gives medians (min–max) and the
//! medians of the per-round ratios.
//!
//! Profiling one client by hand (`--serve --flags N` prints its command line): with
//! `E2E_THREADS=1` it also prints, on stderr, each thread's CPU time and run-queue wait
//! during the patches; with `E2E_PERF_CTL=FIFO` it samples only the patches under
//! `perf record --control=fifo:FIFO -D -1`; with `E2E_CALLGRIND=1` it counts only them
//! under `valgrind --tool=callgrind --instr-atstart=no`; with `E2E_INIT_ONLY=1` it ends
//! once initialized (a heap profile of the start).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use serde_json::value::RawValue;

const MARKER: &str = "bench-marker";
const HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("client") {
        return client::main(&args[1..]);
    }
    orchestrate(&args);
}

// ---------------------------------------------------------------------------------
// The orchestrator and stand-in server
// ---------------------------------------------------------------------------------

struct Options {
    runs: usize,
    patches: usize,
    flags: Vec<usize>,
    cells: Vec<String>,
    /// Only serve (the first size of `--flags`) for clients run by hand, e.g. under a
    /// profiler: prints the client command lines, then serves until killed.
    serve_only: bool,
    /// Keep the stream files here (`put-N`, `patches-N`) for profiling a client alone.
    keep: Option<PathBuf>,
}

fn options(args: &[String]) -> Options {
    let mut o = Options {
        runs: 5,
        patches: 50_000,
        flags: vec![100, 50_000],
        cells: [
            "core",
            "raw",
            "tokio",
            "tokio-sub",
            "smol",
            "smol-sub",
            "async-std",
            "async-std-sub",
            "official",
        ]
        .map(String::from)
        .to_vec(),
        keep: None,
        serve_only: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--serve" {
            o.serve_only = true;
            continue;
        }
        let v = it.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--runs" => o.runs = v.parse().expect("--runs N"),
            "--patches" => o.patches = v.parse().expect("--patches N"),
            "--flags" => {
                o.flags = v
                    .split(',')
                    .map(|f| f.parse().expect("--flags N,M"))
                    .collect()
            }
            "--cells" => o.cells = v.split(',').map(String::from).collect(),
            "--keep" => o.keep = Some(v.into()),
            other => panic!("unknown option {other}"),
        }
    }
    o
}

/// The response bytes of one size: the head and `put`, and the patch events.
struct Stream {
    put: Vec<u8>,
    patches: Vec<u8>,
}

/// The server's state: the stream to serve and the `GET /go` signal of the run.
#[derive(Default)]
struct Shared {
    stream: Mutex<Option<Arc<Stream>>>,
    go: Mutex<u64>,
    cv: Condvar,
}

fn orchestrate(args: &[String]) {
    let o = options(args);
    let me = std::env::current_exe().expect("own path");
    let official = official_binary(&me);
    let shared = Arc::new(Shared::default());
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().unwrap());
    {
        let shared = shared.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let shared = shared.clone();
                std::thread::spawn(move || serve(conn, &shared));
            }
        });
    }
    let dir = o
        .keep
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("e2e-bench-{}", std::process::id())));
    std::fs::create_dir_all(&dir).unwrap();
    println!(
        "e2e_bench: {} runs per cell, {} patches, cells {}, load average {}",
        o.runs,
        o.patches,
        o.cells.join(","),
        load_average()
    );
    if official.is_none() && o.cells.iter().any(|c| c == "official") {
        println!(
            "  (official: not built; `cargo build --release --manifest-path peers/Cargo.toml --example e2e_official`, or set E2E_OFFICIAL)"
        );
    }
    for &flags in &o.flags {
        let payload = payload(flags);
        let stream = Arc::new(stream_bytes(&payload, o.patches));
        drop(payload);
        let put_file = dir.join(format!("put-{flags}"));
        let patch_file = dir.join(format!("patches-{flags}"));
        std::fs::write(&put_file, &stream.put).unwrap();
        std::fs::write(&patch_file, &stream.patches).unwrap();
        *shared.stream.lock().unwrap() = Some(stream.clone());
        if o.serve_only {
            println!(
                "serving {flags} flags; run a client with:\n  {} client MODE {url} {} {}",
                me.display(),
                put_file.display(),
                patch_file.display()
            );
            loop {
                std::thread::park();
            }
        }
        println!(
            "\n{flags} flags: put {:.1} MB (with the response head), {} patches {:.1} MB",
            stream.put.len() as f64 / 1e6,
            o.patches,
            stream.patches.len() as f64 / 1e6
        );
        let mut results: BTreeMap<String, Vec<Option<Report>>> = BTreeMap::new();
        for round in 0..o.runs {
            for cell in &o.cells {
                let mut cmd = if cell == "official" {
                    let Some(bin) = &official else { continue };
                    std::process::Command::new(bin)
                } else if let Some(mode) = cell.strip_prefix("base-") {
                    // Another build of this bench (`E2E_BASE`), e.g. before a change.
                    let base = std::env::var_os("E2E_BASE").expect("base-* cells need E2E_BASE");
                    let mut c = std::process::Command::new(base);
                    c.args(["client", mode]);
                    c.args([
                        &url,
                        &*put_file.to_string_lossy(),
                        &*patch_file.to_string_lossy(),
                    ]);
                    let out = c.output().expect("run a client");
                    let report = String::from_utf8_lossy(&out.stdout)
                        .lines()
                        .find_map(Report::parse);
                    results.entry(cell.clone()).or_default().push(report);
                    continue;
                } else {
                    let mut c = std::process::Command::new(&me);
                    c.arg("client");
                    c
                };
                cmd.args([
                    cell.as_str(),
                    &url,
                    &put_file.to_string_lossy(),
                    &patch_file.to_string_lossy(),
                ]);
                let out = cmd.output().expect("run a client");
                let report = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .find_map(Report::parse);
                if report.is_none() {
                    eprintln!(
                        "{cell} round {round}: no result ({}): {}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                results.entry(cell.clone()).or_default().push(report);
            }
        }
        table(&o, &stream, &results);
    }
    if o.keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The official SDK's client, if built: `E2E_OFFICIAL`, or next to the peers' build.
fn official_binary(me: &Path) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("E2E_OFFICIAL") {
        return Some(p.into());
    }
    // me = <target>/release/examples/e2e_bench
    let target = me.parent()?.parent()?.parent()?;
    let candidates = [
        target.join("release/examples/e2e_official"),
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../peers/target/release/examples/e2e_official"),
    ];
    candidates.into_iter().find(|p| p.exists())
}

fn serve(mut conn: TcpStream, shared: &Shared) {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match conn.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => return,
        }
    }
    if head.starts_with(b"GET /go") {
        *shared.go.lock().unwrap() += 1;
        shared.cv.notify_all();
        let _ = conn.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n");
        return;
    }
    let Some(stream) = shared.stream.lock().unwrap().clone() else {
        return;
    };
    let go = *shared.go.lock().unwrap();
    if conn.write_all(&stream.put).is_err() {
        return;
    }
    {
        let guard = shared.go.lock().unwrap();
        let (guard, timeout) = shared
            .cv
            .wait_timeout_while(guard, Duration::from_secs(120), |g| *g == go)
            .unwrap();
        if timeout.timed_out() {
            return;
        }
        drop(guard);
    }
    if conn.write_all(&stream.patches).is_err() {
        return;
    }
    let mut sink = [0u8; 256];
    while matches!(conn.read(&mut sink), Ok(n) if n > 0) {}
}

/// `target/payloads/flags-N.json` (as the core's benches), generated on first use.
fn payload(flags: usize) -> Vec<u8> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/payloads");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("flags-{flags}.json"));
    if !path.exists() {
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/tools/gen_payload.py");
        let ok = std::process::Command::new("python3")
            .arg(script)
            .args(["--flags", &flags.to_string(), "-o"])
            .arg(&path)
            .status()
            .expect("python3 runs gen_payload.py")
            .success();
        assert!(ok, "gen_payload.py failed");
    }
    std::fs::read(path).unwrap()
}

/// The response head and `put`, and `patches` patch events: the payload's flags in turn
/// (version + 1 each time a flag comes round again, `on` flipped), the marker last.
fn stream_bytes(payload: &[u8], patches: usize) -> Stream {
    #[derive(serde::Deserialize)]
    struct Data<'a> {
        #[serde(borrow)]
        flags: BTreeMap<&'a str, &'a RawValue>,
    }
    let mut put = HEAD.to_vec();
    put.extend_from_slice(b"event: put\ndata: {\"path\":\"/\",\"data\":");
    put.extend_from_slice(payload);
    put.extend_from_slice(b"}\n\n");
    let data: Data<'_> = serde_json::from_slice(payload).expect("an FDv1 payload");
    let mut flags: Vec<(&str, serde_json::Value)> = data
        .flags
        .iter()
        .filter(|(k, _)| **k != MARKER)
        .map(|(k, raw)| (*k, serde_json::from_str(raw.get()).unwrap()))
        .collect();
    let mut out = Vec::new();
    let mut event = |key: &str, flag: &serde_json::Value| {
        out.extend_from_slice(b"event: patch\ndata: {\"path\":\"/flags/");
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\",\"data\":");
        serde_json::to_writer(&mut out, flag).unwrap();
        out.extend_from_slice(b"}\n\n");
    };
    let n = flags.len();
    for i in 0..patches.saturating_sub(1) {
        let (key, flag) = &mut flags[i % n];
        flag["version"] = (flag["version"].as_u64().unwrap_or(0) + 1).into();
        flag["on"] = (!flag["on"].as_bool().unwrap_or(false)).into();
        event(key, flag);
    }
    let mut marker: serde_json::Value =
        serde_json::from_str(data.flags[MARKER].get()).expect("the payload has bench-marker");
    marker["version"] = 2.into();
    marker["offVariation"] = 1.into();
    event(MARKER, &marker);
    Stream { put, patches: out }
}

/// What one client run reports (one `RESULT` line on stdout).
#[derive(Debug, Clone, Copy)]
struct Report {
    init_ms: f64,
    patch_ms: f64,
    init_cpu_ms: f64,
    patch_cpu_ms: f64,
    hwm_init_kb: f64,
    hwm_end_kb: f64,
    rss_end_kb: f64,
}

impl Report {
    fn parse(line: &str) -> Option<Self> {
        let rest = line.strip_prefix("RESULT ")?;
        let mut m = BTreeMap::new();
        for kv in rest.split_whitespace() {
            let (k, v) = kv.split_once('=')?;
            m.insert(k, v.parse::<f64>().ok()?);
        }
        Some(Self {
            init_ms: *m.get("init_ms")?,
            patch_ms: *m.get("patch_ms")?,
            init_cpu_ms: *m.get("init_cpu_ms")?,
            patch_cpu_ms: *m.get("patch_cpu_ms")?,
            hwm_init_kb: *m.get("hwm_init_kb")?,
            hwm_end_kb: *m.get("hwm_end_kb")?,
            rss_end_kb: *m.get("rss_end_kb")?,
        })
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn spread(v: &[f64]) -> String {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{:.0}–{:.0}", min, max)
}

/// Medians of per-round ratios `f(a) / f(b)` over the rounds where both reported.
fn paired(a: &[Option<Report>], b: &[Option<Report>], f: impl Fn(&Report, &Report) -> f64) -> f64 {
    median(
        a.iter()
            .zip(b)
            .filter_map(|(a, b)| Some(f(a.as_ref()?, b.as_ref()?)))
            .collect(),
    )
}

fn table(o: &Options, stream: &Stream, results: &BTreeMap<String, Vec<Option<Report>>>) {
    let patches = o.patches as f64;
    let put_mb = (stream.put.len() - HEAD.len()) as f64 / 1e6;
    println!(
        "{:<14} {:>18} {:>8} {:>24} {:>9} {:>8} {:>8} {:>9} {:>9} {:>9}",
        "cell",
        "init ms (min–max)",
        "init CPU",
        "patches/s (min–max)",
        "CPU µs/p",
        "vs core",
        "CPU vs",
        "peak init",
        "peak end",
        "RSS end"
    );
    let none = Vec::new();
    let core = results.get("core").unwrap_or(&none);
    for cell in &o.cells {
        let Some(rs) = results.get(cell) else {
            continue;
        };
        let ok: Vec<Report> = rs.iter().flatten().copied().collect();
        if ok.is_empty() {
            println!("{cell:<14} (no result)");
            continue;
        }
        let inits: Vec<f64> = ok.iter().map(|r| r.init_ms).collect();
        let rates: Vec<f64> = ok.iter().map(|r| patches / (r.patch_ms / 1e3)).collect();
        println!(
            "{:<14} {:>6.1} ({:>9}) {:>8.1} {:>10.0} ({:>11}) {:>9.2} {:>8.2} {:>8.2} {:>8.1}M {:>8.1}M {:>8.1}M",
            cell,
            median(inits.clone()),
            spread(&inits),
            median(ok.iter().map(|r| r.init_cpu_ms).collect()),
            median(rates.clone()),
            spread(&rates),
            median(ok.iter().map(|r| r.patch_cpu_ms * 1e3 / patches).collect()),
            paired(rs, core, |a, c| c.patch_ms / a.patch_ms),
            paired(rs, core, |a, c| c.patch_cpu_ms / a.patch_cpu_ms),
            median(ok.iter().map(|r| r.hwm_init_kb / 1e3).collect()),
            median(ok.iter().map(|r| r.hwm_end_kb / 1e3).collect()),
            median(ok.iter().map(|r| r.rss_end_kb / 1e3).collect()),
        );
    }
    println!(
        "(vs core: the core's patch time over the cell's, wall clock, median of the per-round ratios; CPU vs: the same with the process CPU time. Peaks are VmHWM once initialized and at the end, MB.)"
    );
    println!("targets (medians of per-round ratios):");
    let raw = results.get("raw").unwrap_or(&none);
    for rt in ["tokio", "smol", "async-std"] {
        let Some(c) = results.get(rt) else { continue };
        println!(
            "  {rt:<10} init / raw reader {:.2} (≤ 1.5; init / core's init {:.2}); patches/s vs core {:.2} wall, {:.2} CPU (≥ 0.8)",
            paired(c, raw, |a, r| a.init_ms / r.init_ms),
            paired(c, core, |a, r| a.init_ms / r.init_ms),
            paired(c, core, |a, k| k.patch_ms / a.patch_ms),
            paired(c, core, |a, k| k.patch_cpu_ms / a.patch_cpu_ms),
        );
        if let Some(s) = results.get(&format!("{rt}-sub")) {
            println!(
                "  {:<10} with a flag_changes subscriber / without: {:.2} wall, {:.2} CPU (≥ 0.9)",
                "",
                paired(s, c, |s, n| n.patch_ms / s.patch_ms),
                paired(s, c, |s, n| n.patch_cpu_ms / s.patch_cpu_ms),
            );
        }
        let peak = median(c.iter().flatten().map(|r| r.hwm_init_kb / 1e3).collect());
        let end = median(c.iter().flatten().map(|r| r.hwm_end_kb / 1e3).collect());
        println!(
            "  {:<10} peak RSS once initialized {peak:.1} MB (≤ 1.2 × put + 15 = {:.1} MB); at the end {end:.1} MB (≤ {peak:.1})",
            "",
            1.2 * put_mb + 15.0
        );
        if let Some(off) = results.get("official") {
            println!(
                "  {:<10} against the official SDK: init {:.2}× its time, patches/s {:.2}× its rate, peak RSS {:.2}× its peak",
                "",
                paired(c, off, |a, b| a.init_ms / b.init_ms),
                paired(c, off, |a, b| b.patch_ms / a.patch_ms),
                paired(c, off, |a, b| a.hwm_end_kb / b.hwm_end_kb),
            );
        }
    }
    println!("  load average now {}", load_average());
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------
// The clients (child processes)
// ---------------------------------------------------------------------------------

mod client {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::atomic::AtomicU64;
    use std::sync::atomic::Ordering::Relaxed;
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use flagsync::runtime::Runtime;

    use super::MARKER;

    pub(super) fn main(args: &[String]) {
        let [mode, url, put_file, patch_file] = args else {
            panic!("client MODE URL PUT_FILE PATCH_FILE");
        };
        let (init, patch) = match mode.as_str() {
            "core" => core(put_file, patch_file),
            "raw" => raw(url, put_file, patch_file),
            client => {
                let (rt, sub) = match client.strip_suffix("-sub") {
                    Some(rt) => (rt, true),
                    None => (client, false),
                };
                flagsync_client(rt, sub, url)
            }
        };
        let hwm_init = HWM_INIT.load(Relaxed);
        let cpu_init = CPU_INIT.load(Relaxed);
        let cpu_patch = CPU_END.load(Relaxed).saturating_sub(cpu_init);
        println!(
            "RESULT init_ms={:.3} patch_ms={:.3} init_cpu_ms={:.3} patch_cpu_ms={:.3} hwm_init_kb={hwm_init} hwm_end_kb={} rss_end_kb={}",
            init.as_secs_f64() * 1e3,
            patch.as_secs_f64() * 1e3,
            cpu_init as f64 / 1e6,
            cpu_patch as f64 / 1e6,
            status_kb("VmHWM"),
            status_kb("VmRSS"),
        );
    }

    /// Each thread's name, CPU time and time spent runnable but waiting for a CPU
    /// (`/proc/self/task/*/{comm,schedstat}`), in ns.
    fn threads() -> Vec<(String, u64, u64)> {
        let mut out = Vec::new();
        for task in std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .flatten()
        {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            let mut f = stat
                .split_whitespace()
                .map(|v| v.parse::<u64>().unwrap_or(0));
            let (run, wait) = (f.next().unwrap_or(0), f.next().unwrap_or(0));
            let name = format!("{}:{}", comm.trim(), task.file_name().to_string_lossy());
            out.push((name, run, wait));
        }
        out
    }

    /// The threads' CPU and run-queue wait at initialization (`E2E_THREADS=1`).
    static THREADS_INIT: Mutex<Vec<(String, u64, u64)>> = Mutex::new(Vec::new());

    /// With `E2E_THREADS=1`: each thread's CPU time and run-queue wait during the
    /// patches, on stderr.
    fn report_threads() {
        if std::env::var_os("E2E_THREADS").is_none() {
            return;
        }
        let before = THREADS_INIT.lock().unwrap().clone();
        let mut line = String::from("THREADS");
        for (name, run, wait) in threads() {
            let (r0, w0) = before
                .iter()
                .find(|t| t.0 == name)
                .map_or((0, 0), |t| (t.1, t.2));
            let (run, wait) = (run.saturating_sub(r0), wait.saturating_sub(w0));
            if run > 1_000_000 {
                line += &format!(" {name}={:.1}/{:.1}ms", run as f64 / 1e6, wait as f64 / 1e6);
            }
        }
        eprintln!("{line}");
    }

    static HWM_INIT: AtomicU64 = AtomicU64::new(0);
    static CPU_INIT: AtomicU64 = AtomicU64::new(0);
    static CPU_END: AtomicU64 = AtomicU64::new(0);

    /// Called once the last patch is seen, before the client is closed (its threads
    /// may end with it, taking their CPU time out of the sum).
    fn patched() {
        CPU_END.store(cpu_ns(), Relaxed);
        report_threads();
    }

    /// Called once initialized, before the patches are asked for.
    fn initialized() {
        HWM_INIT.store(status_kb("VmHWM"), Relaxed);
        CPU_INIT.store(cpu_ns(), Relaxed);
        if std::env::var_os("E2E_THREADS").is_some() {
            *THREADS_INIT.lock().unwrap() = threads();
        }
    }

    /// CPU time of this process so far, every thread (`/proc/self/task/*/schedstat`):
    /// less disturbed by other processes on the machine than the wall clock.
    pub(super) fn cpu_ns() -> u64 {
        threads().iter().map(|(_, run, _)| run).sum()
    }

    pub(super) fn status_kb(field: &str) -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0)
    }

    fn host_port(url: &str) -> &str {
        url.strip_prefix("http://").unwrap_or(url)
    }

    /// Ask the server for the patches.
    fn go(url: &str) {
        let mut s = TcpStream::connect(host_port(url)).expect("connect for /go");
        s.write_all(b"GET /go HTTP/1.1\r\nHost: bench\r\n\r\n")
            .unwrap();
        let mut buf = [0u8; 128];
        let _ = s.read(&mut buf);
    }

    /// The same bytes through the core alone, in 64 KiB reads.
    fn core(put_file: &str, patch_file: &str) -> (Duration, Duration) {
        use flagsync_core::{Config, ConnId, DataSystem, Event, Input, Output};
        let put = std::fs::read(put_file).unwrap();
        let patches = std::fs::read(patch_file).unwrap();
        let mut config = Config::new("sdk-bench-key");
        config.stream_uri = "http://127.0.0.1:1".into();
        let t0 = Instant::now();
        let mut system = DataSystem::new(config, 1, t0).unwrap();
        system.handle_input(t0, Input::Command(flagsync_core::Command::Start));
        let mut conn: Option<ConnId> = None;
        let mut changes = 0usize;
        let mut drain = |system: &mut DataSystem, conn: &mut Option<ConnId>| loop {
            match system.poll_output() {
                Output::Action(flagsync_core::Action::Connect { conn: c, .. }) => *conn = Some(c),
                Output::Event(Event::StoreChanged {
                    changed_flags: flagsync_core::store::ChangedFlags::Keys(k),
                }) => changes += k.len(),
                Output::Wait(_) => break,
                _ => {}
            }
        };
        drain(&mut system, &mut conn);
        let conn = conn.expect("a connect action");
        system.handle_input(Instant::now(), Input::Connected { conn });
        drain(&mut system, &mut Some(conn));
        for chunk in put.chunks(64 * 1024) {
            system.handle_input(Instant::now(), Input::Data { conn, bytes: chunk });
            drain(&mut system, &mut Some(conn));
        }
        assert!(system.initialized());
        let init = t0.elapsed();
        initialized();
        profile_patches(true);
        let t1 = Instant::now();
        measured_core_patches(&mut system, conn, &patches, &mut drain);
        let patch = t1.elapsed();
        profile_patches(false);
        patched();
        let marker = system
            .snapshot()
            .get(flagsync_core::Kind::Flag, MARKER)
            .map(|i| i.version);
        assert_eq!(marker, Some(2));
        assert!(changes > 0);
        (init, patch)
    }

    /// The patches through the core (a function of its own for
    /// `valgrind --tool=callgrind --toggle-collect='*measured_*'`).
    #[inline(never)]
    fn measured_core_patches(
        system: &mut flagsync_core::DataSystem,
        conn: flagsync_core::ConnId,
        patches: &[u8],
        drain: &mut impl FnMut(&mut flagsync_core::DataSystem, &mut Option<flagsync_core::ConnId>),
    ) {
        for chunk in patches.chunks(64 * 1024) {
            system.handle_input(
                Instant::now(),
                flagsync_core::Input::Data { conn, bytes: chunk },
            );
            drain(system, &mut Some(conn));
        }
    }

    /// Profile the patch phase only: with `E2E_CALLGRIND=1`, under
    /// `valgrind --tool=callgrind --collect-atstart=no`, count it
    /// (`callgrind_control -i on|off`); with `E2E_PERF_CTL=FIFO`, under
    /// `perf record --control=fifo:FIFO -D -1`, sample it.
    fn profile_patches(on: bool) {
        if let Some(fifo) = std::env::var_os("E2E_PERF_CTL") {
            let cmd: &[u8] = if on { b"enable\n" } else { b"disable\n" };
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .open(fifo)
                .and_then(|mut f| f.write_all(cmd));
        }
        if std::env::var_os("E2E_CALLGRIND").is_some() {
            let _ = std::process::Command::new("callgrind_control")
                .args(["-i", if on { "on" } else { "off" }])
                .arg(std::process::id().to_string())
                .output();
        }
    }

    /// A plain TCP reader: the floor.
    fn raw(url: &str, put_file: &str, patch_file: &str) -> (Duration, Duration) {
        let put_len = std::fs::metadata(put_file).unwrap().len() as usize;
        let patch_len = std::fs::metadata(patch_file).unwrap().len() as usize;
        let t0 = Instant::now();
        let mut s = TcpStream::connect(host_port(url)).expect("connect");
        s.write_all(b"GET /all HTTP/1.1\r\nHost: bench\r\nAuthorization: sdk-bench-key\r\n\r\n")
            .unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let mut got = 0;
        while got < put_len {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "closed early");
            got += n;
        }
        let init = t0.elapsed();
        initialized();
        let t1 = Instant::now();
        go(url);
        let mut got = 0;
        while got < patch_len {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "closed early");
            got += n;
        }
        patched();
        (init, t1.elapsed())
    }

    fn flagsync_client(runtime: &str, sub: bool, url: &str) -> (Duration, Duration) {
        // Kept alive for the whole run (its workers run the client's tasks).
        let tokio_rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let rt: Arc<dyn Runtime> = match runtime {
            "tokio" => {
                let _in_runtime = tokio_rt.enter();
                Arc::new(flagsync::runtime::TokioRuntime::try_current().unwrap())
            }
            "smol" => Arc::new(flagsync::runtime::SmolRuntime),
            "async-std" => Arc::new(flagsync::runtime::AsyncStdRuntime),
            other => panic!("unknown runtime {other}"),
        };
        let run = |f: flagsync::runtime::BoxFuture<'_, ()>| match runtime {
            "tokio" => tokio_rt.block_on(f),
            "smol" => smol::block_on(f),
            _ => async_std::task::block_on(f),
        };
        let builder = flagsync::Client::builder("sdk-bench-key")
            .stream_uri(url)
            .runtime(rt.clone())
            .no_proxy();
        let client = builder.send_events(false).build().unwrap();
        let (done_tx, done_rx) = mpsc::channel::<Instant>();
        if sub {
            let changes = client.flag_changes();
            let c = client.clone();
            rt.spawn(Box::pin(async move {
                let mut n = 0usize;
                while let Some(change) = changes.recv().await {
                    n += 1;
                    if change.key == MARKER && c.flag(MARKER).is_some_and(|f| f.version == 2) {
                        let _ = done_tx.send(Instant::now());
                        break;
                    }
                }
                std::hint::black_box(n);
            }));
        }
        let t0 = Instant::now();
        let mut init = Duration::ZERO;
        run(Box::pin(async {
            client.start().unwrap();
            assert!(
                client
                    .wait_for_initialization(Duration::from_secs(120))
                    .await
            );
            init = t0.elapsed();
        }));
        initialized();
        assert_eq!(client.flag(MARKER).map(|f| f.version), Some(1));
        if std::env::var_os("E2E_INIT_ONLY").is_some() {
            // For a heap profile of the start alone.
            return (init, Duration::ZERO);
        }
        profile_patches(true);
        let t1 = Instant::now();
        go(url);
        let end = if sub {
            done_rx
                .recv_timeout(Duration::from_secs(120))
                .expect("the subscriber saw the marker")
        } else {
            loop {
                if client.flag(MARKER).is_some_and(|f| f.version == 2) {
                    break Instant::now();
                }
                assert!(
                    t1.elapsed() < Duration::from_secs(120),
                    "the marker never came"
                );
                std::thread::sleep(Duration::from_micros(100));
            }
        };
        let patch = end - t1;
        patched();
        profile_patches(false);
        run(Box::pin(async {
            client.close().await;
        }));
        (init, patch)
    }
}
