//! Redis Cluster against real processes on 127.0.0.1 (three masters made a cluster with
//! `redis-cli --cluster create`: `common/topology.rs`), on every runtime feature: a
//! writer and a daemon-mode reader sharing a cluster, the big-segment store, and the
//! configuration error for a prefix without a hash tag. (The persistent-store contract
//! runs on a cluster in `store.rs`.)
//!
//! The processes are started by each test (`bash .ci/test` installs redis-server when
//! it is missing); a test that cannot start them fails, it never skips.

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::topology::RedisCluster;
use common::*;
use flagsync::bigseg::{BigSegmentStore, BigSegmentStoreStatus, BigSegmentsOptions, StoreError};
use flagsync_core::bigseg::context_hash;
use flagsync_redis::{RedisBigSegmentStore, RedisStore};
use flagsync_server::Server as FlagServer;
use serde_json::{Value, json};

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    a_writer_and_a_daemon_reader_share_a_cluster,
    the_big_segment_store_reads_a_cluster,
);

fn flag(value: i64) -> Value {
    json!({"on": true, "variations": [value], "fallthrough": {"variation": 0}, "offVariation": 0})
}

/// `{launchdarkly}:features`, read with redis-cli through the cluster: key → JSON, but
/// tombstones (the service serves no deleted flag).
fn stored(cluster: &RedisCluster) -> BTreeMap<String, Value> {
    let out = cluster.cli(&["HGETALL", "{launchdarkly}:features"]);
    json_hash(&out)
        .into_iter()
        .filter(|(_, v)| v["deleted"] != true)
        .collect()
}

async fn a_writer_and_a_daemon_reader_share_a_cluster(rt: Rt) {
    let cluster = RedisCluster::start();
    let flags: serde_json::Map<String, Value> =
        (0..5).map(|i| (format!("f{i}"), flag(i))).collect();
    let server = FlagServer::builder()
        .heartbeat(Duration::from_millis(500))
        .data(json!({ "flags": flags, "segments": {"s": {"included": ["u1"]}} }))
        .start()
        .unwrap();
    let store = Arc::new(cluster.store_builder().build().unwrap());
    assert!(store.target().starts_with("cluster:"), "{}", store.target());
    let writer = started_writer(&rt, store, &server, || stored(&cluster)).await;
    // One slot holds the whole prefix: the three keys of a full write, written in one
    // transaction, live on one node.
    let keys = cluster.keys("{launchdarkly}:*");
    let on_one_node = cluster
        .nodes
        .iter()
        .map(|n| n.cli(&["KEYS", "{launchdarkly}:*"]).lines().count())
        .max();
    assert_eq!(on_one_node, Some(keys.len()), "{keys:?}");
    for key in [
        "{launchdarkly}:$inited",
        "{launchdarkly}:features",
        "{launchdarkly}:segments",
    ] {
        assert!(keys.iter().any(|k| k == key), "{key} missing from {keys:?}");
    }

    let reader = started_reader(&rt, Arc::new(cluster.store_builder().build().unwrap())).await;
    let context = flagsync::eval::ContextBuilder::new("u").build().unwrap();
    assert_eq!(reader.int_variation("f3", &context, -1), 3);
    assert!(eventually(&rt, 3 * SEC, || reader.segment("s").is_some()).await);
    // Changes reach the cluster through the writer, and the reader serves them.
    for (i, v) in [(1, 10), (3, 30), (4, 40)] {
        server.set_flag(&format!("f{i}"), flag(v)).unwrap();
    }
    server.delete_flag("f0");
    assert!(eventually(&rt, 5 * SEC, || stored(&cluster) == served_flags(&server)).await);
    assert!(
        eventually(&rt, 3 * SEC, || {
            [("f1", 10), ("f2", 2), ("f3", 30), ("f4", 40), ("f0", -1)]
                .iter()
                .all(|(k, v)| reader.int_variation(k, &context, -1) == *v)
        })
        .await
    );
    reader.close().await;
    writer.close().await;
}

