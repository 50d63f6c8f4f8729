//! A Redis that restarts, loses its data or stalls unseen, against a real redis-server,
//! on every runtime feature (issue 19, defects 5 and 6): the writer notices without a
//! write and rewrites the data set; readers never take a store without `$inited` for
//! an empty data set; a daemon started while Redis is down becomes ready and VALID
//! once Redis answers.

#[macro_use]
mod common;

use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use common::redis_server::RedisServer;
use common::*;
use flagsync::persist::{CacheConfig, Item, PersistentStore, StoreMode};
use flagsync::{Kind, State};
use flagsync_redis::RedisStore;

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    writer_rewrites_a_redis_restarted_empty_without_a_flag_change,
    writer_rewrites_a_redis_restarted_from_an_older_save,
    writer_notices_a_stalled_redis_and_rewrites_it_after,
    daemon_started_while_redis_is_down_becomes_ready_and_valid,
    daemon_lists_what_redis_holds_after_it_restarts_empty,
    pooled_connections_are_checked_after_a_restart,
    warm_start_and_first_reads_report_only_real_changes,
    store_errors_say_what_failed,
);

/// A stream server whose one connection sends whatever the test feeds it.
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

fn redis_store(server: &RedisServer) -> Arc<RedisStore> {
    Arc::new(
        RedisStore::builder(server.url())
            .connect_timeout(Duration::from_millis(300))
            .response_timeout(Duration::from_millis(500))
            .build()
            .unwrap(),
    )
}

fn item(key: &str, version: u64) -> Item {
    Item {
        version,
        deleted: false,
        raw: format!(
            r#"{{"key":"{key}","version":{version},"on":true,"variations":[true,false]}}"#
        )
        .into(),
    }
}

fn hundred_flags(version: u64) -> Vec<(String, u64, bool)> {
    (0..101).map(|i| (format!("f{i}"), version, true)).collect()
}

fn put_of(flags: &[(String, u64, bool)]) -> String {
    let flags: Vec<(&str, u64, bool)> = flags
        .iter()
        .map(|(k, v, on)| (k.as_str(), *v, *on))
        .collect();
    put_event(&flags, &[], None)
}

/// The flag versions Redis holds, sorted by key.
async fn redis_flags(store: &RedisStore) -> Vec<(String, u64)> {
    let mut got: Vec<(String, u64)> = match store.all(Kind::Flag).await {
        Ok(items) => items.into_iter().map(|(k, i)| (k, i.version)).collect(),
        Err(_) => Vec::new(),
    };
    got.sort();
    got
}

fn sorted(flags: &[(String, u64, bool)]) -> Vec<(String, u64)> {
    let mut want: Vec<(String, u64)> = flags.iter().map(|(k, v, _)| (k.clone(), *v)).collect();
    want.sort();
    want
}

/// Wait until Redis holds exactly `want` and `$inited`; how long that took.
async fn until_redis_holds(
    rt: &Rt,
    redis: &RedisServer,
    store: &RedisStore,
    want: &[(String, u64)],
) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < 5 * SEC {
        if redis_flags(store).await == want && redis.cli(&["EXISTS", "launchdarkly:$inited"]) == "1"
        {
            return Some(start.elapsed());
        }
        sleep(rt, Duration::from_millis(20)).await;
    }
    None
}

/// A writer with 101 flags in Redis.
async fn started_writer(
    rt: &Rt,
    redis: &RedisServer,
) -> (
    flagsync::Client,
    mpsc::Sender<String>,
    Server,
    Arc<RedisStore>,
) {
    let (feed, server) = feed_server();
    let store = redis_store(redis);
    let client = builder(rt, &server.url())
        .persistent_store(store.clone(), StoreMode::ReadWrite, CacheConfig::default())
        .build()
        .unwrap();
    feed.send(SSE_HEAD.into()).unwrap();
    feed.send(put_of(&hundred_flags(1))).unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    let want = sorted(&hundred_flags(1));
    assert!(until_redis_holds(rt, redis, &store, &want).await.is_some());
    (client, feed, server, store)
}

async fn writer_rewrites_a_redis_restarted_empty_without_a_flag_change(rt: Rt) {
    let mut redis = RedisServer::start();
    let (client, _feed, _server, store) = started_writer(&rt, &redis).await;
    // Down for a moment, back empty; no flag changes meanwhile or after.
    redis.stop();
    sleep(&rt, Duration::from_millis(300)).await;
    redis.restart();
    let took = until_redis_holds(&rt, &redis, &store, &sorted(&hundred_flags(1))).await;
    assert!(
        took.is_some(),
        "Redis still holds {:?}",
        redis_flags(&store).await.len()
    );
    eprintln!("rewritten {:?} after the restart", took.unwrap());
    assert!(
        eventually(&rt, 3 * SEC, || client
            .store_status()
            .is_some_and(|s| s.available && !s.stale))
        .await
    );
    client.close().await;
}

