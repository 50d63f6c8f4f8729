//! Connect → initialized for a large FDv1 payload over loopback, on one runtime.
//!
//! ```text
//! python3 gen_payload.py --size large -o /tmp/large.json
//! cargo run --release -p flagsync --all-features --example init_bench -- tokio /tmp/large.json
//! ```
//! Prints the time from `start()` to initialized (best of 3 runs) and the peak RSS
//! (VmHWM) of the process. Run one process per runtime so the peaks do not mix.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flagsync::runtime::Runtime;

fn main() {
    let mut args = std::env::args().skip(1);
    let runtime = args.next().unwrap_or_else(|| "tokio".into());
    let path = args.next().unwrap_or_else(|| "/tmp/large.json".into());
    let payload = std::fs::read_to_string(&path).expect("payload file");
    let body = format!("event: put\ndata: {{\"path\":\"/\",\"data\":{payload}}}\n\n");
    drop(payload);
    let body = Arc::new(body);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let body = body.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut b).unwrap_or(0) == 1 {
                    head.push(b[0]);
                }
                let _ =
                    stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n");
                let _ = stream.write_all(body.as_bytes());
                let mut sink = [0u8; 64];
                while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
            });
        }
    });

    let mut best = Duration::MAX;
    for _ in 0..3 {
        let elapsed = match runtime.as_str() {
            #[cfg(feature = "tokio")]
            "tokio" => tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async {
                    let rt = flagsync::runtime::TokioRuntime::try_current().unwrap();
                    run(Arc::new(rt), &url).await
                }),
            #[cfg(feature = "smol")]
            "smol" => smol::block_on(run(Arc::new(flagsync::runtime::SmolRuntime), &url)),
            #[cfg(feature = "async-std")]
            "async-std" => {
                async_std::task::block_on(run(Arc::new(flagsync::runtime::AsyncStdRuntime), &url))
            }
            other => panic!("unknown or disabled runtime {other}"),
        };
        best = best.min(elapsed);
    }
    let hwm = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM"))
        .map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_owned())
        .unwrap_or_default();
    println!("{runtime}: connect → initialized {best:?} (best of 3), peak RSS {hwm} kB");
}

async fn run(rt: Arc<dyn Runtime>, url: &str) -> Duration {
    let client = flagsync::Client::builder("sdk-bench-key")
        .stream_uri(url)
        .runtime(rt)
        .no_proxy()
        .build()
        .unwrap();
    let t0 = Instant::now();
    client.start().unwrap();
    assert!(
        client
            .wait_for_initialization(Duration::from_secs(60))
            .await
    );
    let elapsed = t0.elapsed();
    assert!(client.flag("bench-marker").is_some());
    client.close().await;
    elapsed
}