async fn the_big_segment_store_reads_a_cluster(rt: Rt) {
    let cluster = RedisCluster::start();
    let hash = context_hash("user-key");
    let include = format!("{{launchdarkly}}:big_segment_include:{hash}");
    let exclude = format!("{{launchdarkly}}:big_segment_exclude:{hash}");
    cluster.cli(&["SADD", &include, "segment1.g100", "both.g1"]);
    cluster.cli(&["SADD", &exclude, "segment2.g7", "both.g1"]);
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .to_string();
    cluster.cli(&[
        "SET",
        "{launchdarkly}:big_segments_synchronized_on",
        &now_ms,
    ]);
    let store = cluster.big_segment_builder().build().unwrap();
    let m = store
        .membership(&hash)
        .await
        .unwrap()
        .expect("a membership");
    assert_eq!(m.check("segment1.g100"), Some(true));
    assert_eq!(m.check("segment2.g7"), Some(false));
    assert_eq!(m.check("both.g1"), Some(true), "include wins");
    // The blocking path reads the same, through the cluster.
    assert_eq!(store.membership_now(&hash, SEC).unwrap().unwrap(), Some(m));
    assert_eq!(
        store
            .membership_now(&context_hash("nobody"), SEC)
            .unwrap()
            .unwrap(),
        None
    );
    let synced = now_ms.parse::<u64>().ok();
    assert_eq!(store.metadata().await.unwrap().last_up_to_date, synced);
    assert_eq!(
        store.metadata_now(SEC).unwrap().unwrap().last_up_to_date,
        synced
    );
    // A client reports it healthy.
    let client = flagsync::Client::builder("sdk-key")
        .send_events(false)
        .runtime(rt.clone())
        .big_segments(BigSegmentsOptions::new(Arc::new(store)))
        .build()
        .unwrap();
    assert_eq!(
        client.big_segment_store_status(),
        Some(BigSegmentStoreStatus {
            available: true,
            stale: false
        })
    );
    client.close().await;
}

#[test]
fn a_prefix_without_a_hash_tag_is_refused_when_the_store_is_built() {
    // Built, never connected: no server is needed to refuse it.
    let seeds = ["127.0.0.1:7000", "127.0.0.1:7001"];
    for prefix in [
        None,
        Some("launchdarkly"),
        Some("{}launchdarkly"),
        Some("{launchdarkly"),
    ] {
        let mut b = RedisStore::builder_cluster(seeds);
        if let Some(p) = prefix {
            b = b.prefix(p);
        }
        let e = b.build().unwrap_err();
        assert!(matches!(e, StoreError::Config(_)), "{prefix:?}: {e:?}");
        assert!(e.is_permanent());
        assert!(e.to_string().contains("hash tag"), "{e}");
        let mut big = RedisBigSegmentStore::builder_cluster(seeds);
        if let Some(p) = prefix {
            big = big.prefix(p);
        }
        assert!(
            matches!(big.build(), Err(StoreError::Config(_))),
            "{prefix:?}"
        );
    }
    // The message says what to write instead.
    let e = RedisStore::builder_cluster(seeds).build().unwrap_err();
    assert!(e.to_string().contains("\"{launchdarkly}\""), "{e}");
    for prefix in ["{launchdarkly}", "env-{prod}", "{a}:b"] {
        assert!(
            RedisStore::builder_cluster(seeds)
                .prefix(prefix)
                .build()
                .is_ok(),
            "{prefix}"
        );
        assert!(
            RedisBigSegmentStore::builder_cluster(seeds)
                .prefix(prefix)
                .build()
                .is_ok(),
            "{prefix}"
        );
    }
    // Redis Cluster has database 0 only.
    assert!(matches!(
        RedisStore::builder_cluster(["redis://127.0.0.1:7000/2"])
            .prefix("{x}")
            .build(),
        Err(StoreError::Config(_))
    ));
}
