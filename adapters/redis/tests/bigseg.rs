//! The big-segment store contract of `RedisBigSegmentStore` against a real
//! redis-server, on every runtime feature: its async calls (the status poller's, and
//! an evaluation's through the runtime) and its blocking ones (`membership_now`,
//! `metadata_now`: an evaluation's on whatever thread it runs), and a store written in
//! the layout the Relay Proxy and the other LaunchDarkly SDKs use, with raw redis
//! commands.
//!
//! Each test starts its own redis-server on a free 127.0.0.1 port (see
//! `common/redis_server.rs`); a missing redis-server fails the test, never skips it.

#[macro_use]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::Rt;
use common::redis_server::RedisServer;
use flagsync::bigseg::{BigSegmentStore, BigSegmentStoreStatus, BigSegmentsOptions, StoreError};
use flagsync_core::bigseg::context_hash;
use flagsync_redis::RedisBigSegmentStore;

runtime_tests!(
    metadata_is_the_synchronized_on_time_or_none,
    a_store_written_as_the_relay_proxy_does_is_read,
    a_context_in_no_set_has_no_membership,
    prefixes_are_isolated_and_default_to_launchdarkly,
    calls_fail_while_the_server_is_down_and_work_after_it_returns,
    a_client_reports_the_status_of_a_redis_store,
);

fn store(server: &RedisServer) -> RedisBigSegmentStore {
    RedisBigSegmentStore::new(server.url()).unwrap()
}

const NOW: Duration = Duration::from_secs(2);

/// The answer of a blocking call, which `RedisBigSegmentStore` always gives.
fn now<T>(answer: Option<T>) -> T {
    answer.expect("RedisBigSegmentStore answers on the calling thread")
}

async fn metadata_is_the_synchronized_on_time_or_none(_rt: Rt) {
    let server = RedisServer::start();
    let store = store(&server);
    assert_eq!(store.metadata().await.unwrap().last_up_to_date, None);
    server.cli(&[
        "SET",
        "launchdarkly:big_segments_synchronized_on",
        "1700000000123",
    ]);
    assert_eq!(
        store.metadata().await.unwrap().last_up_to_date,
        Some(1_700_000_000_123)
    );
    server.cli(&[
        "SET",
        "launchdarkly:big_segments_synchronized_on",
        "not-a-time",
    ]);
    assert!(matches!(
        store.metadata().await,
        Err(StoreError::Backend(_))
    ));
    // A key of the wrong type is the store's error, not a panic.
    server.cli(&["DEL", "launchdarkly:big_segments_synchronized_on"]);
    server.cli(&["SADD", "launchdarkly:big_segments_synchronized_on", "x"]);
    assert!(store.metadata().await.is_err());
}

async fn a_store_written_as_the_relay_proxy_does_is_read(_rt: Rt) {
    let server = RedisServer::start();
    // What the Relay Proxy writes for context "user-key" (hash from the contract tests).
    let hash = "CEXjZY7cHJG/ydFy7q4+YEFwVrG3/pkJwA4FAjrbfx0=";
    assert_eq!(context_hash("user-key"), hash);
    let include = format!("launchdarkly:big_segment_include:{hash}");
    let exclude = format!("launchdarkly:big_segment_exclude:{hash}");
    server.cli(&["SADD", &include, "segment1.g100", "both.g1"]);
    server.cli(&["SADD", &exclude, "segment2.g7", "both.g1"]);
    server.cli(&["SET", "launchdarkly:big_segments_synchronized_on", "42"]);
    let store = store(&server);
    let m = store.membership(hash).await.unwrap().expect("a membership");
    assert_eq!(m.check("segment1.g100"), Some(true));
    assert_eq!(m.check("segment2.g7"), Some(false));
    assert_eq!(m.check("both.g1"), Some(true), "include wins");
    assert_eq!(m.check("segment1.g101"), None, "another generation");
    assert_eq!(store.metadata().await.unwrap().last_up_to_date, Some(42));
    // The blocking calls read the same.
    assert_eq!(
        now(store.membership_now(hash, NOW)).unwrap(),
        Some(m.clone())
    );
    assert_eq!(
        now(store.metadata_now(NOW)).unwrap().last_up_to_date,
        Some(42)
    );
    // Only excluded: still a membership.
    let other = context_hash("other");
    server.cli(&[
        "SADD",
        &format!("launchdarkly:big_segment_exclude:{other}"),
        "segment1.g100",
    ]);
    let m = store
        .membership(&other)
        .await
        .unwrap()
        .expect("a membership");
    assert_eq!(m.check("segment1.g100"), Some(false));
}

