//! `core/examples/custom_loop.rs` (the core driven by a `mio` loop of its own, no async
//! runtime) against a real `flagsync serve`: FDv1 streaming, FDv2, and https through a
//! rustls-terminating proxy; its values are compared with a flagsync `Client`'s, a data
//! file edit must reach it, and serve must receive its analytics events. It also
//! measures its footprint next to `flagsync watch` (the async `Client`).
//!
//! The two binaries are brought up to date with `cargo build` (built if missing); the
//! test fails, never skips, if they cannot be had.

mod common;
/// `/proc` sampling, as the `sse-load` tool does it.
#[path = "../src/load/measure.rs"]
#[allow(dead_code)]
mod measure;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Proc, built, debug_dir, expect, flagsync_bin, lines, serve_command, serving};
use measure::ProcSample;
use serde_json::{Value, json};

const SDK_KEY: &str = "sdk-custom-loop-test";

fn example_bin() -> PathBuf {
    let args = ["-p", "flagsync-core", "--example", "custom_loop"];
    built(debug_dir().join("examples").join("custom_loop"), &args)
}

/// The flags: a rule on the `country` attribute, a percentage rollout, a plain one.
fn flags(banner_rule: &str, rollout: [&str; 3]) -> Value {
    json!({"flags": {
        "banner": {"key": "banner", "version": 1, "on": true, "trackEvents": true,
            "variations": ["plain", "fancy", "shiny"], "offVariation": 0,
            "fallthrough": {"variation": 0},
            "rules": [{"id": "r1", "variation": if banner_rule == "shiny" { 2 } else { 1 },
                "clauses": [{"attribute": "country", "op": "in", "values": ["de"],
                    "contextKind": "user"}]}]},
        "rollout": {"key": "rollout", "version": 1, "on": true, "salt": "s1",
            "variations": rollout, "offVariation": 0,
            "fallthrough": {"rollout": {"variations": [
                {"variation": 0, "weight": 30000}, {"variation": 1, "weight": 30000},
                {"variation": 2, "weight": 40000}]}}},
        "simple": {"key": "simple", "version": 1, "on": true, "variations": [false, true],
            "offVariation": 0, "fallthrough": {"variation": 1}}
    }, "segments": {}})
}

/// Replace the data file whole (serve must never read half of it).
fn write_data(path: &Path, data: &Value) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(data).unwrap()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// `flagsync serve` on a free port, with the data file and an events file.
fn serve(data: &Path, events: &Path) -> (Proc, String) {
    let mut command = serve_command(SDK_KEY, data);
    command.arg("--events").arg(events);
    serving(command)
}

/// What a process used, read from /proc/PID/status while it ran: the last VmHWM (its
/// peak resident set) and the most threads seen.
#[derive(Debug, Default, Clone, Copy)]
struct Footprint {
    vm_hwm_kb: u64,
    max_threads: u64,
}

fn sample(pid: u32, into: &Arc<Mutex<Footprint>>) {
    let (pid, into) = (pid, into.clone());
    std::thread::spawn(move || {
        while let Ok(now) = ProcSample::read(Some(pid)) {
            if now.is_zombie {
                break;
            }
            let mut f = into.lock().unwrap();
            f.vm_hwm_kb = f.vm_hwm_kb.max(now.hwm_kb);
            f.max_threads = f.max_threads.max(now.threads);
            drop(f);
            std::thread::sleep(Duration::from_millis(20));
        }
    });
}

/// The value a flagsync `Client` (tokio) evaluates for `flag` and `context`.
fn client_value(url: &str, fdv2: bool, flag: &str, context: &Value) -> Value {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut builder = flagsync::Client::builder(SDK_KEY)
            .stream_uri(url)
            .polling_uri(url)
            .no_proxy()
            .send_events(false);
        if fdv2 {
            builder = builder.fdv2(flagsync::Fdv2Config::default());
        }
        let client = builder.build().unwrap();
        client.start().unwrap();
        assert!(
            client
                .wait_for_initialization(Duration::from_secs(10))
                .await
        );
        let context: flagsync::eval::Context = serde_json::from_value(context.clone()).unwrap();
        let value = client.json_variation(flag, &context, Value::Null);
        client.close().await;
        value
    })
}

/// One run of the example; its stdout lines and footprint.
struct Run {
    proc: Proc,
    rx: Receiver<String>,
    seen: Vec<String>,
    footprint: Arc<Mutex<Footprint>>,
}

