//! The persistent-store contract of `RedisStore` against a real redis-server, on every
//! runtime feature, and the key layout other LaunchDarkly SDKs read (interop).
//!
//! Each test starts its own redis-server on a free 127.0.0.1 port (see
//! `common/redis_server.rs`); `bash .ci/test` installs it when it is missing.

#[macro_use]
mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::Rt;
use common::redis_server::RedisServer;
use common::topology::{Deployment, RedisCluster};
use flagsync::Kind;
use flagsync::persist::{CacheConfig, CachingStore, Item, PersistentStore, StoreError, Upserted};
use flagsync_redis::RedisStore;

/// The contract, on a plaintext server, on a TLS-only one (`--port 0`, the stores
/// trusting the test's CA), and on a cluster of three masters (every prefix with a hash
/// tag: `{launchdarkly}`, `{env-a}`).
macro_rules! contract_tests {
    ($($name:ident),* $(,)?) => {
        mod plaintext {
            use super::*;
            $( async fn $name(rt: Rt) { super::$name(rt, plaintext).await } )*
            runtime_tests!($($name),*);
        }
        #[cfg(feature = "tls")]
        mod over_tls {
            use super::*;
            $( async fn $name(rt: Rt) { super::$name(rt, over_tls).await } )*
            runtime_tests!($($name),*);
        }
        mod on_cluster {
            use super::*;
            $( async fn $name(rt: Rt) { super::$name(rt, on_cluster).await } )*
            runtime_tests!($($name),*);
        }
    };
}

/// Starts what a test runs against.
type Start = fn() -> Deployment;

fn plaintext() -> Deployment {
    Deployment::Server(RedisServer::start())
}

#[cfg(feature = "tls")]
fn over_tls() -> Deployment {
    Deployment::Server(RedisServer::start_tls())
}

fn on_cluster() -> Deployment {
    Deployment::Cluster(RedisCluster::start())
}

contract_tests!(
    init_replaces_everything_and_marks_initialized,
    get_and_all_return_tombstones_and_live_items,
    upsert_writes_newer_and_rejects_same_or_older,
    delete_is_a_tombstone_that_blocks_older_upserts,
    tombstones_in_three_shapes_written_by_redis_cli,
    prefixes_are_isolated,
    concurrent_upserts_keep_the_highest_version,
    a_store_written_by_flagsync_has_the_layout_other_sdks_read,
    data_written_as_other_sdks_do_is_read,
    operations_fail_while_the_server_is_down_and_work_after_it_returns,
    the_caching_wrapper_over_redis,
);

fn item(key: &str, version: u64) -> Item {
    Item {
        version,
        deleted: false,
        raw: Bytes::from(format!(
            r#"{{"key":"{key}","version":{version},"on":true,"variations":[true,false]}}"#
        )),
    }
}

fn store(server: &Deployment) -> RedisStore {
    server.store_builder().build().unwrap()
}

fn keys(mut v: Vec<(String, Item)>) -> Vec<(String, u64, bool)> {
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v.into_iter()
        .map(|(k, i)| (k, i.version, i.deleted))
        .collect()
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap()
}

async fn init_replaces_everything_and_marks_initialized(_rt: Rt, start: Start) {
    let server = start();
    let store = store(&server);
    assert!(!store.initialized().await.unwrap());
    store
        .init(&[
            (Kind::Flag, "old".into(), item("old", 1)),
            (Kind::Segment, "old-seg".into(), item("old-seg", 1)),
        ])
        .await
        .unwrap();
    assert!(store.initialized().await.unwrap());
    store
        .init(&[
            (Kind::Segment, "s".into(), item("s", 3)),
            (Kind::Flag, "a".into(), item("a", 1)),
            (Kind::Flag, "b".into(), item("b", 2)),
        ])
        .await
        .unwrap();
    assert_eq!(
        keys(store.all(Kind::Flag).await.unwrap()),
        [("a".into(), 1, false), ("b".into(), 2, false)]
    );
    assert_eq!(
        keys(store.all(Kind::Segment).await.unwrap()),
        [("s".into(), 3, false)]
    );
    // An init with no items of a kind leaves that kind empty.
    store
        .init(&[(Kind::Flag, "c".into(), item("c", 1))])
        .await
        .unwrap();
    assert!(store.all(Kind::Segment).await.unwrap().is_empty());
    assert_eq!(
        server.cli(&["EXISTS", &server.key("launchdarkly:segments")]),
        "0"
    );
    assert!(store.initialized().await.unwrap());
    assert!(store.is_available().await);
}

