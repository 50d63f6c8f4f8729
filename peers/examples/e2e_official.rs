//! The official Rust SDK as a contender of flagsync's end-to-end bench
//! (`adapters/examples/e2e_bench.rs`, which runs this binary once per run):
//! `e2e_official official URL PUT_FILE PATCH_FILE`.
//!
//! `launchdarkly-server-sdk` 3.2.0 with its streaming data source over the plain-HTTP
//! hyper transport, analytics events off, on a multi-threaded tokio runtime. Init is
//! `start_with_default_executor` → initialized; the patches are asked for with `GET /go`
//! and their end is seen by evaluating the marker flag every 100 µs until it serves
//! "final" (this SDK has no flag-change notification). Prints one `RESULT` line.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use launchdarkly_sdk_transport::HyperTransport;
use launchdarkly_server_sdk::{
    Client, ConfigBuilder, ContextBuilder, NullEventProcessorBuilder, ServiceEndpointsBuilder,
    StreamingDataSourceBuilder,
};

const MARKER: &str = "bench-marker";

fn status_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// CPU time of this process so far, every thread (`/proc/self/task/*/schedstat`).
fn cpu_ns() -> u64 {
    std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [_mode, url, ..] = &args[..] else {
        panic!("e2e_official official URL PUT_FILE PATCH_FILE");
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let transport = HyperTransport::builder()
        .disable_proxy()
        .build_http()
        .expect("a plain-HTTP transport");
    let mut endpoints = ServiceEndpointsBuilder::new();
    endpoints
        .polling_base_url(url)
        .streaming_base_url(url)
        .events_base_url(url);
    let mut source = StreamingDataSourceBuilder::<HyperTransport>::new();
    source.transport(transport);
    let config = ConfigBuilder::new("sdk-bench-key")
        .service_endpoints(&endpoints)
        .data_source(&source)
        .event_processor(&NullEventProcessorBuilder::new())
        .build()
        .expect("the official SDK's settings");
    let client = Client::build(config).expect("the official SDK");
    let t0 = Instant::now();
    let ok = runtime.block_on(async {
        client.start_with_default_executor();
        client.wait_for_initialization(Duration::from_secs(60)).await
    });
    assert_eq!(ok, Some(true), "initialized");
    let init = t0.elapsed();
    let hwm_init = status_kb("VmHWM");
    let cpu_init = cpu_ns();
    let context = ContextBuilder::new("bench-user").build().unwrap();
    let value = || client.str_variation(&context, MARKER, String::new());
    assert_eq!(value(), "initial");
    let t1 = Instant::now();
    let mut s = TcpStream::connect(url.strip_prefix("http://").unwrap_or(url)).unwrap();
    s.write_all(b"GET /go HTTP/1.1\r\nHost: bench\r\n\r\n").unwrap();
    let _ = s.read(&mut [0u8; 128]);
    loop {
        if value() == "final" {
            break;
        }
        assert!(t1.elapsed() < Duration::from_secs(300), "the marker never came");
        std::thread::sleep(Duration::from_micros(100));
    }
    let patch = t1.elapsed();
    let cpu_patch = cpu_ns().saturating_sub(cpu_init);
    client.close();
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