async fn a_context_in_no_set_has_no_membership(_rt: Rt) {
    let server = RedisServer::start();
    let store = store(&server);
    assert_eq!(
        store.membership(&context_hash("nobody")).await.unwrap(),
        None
    );
    // A hash with characters that need no escaping in Redis but would in a shell.
    assert_eq!(store.membership("a+b/c=").await.unwrap(), None);
}

async fn prefixes_are_isolated_and_default_to_launchdarkly(_rt: Rt) {
    let server = RedisServer::start();
    let hash = context_hash("u");
    server.cli(&["SADD", &format!("env-a:big_segment_include:{hash}"), "s.g1"]);
    server.cli(&["SET", "env-a:big_segments_synchronized_on", "7"]);
    let a = RedisBigSegmentStore::builder(server.url())
        .prefix("env-a")
        .build()
        .unwrap();
    let b = RedisBigSegmentStore::builder(server.url())
        .prefix("env-b")
        .build()
        .unwrap();
    assert_eq!(
        a.synchronized_on_key(),
        "env-a:big_segments_synchronized_on"
    );
    assert_eq!(
        store(&server).synchronized_on_key(),
        "launchdarkly:big_segments_synchronized_on"
    );
    assert_eq!(
        a.membership(&hash)
            .await
            .unwrap()
            .and_then(|m| m.check("s.g1")),
        Some(true)
    );
    assert_eq!(b.membership(&hash).await.unwrap(), None);
    assert_eq!(a.metadata().await.unwrap().last_up_to_date, Some(7));
    assert_eq!(b.metadata().await.unwrap().last_up_to_date, None);
}

async fn calls_fail_while_the_server_is_down_and_work_after_it_returns(_rt: Rt) {
    let mut server = RedisServer::start();
    let store = RedisBigSegmentStore::builder(server.url())
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    assert!(store.metadata().await.is_ok());
    assert!(now(store.metadata_now(NOW)).is_ok());
    server.stop();
    assert!(matches!(
        store.metadata().await,
        Err(StoreError::Unreachable(_))
    ));
    assert!(store.membership("h").await.is_err());
    let started = std::time::Instant::now();
    assert!(matches!(
        now(store.metadata_now(NOW)),
        Err(StoreError::Unreachable(_))
    ));
    assert!(now(store.membership_now("h", NOW)).is_err());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "bounded by the timeouts"
    );
    server.restart();
    server.cli(&["SET", "launchdarkly:big_segments_synchronized_on", "5"]);
    assert_eq!(store.metadata().await.unwrap().last_up_to_date, Some(5));
    assert_eq!(
        now(store.metadata_now(NOW)).unwrap().last_up_to_date,
        Some(5)
    );
}

async fn a_client_reports_the_status_of_a_redis_store(rt: Rt) {
    let mut server = RedisServer::start();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .to_string();
    server.cli(&["SET", "launchdarkly:big_segments_synchronized_on", &now]);
    let store = RedisBigSegmentStore::builder(server.url())
        .connect_timeout(Duration::from_millis(300))
        .response_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let client = flagsync::Client::builder("sdk-key")
        .send_events(false)
        .runtime(rt.clone())
        .big_segments(
            BigSegmentsOptions::new(Arc::new(store))
                .status_poll_interval(Duration::from_millis(20)),
        )
        .build()
        .unwrap();
    let changes = client.big_segment_store_status_changes();
    let healthy = BigSegmentStoreStatus {
        available: true,
        stale: false,
    };
    assert_eq!(client.big_segment_store_status(), Some(healthy));
    server.stop();
    let down = BigSegmentStoreStatus {
        available: false,
        stale: false,
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while client.big_segment_store_status() != Some(down) {
        assert!(std::time::Instant::now() < deadline, "outage not seen");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(changes.try_recv(), Some(healthy));
    assert_eq!(changes.try_recv(), Some(down));
    client.close().await;
}
