//! Subscriptions are bounded: a subscriber that never reads, under a flood of `put`s
//! that change every flag, holds at most its capacity of unread items, and the
//! client's memory stays flat (issue 19, defect 4). One test per runtime, run one
//! after another in this binary of its own, so that the process's memory is this
//! test's.
#![cfg(any(feature = "tokio", feature = "smol", feature = "async-std"))]

#[macro_use]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::*;

const SEC: Duration = Duration::from_secs(1);
const CAPACITY: usize = 64;
const FLAGS: usize = 500;
const PUTS: u64 = 400;

/// The process's resident memory in bytes (Linux).
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    kb * 1024
}

/// Samples the resident memory every 5 ms until dropped; `peak` is the highest.
struct PeakRss {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PeakRss {
    fn start() -> Self {
        let peak = Arc::new(AtomicU64::new(rss()));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peak.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(rss(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        Self {
            peak,
            stop,
            thread: Some(thread),
        }
    }

    fn peak(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.load(Ordering::Relaxed).max(rss())
    }
}

/// `put` number `n`: every flag at version `n` (each `put` changes every flag), and
/// `last` at the end.
fn flood_put(n: u64) -> String {
    let keys: Vec<String> = (0..FLAGS)
        .map(|i| format!("flag-with-a-rather-long-key-so-that-each-change-weighs-{i:06}"))
        .collect();
    let mut flags: Vec<(&str, u64, bool)> = keys.iter().map(|k| (k.as_str(), n, true)).collect();
    if n == PUTS {
        flags.push(("last", 1, true));
    }
    put_event(&flags, &[], None)
}

async fn stalled_subscribers_stay_bounded_under_a_put_flood(rt: Rt) {
    let puts: Arc<Vec<String>> = Arc::new((1..=PUTS).map(flood_put).collect());
    let server = Server::start(move |_, r| {
        r.send(SSE_HEAD);
        for put in puts.iter() {
            r.send(put);
        }
        After::Hold
    });
    let client = builder(&rt, &server.url())
        .subscription_capacity(CAPACITY)
        .build()
        .unwrap();
    // Two subscribers that never read, and one status subscriber that never reads.
    let stalled = [client.flag_changes(), client.flag_changes()];
    let statuses = client.status_changes();
    let before = rss();
    let meter = PeakRss::start();
    client.start().unwrap();
    assert!(
        eventually(&rt, 60 * SEC, || client.flag("last").is_some()).await,
        "the flood was read"
    );
    // The change events follow the snapshot: let them arrive.
    sleep(&rt, Duration::from_millis(200)).await;
    let growth = meter.peak().saturating_sub(before);
    let changes = PUTS * FLAGS as u64;
    eprintln!(
        "{PUTS} puts x {FLAGS} flags = {changes} flag changes per subscriber: peak RSS growth {:.1} MiB",
        growth as f64 / (1 << 20) as f64
    );
    for sub in &stalled {
        assert!(sub.len() <= CAPACITY, "{} unread", sub.len());
        // Every put but the first changed all 500 flags: most were dropped, counted.
        let lagged = sub.lagged();
        assert!(lagged >= changes - FLAGS as u64 * 2, "lagged {lagged}");
        assert_eq!(sub.lagged(), 0, "the count resets when read");
    }
    assert!(statuses.len() <= CAPACITY);
    // Unbounded, 200 000 unread changes of 64-byte keys per subscriber took over
    // 40 MiB; bounded, the flood costs what parsing one put costs.
    assert!(growth < 24 << 20, "peak RSS grew by {} MiB", growth >> 20);
    // A subscriber that reads again sees the newest changes, each key once.
    let mut seen = std::collections::HashSet::new();
    while let Some(change) = stalled[0].try_recv() {
        assert!(seen.insert(change.key.clone()), "{} twice", change.key);
    }
    assert!(seen.contains("last"));
    client.close().await;
}

#[test]
fn bounded_under_a_put_flood_on_every_runtime() {
    #[cfg(feature = "tokio")]
    run_tokio(stalled_subscribers_stay_bounded_under_a_put_flood);
    #[cfg(feature = "smol")]
    run_smol(stalled_subscribers_stay_bounded_under_a_put_flood);
    #[cfg(feature = "async-std")]
    run_async_std(stalled_subscribers_stay_bounded_under_a_put_flood);
}
