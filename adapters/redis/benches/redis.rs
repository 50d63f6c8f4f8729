//! Redis persistent-store benchmarks (issue 7), against a redis-server started on a
//! free 127.0.0.1 port for the run:
//! - `init`: the 50,000-flag payload (50,001 flags + 2,500 segments, 55.5 MB) written
//!   by `RedisStore::init` in init order (one pipelined MULTI/EXEC), against the floor:
//!   `redis-cli --pipe` loading the same items (DEL, one HSET per item, SET `$inited`)
//!   from a prepared RESP file;
//! - `daemon_read`: a cold daemon-mode read of every flag and segment through a fresh
//!   `CachingStore` (HGETALL + decoding every item), and a whole daemon-mode `Client`
//!   from `start()` to serving every flag (the read plus building the snapshot it
//!   serves), against the floor: the same two HGETALLs through the redis crate without
//!   decoding.
//!
//! - with the `rustls` feature, `tls`: init and point reads over TLS against plaintext
//!   (see `tls/mod.rs`);
//! - `sentinel`: point reads, and a new store's first read, through three sentinels
//!   against a direct connection to the same master (see `sentinel/mod.rs`).
//!
//! `REDIS_BENCH_COMPARE_ONLY=1` (or `REDIS_BENCH_TLS_ONLY=1`) runs only these two
//! comparisons.
//!
//! Run: `cargo bench -p flagsync-redis --bench redis` (`--features rustls` for TLS). Needs redis-server
//! and redis-cli on the PATH; the payload comes from `../shared/tools/gen_payload.py`
//! (generated into `target/payloads/` on first run).

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use flagsync::persist::{CacheConfig, CachingStore, Item, PersistentStore};
use flagsync::{Client, Kind};
use flagsync_core::store::{ChangeSet, Store, split_all_data};
use flagsync_redis::RedisStore;

#[path = "../tests/common/redis_server.rs"]
#[allow(dead_code, unreachable_pub)] // the tests' helper: not all of it is used here
mod redis_server;
mod sentinel;
#[cfg(feature = "tls")]
mod tls;

/// The payload generator the core's benches use.
#[path = "../../../core/benches/common/mod.rs"]
mod core_benches;

fn payload(flags: usize) -> Bytes {
    Bytes::from(core_benches::payload(flags))
}

/// One command in the Redis protocol.
fn resp(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

fn bench(c: &mut Criterion) {
    let server = redis_server::RedisServer::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    {
        let mut small = Store::new();
        small.apply(ChangeSet::fdv1_full(
            split_all_data(&payload(5_000), false).unwrap(),
        ));
        #[cfg(feature = "tls")]
        {
            let plain = Arc::new(
                RedisStore::builder(server.url())
                    .prefix("tls-cmp")
                    .pool_size(1)
                    .build()
                    .unwrap(),
            );
            tls::compare(&rt, plain, &small.persist_order());
        }
        sentinel::compare(&rt, &server.url(), server.port(), &small.persist_order());
        if std::env::var_os("REDIS_BENCH_COMPARE_ONLY").is_some()
            || std::env::var_os("REDIS_BENCH_TLS_ONLY").is_some()
        {
            return;
        }
    }

    let whole = payload(50_000);
    let mut memory = Store::new();
    memory.apply(ChangeSet::fdv1_full(split_all_data(&whole, false).unwrap()));
    // Exactly what the core hands the driver: the whole data set in init order.
    let items: Vec<(Kind, String, Item)> = memory.persist_order();
    let bytes: u64 = items.iter().map(|(_, _, i)| i.raw.len() as u64).sum();
    eprintln!(
        "payload: {} items, {:.1} MB of item JSON",
        items.len(),
        bytes as f64 / 1e6
    );
    let store = Arc::new(RedisStore::new(server.url()).unwrap());

    // The floor's input: the same items as plain commands.
    let mut pipe_file = Vec::with_capacity(whole.len() + items.len() * 64);
    resp(
        &mut pipe_file,
        &[b"DEL", b"floor:segments", b"floor:features"],
    );
    for (kind, key, item) in &items {
        let hash = format!("floor:{}", kind.namespace());
        resp(
            &mut pipe_file,
            &[b"HSET", hash.as_bytes(), key.as_bytes(), &item.raw],
        );
    }
    resp(&mut pipe_file, &[b"SET", b"floor:$inited", b""]);
    let pipe_path =
        std::env::temp_dir().join(format!("flagsync-bench-{}.resp", std::process::id()));
    std::fs::write(&pipe_path, &pipe_file).unwrap();

    let redis_client = redis::Client::open(server.url()).unwrap();
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
    let n = items.len();
    let ops = Ops {
        init: &|| rt.block_on(store.init(&items)).unwrap(),
        pipe: &|| {
            let input = std::fs::File::open(&pipe_path).unwrap();
            let out = Command::new("redis-cli")
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &server.port().to_string(),
                    "--pipe",
                ])
                .stdin(input)
                .output()
                .expect("redis-cli on the PATH");
            assert!(out.status.success());
        },
        cold_all: &|| {
            rt.block_on(async {
                let cached = CachingStore::new(store.clone(), CacheConfig::default());
                let flags = cached.all(Kind::Flag).await.unwrap();
                let segments = cached.all(Kind::Segment).await.unwrap();
                assert_eq!(flags.len() + segments.len(), n);
            })
        },
        daemon_client: &|| {
            rt.block_on(async {
                let client = Client::builder("sdk-key")
                    .daemon(store.clone(), CacheConfig::default())
                    .build()
                    .unwrap();
                client.start().unwrap();
                assert!(
                    client
                        .wait_for_initialization(Duration::from_secs(30))
                        .await
                );
                assert_eq!(client.snapshot().len(Kind::Flag), 50_001);
                client.close().await;
            })
        },
        hgetall: &|| {
            rt.block_on(async {
                let mut conn = redis_client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .unwrap();
                let mut got = 0;
                for hash in ["launchdarkly:features", "launchdarkly:segments"] {
                    let v: Vec<(String, Bytes)> = redis::cmd("HGETALL")
                        .arg(hash)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    got += v.len();
                }
                assert_eq!(got, n);
            })
        },
    };

    let mut g = c.benchmark_group("redis_init_50k");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Bytes(bytes));
    g.bench_function("flagsync_init", |b| b.iter(ops.init));
    g.bench_function("redis_cli_pipe_floor", |b| b.iter(ops.pipe));
    g.finish();

    // The daemon reads what the writer left.
    (ops.init)();
    let mut g = c.benchmark_group("redis_daemon_read_50k");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(15));
    g.throughput(Throughput::Bytes(bytes));
    g.bench_function("flagsync_cold_all", |b| b.iter(ops.cold_all));
    g.bench_function("flagsync_daemon_client_ready", |b| {
        b.iter(ops.daemon_client)
    });
    g.bench_function("hgetall_floor", |b| b.iter(ops.hgetall));
    g.finish();

    interleaved(&ops);
    let _ = std::fs::remove_file(&pipe_path);
}