async fn get_and_all_return_tombstones_and_live_items(_rt: Rt, start: Start) {
    let server = start();
    let store = store(&server);
    store
        .init(&[
            (Kind::Flag, "live".into(), item("live", 4)),
            (Kind::Flag, "dead".into(), Item::tombstone("dead", 7)),
        ])
        .await
        .unwrap();
    let live = store.get(Kind::Flag, "live").await.unwrap().unwrap();
    assert_eq!((live.version, live.deleted), (4, false));
    assert_eq!(
        json(std::str::from_utf8(&live.raw).unwrap()),
        json(item("live", 4).raw_str())
    );
    let dead = store.get(Kind::Flag, "dead").await.unwrap().unwrap();
    assert_eq!((dead.version, dead.deleted), (7, true));
    assert_eq!(store.get(Kind::Flag, "nope").await.unwrap(), None);
    assert_eq!(store.get(Kind::Segment, "live").await.unwrap(), None);
    assert_eq!(
        keys(store.all(Kind::Flag).await.unwrap()),
        [("dead".into(), 7, true), ("live".into(), 4, false)]
    );
}

async fn upsert_writes_newer_and_rejects_same_or_older(_rt: Rt, start: Start) {
    let server = start();
    let store = store(&server);
    store
        .init(&[(Kind::Flag, "f".into(), item("f", 5))])
        .await
        .unwrap();
    assert_eq!(
        store
            .upsert(Kind::Flag, "new", &item("new", 1))
            .await
            .unwrap(),
        Upserted::Written
    );
    assert_eq!(
        store.upsert(Kind::Flag, "f", &item("f", 6)).await.unwrap(),
        Upserted::Written
    );
    for v in [6, 5, 1] {
        match store.upsert(Kind::Flag, "f", &item("f", v)).await.unwrap() {
            Upserted::Rejected { stored } => assert_eq!(stored.version, 6),
            other => panic!("version {v}: {other:?}"),
        }
    }
    assert_eq!(
        store.get(Kind::Flag, "f").await.unwrap().unwrap().version,
        6
    );
    assert_eq!(
        store
            .upsert(Kind::Segment, "s", &item("s", 1))
            .await
            .unwrap(),
        Upserted::Written
    );
    assert_eq!(store.all(Kind::Flag).await.unwrap().len(), 2);
}

