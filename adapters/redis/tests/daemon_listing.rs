//! A daemon-mode client lists what Redis holds, `$inited` or not, as LaunchDarkly's
//! SDKs list it (their persistent-store wrappers' `GetAll` never asks `$inited`), and
//! every shape of deleted item that LaunchDarkly's SDKs and the Relay Proxy write is
//! read as deleted, in either collection, without failing the rest.

#[macro_use]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::redis_server::RedisServer;
use common::*;
use flagsync::eval::{AllFlagsOptions, ContextBuilder};
use flagsync::persist::{CacheConfig, PersistentStore};

const SEC: Duration = Duration::from_secs(1);

/// Each module runs the tests on every runtime.
mod eval_rt {
    use super::*;
    runtime_tests!(
        a_daemon_lists_every_live_item_without_inited,
        a_daemon_lists_over_tls_without_inited,
    );
}

fn flag(key: &str, version: u64, rules: &str) -> String {
    format!(
        r#"{{"key":"{key}","version":{version},"on":true,"variations":[true,false],"fallthrough":{{"variation":0}},"offVariation":1,"rules":[{rules}],"salt":"s"}}"#
    )
}

/// Items in every shape, and no `$inited`: live flags `live` and `guarded` (false for
/// a context in the deleted segments), segments `seg` live and the rest deleted.
fn write_every_shape(redis: &RedisServer) {
    let in_segment = |seg: &str| {
        format!(
            r#"{{"id":"r-{seg}","variation":1,"clauses":[{{"attribute":"key","op":"segmentMatch","values":["{seg}"]}}]}}"#
        )
    };
    let tombstones = |hash: &str, prefix: &str| {
        [
            // The Node, .NET and Java SDKs: no key.
            (
                format!("{prefix}-nokey"),
                r#"{"version":5,"deleted":true}"#.to_owned(),
            ),
            // The Go SDK and the Relay Proxy: a placeholder key.
            (
                format!("{prefix}-placeholder"),
                r#"{"key":"$deleted","version":6,"deleted":true}"#.to_owned(),
            ),
            // The Python SDK: the item's own key.
            (
                format!("{prefix}-keyed"),
                format!(r#"{{"key":"{prefix}-keyed","version":7,"deleted":true}}"#),
            ),
            // A full object marked deleted.
            (
                format!("{prefix}-full"),
                if hash == "features" {
                    flag(&format!("{prefix}-full"), 8, "")
                        .replace(r#""salt""#, r#""deleted":true,"salt""#)
                } else {
                    format!(
                        r#"{{"key":"{prefix}-full","version":8,"included":["u1"],"deleted":true,"salt":"s"}}"#
                    )
                },
            ),
            // A full object marked deleted under the placeholder key.
            (
                format!("{prefix}-full-placeholder"),
                if hash == "features" {
                    flag("$deleted", 9, "").replace(r#""salt""#, r#""deleted":true,"salt""#)
                } else {
                    r#"{"key":"$deleted","version":9,"included":["u1"],"deleted":true,"salt":"s"}"#
                        .to_owned()
                },
            ),
        ]
    };
    for (field, value) in tombstones("features", "f") {
        redis.cli(&["HSET", "launchdarkly:features", &field, &value]);
    }
    for (field, value) in tombstones("segments", "s") {
        redis.cli(&["HSET", "launchdarkly:segments", &field, &value]);
    }
    let rules = [
        "s-nokey",
        "s-placeholder",
        "s-keyed",
        "s-full",
        "s-full-placeholder",
    ]
    .map(in_segment)
    .join(",");
    redis.cli(&[
        "HSET",
        "launchdarkly:features",
        "live",
        &flag("live", 3, ""),
    ]);
    redis.cli(&[
        "HSET",
        "launchdarkly:features",
        "guarded",
        &flag("guarded", 4, &rules),
    ]);
    redis.cli(&[
        "HSET",
        "launchdarkly:segments",
        "seg",
        r#"{"key":"seg","version":2,"included":["u1"],"salt":"s"}"#,
    ]);
    // Something that is no item at all is skipped, not fatal.
    redis.cli(&["HSET", "launchdarkly:features", "broken", "{not json"]);
    assert_eq!(redis.cli(&["EXISTS", "launchdarkly:$inited"]), "0");
}

async fn lists_every_live_item(rt: Rt, redis: &RedisServer) {
    write_every_shape(redis);
    let store = Arc::new(redis.store_builder().build().unwrap());
    let client = builder(&rt, "http://127.0.0.1:1")
        .daemon(store.clone(), CacheConfig::ttl(Duration::from_millis(300)))
        .build()
        .unwrap();
    client.start().unwrap();
    let _ = client.wait_for_initialization(2 * SEC).await;
    let context = ContextBuilder::new("u1").build().unwrap();
    // A point read evaluates (as before).
    assert!(client.bool_variation("live", &context, false));
    let live = ["guarded", "live"];
    assert!(
        eventually(&rt, 5 * SEC, || client.all_flags().keys().eq(live.iter())).await,
        "all_flags: {:?}",
        client.all_flags().keys().collect::<Vec<_>>()
    );
    let state = client.all_flags_state(&context, AllFlagsOptions::new());
    assert!(state.valid());
    let mut keys: Vec<&str> = state.iter().map(|(k, _)| k).collect();
    keys.sort_unstable();
    assert_eq!(keys, live, "{}", state.to_json());
    // No deleted segment matches u1: `guarded` falls through to true.
    assert_eq!(
        state.value("guarded").and_then(|v| v.as_bool()),
        Some(true),
        "{}",
        state.to_json()
    );
    let snapshot = client.snapshot();
    let mut segments: Vec<&str> = snapshot
        .iter(flagsync::Kind::Segment)
        .map(|(k, _)| k)
        .collect();
    segments.sort_unstable();
    assert_eq!(segments, ["seg"]);
    // Deleted items stay deleted: never revived, whatever their shape.
    for key in [
        "f-nokey",
        "f-placeholder",
        "f-keyed",
        "f-full",
        "f-full-placeholder",
    ] {
        assert!(client.flag(key).is_none(), "{key}");
        assert!(
            store
                .get(flagsync::Kind::Flag, key)
                .await
                .unwrap()
                .unwrap()
                .deleted,
            "{key}"
        );
    }
    // The reader wrote nothing, `$inited` included.
    assert_eq!(redis.cli(&["EXISTS", "launchdarkly:$inited"]), "0");
    client.close().await;
}

async fn a_daemon_lists_every_live_item_without_inited(rt: Rt) {
    let redis = RedisServer::start();
    lists_every_live_item(rt, &redis).await;
}

async fn a_daemon_lists_over_tls_without_inited(rt: Rt) {
    #[cfg(feature = "tls")]
    {
        let redis = RedisServer::start_tls();
        lists_every_live_item(rt, &redis).await;
    }
    #[cfg(not(feature = "tls"))]
    let _ = rt;
}
