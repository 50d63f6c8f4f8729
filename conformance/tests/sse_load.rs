//! `sse-load` against a real `flagsync serve`: 200 FDv1 and 200 FDv2 streams from one
//! thread get their initial payload, stay open through an idle period with heartbeats,
//! and each of three edits of the data file reaches every one of them. Two runs check
//! that the tool fails when it should: a wrong SDK key (every stream refused), and
//! edits of a file the server does not watch (every change missed).
//!
//! `flagsync` is brought up to date with `cargo build -p flagsync-cli` (built if
//! missing); the test fails, never skips, if it cannot be had.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::{Proc, serve_command, serving};
use serde_json::{Value, json};

const SDK_KEY: &str = "sdk-load-test";
const STREAMS: u64 = 200;
const CHANGES: u64 = 3;

/// A scratch folder with a data file, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    /// The data file holds flag `other` and `padding` flags `flag-NNNN` with a rule
    /// each (about 300 bytes a flag): they come before `load-flag` in every payload, so
    /// that with a few hundred the marker lies past the first reads of a `put`.
    fn new(name: &str, padding: usize) -> Self {
        let dir = std::env::temp_dir().join(format!("sse-load-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut flags = serde_json::Map::new();
        flags.insert(
            "other".into(),
            json!({"key": "other", "version": 1, "on": true, "variations": [false, true],
                "offVariation": 0, "fallthrough": {"variation": 1}}),
        );
        for i in 0..padding {
            let key = format!("flag-{i:04}");
            let flag = json!({"key": key, "version": 1, "on": true,
                "variations": ["a", "b"], "offVariation": 0, "fallthrough": {"variation": 0},
                "rules": [{"id": format!("r{i}"), "variation": 1, "clauses": [{
                    "attribute": "email", "op": "endsWith", "contextKind": "user",
                    "values": ["@example.com", "@example.org"], "negate": false}]}]});
            flags.insert(key, flag);
        }
        let data = json!({"flags": flags, "segments": {}});
        std::fs::write(dir.join("data.json"), data.to_string()).unwrap();
        Self(dir)
    }

    fn data(&self) -> PathBuf {
        self.0.join("data.json")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `flagsync serve` on a free port with heartbeats every second: the process and its URL.
fn serve(data: &Path) -> (Proc, String) {
    serving(serve_command(SDK_KEY, data))
}

/// Run `sse-load ARGS --json`: its exit status, its report and how long it took.
fn sse_load(args: &[&str]) -> (Output, Value, Duration) {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_sse-load"))
        .args(args)
        .arg("--json")
        .output()
        .expect("run sse-load");
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{}", String::from_utf8_lossy(&output.stderr));
    let report = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("sse-load printed no JSON report ({e}): {stdout}"));
    (output, report, took)
}

/// 200 streams, an idle period, three changes: everything must arrive.
fn every_stream_gets_every_change(fdv2: bool) {
    // About 150 kB: every `put` takes several reads, the marker near its end.
    let scratch = Scratch::new(if fdv2 { "fdv2" } else { "fdv1" }, 500);
    let (serve, url) = serve(&scratch.data());
    let pid = serve.0.id().to_string();
    let data = scratch.data();
    let streams = STREAMS.to_string();
    let changes = CHANGES.to_string();
    let mut args = vec![
        "--url",
        &url,
        "--streams",
        &streams,
        "--sdk-key",
        SDK_KEY,
        "--serve-pid",
        &pid,
        "--idle-secs",
        "3",
        "--changes",
        &changes,
        "--interval-ms",
        "1000",
    ];
    args.extend(["--trigger-file", data.to_str().unwrap()]);
    if fdv2 {
        args.push("--fdv2");
    }
    let (output, report, took) = sse_load(&args);
    assert!(output.status.success(), "sse-load failed: {report:#}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert_eq!(report["ok"], true);
    assert_eq!(report["protocol"], if fdv2 { "fdv2" } else { "fdv1" });
    assert_eq!(report["connect"]["initialized"], STREAMS);
    assert_eq!(report["connect"]["failures"], json!({}));
    assert_eq!(report["failed_after_initial_payload"], 0);
    // A heartbeat a second on every stream for three seconds (allowing for timing).
    let idle = &report["idle"];
    assert_eq!(idle["streams"], STREAMS);
    let beats = idle["heartbeats"].as_u64().unwrap();
    assert!(
        beats >= 2 * STREAMS,
        "{beats} heartbeats in the idle period"
    );
    let serve_idle = &idle["serve"];
    assert!(serve_idle["rss_kb"].as_u64().unwrap() > 0, "{serve_idle}");
    assert!(serve_idle["cpu_percent_of_one_core"].as_f64().is_some());
    // Streams cost serve no thread (its stream hub holds them all on one).
    assert!(serve_idle["threads"].as_u64().unwrap() < 16, "{serve_idle}");
    assert!(report["serve"]["end"]["hwm_kb"].as_u64().unwrap() > 0);
    let per_change = report["changes"]["per_change"].as_array().unwrap();
    assert_eq!(per_change.len() as u64, CHANGES);
    for change in per_change {
        assert_eq!(change["received"], STREAMS, "{change}");
        assert_eq!(change["missed"], 0, "{change}");
        // A second apart, serve (which looks at its file five times a second) sends
        // each edit on its own: every stream reads every marker.
        assert_eq!(change["superseded"], 0, "{change}");
        // serve looks at its file five times a second: well within 10 s.
        let max = change["latency_ms"]["max"].as_f64().unwrap();
        assert!(max > 0.0 && max < 10_000.0, "{change}");
    }
    assert_eq!(report["changes"]["overall"]["received"], STREAMS * CHANGES);
    // The edits kept the other flag and marked the load flag with the last change.
    let written: Value = serde_json::from_slice(&std::fs::read(&data).unwrap()).unwrap();
    assert_eq!(
        written["flags"]["other"]["variations"],
        json!([false, true])
    );
    let salt = written["flags"]["load-flag"]["salt"].as_str().unwrap();
    assert!(
        salt.starts_with("sse-load-") && salt.ends_with("-3"),
        "{salt}"
    );
}

#[test]
fn fdv1_streams_get_the_payload_and_every_change() {
    every_stream_gets_every_change(false);
}

#[test]
fn fdv2_streams_get_the_payload_and_every_change() {
    every_stream_gets_every_change(true);
}

#[test]
fn refused_streams_fail_the_run() {
    let scratch = Scratch::new("refused", 0);
    let (_serve, url) = serve(&scratch.data());
    let args = ["--url", &url, "--streams", "20", "--sdk-key", "not-the-key"];
    let (output, report, _) = sse_load(&args);
    assert_eq!(output.status.code(), Some(1), "{report:#}");
    assert_eq!(report["ok"], false);
    assert_eq!(report["connect"]["initialized"], 0);
    assert_eq!(report["connect"]["failures"], json!({"status 401": 20}));
}

#[test]
fn changes_the_server_never_sends_fail_the_run() {
    let scratch = Scratch::new("unwatched", 0);
    let (_serve, url) = serve(&scratch.data());
    // The tool edits a copy that the server does not watch.
    let copy = scratch.0.join("copy.json");
    std::fs::copy(scratch.data(), &copy).unwrap();
    let args = [
        "--url",
        &url,
        "--streams",
        "20",
        "--sdk-key",
        SDK_KEY,
        "--changes",
        "2",
        "--interval-ms",
        "100",
        "--change-timeout-ms",
        "1500",
        "--trigger-file",
        copy.to_str().unwrap(),
    ];
    let (output, report, _) = sse_load(&args);
    assert_eq!(output.status.code(), Some(1), "{report:#}");
    assert_eq!(report["connect"]["initialized"], 20);
    for change in report["changes"]["per_change"].as_array().unwrap() {
        assert_eq!(
            (&change["received"], &change["missed"]),
            (&json!(0), &json!(20))
        );
    }
}