async fn writer_rewrites_a_redis_restarted_from_an_older_save(rt: Rt) {
    let mut redis = RedisServer::start();
    let (client, feed, _server, store) = started_writer(&rt, &redis).await;
    // Saved now (with `$inited`), then changed: a restart from the save rolls back.
    redis.cli(&["SAVE"]);
    let v2 = hundred_flags(2);
    feed.send(put_of(&v2)).unwrap();
    assert!(
        until_redis_holds(&rt, &redis, &store, &sorted(&v2))
            .await
            .is_some()
    );
    redis.restart();
    assert_eq!(
        redis.cli(&["EXISTS", "launchdarkly:$inited"]),
        "1",
        "the save has $inited"
    );
    let took = until_redis_holds(&rt, &redis, &store, &sorted(&v2)).await;
    assert!(took.is_some(), "Redis still holds the old save");
    client.close().await;
}

async fn writer_notices_a_stalled_redis_and_rewrites_it_after(rt: Rt) {
    let redis = RedisServer::start();
    let (client, feed, _server, store) = started_writer(&rt, &redis).await;
    let store_statuses = client.store_status_changes();
    redis.signal("STOP");
    // No write is needed to notice: the store status turns unavailable.
    let down = next_within(&rt, &store_statuses).await;
    redis.signal("CONT");
    assert_eq!(
        down.map(|s| s.available),
        Some(false),
        "the stall was noticed"
    );
    // A change made while it was stalled reaches it afterwards.
    let v3 = hundred_flags(3);
    feed.send(put_of(&v3)).unwrap();
    assert!(
        until_redis_holds(&rt, &redis, &store, &sorted(&v3))
            .await
            .is_some()
    );
    assert!(
        eventually(&rt, 3 * SEC, || client
            .store_status()
            .is_some_and(|s| s.available))
        .await
    );
    client.close().await;
}

async fn daemon_started_while_redis_is_down_becomes_ready_and_valid(rt: Rt) {
    let mut redis = RedisServer::start();
    redis.stop();
    let client = builder(&rt, "http://127.0.0.1:1")
        .daemon(
            redis_store(&redis),
            CacheConfig::ttl(Duration::from_millis(200)),
        )
        .build()
        .unwrap();
    client.start().unwrap();
    let started = Instant::now();
    let restart = async {
        sleep(&rt, Duration::from_millis(1500)).await;
        redis.restart();
        let writer = redis_store(&redis);
        let items: Vec<(Kind, String, Item)> = (0..101)
            .map(|i| (Kind::Flag, format!("f{i}"), item(&format!("f{i}"), 1)))
            .collect();
        writer.init(&items).await.unwrap();
    };
    let (ready, ()) =
        futures_lite::future::zip(client.wait_for_initialization(8 * SEC), restart).await;
    assert!(ready, "ready once Redis answered");
    assert!(started.elapsed() < 6 * SEC, "{:?}", started.elapsed());
    assert!(
        started.elapsed() >= Duration::from_millis(1400),
        "not before Redis came back"
    );
    assert_eq!(client.snapshot().len(Kind::Flag), 101);
    assert!(
        eventually(&rt, 3 * SEC, || client.status().state == State::Valid).await,
        "{:?}",
        client.status()
    );
    client.close().await;
}

async fn daemon_lists_what_redis_holds_after_it_restarts_empty(rt: Rt) {
    let mut redis = RedisServer::start();
    let writer = redis_store(&redis);
    let items: Vec<(Kind, String, Item)> = (0..101)
        .map(|i| (Kind::Flag, format!("f{i}"), item(&format!("f{i}"), 1)))
        .collect();
    writer.init(&items).await.unwrap();
    let client = builder(&rt, "http://127.0.0.1:1")
        .daemon(
            redis_store(&redis),
            CacheConfig::ttl(Duration::from_millis(100)),
        )
        .build()
        .unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(client.snapshot().len(Kind::Flag), 101);
    assert!(eventually(&rt, 3 * SEC, || client.flag("f7").is_some()).await);
    let changes = client.flag_changes();
    redis.restart();
    // A reader lists what Redis holds, `$inited` or not, as LaunchDarkly's SDKs list it
    // (issue 30 item 5): once the listing's TTL is over, the empty Redis lists no flag.
    // (A writer still takes a Redis restarted empty for "not initialized" and writes
    // its data set again: `writer_rewrites_a_redis_restarted_empty_…`.)
    assert!(
        eventually(&rt, 5 * SEC, || client.snapshot().len(Kind::Flag) == 0).await,
        "{}",
        client.snapshot().len(Kind::Flag)
    );
    assert!(
        timeout(&rt, SEC, changes.recv()).await.flatten().is_some(),
        "the removals are reported"
    );
    // Another process writes again, without `$inited`: listed at once.
    redis.cli(&[
        "HSET",
        "launchdarkly:features",
        "f7",
        item("f7", 2).raw_str(),
    ]);
    assert!(
        eventually(&rt, 5 * SEC, || client
            .snapshot()
            .get(Kind::Flag, "f7")
            .is_some_and(|f| f.version == 2))
        .await
    );
    client.close().await;
}

