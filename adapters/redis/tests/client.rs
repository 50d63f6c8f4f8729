//! The client with a Redis persistent store against a real redis-server and a scripted
//! flag stream, on every runtime feature: write-through, read-only, warm start, daemon
//! mode, and an outage of Redis in the middle of the stream.

#[macro_use]
mod common;

use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use common::redis_server::RedisServer;
use common::*;
use flagsync::persist::{CacheConfig, Item, PersistentStore, StoreMode, StoreStatus};
use flagsync::{DataAvailability, Kind, Snapshot, State};
use flagsync_redis::RedisStore;

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    write_through_keeps_redis_equal_to_the_stream,
    read_only_never_writes,
    warm_start_serves_the_stored_flags_until_the_stream_delivers,
    daemon_mode_serves_data_another_process_wrote,
    outage_mid_stream_ends_with_redis_equal_to_the_last_state,
);

/// Reads that evaluate (the `eval` feature).
mod eval_rt {
    use super::*;
    runtime_tests!(a_read_without_a_live_entry_reads_redis_before_it_returns);
}

/// A stream server whose one connection sends whatever the test feeds it, when it
/// feeds it.
fn feed_server() -> (mpsc::Sender<String>, Server) {
    let (tx, rx) = mpsc::channel::<String>();
    let rx = Arc::new(Mutex::new(rx));
    let server = Server::start(move |_, r| {
        let rx = rx.lock().unwrap();
        while let Ok(chunk) = rx.recv() {
            r.send(chunk);
        }
        After::Close
    });
    (tx, server)
}

fn patch(kind: Kind, key: &str, version: u64, on: bool) -> String {
    let path = kind.fdv1_path_prefix();
    format!(
        "event: patch\ndata: {{\"path\":\"{path}{key}\",\"data\":{{\"key\":\"{key}\",\"version\":{version},\"on\":{on},\"variations\":[true,false]}}}}\n\n"
    )
}

fn delete(kind: Kind, key: &str, version: u64) -> String {
    let path = kind.fdv1_path_prefix();
    format!("event: delete\ndata: {{\"path\":\"{path}{key}\",\"version\":{version}}}\n\n")
}

fn redis_store(server: &RedisServer) -> Arc<RedisStore> {
    Arc::new(
        RedisStore::builder(server.url())
            .connect_timeout(Duration::from_millis(300))
            .build()
            .unwrap(),
    )
}

/// (kind, key, version, deleted) of every item, tombstones included, sorted.
type Listing = Vec<(Kind, String, u64, bool)>;

async fn redis_listing(store: &RedisStore) -> Listing {
    let mut out = Listing::new();
    for kind in Kind::ALL {
        for (key, item) in store.all(kind).await.unwrap() {
            out.push((kind, key, item.version, item.deleted));
        }
    }
    out.sort();
    out
}

fn snapshot_listing(s: &Snapshot) -> Listing {
    let mut out = Listing::new();
    for kind in Kind::ALL {
        for (key, item) in s.iter_including_deleted(kind) {
            out.push((kind, key.to_owned(), item.version, item.deleted));
        }
    }
    out.sort();
    out
}

fn item(key: &str, version: u64, on: bool) -> Item {
    Item {
        version,
        deleted: false,
        raw: format!(
            r#"{{"key":"{key}","version":{version},"on":{on},"variations":[true,false]}}"#
        )
        .into(),
    }
}

async fn write_through_keeps_redis_equal_to_the_stream(rt: Rt) {
    let redis = RedisServer::start();
    let (feed, server) = feed_server();
    let store = redis_store(&redis);
    let client = builder(&rt, &server.url())
        .persistent_store(store.clone(), StoreMode::ReadWrite, CacheConfig::default())
        .build()
        .unwrap();
    feed.send(SSE_HEAD.into()).unwrap();
    feed.send(put_event(
        &[("f1", 1, true), ("f2", 1, false)],
        &[("s1", 1)],
        None,
    ))
    .unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    for chunk in [
        patch(Kind::Flag, "f1", 2, false),
        delete(Kind::Flag, "f2", 2),
        patch(Kind::Flag, "f3", 1, true),
        patch(Kind::Segment, "s1", 3, true),
        // Stale: rejected in memory, never written.
        patch(Kind::Flag, "f1", 1, true),
    ] {
        feed.send(chunk).unwrap();
    }
    assert!(eventually(&rt, 5 * SEC, || client.flag("f3").is_some()).await);
    let want = snapshot_listing(&client.snapshot());
    let mut got = Listing::new();
    for _ in 0..200 {
        got = redis_listing(&store).await;
        if got == want {
            break;
        }
        sleep(&rt, Duration::from_millis(10)).await;
    }
    assert_eq!(got, want);
    assert_eq!(
        got,
        [
            (Kind::Segment, "s1".into(), 3, false),
            (Kind::Flag, "f1".into(), 2, false),
            (Kind::Flag, "f2".into(), 2, true),
            (Kind::Flag, "f3".into(), 1, false),
        ]
    );
    assert_eq!(redis.cli(&["EXISTS", "launchdarkly:$inited"]), "1");
    assert_eq!(
        client.store_status(),
        Some(StoreStatus {
            available: true,
            stale: false
        })
    );
    assert_eq!(client.data_availability(), DataAvailability::Refreshed);
    client.close().await;
    assert!(client.is_closed());
}

