//! Issue 42: what a large payload costs the client follows its bytes, never the number
//! of reads it arrives in, and an FDv2 poll polled again and again costs no more than
//! one.
//!
//! - An FDv1 `put` of ~1.4 MB is served through a real loopback socket with
//!   `TCP_NODELAY`, one byte per write, and then 64 bytes per write, on each runtime: the peak RSS
//!   growth of the first may be at most 1.25 times that of the second. Before the fix
//!   each read's bytes were kept as a piece of their own (a reference and an
//!   allocation per read, ~110 bytes). A debug build's client cannot keep up with a
//!   byte per write: it reads ~90 bytes at a time, where the release CLI reads a few
//!   (BENCHMARKS.md), so here the old code measured 1.26× (against 0.90× now), and
//!   the pieces' bound is tested in the core (`store::scan::data_set` tests).
//! - An FDv2 poll body of ~9.5 MB is polled six times: the peak RSS growth stays
//!   within 2.75 times the body. Measured 2.20–2.37× on tokio, 2.27× on smol, 2.32× on
//!   async-std (the issue's target is 2.5×; the margin is for the allocator, whose
//!   slack on the runtime's threads is ~0.5× here). The body is read as it arrives
//!   (`flagsync_core::fdv2::PollReader`) and each object the store holds already takes
//!   the stored buffer, so a poll holds the stored data and its change list, never its
//!   body. Before: 3.8× (the whole body beside the stored data), and before that 5.1×
//!   (a copy of every item as well).
//!
//! Each case runs alone in a child process (the test binary run again with `--exact`),
//! so that the peak it reads (`VmHWM` of `/proc/self/status`, reset with
//! `/proc/self/clear_refs` once the payload is built, before the client starts) is its
//! own. Linux only; each case on each runtime.
#![cfg(target_os = "linux")]
#![cfg_attr(not(feature = "tokio"), allow(dead_code, unused_imports))]

#[macro_use]
#[allow(unused_imports)] // the scripted server is not used here
mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::{Rt, builder, eventually};
use flagsync::{Fdv2Config, SourceSpec};

const CHILD: &str = "FLAGSYNC_READ_MEMORY_CHILD";

/// Run `body` in a child process (this test binary, filtered to `name` alone) and
/// return what it printed.
fn isolated(name: &str, body: impl FnOnce()) -> String {
    if std::env::var(CHILD).as_deref() == Ok(name) {
        body();
        return String::new();
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{stdout}");
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the child test failed");
    assert!(stdout.contains("1 passed"), "the child ran no test");
    stdout
}

/// A field of `/proc/self/status`, in bytes.
fn status_bytes(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field}"));
    let kb: usize = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kb * 1024
}

/// The RSS now, and the peak from now on (reset; without `clear_refs`, the peak so
/// far, which only makes the growth read smaller).
fn reset_peak() -> usize {
    let rss = status_bytes("VmRSS:");
    if std::fs::write("/proc/self/clear_refs", "5").is_ok() {
        rss
    } else {
        status_bytes("VmHWM:")
    }
}

/// A flag of ~400 bytes.
fn flag(key: &str, version: u64) -> String {
    format!(
        r#"{{"key":"{key}","version":{version},"on":true,"prerequisites":[],"targets":[{{"values":["a","b","c"],"variation":0}}],"rules":[{{"id":"r-{key}","clauses":[{{"attribute":"email","op":"endsWith","values":["@example.com"],"negate":false}}],"variation":1}}],"fallthrough":{{"variation":0}},"offVariation":1,"variations":[true,false],"salt":"{key}-salt","trackEvents":false,"deleted":false}}"#
    )
}

fn flag_key(i: usize) -> String {
    format!("flag-{i:06}")
}

/// The growth of the peak RSS printed by a child, in bytes.
fn printed_growth(stdout: &str) -> usize {
    stdout
        .lines()
        .find_map(|l| l.split_once("growth: ").map(|(_, rest)| rest))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no growth printed in {stdout}"))
}

/// Accept connections; answer each request with `respond(stream)`. Returns the URL.
fn listen(respond: impl Fn(TcpStream) + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let respond = Arc::new(respond);
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let respond = respond.clone();
            thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                    if line == "\r\n" {
                        break;
                    }
                    line.clear();
                }
                respond(stream);
            });
        }
    });
    url
}

const PUT_FLAGS: usize = 3_600;

