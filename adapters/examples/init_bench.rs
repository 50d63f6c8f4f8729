//! End-to-end over loopback for a large FDv1 payload, on one runtime: connect →
//! initialized, then patches/s (the server pushes 10,000 `patch` events as fast as it
//! can; the last one patches the marker flag `bench-marker` to version 2, and the
//! client counts flag-change events until that version arrives).
//!
//! ```text
//! python3 gen_payload.py --size large -o /tmp/large.json
//! cargo run --release -p flagsync --all-features --example init_bench -- tokio /tmp/large.json
//! ```
//! Prints the medians of 3 runs and the peak RSS (VmHWM) of the process, reset once the
//! in-process server has its copy of the payload (that copy is part of the peak; its
//! size is printed as well). Run one process per runtime so the peaks do not mix.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flagsync::runtime::Runtime;
use serde_json::value::RawValue;

const PATCHES: usize = 10_000;
const MARKER: &str = "bench-marker";
const RUNS: usize = 3;

/// The server's side of one run: released once the client is initialized.
type Go = Arc<Mutex<Option<mpsc::Receiver<()>>>>;

fn main() {
    let mut args = std::env::args().skip(1);
    let runtime = args.next().unwrap_or_else(|| "tokio".into());
    let path = args.next().unwrap_or_else(|| "/tmp/large.json".into());
    let payload = std::fs::read_to_string(&path).expect("payload file");
    let patches = Arc::new(patch_events(&payload));
    let body = format!("event: put\ndata: {{\"path\":\"/\",\"data\":{payload}}}\n\n");
    drop(payload);
    let body = Arc::new(body);
    let go: Go = Arc::new(Mutex::new(None));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    {
        let go = go.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let (body, patches, go) = (body.clone(), patches.clone(), go.clone());
                std::thread::spawn(move || {
                    let mut head = Vec::new();
                    let mut b = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && stream.read(&mut b).unwrap_or(0) == 1 {
                        head.push(b[0]);
                    }
                    let _ = stream
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n");
                    let _ = stream.write_all(body.as_bytes());
                    let rx = go.lock().unwrap().take();
                    if rx.is_some_and(|rx| rx.recv().is_ok()) {
                        let _ = stream.write_all(&patches);
                    }
                    let mut sink = [0u8; 64];
                    while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
                });
            }
        });
    }
    let base_kb = status_kb("VmRSS");
    // Count the peak from here: the setup above (parsing the patches) is not the client.
    let _ = std::fs::write("/proc/self/clear_refs", "5");

    let mut inits = Vec::new();
    let mut rates = Vec::new();
    for _ in 0..RUNS {
        let (tx, rx) = mpsc::channel();
        *go.lock().unwrap() = Some(rx);
        let (init, patch_time) = match runtime.as_str() {
            #[cfg(feature = "tokio")]
            "tokio" => tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async {
                    let rt = flagsync::runtime::TokioRuntime::try_current().unwrap();
                    run(Arc::new(rt), &url, tx).await
                }),
            #[cfg(feature = "smol")]
            "smol" => smol::block_on(run(Arc::new(flagsync::runtime::SmolRuntime), &url, tx)),
            #[cfg(feature = "async-std")]
            "async-std" => async_std::task::block_on(run(
                Arc::new(flagsync::runtime::AsyncStdRuntime),
                &url,
                tx,
            )),
            other => panic!("unknown or disabled runtime {other}"),
        };
        let rate = PATCHES as f64 / patch_time.as_secs_f64();
        eprintln!(
            "{runtime}: connect → initialized {:.0} ms, {PATCHES} patches in {:.0} ms = {rate:.0} patches/s",
            init.as_secs_f64() * 1e3,
            patch_time.as_secs_f64() * 1e3
        );
        inits.push(init);
        rates.push(rate);
    }
    let init = median(&mut inits);
    let rate = median(&mut rates);
    println!(
        "{runtime}: connect → initialized {:.0} ms, {rate:.0} patches/s (medians of {RUNS}), peak RSS {} kB (VmHWM; {base_kb} kB before the first client)",
        init.as_secs_f64() * 1e3,
        status_kb("VmHWM"),
    );
}

/// 10,000 `patch` events: a version bump of the payload's first 9,999 flags, then the
/// marker flag to version 2, serving "final".
fn patch_events(payload: &str) -> Vec<u8> {
    #[derive(serde::Deserialize)]
    struct Data<'a> {
        #[serde(borrow)]
        flags: BTreeMap<&'a str, &'a RawValue>,
    }
    let data: Data<'_> = serde_json::from_str(payload).expect("FDv1 payload");
    let mut out = Vec::new();
    let mut event = |key: &str, flag: &serde_json::Value| {
        out.extend_from_slice(
            format!("event: patch\ndata: {{\"path\":\"/flags/{key}\",\"data\":{flag}}}\n\n")
                .as_bytes(),
        );
    };
    for (key, raw) in data
        .flags
        .iter()
        .filter(|(k, _)| **k != MARKER)
        .take(PATCHES - 1)
    {
        let mut flag: serde_json::Value = serde_json::from_str(raw.get()).unwrap();
        flag["version"] = (flag["version"].as_u64().unwrap_or(0) + 1).into();
        flag["on"] = (!flag["on"].as_bool().unwrap_or(false)).into();
        event(key, &flag);
    }
    let mut marker: serde_json::Value =
        serde_json::from_str(data.flags[MARKER].get()).expect("the payload has bench-marker");
    marker["version"] = 2.into();
    marker["offVariation"] = 1.into();
    event(MARKER, &marker);
    out
}

/// (connect → initialized, first patch sent → marker's version 2 seen).
async fn run(rt: Arc<dyn Runtime>, url: &str, go: mpsc::Sender<()>) -> (Duration, Duration) {
    let client = flagsync::Client::builder("sdk-bench-key")
        .stream_uri(url)
        .runtime(rt)
        .no_proxy()
        .build()
        .unwrap();
    let changes = client.flag_changes();
    let t0 = Instant::now();
    client.start().unwrap();
    assert!(
        client
            .wait_for_initialization(Duration::from_secs(60))
            .await
    );
    let init = t0.elapsed();
    // The initial data's change events are all buffered by now.
    let initial = std::iter::from_fn(|| changes.try_recv()).count();
    assert_eq!(initial, client.snapshot().len(flagsync::Kind::Flag));
    assert_eq!(client.flag(MARKER).map(|f| f.version), Some(1));

    let t1 = Instant::now();
    go.send(()).unwrap();
    let mut events = 0usize;
    loop {
        let change = changes.recv().await.expect("client ended");
        events += 1;
        if change.key == MARKER && client.flag(MARKER).is_some_and(|f| f.version == 2) {
            break;
        }
    }
    let patch_time = t1.elapsed();
    assert!(events >= PATCHES, "{events} change events");
    client.close().await;
    (init, patch_time)
}

fn median<T: PartialOrd + Copy>(v: &mut [T]) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn status_kb(field: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_owned())
        .unwrap_or_default()
}
