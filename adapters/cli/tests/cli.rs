//! The `flagsync` binary, run as a user would.

#[path = "common/serve.rs"]
#[allow(dead_code)] // the banner is for the relay tests
mod serve;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use serve::Serve;

const BIN: &str = env!("CARGO_BIN_EXE_flagsync");

fn data() -> Value {
    json!({
        "flags": {
            "checkout": {"key": "checkout", "version": 5, "on": true, "variations": [false, true],
                         "fallthrough": {"variation": 1}, "offVariation": 0,
                         "rules": [], "prerequisites": [], "targets": [], "salt": "abc"},
            "limit": {"key": "limit", "version": 1, "on": false, "variations": [1, 10],
                      "fallthrough": {"variation": 0}, "offVariation": 1, "salt": "def"}
        },
        "segments": {"beta": {"key": "beta", "version": 2, "included": ["u1"], "salt": "ghi"}}
    })
}

fn temp_file(name: &str, contents: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("flagsync-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

/// `flagsync serve` of `file` with SDK key `key` on a free port; killed on drop.
fn serve(file: &std::path::Path, key: &str) -> Serve {
    serve_with(file, key, &[])
}

/// With more `serve` arguments (faults).
fn serve_with(file: &std::path::Path, key: &str, extra: &[&str]) -> Serve {
    let file = file.to_str().expect("a UTF-8 path");
    let mut args = vec!["--sdk-key", key, "--data", file];
    args.extend_from_slice(extra);
    Serve::start(&args)
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("FLAGSYNC_SDK_KEY")
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn assert_clean_failure(o: &Output) {
    assert!(!o.status.success(), "unexpected success");
    let err = stderr(o);
    assert!(err.contains("flagsync: error:"), "{err}");
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{err}"
    );
}

#[test]
fn serve_then_snapshot_round_trips_the_data_file() {
    let file = temp_file("round.json", &data().to_string());
    let server = serve(&file, "sdk-round");
    for mode in [&[][..], &["--polling"][..]] {
        let mut args = vec![
            "snapshot",
            "--stream-uri",
            &server.url,
            "--sdk-key",
            "sdk-round",
        ];
        args.extend_from_slice(mode);
        let out = run(&args);
        assert!(out.status.success(), "{mode:?}: {}", stderr(&out));
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(got, data(), "{mode:?}");
    }
}

#[test]
fn serve_pushes_edits_of_the_data_file() {
    let file = temp_file("edit.json", &data().to_string());
    let server = serve(&file, "sdk-edit");
    std::thread::sleep(Duration::from_millis(1100)); // a distinct mtime
    let mut edited = data();
    edited["flags"]["limit"]["on"] = json!(true);
    edited["flags"]["limit"]["version"] = json!(2);
    std::fs::write(&file, edited.to_string()).unwrap();
    let mut last = Value::Null;
    for _ in 0..40 {
        let out = run(&[
            "snapshot",
            "--stream-uri",
            &server.url,
            "--sdk-key",
            "sdk-edit",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        last = serde_json::from_slice(&out.stdout).unwrap();
        if last == edited {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("edit not served; last snapshot {last}");
}

/// An open stream of `url` at `path`: what it has sent so far, read as it arrives.
struct RawStream {
    socket: std::net::TcpStream,
    text: String,
}

impl RawStream {
    fn open(url: &str, path: &str, key: &str) -> Self {
        use std::io::Write;
        let addr = url.trim_start_matches("http://");
        let mut socket = std::net::TcpStream::connect(addr).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        write!(
            socket,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {key}\r\n\r\n"
        )
        .unwrap();
        Self {
            socket,
            text: String::new(),
        }
    }

    /// Read for `time`, or until `needle` occurs `times` times.
    fn read_until(&mut self, needle: &str, times: usize, time: Duration) -> &str {
        use std::io::Read;
        let deadline = std::time::Instant::now() + time;
        let mut buf = [0u8; 64 * 1024];
        while self.text.matches(needle).count() < times && std::time::Instant::now() < deadline {
            if let Ok(n) = self.socket.read(&mut buf) {
                self.text.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        }
        &self.text
    }
}

#[test]
fn an_edit_of_one_flag_reaches_streams_as_one_change() {
    let file = temp_file("one-change.json", &data().to_string());
    let server = serve(&file, "sdk-one");
    let t = Duration::from_secs(10);
    let mut fdv1 = RawStream::open(&server.url, "/all", "sdk-one");
    let mut fdv2 = RawStream::open(&server.url, "/sdk/stream", "sdk-one");
    assert!(fdv1.read_until("event: put", 1, t).contains("event: put"));
    assert!(
        fdv2.read_until("payload-transferred", 1, t)
            .contains("xfer-full")
    );
    let (seen1, seen2) = (fdv1.text.len(), fdv2.text.len());
    let mut edited = data();
    edited["flags"]["limit"]["on"] = json!(true);
    std::fs::write(&file, edited.to_string()).unwrap();
    fdv1.read_until("event: patch", 1, t);
    fdv2.read_until("payload-transferred", 2, t);
    // Anything else the edit would send has had time to arrive.
    fdv1.read_until("never sent", 1, Duration::from_millis(300));
    fdv2.read_until("never sent", 1, Duration::from_millis(300));
    let after1 = &fdv1.text[seen1..];
    assert_eq!(after1.matches("event: patch").count(), 1, "{after1}");
    assert!(after1.contains("\"path\":\"/flags/limit\""), "{after1}");
    assert!(
        !after1.contains("event: put") && !after1.contains("checkout"),
        "{after1}"
    );
    let after2 = &fdv2.text[seen2..];
    assert_eq!(after2.matches("event: put-object").count(), 1, "{after2}");
    assert!(after2.contains("\"key\":\"limit\""), "{after2}");
    assert!(
        !after2.contains("server-intent") && !after2.contains("checkout"),
        "{after2}"
    );
    assert!(after2.contains("event: payload-transferred"), "{after2}");
}

#[test]
fn snapshot_with_a_wrong_key_fails_and_says_so() {
    let file = temp_file("key.json", &data().to_string());
    let server = serve(&file, "sdk-right");
    let out = run(&[
        "snapshot",
        "--stream-uri",
        &server.url,
        "--sdk-key",
        "sdk-wrong",
        "--timeout",
        "10",
    ]);
    assert_clean_failure(&out);
    let err = stderr(&out);
    assert!(
        err.contains("SDK key was rejected") && err.contains("401"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn malformed_url_is_a_clear_error() {
    for bad in ["htp://x", "127.0.0.1:8030", "http://", "http://host:99999"] {
        let out = run(&["snapshot", "--stream-uri", bad, "--sdk-key", "k"]);
        assert_clean_failure(&out);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = stderr(&out);
        assert!(
            err.contains("invalid --stream-uri") && err.contains("http://"),
            "{err}"
        );
    }
    let out = run(&["watch", "--polling-uri", "ftp://x", "--sdk-key", "k"]);
    assert!(stderr(&out).contains("invalid --polling-uri"));
}

#[test]
fn unreachable_host_is_a_clear_error() {
    // Bind then drop: a port with nothing listening.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let out = run(&[
        "snapshot",
        "--stream-uri",
        &url,
        "--sdk-key",
        "k",
        "--timeout",
        "10",
    ]);
    assert_clean_failure(&out);
    assert!(stderr(&out).contains("cannot reach"), "{}", stderr(&out));
}

#[test]
fn missing_key_for_the_real_service_and_bad_files() {
    let out = run(&["snapshot"]);
    assert_clean_failure(&out);
    assert!(stderr(&out).contains("FLAGSYNC_SDK_KEY"));

    let out = run(&["serve", "--data", "/definitely/not/here.json"]);
    assert_clean_failure(&out);
    assert!(stderr(&out).contains("cannot read"));

    let bad = temp_file("bad.json", "{\"flags\": {");
    let out = run(&["serve", "--data", bad.to_str().unwrap()]);
    assert_clean_failure(&out);
    assert!(stderr(&out).contains("not valid JSON"));

    let wrong = temp_file("wrong.json", "{\"flags\": [1]}");
    let out = run(&["serve", "--data", wrong.to_str().unwrap()]);
    assert_clean_failure(&out);
    assert!(stderr(&out).contains("\"flags\" must be an object"));
}

#[test]
fn demo_prints_flag_changes() {
    let out = run(&["demo", "--duration", "5"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("initialized"), "{text}");
    assert!(
        text.contains("flag dark-mode: v7 → v8, on: false → true"),
        "{text}"
    );
}

#[test]
fn watch_json_lines() {
    let file = temp_file("watch.json", &data().to_string());
    let server = serve(&file, "sdk-w");
    let out = run(&[
        "watch",
        "--json",
        "--duration",
        "1",
        "--stream-uri",
        &server.url,
        "--sdk-key",
        "sdk-w",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let init = lines.iter().find(|l| l["type"] == "initialized").unwrap();
    assert_eq!(
        (init["flags"].as_u64(), init["segments"].as_u64()),
        (Some(2), Some(1))
    );
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "status" && l["state"] == "valid")
    );
    // The initial data's change events are part of "initialized", never news.
    assert!(!lines.iter().any(|l| l["type"] == "flag"), "{lines:?}");
    // No progress unless asked for (stderr is not a terminal here).
    assert!(!stderr(&out).contains("initialized in"), "{}", stderr(&out));
}

#[test]
fn watch_progress_on_stderr() {
    let file = temp_file("progress.json", &data().to_string());
    let server = serve(&file, "sdk-p");
    let out = run(&[
        "watch",
        "--progress",
        "--duration",
        "1",
        "--stream-uri",
        &server.url,
        "--sdk-key",
        "sdk-p",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    let last = lines
        .iter()
        .position(|l| l.starts_with("initialized in "))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(lines[last].contains(" ms: 2 flags ("), "{err}");
    assert!(lines[last].ends_with(" B received)"), "{err}");
    // Before it, only the connecting line and `loading:` lines (how many depends on
    // timing); none after.
    for l in &lines[1..last] {
        assert!(
            l.starts_with("loading: ") && l.contains(" received ("),
            "{err}"
        );
    }
    assert!(
        !lines[last + 1..].iter().any(|l| l.starts_with("loading")),
        "{err}"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("initialized in"), "{text}");
}

fn json_lines(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect()
}

#[test]
fn serve_then_fdv2_snapshot_with_each_preset() {
    let file = temp_file("fdv2.json", &data().to_string());
    let server = serve(&file, "sdk-fdv2");
    for preset in ["default", "streaming", "polling"] {
        let out = run(&[
            "snapshot",
            "--stream-uri",
            &server.url,
            "--sdk-key",
            "sdk-fdv2",
            "--fdv2",
            preset,
        ]);
        assert!(out.status.success(), "{preset}: {}", stderr(&out));
        let got: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(got, data(), "{preset}");
    }
}

#[test]
fn watch_fdv2_shows_availability_and_source_through_the_fdv1_fallback() {
    let file = temp_file("fallback.json", &data().to_string());
    let server = serve_with(&file, "sdk-fb", &["--fdv1-fallback"]);
    let out = run(&[
        "watch",
        "--json",
        "--duration",
        "1.5",
        "--fdv2",
        "streaming",
        "--stream-uri",
        &server.url,
        "--sdk-key",
        "sdk-fb",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("(FDv2: streaming)"),
        "{}",
        stderr(&out)
    );
    let lines = json_lines(&out);
    let status = lines
        .iter()
        .find(|l| l["type"] == "status" && l["state"] == "valid")
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert!(status["availability"].is_string() && status.get("source").is_some());
    // Whatever was seen first, the last word is FDv1 polling at CACHED.
    let last = lines
        .iter()
        .rev()
        .find(|l| l["type"] == "status" || l["type"] == "source")
        .unwrap();
    assert_eq!(
        (&last["availability"], &last["source"]),
        (&json!("cached"), &json!("fdv1-polling")),
        "{lines:?}"
    );
    let init = lines.iter().find(|l| l["type"] == "initialized").unwrap();
    assert_eq!(init["flags"].as_u64(), Some(2));
}

#[test]
fn watch_fdv2_text_against_a_refused_stream() {
    let file = temp_file("refused.json", &data().to_string());
    let server = serve_with(
        &file,
        "sdk-r",
        &["--fail", "/sdk/stream=401", "--payload-error", "always"],
    );
    let out = run(&[
        "watch",
        "--duration",
        "1",
        "--fdv2",
        "default",
        "--stream-uri",
        &server.url,
        "--sdk-key",
        "sdk-r",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("initialized in"), "{text}");
    assert!(text.contains("HTTP 401"), "{text}");
    assert!(
        text.contains("status: valid  [data: refreshed, source: polling]"),
        "{text}"
    );
}

#[test]
fn serve_fault_flags_are_checked() {
    let file = temp_file("faults.json", &data().to_string());
    for bad in [
        &["--fail", "/nope=401"][..],
        &["--fail", "/sdk/stream"],
        &["--fail", "/sdk/stream=42"],
        &["--goodbye", "sometimes"],
        &["--hang", "/sdk/other"],
    ] {
        let mut args = vec!["serve", "--port", "0", "--data", file.to_str().unwrap()];
        args.extend_from_slice(bad);
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    }
    let out = run(&[
        "watch",
        "--polling",
        "--fdv2",
        "default",
        "--stream-uri",
        "http://127.0.0.1:1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let help = run(&["serve", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--fdv1-fallback",
        "--goodbye",
        "--payload-error",
        "--fail",
        "--hang",
    ] {
        assert!(help.contains(flag), "{help}");
    }
}

/// `POST` `body` to `url` + `path` with `headers`; the response's status.
fn post_events(url: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> u16 {
    use std::io::{Read, Write};
    let addr = url.strip_prefix("http://").unwrap();
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = format!("POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    conn.write_all(&bytes).unwrap();
    let mut resp = String::new();
    conn.read_to_string(&mut resp).unwrap();
    resp.split(' ').nth(1).unwrap().parse().unwrap()
}

#[test]
fn serve_writes_each_received_event_as_a_json_line() {
    let file = temp_file("events-data.json", &data().to_string());
    let out = temp_file("events.jsonl", "stale contents are truncated\n");
    let server = serve_with(&file, "sdk-ev", &["--events", out.to_str().unwrap()]);
    let bulk = json!([
        {"kind": "identify", "creationDate": 1_700_000_000_000_u64, "context": {"kind": "user", "key": "u1"}},
        {"kind": "custom", "creationDate": 1_700_000_000_001_u64, "key": "clicked",
         "contextKeys": {"user": "u1"}, "metricValue": 2.5}
    ]);
    let key = [
        ("Authorization", "sdk-ev"),
        ("X-LaunchDarkly-Event-Schema", "4"),
        ("X-LaunchDarkly-Payload-ID", "pid-1"),
        ("User-Agent", "NodeJSClient/9.13.7"),
    ];
    assert_eq!(
        post_events(&server.url, "/bulk", &key, bulk.to_string().as_bytes()),
        202
    );
    let wrong = [("Authorization", "sdk-wrong")];
    assert_eq!(
        post_events(&server.url, "/bulk", &wrong, b"[{\"kind\":\"custom\"}]"),
        401
    );
    assert_eq!(post_events(&server.url, "/bulk", &key, b"[{"), 400);
    let diag = json!({"kind": "diagnostic", "creationDate": 1_700_000_000_002_u64,
                      "id": {"diagnosticId": "d"}, "droppedEvents": 0});
    let key = [("Authorization", "sdk-ev")];
    assert_eq!(
        post_events(
            &server.url,
            "/diagnostic",
            &key,
            diag.to_string().as_bytes()
        ),
        202
    );

    let mut lines = Vec::new();
    for _ in 0..100 {
        let text = std::fs::read_to_string(&out).unwrap();
        lines = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect();
        if lines.len() >= 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(lines.len(), 3, "{lines:?}");
    for line in &lines {
        assert!(
            line["receivedAt"].as_u64().unwrap() > 1_700_000_000_000,
            "{line}"
        );
    }
    let strip = |l: &Value| {
        let mut l = l.clone();
        l.as_object_mut().unwrap().remove("receivedAt");
        l
    };
    assert_eq!(
        strip(&lines[0]),
        json!({"endpoint": "/bulk", "payloadId": "pid-1", "schema": "4",
               "userAgent": "NodeJSClient/9.13.7", "event": bulk[0]})
    );
    assert_eq!(
        strip(&lines[1]),
        json!({"endpoint": "/bulk", "payloadId": "pid-1", "schema": "4",
               "userAgent": "NodeJSClient/9.13.7", "event": bulk[1]})
    );
    assert_eq!(
        strip(&lines[2]),
        json!({"endpoint": "/diagnostic", "payloadId": null, "schema": null,
               "userAgent": null, "event": diag})
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        !text.contains("sdk-ev") && !text.contains("stale"),
        "{text}"
    );
    // The documented field order, the event last.
    assert!(text.starts_with("{\"receivedAt\":"), "{text}");
    assert!(
        text.contains(",\"endpoint\":\"/diagnostic\",\"payloadId\":null,\"schema\":null,\"userAgent\":null,\"event\":{"),
        "{text}"
    );

    let help = run(&["serve", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--events <FILE|->") && help.contains("payloadId"),
        "{help}"
    );
}

#[test]
fn serve_events_to_stdout_moves_the_other_messages_to_stderr() {
    let file = temp_file("events-stdout.json", &data().to_string());
    let mut child = Command::new(BIN)
        .args(["serve", "--port", "0", "--events", "-", "--data"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    stderr.read_line(&mut banner).unwrap();
    // Keep reading it: serve stops when its standard error is closed mid-banner.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let url = banner.split_whitespace().last().unwrap().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{banner:?}");
    let bulk =
        json!([{"kind": "custom", "creationDate": 1, "key": "k", "contextKeys": {"user": "u"}}]);
    assert_eq!(
        post_events(&url, "/base/bulk", &[], bulk.to_string().as_bytes()),
        202
    );
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let line: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    assert_eq!(line["endpoint"], "/bulk");
    assert_eq!(line["payloadId"], Value::Null);
    assert_eq!(line["event"], bulk[0]);
}

#[test]
fn watch_evaluates_and_serve_shows_what_was_reported() {
    let file = temp_file("loop-data.json", &data().to_string());
    let out = temp_file("loop-events.jsonl", "");
    let server = serve_with(&file, "sdk-loop", &["--events", out.to_str().unwrap()]);
    let watched = run(&[
        "watch",
        "--json",
        "--duration",
        "1.5",
        "--stream-uri",
        &server.url,
        "--sdk-key",
        "sdk-loop",
        "--evaluate",
        "checkout",
        "--evaluate",
        "limit",
        "--context",
        r#"{"kind":"org","key":"acme","name":"Acme"}"#,
    ]);
    assert!(watched.status.success(), "{}", stderr(&watched));
    let lines = json_lines(&watched);
    let evaluation = |key: &str| {
        lines
            .iter()
            .find(|l| l["type"] == "evaluation" && l["key"] == key)
            .unwrap_or_else(|| panic!("no evaluation of {key} in {lines:?}"))
            .clone()
    };
    assert_eq!(evaluation("checkout")["value"], true);
    assert_eq!(
        evaluation("checkout")["reason"],
        json!({"kind": "FALLTHROUGH"})
    );
    assert_eq!(evaluation("limit")["value"].as_f64(), Some(10.0));
    assert_eq!(evaluation("limit")["reason"], json!({"kind": "OFF"}));
    // What the watch reported reached serve: the context's index event and a summary
    // counting both flags.
    let mut events = Vec::new();
    for _ in 0..100 {
        events = std::fs::read_to_string(&out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect();
        if events.iter().any(|e| e["event"]["kind"] == "summary") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let index = events
        .iter()
        .find(|e| e["event"]["kind"] == "index")
        .unwrap_or_else(|| panic!("no index event in {events:?}"));
    assert_eq!(index["endpoint"], "/bulk");
    assert_eq!(
        index["event"]["context"],
        json!({"kind": "org", "key": "acme", "name": "Acme"})
    );
    let counted: u64 = events
        .iter()
        .filter(|e| e["event"]["kind"] == "summary")
        .flat_map(|e| e["event"]["features"].as_object().unwrap().clone())
        .filter(|(k, _)| k == "checkout" || k == "limit")
        .flat_map(|(_, f)| f["counters"].as_array().unwrap().clone())
        .map(|c| c["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, 2, "{events:?}");
}

#[test]
fn watch_rejects_a_malformed_context() {
    let out = run(&[
        "watch",
        "--stream-uri",
        "http://127.0.0.1:9",
        "--sdk-key",
        "sdk-x",
        "--evaluate",
        "f",
        "--context",
        "{\"kind\":\"user\"}",
    ]);
    assert_clean_failure(&out);
    assert!(stderr(&out).contains("--context"), "{}", stderr(&out));
}