async fn read_only_never_writes(rt: Rt) {
    let redis = RedisServer::start();
    // Another process's data.
    redis.cli(&[
        "HSET",
        "launchdarkly:features",
        "f1",
        r#"{"key":"f1","version":5,"on":false,"variations":[true,false]}"#,
    ]);
    redis.cli(&["SET", "launchdarkly:$inited", ""]);
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let (feed, server) = feed_server();
    let client = builder(&rt, &server.url())
        .persistent_store(
            redis_store(&redis),
            StoreMode::ReadOnly,
            CacheConfig::default(),
        )
        .build()
        .unwrap();
    feed.send(SSE_HEAD.into()).unwrap();
    feed.send(put_event(
        &[("f1", 1, true), ("f2", 1, true)],
        &[("s", 1)],
        None,
    ))
    .unwrap();
    feed.send(patch(Kind::Flag, "f2", 2, false)).unwrap();
    feed.send(delete(Kind::Flag, "f1", 9)).unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    // Reads come from the store (FDv1: the store is the SDK's store), which this
    // client never writes: the stream's delete of f1 does not show there.
    assert_eq!(client.flag("f1").map(|f| f.version), Some(5));
    sleep(&rt, Duration::from_millis(300)).await;
    let stats = redis.cli(&["INFO", "commandstats"]);
    for write in ["hset", "hdel", "del", "set", "multi", "exec", "watch"] {
        assert!(
            !stats.contains(&format!("cmdstat_{write}:")),
            "read-only client ran {write}: {stats}"
        );
    }
    assert_eq!(
        redis.cli(&["HGET", "launchdarkly:features", "f1"]),
        r#"{"key":"f1","version":5,"on":false,"variations":[true,false]}"#
    );
    assert_eq!(redis.cli(&["HLEN", "launchdarkly:features"]), "1");
    client.close().await;
}

async fn warm_start_serves_the_stored_flags_until_the_stream_delivers(rt: Rt) {
    let redis = RedisServer::start();
    let store = redis_store(&redis);
    // What the previous run of this service left.
    store
        .init(&[
            (Kind::Segment, "s".into(), item("s", 1, true)),
            (Kind::Flag, "f1".into(), item("f1", 5, false)),
        ])
        .await
        .unwrap();
    let (feed, server) = feed_server();
    let client = builder(&rt, &server.url())
        .persistent_store(store.clone(), StoreMode::ReadWrite, CacheConfig::default())
        .build()
        .unwrap();
    let changes = client.flag_changes();
    client.start().unwrap();
    // Served from Redis at once, while the stream has sent nothing.
    assert!(eventually(&rt, 3 * SEC, || client.flag("f1").is_some()).await);
    let f1 = client.flag("f1").unwrap();
    assert_eq!((f1.version, f1.on), (5, false));
    // Read key by key: the segment once asked for.
    assert!(eventually(&rt, 3 * SEC, || client.segment("s").is_some()).await);
    assert!(
        eventually(&rt, 3 * SEC, || client.data_availability()
            == DataAvailability::Cached)
        .await
    );
    assert!(client.initialized());
    // The stream delivers: memory takes over and Redis follows it.
    feed.send(SSE_HEAD.into()).unwrap();
    feed.send(put_event(&[("f1", 6, true), ("f2", 1, true)], &[], None))
        .unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert!(
        eventually(&rt, 5 * SEC, || client
            .flag("f1")
            .is_some_and(|f| f.version == 6))
        .await
    );
    assert!(client.segment("s").is_none());
    assert_eq!(client.data_availability(), DataAvailability::Refreshed);
    // The flags that differ from what Redis served changed (f1 5 → 6, f2 new).
    let mut keys = Vec::new();
    while let Some(c) = changes.try_recv() {
        keys.push(c.key);
    }
    keys.sort();
    keys.dedup();
    assert_eq!(keys, ["f1", "f2"]);
    let want = snapshot_listing(&client.snapshot());
    let mut got = Listing::new();
    for _ in 0..200 {
        got = redis_listing(&store).await;
        if got == want {
            break;
        }
        sleep(&rt, Duration::from_millis(10)).await;
    }
    assert_eq!(got, want);
    // Under FDv1 the store stays the store reads come from, through its cache: a
    // later change in Redis by someone else shows only once the entry written above
    // expires (a TTL of 15 s).
    store
        .upsert(Kind::Flag, "f1", &item("f1", 99, false))
        .await
        .unwrap();
    sleep(&rt, Duration::from_millis(100)).await;
    assert_eq!(client.flag("f1").unwrap().version, 6);
    client.close().await;
    assert!(client.is_closed());
}

