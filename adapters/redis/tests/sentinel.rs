//! Redis Sentinel against real processes on 127.0.0.1 (a master, a replica, three
//! sentinels with quorum 2, down after 1 s: `common/topology.rs`), on every runtime
//! feature: a failover while flag changes stream in loses no change, the writer reports
//! the outage as a store fault and rewrites its data set to the new master, daemon-mode
//! readers follow; sentinel and master passwords and an ACL user.
//!
//! The processes are started by each test (`bash .ci/test` installs redis-server when
//! it is missing); a test that cannot start them fails, it never skips.

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::redis_server::{RedisServer, Role};
use common::topology::{MASTER_NAME, SentinelAuth, SentinelSet};
use common::*;
use flagsync::persist::{Item, PersistentStore, StoreError};
use flagsync::{Kind, State};
use flagsync_redis::{RedisBigSegmentStore, RedisStore};
use flagsync_server::{Server as FlagServer, ServerHandle};
use serde_json::{Value, json};

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    a_failover_loses_no_change_and_readers_follow_the_new_master,
    the_writer_reports_a_store_fault_during_the_failover,
    sentinel_and_master_passwords_and_an_acl_user,
    a_sentinel_naming_a_dead_master_is_passed_over,
);

/// Over TLS: sentinels and master on TLS ports only.
#[cfg(feature = "tls")]
mod over_tls {
    use super::*;
    runtime_tests!(sentinels_and_master_over_tls);
}

/// Flags `f0`…`f4`: `fN` serves `value` to everyone.
fn flag(value: i64) -> Value {
    json!({"on": true, "variations": [value], "fallthrough": {"variation": 0}, "offVariation": 0})
}

fn flag_server() -> Arc<ServerHandle> {
    let flags: serde_json::Map<String, Value> =
        (0..5).map(|i| (format!("f{i}"), flag(0))).collect();
    Arc::new(
        FlagServer::builder()
            .heartbeat(Duration::from_millis(500))
            .data(json!({ "flags": flags }))
            .start()
            .unwrap(),
    )
}

/// The store as every client of these tests uses it: quick to give up on a dead
/// master.
fn sentinel_store(set: &SentinelSet) -> Arc<RedisStore> {
    Arc::new(
        set.store_builder()
            .connect_timeout(Duration::from_millis(300))
            .response_timeout(Duration::from_millis(500))
            .build()
            .unwrap(),
    )
}

/// `launchdarkly:features` as `master` holds it, read with redis-cli: key → JSON.
fn stored(master: &RedisServer) -> BTreeMap<String, Value> {
    let out = master.cli(&["HGETALL", "launchdarkly:features"]);
    json_hash(&out)
}

/// A writer on the sentinel store, fed by `server`, with the data set in Redis.
async fn writer_on(rt: &Rt, set: &SentinelSet, server: &ServerHandle) -> flagsync::Client {
    started_writer(rt, sentinel_store(set), server, || stored(set.master())).await
}