async fn delete_is_a_tombstone_that_blocks_older_upserts(_rt: Rt, start: Start) {
    let server = start();
    let store = store(&server);
    store
        .init(&[(Kind::Flag, "f".into(), item("f", 1))])
        .await
        .unwrap();
    assert_eq!(
        store
            .upsert(Kind::Flag, "f", &Item::tombstone("f", 3))
            .await
            .unwrap(),
        Upserted::Written
    );
    // Written in the Go SDK's shape.
    assert_eq!(
        json(&server.cli(&["HGET", &server.key("launchdarkly:features"), "f"])),
        json(r#"{"key":"$deleted","version":3,"deleted":true}"#)
    );
    assert!(matches!(
        store.upsert(Kind::Flag, "f", &item("f", 3)).await.unwrap(),
        Upserted::Rejected { stored } if stored.deleted
    ));
    assert_eq!(
        store.upsert(Kind::Flag, "f", &item("f", 4)).await.unwrap(),
        Upserted::Written
    );
    // A delete of a key never seen is stored too (it blocks older late updates).
    assert_eq!(
        store
            .upsert(Kind::Flag, "never", &Item::tombstone("never", 2))
            .await
            .unwrap(),
        Upserted::Written
    );
    assert!(
        store
            .get(Kind::Flag, "never")
            .await
            .unwrap()
            .unwrap()
            .deleted
    );
}

async fn tombstones_in_three_shapes_written_by_redis_cli(_rt: Rt, start: Start) {
    let server = start();
    // As the Node/.NET/Java SDKs, the Go SDK/Relay Proxy, and the Python SDK write them.
    server.cli(&[
        "HSET",
        &server.key("launchdarkly:features"),
        "node",
        r#"{"version":5,"deleted":true}"#,
    ]);
    server.cli(&[
        "HSET",
        &server.key("launchdarkly:features"),
        "go",
        r#"{"key":"$deleted","version":6,"deleted":true}"#,
    ]);
    server.cli(&[
        "HSET",
        &server.key("launchdarkly:segments"),
        "py",
        r#"{"key":"py","version":7,"deleted":true}"#,
    ]);
    server.cli(&["SET", &server.key("launchdarkly:$inited"), ""]);
    let store = store(&server);
    assert!(store.initialized().await.unwrap());
    for (kind, key, version) in [
        (Kind::Flag, "node", 5),
        (Kind::Flag, "go", 6),
        (Kind::Segment, "py", 7),
    ] {
        let t = store.get(kind, key).await.unwrap().unwrap();
        assert_eq!((t.version, t.deleted), (version, true), "{key}");
        assert!(matches!(
            store.upsert(kind, key, &item(key, version)).await.unwrap(),
            Upserted::Rejected { .. }
        ));
        assert_eq!(
            store
                .upsert(kind, key, &item(key, version + 1))
                .await
                .unwrap(),
            Upserted::Written
        );
    }
    // Through the cache, tombstones read as absent.
    server.cli(&[
        "HSET",
        &server.key("launchdarkly:features"),
        "node2",
        r#"{"version":1,"deleted":true}"#,
    ]);
    let cached = CachingStore::new(Arc::new(store), CacheConfig::default());
    assert!(cached.get(Kind::Flag, "node2").await.unwrap().is_none());
    let all = cached.all(Kind::Flag).await.unwrap();
    assert_eq!(all.keys().collect::<Vec<_>>(), ["go", "node"]);
}

async fn prefixes_are_isolated(_rt: Rt, start: Start) {
    let server = start();
    let a = server
        .store_builder()
        .prefix(server.prefix("env-a"))
        .build()
        .unwrap();
    let b = server
        .store_builder()
        .prefix(server.prefix("env-b"))
        .build()
        .unwrap();
    let default = store(&server);
    a.init(&[(Kind::Flag, "f".into(), item("f", 1))])
        .await
        .unwrap();
    assert!(a.initialized().await.unwrap());
    assert!(!b.initialized().await.unwrap());
    assert!(!default.initialized().await.unwrap());
    assert!(b.get(Kind::Flag, "f").await.unwrap().is_none());
    b.upsert(Kind::Flag, "f", &item("f", 9)).await.unwrap();
    assert_eq!(a.get(Kind::Flag, "f").await.unwrap().unwrap().version, 1);
    assert_eq!(b.get(Kind::Flag, "f").await.unwrap().unwrap().version, 9);
    b.init(&[]).await.unwrap();
    assert!(b.all(Kind::Flag).await.unwrap().is_empty());
    assert_eq!(a.all(Kind::Flag).await.unwrap().len(), 1);
    let keys: Vec<String> = server
        .keys("*")
        .into_iter()
        .filter(|k| !k.contains(":$flagsync:"))
        .collect();
    assert_eq!(
        keys,
        [
            server.key("env-a:$inited"),
            server.key("env-a:features"),
            server.key("env-b:$inited")
        ]
    );
    // Each writing store counts its writes under its own prefix only.
    let markers: Vec<String> = server
        .keys("*:$flagsync:*")
        .iter()
        .map(|k| k.split(':').next().unwrap_or_default().to_owned())
        .collect();
    assert!(
        markers
            .iter()
            .all(|p| *p == server.prefix("env-a") || *p == server.prefix("env-b")),
        "{markers:?}"
    );
}

async fn concurrent_upserts_keep_the_highest_version(rt: Rt, start: Start) {
    let server = start();
    // Several writers (separate pools, as separate processes would be) race on one
    // hash: the optimistic lock lets exactly the newest version written win. A writer
    // that loses the race every time gives up with `Contended` after
    // MAX_UPSERT_ATTEMPTS (PROTOCOL.md B §4.4), so its version may be missing.
    let writers: Vec<Arc<RedisStore>> = (0..4).map(|_| Arc::new(store(&server))).collect();
    let (tx, rx) = async_channel::unbounded();
    for (n, w) in writers.iter().enumerate() {
        for v in 0..10u64 {
            let w = w.clone();
            let tx = tx.clone();
            let version = v * 4 + n as u64 + 1;
            rt.spawn(Box::pin(async move {
                let r = w.upsert(Kind::Flag, "hot", &item("hot", version)).await;
                let _ = tx.send((version, r)).await;
            }));
        }
    }
    drop(tx);
    let (mut written, mut newest_written, mut contended) = (0, 0, false);
    while let Ok((version, r)) = rx.recv().await {
        match r {
            Ok(Upserted::Written) => {
                written += 1;
                newest_written = newest_written.max(version);
            }
            Ok(Upserted::Rejected { .. }) => {}
            Err(StoreError::Contended { .. }) => contended = true,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(written >= 1);
    let stored = writers[0]
        .get(Kind::Flag, "hot")
        .await
        .unwrap()
        .unwrap()
        .version;
    assert_eq!(stored, newest_written);
    if !contended {
        assert_eq!(stored, 40);
    }
}

async fn a_store_written_by_flagsync_has_the_layout_other_sdks_read(_rt: Rt, start: Start) {
    let server = start();
    let store = store(&server);
    let flag = r#"{"key":"f","version":2,"on":true,"prerequisites":[{"key":"p","variation":0}],"variations":[1,2]}"#;
    store
        .init(&[
            (Kind::Segment, "s".into(), item("s", 1)),
            (Kind::Flag, "p".into(), item("p", 1)),
            (
                Kind::Flag,
                "f".into(),
                Item {
                    version: 2,
                    deleted: false,
                    raw: Bytes::from_static(flag.as_bytes()),
                },
            ),
            (Kind::Flag, "gone".into(), Item::tombstone("gone", 9)),
        ])
        .await
        .unwrap();
    // The LaunchDarkly layout, and flagsync's count of its own writes.
    let marker = server.key("launchdarkly:$flagsync:");
    let keys: Vec<String> = server
        .keys("*")
        .into_iter()
        .filter(|k| !k.starts_with(&marker))
        .collect();
    assert_eq!(
        server.keys(&server.key("launchdarkly:$flagsync:*")).len(),
        1
    );
    assert_eq!(
        keys,
        [
            server.key("launchdarkly:$inited"),
            server.key("launchdarkly:features"),
            server.key("launchdarkly:segments")
        ]
    );
    for (key, kind) in [
        ("launchdarkly:features", "hash"),
        ("launchdarkly:segments", "hash"),
        ("launchdarkly:$inited", "string"),
    ] {
        assert_eq!(server.cli(&["TYPE", &server.key(key)]), kind, "{key}");
    }
    assert_eq!(
        server.cli(&["HLEN", &server.key("launchdarkly:features")]),
        "3"
    );
    // Items are stored exactly as received: byte for byte.
    assert_eq!(
        server.cli(&["HGET", &server.key("launchdarkly:features"), "f"]),
        flag
    );
    assert_eq!(
        json(&server.cli(&["HGET", &server.key("launchdarkly:segments"), "s"])),
        json(item("s", 1).raw_str())
    );
    assert_eq!(
        json(&server.cli(&["HGET", &server.key("launchdarkly:features"), "gone"])),
        json(r#"{"key":"$deleted","version":9,"deleted":true}"#)
    );
    // Every stored value is a JSON object with a key and a numeric version, which
    // every SDK's model decoder needs.
    for hash in [
        server.key("launchdarkly:features"),
        server.key("launchdarkly:segments"),
    ] {
        let out = server.cli(&["HGETALL", &hash]);
        let lines: Vec<&str> = out.lines().collect();
        for pair in lines.chunks(2) {
            let v = json(pair[1]);
            assert!(v["key"].is_string(), "{hash} {}", pair[0]);
            assert!(v["version"].is_u64(), "{hash} {}", pair[0]);
        }
    }
}

async fn data_written_as_other_sdks_do_is_read(_rt: Rt, start: Start) {
    let server = start();
    // What the Relay Proxy leaves under a custom prefix: one hash per kind, JSON items,
    // and the marker (whose value does not matter).
    server.cli(&[
        "HSET",
        &server.key("relay:features"),
        "flag-a",
        r#"{"key":"flag-a","version":12,"on":true,"variations":["x","y"],"fallthrough":{"variation":0},"offVariation":1,"salt":"s","trackEvents":false,"clientSide":false}"#,
        "flag-b",
        r#"{"key":"flag-b","version":3,"on":false,"rules":[{"clauses":[{"attribute":"key","op":"segmentMatch","values":["seg"]}]}]}"#,
    ]);
    server.cli(&[
        "HSET",
        &server.key("relay:segments"),
        "seg",
        r#"{"key":"seg","version":2,"included":["u1"]}"#,
    ]);
    server.cli(&[
        "SET",
        &server.key("relay:$inited"),
        &server.key("relay:$inited"),
    ]);
    let store = server
        .store_builder()
        .prefix(server.prefix("relay"))
        .build()
        .unwrap();
    assert!(store.initialized().await.unwrap());
    assert_eq!(
        keys(store.all(Kind::Flag).await.unwrap()),
        [("flag-a".into(), 12, false), ("flag-b".into(), 3, false)]
    );
    assert_eq!(
        store
            .get(Kind::Segment, "seg")
            .await
            .unwrap()
            .unwrap()
            .version,
        2
    );
    // A malformed item is skipped, not fatal.
    server.cli(&["HSET", &server.key("relay:features"), "broken", "{not json"]);
    assert_eq!(store.all(Kind::Flag).await.unwrap().len(), 2);
    assert_eq!(store.get(Kind::Flag, "broken").await.unwrap(), None);
}

async fn operations_fail_while_the_server_is_down_and_work_after_it_returns(_rt: Rt, start: Start) {
    let mut server = start();
    let store = server
        .store_builder()
        .connect_timeout(std::time::Duration::from_millis(500))
        .build()
        .unwrap();
    store
        .init(&[(Kind::Flag, "f".into(), item("f", 1))])
        .await
        .unwrap();
    assert!(store.is_available().await);
    server.stop();
    assert!(!store.is_available().await);
    assert!(matches!(
        store.get(Kind::Flag, "f").await,
        Err(StoreError::Unreachable(_))
    ));
    assert!(store.upsert(Kind::Flag, "f", &item("f", 2)).await.is_err());
    assert!(store.initialized().await.is_err());
    server.restart();
    assert!(store.is_available().await);
    // The restarted server is empty (nothing was saved).
    assert!(!store.initialized().await.unwrap());
    store
        .init(&[(Kind::Flag, "f".into(), item("f", 3))])
        .await
        .unwrap();
    assert_eq!(
        store.get(Kind::Flag, "f").await.unwrap().unwrap().version,
        3
    );
}

async fn the_caching_wrapper_over_redis(_rt: Rt, start: Start) {
    let server = start();
    let cached = CachingStore::new(Arc::new(store(&server)), CacheConfig::default());
    assert!(!cached.initialized().await.unwrap());
    // Another process initializes the store: the cached "false" holds for the TTL.
    let other = store(&server);
    other
        .init(&[(Kind::Flag, "f".into(), item("f", 1))])
        .await
        .unwrap();
    assert!(!cached.initialized().await.unwrap());
    assert_eq!(cached.all(Kind::Flag).await.unwrap().len(), 1);
    other.upsert(Kind::Flag, "f", &item("f", 2)).await.unwrap();
    assert_eq!(
        cached.get(Kind::Flag, "f").await.unwrap().unwrap().version,
        1
    );
    // Handed over: reads go to Redis.
    cached.disable_cache();
    assert_eq!(
        cached.get(Kind::Flag, "f").await.unwrap().unwrap().version,
        2
    );
    assert!(cached.initialized().await.unwrap());
}