async fn daemon_mode_serves_data_another_process_wrote(rt: Rt) {
    let redis = RedisServer::start();
    // The writer: another process (here a second store on its own connections).
    let writer = redis_store(&redis);
    writer
        .init(&[
            (Kind::Segment, "s".into(), item("s", 1, true)),
            (Kind::Flag, "f1".into(), item("f1", 1, true)),
            (Kind::Flag, "gone".into(), Item::tombstone("gone", 4)),
        ])
        .await
        .unwrap();
    // No flag service at all: nothing listens on port 1.
    let client = builder(&rt, "http://127.0.0.1:1")
        .daemon(
            redis_store(&redis),
            CacheConfig::ttl(Duration::from_millis(200)),
        )
        .build()
        .unwrap();
    let changes = client.flag_changes();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    // Items are read key by key: each once asked for.
    assert!(
        eventually(&rt, 3 * SEC, || client
            .flag("f1")
            .is_some_and(|f| f.version == 1))
        .await
    );
    assert!(client.flag("gone").is_none());
    assert!(eventually(&rt, 3 * SEC, || client.segment("s").is_some()).await);
    assert_eq!(client.data_availability(), DataAvailability::Cached);
    assert_eq!(client.target_availability(), DataAvailability::Cached);
    // Reading f1 for the first time is not a change: it is what the first listing held.
    assert_eq!(changes.try_recv(), None);
    // The writer changes the store: the daemon serves it within a TTL or so.
    writer
        .upsert(Kind::Flag, "f1", &item("f1", 2, false))
        .await
        .unwrap();
    writer
        .upsert(Kind::Flag, "f9", &item("f9", 1, true))
        .await
        .unwrap();
    assert!(eventually(&rt, 5 * SEC, || client.flag("f9").is_some()).await);
    // f1 was read before: it is read again once its entry expires.
    assert!(
        eventually(&rt, 5 * SEC, || client
            .flag("f1")
            .is_some_and(|f| f.version == 2))
        .await
    );
    let mut keys = vec![
        timeout(&rt, SEC, changes.recv())
            .await
            .flatten()
            .unwrap()
            .key,
        timeout(&rt, SEC, changes.recv())
            .await
            .flatten()
            .unwrap()
            .key,
    ];
    keys.sort();
    assert_eq!(keys, ["f1", "f9"]);
    // The daemon never writes.
    assert_eq!(
        redis.cli(&["HGET", "launchdarkly:features", "f9"]),
        item("f9", 1, true).raw_str()
    );
    client.close().await;
    assert!(client.is_closed());
}