fn start_example(url: &str, fdv2: bool, flag: &str, context: &Value, extra: &[&str]) -> Run {
    let mut cmd = Command::new(example_bin());
    cmd.args([
        "--base-uri",
        url,
        "--sdk-key",
        SDK_KEY,
        "--flag",
        flag,
        "--duration",
        "6",
    ]);
    cmd.arg("--context").arg(context.to_string()).args(extra);
    if fdv2 {
        cmd.arg("--fdv2");
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the example");
    let footprint = Arc::default();
    sample(child.id(), &footprint);
    let rx = lines(child.stdout.take().unwrap());
    Run {
        proc: Proc(child),
        rx,
        seen: Vec::new(),
        footprint,
    }
}

impl Run {
    fn expect(&mut self, within: Duration, want: impl Fn(&str) -> bool) -> String {
        expect(&self.rx, &mut self.seen, within, want)
    }

    /// Wait for a clean exit; the `footprint` line it printed.
    fn finish(mut self) -> (String, Footprint, Vec<String>) {
        let line = self.expect(Duration::from_secs(20), |l| l.starts_with("footprint "));
        let status = self.proc.0.wait().unwrap();
        assert!(
            status.success(),
            "the example failed: {status}; saw {:#?}",
            self.seen
        );
        let footprint = *self.footprint.lock().unwrap();
        (line, footprint, self.seen)
    }
}

fn value_line(flag: &str, value: &Value) -> String {
    format!("value {flag} {value}")
}

/// The events serve received for contexts with key `key`: those events, and the
/// summaries sent in the same payloads.
fn events_of(events_file: &Path, key: &str) -> Vec<Value> {
    let lines: Vec<Value> = std::fs::read_to_string(events_file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let payloads: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"]["context"]["key"] == key)
        .map(|l| &l["payloadId"])
        .collect();
    lines
        .iter()
        .filter(|l| payloads.contains(&&l["payloadId"]))
        .map(|l| l["event"].clone())
        .collect()
}

fn assert_events(events_file: &Path, key: &str, flag: &str, feature: bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let events = events_of(events_file, key);
        let has = |kind: &str| events.iter().any(|e| e["kind"] == kind);
        let summary = events
            .iter()
            .any(|e| e["kind"] == "summary" && e["features"].get(flag).is_some());
        let custom = events
            .iter()
            .any(|e| e["kind"] == "custom" && e["key"] == "custom-loop-exit");
        if has("identify") && summary && custom && (!feature || has("feature")) {
            return;
        }
        assert!(Instant::now() < deadline, "events for {key}: {events:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A TLS-terminating proxy in front of `upstream` (host:port), with a certificate for
/// 127.0.0.1 from a fresh CA; its URL, the CA's PEM, and every byte clients sent.
fn tls_proxy(upstream: String) -> (String, String, Arc<Mutex<Vec<u8>>>) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "custom_loop test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from(cert.der().to_vec())],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let config = Arc::new(config);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "https://127.0.0.1:{}",
        listener.local_addr().unwrap().port()
    );
    let sent = Arc::new(Mutex::new(Vec::new()));
    let record = sent.clone();
    std::thread::spawn(move || {
        for sock in listener.incoming().map_while(Result::ok) {
            let (config, upstream, record) = (config.clone(), upstream.clone(), record.clone());
            std::thread::spawn(move || {
                let _ = relay(sock, &config, &upstream, &record);
            });
        }
    });
    (url, ca.pem(), sent)
}

/// Relay one connection: TLS from the client, plain TCP to `upstream`.
fn relay(
    sock: TcpStream,
    config: &Arc<rustls::ServerConfig>,
    upstream: &str,
    record: &Mutex<Vec<u8>>,
) -> std::io::Result<()> {
    let tick = Some(Duration::from_millis(5));
    sock.set_read_timeout(tick)?;
    let mut tls =
        rustls::StreamOwned::new(rustls::ServerConnection::new(config.clone()).unwrap(), sock);
    let mut up = TcpStream::connect(upstream)?;
    up.set_read_timeout(tick)?;
    let mut buf = vec![0u8; 64 * 1024];
    let idle = |e: &std::io::Error| {
        matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        )
    };
    loop {
        match tls.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                record.lock().unwrap().extend_from_slice(&buf[..n]);
                up.write_all(&buf[..n])?;
            }
            Err(e) if idle(&e) => {}
            Err(e) => return Err(e),
        }
        match up.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                tls.write_all(&buf[..n])?;
                tls.flush()?;
            }
            Err(e) if idle(&e) => {}
            Err(e) => return Err(e),
        }
    }
}