async fn pooled_connections_are_checked_after_a_restart(rt: Rt) {
    let mut redis = RedisServer::start();
    let store = redis_store(&redis);
    // Four operations at once: four pooled connections.
    let ops = futures_lite::future::zip(
        futures_lite::future::zip(store.initialized(), store.initialized()),
        futures_lite::future::zip(store.initialized(), store.initialized()),
    )
    .await;
    assert!(matches!(ops, ((Ok(_), Ok(_)), (Ok(_), Ok(_)))));
    redis.restart();
    sleep(&rt, Duration::from_millis(600)).await;
    // Redis is back: no operation fails on a connection that died with the old server.
    let mut failures = 0;
    for _ in 0..8 {
        if store.initialized().await.is_err() {
            failures += 1;
        }
    }
    assert_eq!(failures, 0);
}

async fn warm_start_and_first_reads_report_only_real_changes(rt: Rt) {
    let redis = RedisServer::start();
    let writer = redis_store(&redis);
    let items: Vec<(Kind, String, Item)> = (0..101)
        .map(|i| (Kind::Flag, format!("f{i}"), item(&format!("f{i}"), 1)))
        .collect();
    writer.init(&items).await.unwrap();

    // A daemon: its first reads of each flag are what it listed first, not changes.
    let daemon = builder(&rt, "http://127.0.0.1:1")
        .daemon(
            redis_store(&redis),
            CacheConfig::ttl(Duration::from_millis(100)),
        )
        .build()
        .unwrap();
    let daemon_changes = daemon.flag_changes();
    daemon.start().unwrap();
    assert!(daemon.wait_for_initialization(5 * SEC).await);
    for i in 0..101 {
        let _ = daemon.flag(&format!("f{i}"));
    }
    assert!(eventually(&rt, 3 * SEC, || daemon.flag("f100").is_some()).await);
    sleep(&rt, Duration::from_millis(300)).await;
    assert_eq!(
        daemon_changes.try_recv(),
        None,
        "first reads are not changes"
    );

    // A writer warm-started from Redis: a put equal to it but for one flag reports
    // that flag only.
    let (feed, server) = feed_server();
    let client = builder(&rt, &server.url())
        .persistent_store(
            redis_store(&redis),
            StoreMode::ReadWrite,
            CacheConfig::default(),
        )
        .build()
        .unwrap();
    let changes = client.flag_changes();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await, "warm start");
    let mut flags = hundred_flags(1);
    flags[7].1 = 2;
    feed.send(SSE_HEAD.into()).unwrap();
    feed.send(put_of(&flags)).unwrap();
    assert!(
        eventually(&rt, 5 * SEC, || client
            .flag("f7")
            .is_some_and(|f| f.version == 2))
        .await
    );
    sleep(&rt, Duration::from_millis(100)).await;
    let mut got = Vec::new();
    while let Some(c) = changes.try_recv() {
        got.push(c.key);
    }
    assert_eq!(got, ["f7"]);
    client.close().await;
    daemon.close().await;
}

async fn store_errors_say_what_failed(rt: Rt) {
    let redis = RedisServer::start_with_password(Some("the-password"));
    let url = format!("redis://:wrong-password@127.0.0.1:{}/0", redis.port());
    let store = Arc::new(RedisStore::builder(url).build().unwrap());
    let client = builder(&rt, "http://127.0.0.1:1")
        .daemon(store, CacheConfig::default())
        .build()
        .unwrap();
    client.start().unwrap();
    assert!(
        eventually(&rt, 5 * SEC, || client.status().error.is_some()).await,
        "{:?}",
        client.status()
    );
    let error = client.status().error.unwrap();
    assert_eq!(error.kind, flagsync::ErrorKind::StoreError);
    assert_eq!(
        error.store_fault,
        Some(flagsync::persist::StoreFaultKind::Authentication)
    );
    assert!(
        error.message.contains("authentication"),
        "{}",
        error.message
    );
    assert!(!error.message.contains("password-"), "{}", error.message);
    assert!(
        !error.message.contains("wrong-password"),
        "{}",
        error.message
    );
    client.close().await;
}