async fn a_failover_loses_no_change_and_readers_follow_the_new_master(rt: Rt) {
    let mut set = SentinelSet::start();
    let server = flag_server();
    let writer = writer_on(&rt, &set, &server).await;
    let reader = started_reader(&rt, sentinel_store(&set)).await;
    let context = flagsync::eval::ContextBuilder::new("u").build().unwrap();
    assert_eq!(reader.int_variation("f1", &context, -1), 0);

    // Changes stream in, one every 50 ms, before, during and after the failover.
    let stop = Arc::new(AtomicBool::new(false));
    let setter = {
        let (server, stop) = (server.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n: i64 = 0;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                server.set_flag(&format!("f{}", n % 5), flag(n)).unwrap();
                std::thread::sleep(Duration::from_millis(50));
            }
            n
        })
    };
    sleep(&rt, Duration::from_millis(300)).await;
    let old = set.kill_master();
    let killed = Instant::now();
    let promoted = set.await_promotion(old, 20 * SEC);
    eprintln!("promoted {:?} after the kill", promoted - killed);
    sleep(&rt, Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    let changes = setter.join().unwrap();
    assert!(changes >= 20, "only {changes} changes were made");

    // Within 2 s of the promotion the new master holds exactly what the service
    // serves: every change, also those made while there was no master.
    let want = served_flags(&server);
    let master = set.master();
    assert_ne!(master.port(), old);
    let deadline = promoted + 2 * SEC;
    while stored(master) != want {
        assert!(
            Instant::now() < deadline,
            "2 s after the promotion the new master holds {:?}, the service serves {want:?}",
            stored(master)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!(
        "the new master equals the service {:?} after the promotion",
        promoted.elapsed()
    );
    assert_eq!(
        master.cli(&["EXISTS", "launchdarkly:$inited"]),
        "1",
        "a whole data set"
    );
    assert_eq!(writer.status().state, State::Valid);

    // The daemon reader, on the same sentinels, evaluates the latest values.
    let latest: Vec<(String, i64)> = want
        .iter()
        .map(|(k, v)| (k.clone(), v["variations"][0].as_i64().unwrap()))
        .collect();
    assert!(latest.iter().any(|(_, v)| *v > 0));
    assert!(
        eventually(&rt, 3 * SEC, || latest
            .iter()
            .all(|(k, v)| reader.int_variation(k, &context, -1) == *v))
        .await,
        "the reader evaluates {:?}, the service serves {latest:?}",
        latest
            .iter()
            .map(|(k, _)| reader.int_variation(k, &context, -1))
            .collect::<Vec<_>>()
    );
    reader.close().await;
    writer.close().await;
}

async fn the_writer_reports_a_store_fault_during_the_failover(rt: Rt) {
    let mut set = SentinelSet::start();
    let server = flag_server();
    let writer = writer_on(&rt, &set, &server).await;
    let statuses = writer.status_changes();
    let store_statuses = writer.store_status_changes();
    let old = set.kill_master();
    // A change while there is no master: served from memory at once.
    server.set_flag("f2", flag(42)).unwrap();
    let down = next_within(&rt, &store_statuses).await;
    assert_eq!(
        down.map(|s| s.available),
        Some(false),
        "the store fault was reported"
    );
    let context = flagsync::eval::ContextBuilder::new("u").build().unwrap();
    assert!(
        eventually(&rt, 3 * SEC, || writer.int_variation("f2", &context, -1)
            == 42)
        .await
    );
    let promoted = set.await_promotion(old, 20 * SEC);
    let up = next_within(&rt, &store_statuses).await;
    assert_eq!(up.map(|s| s.available), Some(true), "the store is back");
    eprintln!(
        "store available {:?} after the promotion",
        promoted.elapsed()
    );
    // The data-source status showed the store error, then the recovery.
    assert!(eventually(&rt, 3 * SEC, || writer.status().state == State::Valid).await);
    assert_store_fault_then_recovery(&statuses);
    // The change made during the outage reached the new master.
    assert!(
        eventually(&rt, 2 * SEC, || stored(set.master())
            == served_flags(&server))
        .await,
        "the new master misses a change"
    );
    writer.close().await;
}

async fn sentinel_and_master_passwords_and_an_acl_user(rt: Rt) {
    const SENTINEL_PW: &str = "sentinel-pw-5150";
    const MASTER_PW: &str = "master-pw-7341";
    const ACL_PW: &str = "acl-pw-2718";
    let set = SentinelSet::start_with(SentinelAuth {
        sentinel_password: Some(SENTINEL_PW.into()),
        master_password: Some(MASTER_PW.into()),
    });
    for server in &set.servers {
        server.cli(&["ACL", "SETUSER", "flagsync", "on", &format!(">{ACL_PW}")]);
        server.cli(&["ACL", "SETUSER", "flagsync", "~launchdarkly:*", "+@all"]);
    }
    // The sentinels' password in their URLs, the master's ACL user apart.
    let settings = RedisStore::builder_sentinel(MASTER_NAME, set.sentinel_urls())
        .master_credentials(Some("flagsync"), ACL_PW);
    let debug = format!("{settings:?}");
    let store = settings.build().unwrap();
    let debug = format!("{debug} {store:?} {}", store.target());
    for secret in [SENTINEL_PW, ACL_PW] {
        assert!(!debug.contains(secret), "{debug}");
    }
    assert!(
        store.target().starts_with("sentinel:"),
        "{}",
        store.target()
    );
    let item = Item {
        version: 1,
        deleted: false,
        raw: r#"{"key":"f","version":1,"on":true,"variations":[true]}"#.into(),
    };
    store
        .init(&[(Kind::Flag, "f".into(), item.clone())])
        .await
        .unwrap();
    assert_eq!(store.get(Kind::Flag, "f").await.unwrap(), Some(item));
    assert_eq!(
        store
            .get_now(Kind::Flag, "f", SEC)
            .unwrap()
            .unwrap()
            .map(|i| i.version),
        Some(1)
    );
    // A writer client on it.
    let server = flag_server();
    let writer = started_writer(&rt, Arc::new(store), &server, || stored(set.master())).await;
    writer.close().await;

    // The big-segment store finds the master the same way.
    set.master()
        .cli(&["SET", "launchdarkly:big_segments_synchronized_on", "77"]);
    let big = RedisBigSegmentStore::builder_sentinel(MASTER_NAME, set.sentinel_urls())
        .master_credentials(Some("flagsync"), ACL_PW)
        .build()
        .unwrap();
    use flagsync::bigseg::BigSegmentStore;
    assert_eq!(big.metadata().await.unwrap().last_up_to_date, Some(77));
    assert_eq!(
        big.metadata_now(SEC).unwrap().unwrap().last_up_to_date,
        Some(77)
    );

    // Wrong passwords: permanent faults that never show the password.
    let wrong_sentinel: Vec<String> = set
        .sentinel_urls()
        .iter()
        .map(|u| u.replace(SENTINEL_PW, "not-the-sentinel-pw"))
        .collect();
    let acl_user = |sentinels: Vec<String>, password: &str| {
        RedisStore::builder_sentinel(MASTER_NAME, sentinels)
            .master_credentials(Some("flagsync"), password)
    };
    for (settings, wrong) in [
        (acl_user(wrong_sentinel, ACL_PW), "not-the-sentinel-pw"),
        (
            acl_user(set.sentinel_urls(), "not-the-acl-pw"),
            "not-the-acl-pw",
        ),
    ] {
        let e = init_error(settings).await;
        assert!(matches!(e, StoreError::Auth(_)), "{e:?}");
        assert!(!format!("{e} {e:?}").contains(wrong));
    }
    // An unknown master name is an outage (the sentinels may learn it), not a panic.
    let e = init_error(RedisStore::builder_sentinel(
        "no-such-master",
        set.sentinel_urls(),
    ))
    .await;
    assert!(matches!(e, StoreError::Unreachable(_)), "{e:?}");
}

/// What asking a store made with `settings` whether it is initialized fails with.
async fn init_error(settings: flagsync_redis::RedisStoreBuilder) -> StoreError {
    settings.build().unwrap().initialized().await.unwrap_err()
}

async fn a_sentinel_naming_a_dead_master_is_passed_over(_rt: Rt) {
    // The first sentinel names a master that is gone (as one cut off from the others
    // would, after a failover); the second names the live one.
    let master = RedisServer::start();
    let dead_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let sentinel = |port: u16| {
        RedisServer::start_as(
            Role {
                sentinel: Some(format!(
                    "sentinel monitor {MASTER_NAME} 127.0.0.1 {port} 1\n"
                )),
                ..Role::default()
            },
            None,
        )
    };
    let (stale, live) = (sentinel(dead_port), sentinel(master.port()));
    let urls = [stale.port(), live.port()].map(|p| format!("127.0.0.1:{p}"));
    let store = RedisStore::builder_sentinel(MASTER_NAME, urls.clone())
        .connect_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let item = init_flag_f(&store, &master, 1).await;
    // The blocking connection finds it the same way.
    assert_eq!(
        store.get_now(Kind::Flag, "f", SEC).unwrap().unwrap(),
        Some(item)
    );
    // With only the stale sentinel, the store is down (the master it names is gone).
    let e = init_error(
        RedisStore::builder_sentinel(MASTER_NAME, [urls[0].clone()])
            .connect_timeout(Duration::from_millis(300)),
    )
    .await;
    assert!(matches!(e, StoreError::Unreachable(_)), "{e:?}");
}

/// Sentinels and a master on TLS only (`rediss://` sentinel URLs: the master is reached
/// over TLS too, trusting the same CA).
#[cfg(feature = "tls")]
async fn sentinels_and_master_over_tls(_rt: Rt) {
    use common::redis_server::{TestCerts, Tls};
    let tls = Tls {
        certs: TestCerts::new(),
        auth_clients: "optional",
        client_cert: false,
    };
    let master = RedisServer::start_as(
        Role {
            extra: vec!["--tls-replication".into(), "yes".into()],
            ..Role::default()
        },
        Some(tls.clone()),
    );
    let sentinels: Vec<RedisServer> = (0..2)
        .map(|_| {
            RedisServer::start_as(
                Role {
                    sentinel: Some(format!(
                        "sentinel monitor {MASTER_NAME} 127.0.0.1 {} 1\n",
                        master.port()
                    )),
                    ..Role::default()
                },
                Some(tls.clone()),
            )
        })
        .collect();
    let urls: Vec<String> = sentinels
        .iter()
        .map(|s| format!("rediss://127.0.0.1:{}", s.port()))
        .collect();
    let store = RedisStore::builder_sentinel(MASTER_NAME, urls.clone())
        .tls_ca_pem(tls.certs.ca_pem.clone())
        .build()
        .unwrap();
    let item = init_flag_f(&store, &master, 3).await;
    assert_eq!(
        store.get(Kind::Flag, "f").await.unwrap(),
        Some(item.clone())
    );
    assert_eq!(
        store.get_now(Kind::Flag, "f", SEC).unwrap().unwrap(),
        Some(item)
    );
    // The webpki roots alone do not trust the test's CA: a permanent fault.
    let e = RedisStore::builder_sentinel(MASTER_NAME, urls.clone())
        .build()
        .unwrap()
        .initialized()
        .await
        .unwrap_err();
    assert!(e.is_permanent(), "{e:?}");
    // Certificates for plaintext sentinels are a configuration error.
    let plain = urls.iter().map(|u| u.replace("rediss://", "redis://"));
    assert!(matches!(
        RedisStore::builder_sentinel(MASTER_NAME, plain)
            .tls_ca_pem(tls.certs.ca_pem.clone())
            .build(),
        Err(StoreError::Config(_))
    ));
}

/// Write flag `f` at `version` as a full data set through `store`, check that the
/// master holds it, and return the item.
async fn init_flag_f(store: &RedisStore, master: &RedisServer, version: u64) -> Item {
    let raw = format!(r#"{{"key":"f","version":{version}}}"#);
    let item = Item {
        version,
        deleted: false,
        raw: raw.clone().into(),
    };
    store
        .init(&[(Kind::Flag, "f".into(), item.clone())])
        .await
        .unwrap();
    assert_eq!(master.cli(&["HGET", "launchdarkly:features", "f"]), raw);
    item
}