async fn outage_mid_stream_ends_with_redis_equal_to_the_last_state(rt: Rt) {
    let mut redis = RedisServer::start();
    let store = redis_store(&redis);
    let (feed, server) = feed_server();
    let client = builder(&rt, &server.url())
        .persistent_store(store.clone(), StoreMode::ReadWrite, CacheConfig::default())
        .build()
        .unwrap();
    let store_statuses = client.store_status_changes();
    let statuses = client.status_changes();
    feed.send(SSE_HEAD.into()).unwrap();
    feed.send(put_event(
        &[("f1", 1, true), ("f2", 1, true), ("f3", 1, true)],
        &[("s1", 1)],
        None,
    ))
    .unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert!(inited_within(&rt, &redis).await);

    // Redis goes away; the stream goes on.
    redis.stop();
    feed.send(patch(Kind::Flag, "f1", 2, false)).unwrap();
    let down = next_within(&rt, &store_statuses).await;
    assert_eq!(
        down,
        Some(StoreStatus {
            available: false,
            stale: true
        })
    );
    assert_eq!(client.store_status(), down);
    for chunk in [
        delete(Kind::Flag, "f2", 2),
        patch(Kind::Flag, "f4", 1, true),
        patch(Kind::Segment, "s1", 2, false),
        patch(Kind::Flag, "f3", 7, false),
    ] {
        feed.send(chunk).unwrap();
    }
    assert!(
        eventually(&rt, 5 * SEC, || client
            .flag("f3")
            .is_some_and(|f| f.version == 7))
        .await
    );
    // Memory serves every update meanwhile.
    assert_eq!(client.flag("f1").unwrap().version, 2);
    assert!(client.flag("f2").is_none());
    sleep(&rt, Duration::from_millis(600)).await;
    assert_eq!(client.store_status().map(|s| s.available), Some(false));

    // Redis returns, empty: the client gives it the whole data set again.
    redis.restart();
    let up = next_within(&rt, &store_statuses).await;
    assert_eq!(
        up,
        Some(StoreStatus {
            available: true,
            stale: false
        })
    );
    let want = snapshot_listing(&client.snapshot());
    let mut got = Listing::new();
    for _ in 0..300 {
        got = redis_listing(&store).await;
        if got == want {
            break;
        }
        sleep(&rt, Duration::from_millis(10)).await;
    }
    assert_eq!(got, want);
    assert_eq!(
        want,
        [
            (Kind::Segment, "s1".to_owned(), 2, false),
            (Kind::Flag, "f1".to_owned(), 2, false),
            (Kind::Flag, "f2".to_owned(), 2, true),
            (Kind::Flag, "f3".to_owned(), 7, false),
            (Kind::Flag, "f4".to_owned(), 1, false),
        ]
    );
    assert_eq!(redis.cli(&["EXISTS", "launchdarkly:$inited"]), "1");
    // Updates after the recovery are written through again.
    feed.send(patch(Kind::Flag, "f5", 1, true)).unwrap();
    assert!(
        eventually(&rt, 5 * SEC, || redis.cli(&[
            "HEXISTS",
            "launchdarkly:features",
            "f5"
        ]) == "1")
        .await
    );

    // The data-source status showed the store error, and the recovery.
    assert_store_fault_then_recovery(&statuses);
    assert_eq!(client.status().state, State::Valid);
    client.close().await;
    assert!(client.is_closed());
}

fn served(key: &str, version: u64, serve: bool) -> String {
    let variation = if serve { 0 } else { 1 };
    format!(
        r#"{{"key":"{key}","version":{version},"on":true,"variations":[true,false],"fallthrough":{{"variation":{variation}}}}}"#
    )
}

/// The harness's "store mode … no cache - shows changes immediately", against a real
/// Redis: every evaluation reads Redis before it returns (on the calling thread: also
/// from a task of the client's own runtime), and a change it finds is announced.
async fn a_read_without_a_live_entry_reads_redis_before_it_returns(rt: Rt) {
    let redis = RedisServer::start();
    let client = builder(&rt, "http://127.0.0.1:1")
        .daemon(redis_store(&redis), CacheConfig::disabled())
        .build()
        .unwrap();
    let changes = client.flag_changes();
    redis.cli(&["SET", "launchdarkly:$inited", ""]);
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    let context = flagsync::eval::ContextBuilder::new("u").build().unwrap();
    redis.cli(&["HSET", "launchdarkly:features", "f", &served("f", 1, true)]);
    assert!(
        client.bool_variation("f", &context, false),
        "the first read"
    );
    redis.cli(&["HSET", "launchdarkly:features", "f", &served("f", 2, false)]);
    assert!(!client.bool_variation("f", &context, true), "every read");
    let change = timeout(&rt, SEC, changes.recv()).await.flatten();
    assert_eq!(change.map(|c| c.key), Some("f".to_owned()));
    let (tx, rx) = async_channel::bounded(1);
    let (c, ctx) = (client.clone(), context.clone());
    redis.cli(&["HSET", "launchdarkly:features", "f", &served("f", 3, true)]);
    rt.spawn(Box::pin(async move {
        let _ = tx.send(c.bool_variation("f", &ctx, false)).await;
    }));
    assert_eq!(
        timeout(&rt, 5 * SEC, rx.recv()).await.and_then(Result::ok),
        Some(true)
    );
    // Redis gone: a read fails fast and answers from what the client holds.
    drop(redis);
    let t0 = std::time::Instant::now();
    assert!(client.bool_variation("f", &context, false));
    assert!(t0.elapsed() < 3 * SEC, "{:?}", t0.elapsed());
    client.close().await;
}