/// The measured operations, shared by criterion and the interleaved summary.
struct Ops<'a> {
    init: &'a dyn Fn(),
    pipe: &'a dyn Fn(),
    cold_all: &'a dyn Fn(),
    daemon_client: &'a dyn Fn(),
    hgetall: &'a dyn Fn(),
}

/// `REDIS_BENCH_ROUNDS` (default 11): how many interleaved rounds a comparison runs.
fn bench_rounds() -> usize {
    std::env::var("REDIS_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(11)
}

/// Each of `named`'s operations timed once a round, in turn, for `rounds` rounds: the
/// times of each operation, round by round.
fn time_rounds(named: &[(&str, &dyn Fn())], rounds: usize) -> Vec<Vec<Duration>> {
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); named.len()];
    for _ in 0..rounds {
        for (i, (_, op)) in named.iter().enumerate() {
            let start = Instant::now();
            op();
            times[i].push(start.elapsed());
        }
    }
    times
}

/// The median of each operation's times (from [`time_rounds`]), each printed under
/// `title` with its name in milliseconds.
fn print_medians(
    title: &str,
    named: &[(&str, &dyn Fn())],
    times: &[Vec<Duration>],
) -> Vec<Duration> {
    let medians: Vec<Duration> = times
        .iter()
        .map(|v| {
            let mut v = v.clone();
            v.sort();
            v[v.len() / 2]
        })
        .collect();
    eprintln!("\n{title} (medians):");
    for ((name, _), m) in named.iter().zip(&medians) {
        eprintln!("  {name:<32} {:8.3} ms", m.as_secs_f64() * 1e3);
    }
    medians
}

/// The keys of the first 1,000 flags of `items`.
fn flag_keys(items: &[(Kind, String, Item)]) -> Vec<&str> {
    items
        .iter()
        .filter(|(k, _, _)| *k == Kind::Flag)
        .map(|(_, key, _)| key.as_str())
        .take(1_000)
        .collect()
}

/// Criterion measures one function after another, so a load that drifts (a shared
/// machine) skews the ratios. Here every round times each operation once, in turn,
/// and the medians and ratios of `REDIS_BENCH_ROUNDS` (default 11) rounds are printed.
fn interleaved(ops: &Ops<'_>) {
    let rounds = bench_rounds();
    let named: [(&str, &dyn Fn()); 5] = [
        ("flagsync init", ops.init),
        ("redis-cli --pipe floor", ops.pipe),
        ("flagsync cold all", ops.cold_all),
        ("flagsync daemon client ready", ops.daemon_client),
        ("HGETALL floor", ops.hgetall),
    ];
    let mut times = time_rounds(&named, rounds);
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let medians: Vec<Duration> = times.iter_mut().map(median).collect();
    eprintln!("\ninterleaved, {rounds} rounds (medians):");
    for ((name, _), m) in named.iter().zip(&medians) {
        eprintln!("  {name:<30} {:8.1} ms", m.as_secs_f64() * 1e3);
    }
    let ratio = |a: usize, b: usize| medians[a].as_secs_f64() / medians[b].as_secs_f64();
    eprintln!("  init / redis-cli --pipe          {:.2}", ratio(0, 1));
    eprintln!("  cold all / HGETALL               {:.2}", ratio(2, 4));
    eprintln!("  daemon client ready / HGETALL    {:.2}", ratio(3, 4));
}

criterion_group!(benches, bench);
criterion_main!(benches);
