//! Sentinel-backed reads against a direct connection in the same run (issue 30 item 8):
//! three sentinels started for the run watch the bench's plaintext redis-server, and
//! the same master is read through a store that finds it by asking them
//! (`RedisStore::builder_sentinel`) and through one given its URL. Timed in turn, round
//! after round, so that load on a shared machine skews both alike:
//!
//! - 1,000 point reads (`get`, one key after another on one open connection): once the
//!   master is found, a read is the same command on the same kind of connection;
//! - a new store's first read (connection included): through the sentinels that is
//!   one `SENTINEL get-master-addr-by-name`, the connection to the master and its
//!   `ROLE` check.

use std::sync::Arc;

use flagsync::Kind;
use flagsync::persist::{Item, PersistentStore};
use flagsync_redis::RedisStore;

use super::redis_server::{RedisServer, Role};

const MASTER: &str = "bench-master";

/// Three sentinels (the tests' [`RedisServer`] as a sentinel) watching the master on
/// `master_port`, with quorum 2; killed on drop.
fn start_sentinels(master_port: u16) -> Vec<RedisServer> {
    (0..3)
        .map(|_| {
            RedisServer::start_as(
                Role {
                    sentinel: Some(format!(
                        "sentinel monitor {MASTER} 127.0.0.1 {master_port} 2\n"
                    )),
                    ..Role::default()
                },
                None,
            )
        })
        .collect()
}

/// A store that finds the master through `sentinels`.
fn sentinel_store(sentinels: &[RedisServer]) -> RedisStore {
    let urls: Vec<String> = sentinels.iter().map(RedisServer::url).collect();
    RedisStore::builder_sentinel(MASTER, urls)
        .prefix("sentinel-cmp")
        .pool_size(1)
        .build()
        .unwrap()
}

/// Time point reads, and a new store's first read, through the sentinels and directly
/// at `master_url` (on `master_port`), interleaved; print the medians and ratios.
pub(crate) fn compare(
    rt: &tokio::runtime::Runtime,
    master_url: &str,
    master_port: u16,
    items: &[(Kind, String, Item)],
) {
    let sentinels = start_sentinels(master_port);
    let direct_store = || {
        RedisStore::builder(master_url)
            .prefix("sentinel-cmp")
            .pool_size(1)
            .build()
            .unwrap()
    };
    let direct = Arc::new(direct_store());
    let via_sentinel = Arc::new(sentinel_store(&sentinels));
    let rounds = super::bench_rounds();
    let keys = super::flag_keys(items);
    let reads = |store: &RedisStore| {
        rt.block_on(async {
            for key in &keys {
                assert!(store.get(Kind::Flag, key).await.unwrap().is_some());
            }
        })
    };
    let first_read = |store: RedisStore| {
        rt.block_on(async {
            assert!(store.get(Kind::Flag, keys[0]).await.unwrap().is_some());
        })
    };
    // Written once through the direct store (the same master); connections open.
    rt.block_on(direct.init(items)).unwrap();
    reads(&direct);
    reads(&via_sentinel);
    let named: [(&str, &dyn Fn()); 4] = [
        ("1,000 point reads direct", &|| reads(&direct)),
        ("1,000 point reads Sentinel", &|| reads(&via_sentinel)),
        ("new store, first read direct", &|| {
            first_read(direct_store())
        }),
        ("new store, first read Sentinel", &|| {
            first_read(sentinel_store(&sentinels))
        }),
    ];
    let times = super::time_rounds(&named, rounds);
    // Each round's ratio (its two operations share the round's load), before sorting.
    let paired = |a: usize, b: usize| {
        let mut r: Vec<f64> = times[a]
            .iter()
            .zip(&times[b])
            .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64())
            .collect();
        r.sort_by(f64::total_cmp);
        r[r.len() / 2]
    };
    let (paired_reads, paired_first) = (paired(1, 0), paired(3, 2));
    let title = format!("Sentinel-backed against direct, {rounds} rounds");
    let medians = super::print_medians(&title, &named, &times);
    let ratio = |a: usize, b: usize| medians[a].as_secs_f64() / medians[b].as_secs_f64();
    eprintln!(
        "  point reads, Sentinel / direct            {:.2} (paired rounds: {paired_reads:.2})",
        ratio(1, 0)
    );
    eprintln!(
        "  new store's first read, Sentinel / direct {:.2} (paired rounds: {paired_first:.2})",
        ratio(3, 2)
    );
}