/// One client receives a `put` of [`PUT_FLAGS`] flags sent `write` bytes at a time;
/// prints the peak RSS growth.
async fn put_in_writes_of(rt: Rt, write: usize) {
    let items: Vec<String> = (0..PUT_FLAGS)
        .map(|i| format!(r#""{}":{}"#, flag_key(i), flag(&flag_key(i), 1)))
        .collect();
    let event = format!(
        "event: put\ndata: {{\"path\":\"/\",\"data\":{{\"flags\":{{{}}},\"segments\":{{}}}}}}\n\n",
        items.join(",")
    );
    drop(items);
    let size = event.len();
    let event = Arc::new(event.into_bytes());
    let url = listen(move |mut stream| {
        stream.set_nodelay(true).unwrap();
        let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
        if stream.write_all(head).is_err() {
            return;
        }
        for piece in event.chunks(write) {
            if stream.write_all(piece).is_err() {
                return;
            }
        }
        // Stay open and quiet until the client closes.
        let mut buf = [0u8; 64];
        while std::io::Read::read(&mut stream, &mut buf).is_ok_and(|n| n > 0) {}
    });
    let baseline = reset_peak();
    let started = Instant::now();
    let client = builder(&rt, &url).build().unwrap();
    client.start().unwrap();
    assert!(
        client
            .wait_for_initialization(Duration::from_secs(60))
            .await,
        "the put did not arrive"
    );
    let growth = status_bytes("VmHWM:").saturating_sub(baseline);
    assert!(client.flag(&flag_key(0)).is_some());
    assert!(client.flag(&flag_key(PUT_FLAGS - 1)).is_some());
    println!(
        "growth: {growth} B ({} KiB) for a put of {size} B in {write}-byte writes, {:?}",
        growth >> 10,
        started.elapsed()
    );
    client.close().await;
}

#[cfg(feature = "tokio")]
#[test]
fn put_in_1_byte_writes() {
    isolated("put_in_1_byte_writes", || {
        common::run_tokio(|rt| put_in_writes_of(rt, 1));
    });
}

#[cfg(feature = "tokio")]
#[test]
fn put_in_64_byte_writes() {
    isolated("put_in_64_byte_writes", || {
        common::run_tokio(|rt| put_in_writes_of(rt, 64));
    });
}

#[cfg(feature = "smol")]
#[test]
fn put_in_1_byte_writes_smol() {
    isolated("put_in_1_byte_writes_smol", || {
        common::run_smol(|rt| put_in_writes_of(rt, 1));
    });
}

#[cfg(feature = "smol")]
#[test]
fn put_in_64_byte_writes_smol() {
    isolated("put_in_64_byte_writes_smol", || {
        common::run_smol(|rt| put_in_writes_of(rt, 64));
    });
}

#[cfg(feature = "async-std")]
#[test]
fn put_in_1_byte_writes_async_std() {
    isolated("put_in_1_byte_writes_async_std", || {
        common::run_async_std(|rt| put_in_writes_of(rt, 1));
    });
}

#[cfg(feature = "async-std")]
#[test]
fn put_in_64_byte_writes_async_std() {
    isolated("put_in_64_byte_writes_async_std", || {
        common::run_async_std(|rt| put_in_writes_of(rt, 64));
    });
}

/// Two of the above (children run alone), compared: a put in 1-byte writes costs at
/// most 1.25 times what it costs in 64-byte writes.
fn tiny_writes_cost_what_larger_ones_cost(tiny: &str, larger: &str) {
    if std::env::var(CHILD).is_ok() {
        return; // only in the parent: the children run the tests named
    }
    let tiny = printed_growth(&isolated(tiny, || {}));
    let larger = printed_growth(&isolated(larger, || {}));
    println!(
        "1-byte writes: {} KiB; 64-byte writes: {} KiB; ratio {:.2}",
        tiny >> 10,
        larger >> 10,
        tiny as f64 / larger as f64
    );
    assert!(
        tiny <= larger + larger / 4,
        "1-byte writes grew the peak by {} KiB, 64-byte writes by {} KiB",
        tiny >> 10,
        larger >> 10
    );
}

#[cfg(feature = "tokio")]
#[test]
fn a_put_in_tiny_writes_costs_what_it_costs_in_larger_ones() {
    tiny_writes_cost_what_larger_ones_cost("put_in_1_byte_writes", "put_in_64_byte_writes");
}

#[cfg(feature = "smol")]
#[test]
fn a_put_in_tiny_writes_costs_what_it_costs_in_larger_ones_smol() {
    tiny_writes_cost_what_larger_ones_cost(
        "put_in_1_byte_writes_smol",
        "put_in_64_byte_writes_smol",
    );
}

#[cfg(feature = "async-std")]
#[test]
fn a_put_in_tiny_writes_costs_what_it_costs_in_larger_ones_async_std() {
    tiny_writes_cost_what_larger_ones_cost(
        "put_in_1_byte_writes_async_std",
        "put_in_64_byte_writes_async_std",
    );
}

const POLL_FLAGS: usize = 20_000;
const POLLS: usize = 5;

/// An FDv2 poll body of [`POLL_FLAGS`] flags, polled [`POLLS`] times: the peak RSS
/// growth stays within 2.75 times the body (see the module docs).
async fn repeated_poll_is_bounded(rt: Rt) {
    let mut body = String::from(
        r#"{"events":[{"event":"server-intent","data":{"payloads":[{"id":"p","target":1,"intentCode":"xfer-full","reason":"payload-missing"}]}}"#,
    );
    for i in 0..POLL_FLAGS {
        let key = flag_key(i);
        body.push_str(&format!(
            r#",{{"event":"put-object","data":{{"version":1,"kind":"flag","key":"{key}","object":{}}}}}"#,
            flag(&key, 1)
        ));
    }
    body.push_str(r#",{"event":"payload-transferred","data":{"state":"s1","version":1}}]}"#);
    let size = body.len();
    let response = Arc::new(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {size}\r\nConnection: close\r\n\r\n{body}"
        )
        .into_bytes(),
    );
    drop(body);
    let polls = Arc::new(AtomicUsize::new(0));
    let url = {
        let polls = polls.clone();
        listen(move |mut stream| {
            let _ = stream.write_all(&response);
            polls.fetch_add(1, Ordering::SeqCst);
        })
    };
    let baseline = reset_peak();
    let started = Instant::now();
    let mut fdv2 = Fdv2Config::custom()
        .initializers([])
        .synchronizers([SourceSpec::Polling {
            base_uri: None,
            interval: Some(Duration::from_millis(200)),
        }]);
    fdv2.timing.recovery = Duration::from_secs(600);
    let client = builder(&rt, &url)
        .fdv2(fdv2)
        .core_config(|c| c.min_poll_interval = Duration::from_millis(50))
        .build()
        .unwrap();
    client.start().unwrap();
    assert!(
        client
            .wait_for_initialization(Duration::from_secs(30))
            .await
    );
    let first = status_bytes("VmHWM:").saturating_sub(baseline);
    assert!(
        eventually(&rt, Duration::from_secs(60), || polls
            .load(Ordering::SeqCst)
            > POLLS)
        .await,
        "{} polls",
        polls.load(Ordering::SeqCst)
    );
    let growth = status_bytes("VmHWM:").saturating_sub(baseline);
    assert!(client.flag(&flag_key(POLL_FLAGS - 1)).is_some());
    println!(
        "growth: {growth} B ({} KiB, {:.2} × the body; {:.2} × after the first poll) over {} polls of {size} B, {:?}",
        growth >> 10,
        growth as f64 / size as f64,
        first as f64 / size as f64,
        polls.load(Ordering::SeqCst),
        started.elapsed()
    );
    client.close().await;
    assert!(
        growth * 100 <= size * 275,
        "the peak grew by {} KiB, {:.2} × the body of {} KiB",
        growth >> 10,
        growth as f64 / size as f64,
        size >> 10
    );
}

#[cfg(feature = "tokio")]
#[test]
fn fdv2_poll_polled_again_peak_rss() {
    isolated("fdv2_poll_polled_again_peak_rss", || {
        common::run_tokio(repeated_poll_is_bounded);
    });
}

#[cfg(feature = "smol")]
#[test]
fn fdv2_poll_polled_again_peak_rss_smol() {
    isolated("fdv2_poll_polled_again_peak_rss_smol", || {
        common::run_smol(repeated_poll_is_bounded);
    });
}

#[cfg(feature = "async-std")]
#[test]
fn fdv2_poll_polled_again_peak_rss_async_std() {
    isolated("fdv2_poll_polled_again_peak_rss_async_std", || {
        common::run_async_std(repeated_poll_is_bounded);
    });
}
