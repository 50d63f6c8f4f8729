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

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flagsync::Kind;
use flagsync::persist::{Item, PersistentStore};
use flagsync_redis::RedisStore;

const MASTER: &str = "bench-master";

/// Three sentinels watching the master on `master_port`, killed on drop.
pub(crate) struct Sentinels {
    children: Vec<Child>,
    pub(crate) ports: Vec<u16>,
    dir: PathBuf,
}

impl Sentinels {
    pub(crate) fn start(master_port: u16) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "flagsync-redis-sentinel-bench-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut children = Vec::new();
        let mut ports = Vec::new();
        for i in 0..3 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let conf = dir.join(format!("sentinel-{i}.conf"));
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\nprotected-mode no\nloglevel warning\n\
                     dir {}\nsentinel monitor {MASTER} 127.0.0.1 {master_port} 2\n",
                    dir.display()
                ),
            )
            .unwrap();
            children.push(
                Command::new("redis-server")
                    .arg(&conf)
                    .arg("--sentinel")
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("redis-server on the PATH"),
            );
            ports.push(port);
        }
        let sentinels = Self {
            children,
            ports,
            dir,
        };
        let end = Instant::now() + Duration::from_secs(10);
        for port in &sentinels.ports {
            loop {
                let out = Command::new("redis-cli")
                    .args(["-p", &port.to_string()])
                    .args(["SENTINEL", "get-master-addr-by-name", MASTER])
                    .output();
                if out.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("127.0.0.1")) {
                    break;
                }
                assert!(Instant::now() < end, "the sentinels did not start");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        sentinels
    }

    fn store(&self) -> RedisStore {
        let urls: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect();
        RedisStore::builder_sentinel(MASTER, urls)
            .prefix("sentinel-cmp")
            .pool_size(1)
            .build()
            .unwrap()
    }
}

impl Drop for Sentinels {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Time point reads, and a new store's first read, through the sentinels and directly
/// at `master_url` (on `master_port`), interleaved; print the medians and ratios.
pub(crate) fn compare(
    rt: &tokio::runtime::Runtime,
    master_url: &str,
    master_port: u16,
    items: &[(Kind, String, Item)],
) {
    let sentinels = Sentinels::start(master_port);
    let direct_store = || {
        RedisStore::builder(master_url)
            .prefix("sentinel-cmp")
            .pool_size(1)
            .build()
            .unwrap()
    };
    let direct = Arc::new(direct_store());
    let via_sentinel = Arc::new(sentinels.store());
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
            first_read(sentinels.store())
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