#[test]
fn the_custom_loop_example_against_flagsync_serve() {
    let dir = std::env::temp_dir().join(format!("flagsync-custom-loop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (data_file, events_file) = (dir.join("flags.json"), dir.join("events.jsonl"));
    write_data(&data_file, &flags("fancy", ["low", "mid", "high"]));
    let (_serve, url) = serve(&data_file, &events_file);

    // FDv1 streaming: the rule on `country`; then an edit of the rule's variation.
    let de = json!({"kind": "user", "key": "user-fdv1", "country": "de"});
    let mut run = start_example(&url, false, "banner", &de, &[]);
    run.expect(Duration::from_secs(10), |l| l == "initialized");
    let expected = client_value(&url, false, "banner", &de);
    assert_eq!(expected, json!("fancy"));
    run.expect(Duration::from_secs(5), |l| {
        l == value_line("banner", &expected)
    });
    write_data(&data_file, &flags("shiny", ["low", "mid", "high"]));
    run.expect(Duration::from_secs(5), |l| {
        l == value_line("banner", &json!("shiny"))
    });
    assert_eq!(client_value(&url, false, "banner", &de), json!("shiny"));
    let (line, fdv1_footprint, _) = run.finish();
    println!("FDv1 run: {line}; sampled {fdv1_footprint:?}");
    assert!(line.ends_with("threads=1"), "{line}");
    assert_eq!(fdv1_footprint.max_threads, 1);
    assert_events(&events_file, "user-fdv1", "banner", true);

    // FDv2 (its default data system): the rollout; then an edit of its variations.
    let user = json!({"kind": "user", "key": "user-fdv2"});
    let mut run = start_example(&url, true, "rollout", &user, &[]);
    run.expect(Duration::from_secs(10), |l| l == "initialized");
    let expected = client_value(&url, true, "rollout", &user);
    assert!(expected.is_string(), "{expected}");
    run.expect(Duration::from_secs(5), |l| {
        l == value_line("rollout", &expected)
    });
    write_data(&data_file, &flags("shiny", ["low2", "mid2", "high2"]));
    let edited = json!(format!("{}2", expected.as_str().unwrap()));
    run.expect(Duration::from_secs(5), |l| {
        l == value_line("rollout", &edited)
    });
    assert_eq!(client_value(&url, true, "rollout", &user), edited);
    let (line, fdv2_footprint, _) = run.finish();
    println!("FDv2 run: {line}; sampled {fdv2_footprint:?}");
    assert_eq!(fdv2_footprint.max_threads, 1);
    assert_events(&events_file, "user-fdv2", "rollout", false);

    // https: rustls' sans-I/O client through a TLS-terminating proxy, trusting its CA.
    let upstream = url.trim_start_matches("http://").to_owned();
    let (https_url, ca_pem, sent) = tls_proxy(upstream);
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    let fr = json!({"kind": "user", "key": "user-https", "country": "fr"});
    let ca_arg = ["--ca-file", ca_file.to_str().unwrap()];
    let mut run = start_example(&https_url, false, "banner", &fr, &ca_arg);
    run.expect(Duration::from_secs(10), |l| l == "initialized");
    let expected = client_value(&url, false, "banner", &fr);
    assert_eq!(expected, json!("plain"));
    run.expect(Duration::from_secs(5), |l| {
        l == value_line("banner", &expected)
    });
    let (line, https_footprint, seen) = run.finish();
    println!("https run: {line}; sampled {https_footprint:?}");
    assert!(
        seen.iter().any(|l| l.starts_with("events-sent ")),
        "{seen:#?}"
    );
    assert_events(&events_file, "user-https", "banner", true);
    // What went through the proxy: the stream and the events, with their headers.
    let sent = String::from_utf8_lossy(&sent.lock().unwrap()).to_lowercase();
    let bulk = sent.find("post /bulk http/1.1\r\n").expect("a POST /bulk");
    let head = &sent[bulk..bulk + sent[bulk..].find("\r\n\r\n").unwrap()];
    assert!(
        head.contains(&format!(
            "\r\nauthorization: {}\r\n",
            SDK_KEY.to_lowercase()
        )),
        "{head}"
    );
    assert!(head.contains("\r\nuser-agent: flagsync/"), "{head}");
    assert!(sent.contains("get /all http/1.1\r\n"), "{sent}");

    // The async `Client` for comparison: `flagsync watch` evaluating the same flag.
    let mut watch = Command::new(flagsync_bin())
        .args([
            "watch",
            "--stream-uri",
            &url,
            "--sdk-key",
            SDK_KEY,
            "--duration",
            "6",
        ])
        .args(["--evaluate", "banner", "--context", &de.to_string()])
        .stdout(Stdio::null())
        .spawn()
        .expect("start flagsync watch");
    let watch_footprint = Arc::default();
    sample(watch.id(), &watch_footprint);
    assert!(watch.wait().unwrap().success());
    std::thread::sleep(Duration::from_millis(50));
    let watch_footprint = *watch_footprint.lock().unwrap();
    println!(
        "footprint (VmHWM, most threads; sampled from /proc/PID/status every 20 ms): \
         custom_loop FDv1 {} kB / {} thread(s), FDv2 {} kB / {}, https {} kB / {}; \
         flagsync watch (async Client, tokio) {} kB / {} threads",
        fdv1_footprint.vm_hwm_kb,
        fdv1_footprint.max_threads,
        fdv2_footprint.vm_hwm_kb,
        fdv2_footprint.max_threads,
        https_footprint.vm_hwm_kb,
        https_footprint.max_threads,
        watch_footprint.vm_hwm_kb,
        watch_footprint.max_threads,
    );
    let _ = std::fs::remove_dir_all(&dir);
}
