//! The client with an in-process persistent store (`persist::InMemoryStore`, which
//! can be taken offline), on every runtime feature: readiness checks that never raise
//! while the store is down, a store that is down at start and gets the data when it
//! returns, FDv2 write-through, and reads key by key through the store's cache (another
//! process's change shows once the entry expires; a key never read is read at once). The same behaviours against Redis are in
//! `redis_client.rs`.
#![cfg_attr(
    not(any(feature = "tokio", feature = "smol", feature = "async-std")),
    allow(dead_code, unused_imports)
)]

#[macro_use]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use flagsync::persist::{CacheConfig, InMemoryStore, StoreMode, StoreStatus};
use flagsync::{DataAvailability, ErrorKind, Kind, State};

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    readiness_never_raises_while_the_store_is_down,
    a_store_down_at_start_gets_the_data_when_it_returns,
    fdv1_reads_come_from_the_store_through_its_cache,
    an_infinite_cache_keeps_what_was_read_and_reads_what_was_not,
);

/// Reads that evaluate (the `eval` feature).
#[cfg(feature = "eval")]
mod eval_rt {
    use super::*;
    runtime_tests!(
        a_read_without_a_live_entry_reads_the_store_at_once,
        before_the_source_answers_an_initialized_store_is_evaluated
    );
}

#[cfg(feature = "server")]
mod fdv2_rt {
    use super::fdv2::*;
    runtime_tests!(fdv2_payloads_and_deltas_are_written_through);
}

async fn readiness_never_raises_while_the_store_is_down(rt: Rt) {
    let db = Arc::new(InMemoryStore::new());
    db.put_raw(Kind::Flag, "f", r#"{"key":"f","version":3,"on":true}"#);
    db.set_initialized(true);
    db.set_available(false);
    let client = builder(&rt, "http://127.0.0.1:1")
        .daemon(db.clone(), CacheConfig::default())
        .build()
        .unwrap();
    let store_statuses = client.store_status_changes();
    client.start().unwrap();
    // A failed read is "not initialized", never an error or a panic (A.4.4).
    assert!(!client.wait_for_initialization(SEC / 2).await);
    assert!(!client.initialized());
    assert!(client.flag("f").is_none());
    // Daemon mode: CACHED by definition (B §5.10), even before any data.
    assert!(
        client
            .data_availability()
            .at_least(DataAvailability::Cached)
    );
    let down = timeout(&rt, 3 * SEC, store_statuses.recv()).await.flatten();
    // Read-only: nothing was missed, so not stale.
    assert_eq!(
        down,
        Some(StoreStatus {
            available: false,
            stale: false
        })
    );
    assert_eq!(
        client.status().error.map(|e| e.kind),
        Some(ErrorKind::StoreError)
    );
    db.set_available(true);
    let up = timeout(&rt, 3 * SEC, store_statuses.recv()).await.flatten();
    assert_eq!(
        up,
        Some(StoreStatus {
            available: true,
            stale: false
        })
    );
    // The store is read again: the flag, and (on the reader's own schedule) `$inited`.
    assert!(eventually(&rt, 3 * SEC, || client.flag("f").is_some()).await);
    assert!(eventually(&rt, 3 * SEC, || client.initialized()).await);
    assert_eq!(db.op_counts().init + db.op_counts().upsert, 0);
    client.close().await;
    assert!(client.is_closed());
}

async fn a_store_down_at_start_gets_the_data_when_it_returns(rt: Rt) {
    let db = Arc::new(InMemoryStore::new());
    db.set_available(false);
    let server = Server::start(|_, r| {
        r.send(SSE_HEAD);
        r.pause(300);
        r.send(put_event(&[("f1", 1, true)], &[("s1", 2)], None));
        After::Hold
    });
    let client = builder(&rt, &server.url())
        .persistent_store(db.clone(), StoreMode::ReadWrite, CacheConfig::default())
        .build()
        .unwrap();
    let store_statuses = client.store_status_changes();
    client.start().unwrap();
    let down = timeout(&rt, 3 * SEC, store_statuses.recv()).await.flatten();
    assert_eq!(down.map(|s| s.available), Some(false));
    assert!(!client.initialized());
    assert_eq!(client.data_availability(), DataAvailability::Defaults);
    // The stream delivers; memory serves it while the store is still down.
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(client.flag("f1").unwrap().version, 1);
    assert_eq!(client.data_availability(), DataAvailability::Refreshed);
    assert_eq!(client.store_status().map(|s| s.available), Some(false));
    assert!(db.raw(Kind::Flag).is_empty());
    // The store returns and is given the data (A.4.8).
    db.set_available(true);
    let up = timeout(&rt, 3 * SEC, store_statuses.recv()).await.flatten();
    assert_eq!(
        up,
        Some(StoreStatus {
            available: true,
            stale: false
        })
    );
    assert!(eventually(&rt, 3 * SEC, || db.raw(Kind::Flag).contains_key("f1")).await);
    assert!(db.raw(Kind::Segment).contains_key("s1"));
    assert_eq!(client.status().state, State::Valid);
    client.close().await;
}

#[cfg(feature = "server")]
mod fdv2 {
    use flagsync::Fdv2Config;
    use flagsync::server::Server;
    use serde_json::json;

    use super::*;

    pub(super) async fn fdv2_payloads_and_deltas_are_written_through(rt: Rt) {
        let server = Server::builder()
            .sdk_key(Some(SDK_KEY.into()))
            .heartbeat(Duration::from_millis(200))
            .data(json!({
                "flags": {"f1": {"on": true, "variations": [true, false], "version": 3}},
                "segments": {"s1": {"included": ["u1"]}}
            }))
            .start()
            .unwrap();
        let db = Arc::new(InMemoryStore::new());
        let client = builder(&rt, &server.url())
            .fdv2(Fdv2Config::streaming())
            .persistent_store(db.clone(), StoreMode::ReadWrite, CacheConfig::default())
            .build()
            .unwrap();
        client.start().unwrap();
        assert!(client.wait_for_initialization(5 * SEC).await);
        assert!(eventually(&rt, 3 * SEC, || db.op_counts().init == 1).await);
        assert!(db.raw(Kind::Flag).contains_key("f1"));
        assert!(db.raw(Kind::Segment).contains_key("s1"));
        server.set_flag("f1", json!({"on": false})).unwrap();
        server.delete_flag("f1");
        assert!(eventually(&rt, 3 * SEC, || client.flag("f1").is_none()).await);
        // Written through (the two changes of f1 may merge into one write, issue 19).
        assert!(
            eventually(&rt, 3 * SEC, || db
                .raw(Kind::Flag)
                .get("f1")
                .is_some_and(|raw| raw.windows(9).any(|w| w == b"\"deleted\""))
                && db.op_counts().upsert >= 1)
            .await
        );
        let stored = db.raw(Kind::Flag)["f1"].clone();
        let v: serde_json::Value = serde_json::from_slice(&stored).unwrap();
        assert_eq!(v["deleted"], true);
        assert_eq!(v["key"], "$deleted");
        assert_eq!(db.op_counts().init, 1);
        client.close().await;
    }
}

fn flag_json(key: &str, version: u64) -> String {
    format!(
        r#"{{"key":"{key}","version":{version},"on":true,"variations":[true,false],"fallthrough":{{"variation":0}}}}"#
    )
}

async fn fdv1_reads_come_from_the_store_through_its_cache(rt: Rt) {
    let db = Arc::new(InMemoryStore::new());
    let server = Server::start(|_, r| {
        r.send(SSE_HEAD);
        r.send(put_event(&[("f1", 1, true)], &[], None));
        After::Hold
    });
    let ttl = Duration::from_millis(400);
    let client = builder(&rt, &server.url())
        .persistent_store(db.clone(), StoreMode::ReadWrite, CacheConfig::ttl(ttl))
        .build()
        .unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert!(eventually(&rt, 3 * SEC, || db.raw(Kind::Flag).contains_key("f1")).await);
    assert_eq!(client.flag("f1").map(|f| f.version), Some(1));
    // Another process changes the store: within the TTL the written entry is served...
    db.put_raw(Kind::Flag, "f1", flag_json("f1", 9));
    db.put_raw(Kind::Flag, "other", flag_json("other", 2));
    sleep(&rt, Duration::from_millis(100)).await;
    assert_eq!(client.flag("f1").map(|f| f.version), Some(1));
    // ...a key never read is read from the store at once...
    assert!(eventually(&rt, SEC, || client.flag("other").is_some()).await);
    // ...and the change shows once the entry expires.
    assert!(
        eventually(&rt, 3 * SEC, || client
            .flag("f1")
            .is_some_and(|f| f.version == 9))
        .await
    );
    // Memory still holds what the data source sent.
    assert_eq!(
        client.snapshot().get(Kind::Flag, "f1").map(|i| i.version),
        Some(1)
    );
    client.close().await;
}

async fn an_infinite_cache_keeps_what_was_read_and_reads_what_was_not(rt: Rt) {
    let db = Arc::new(InMemoryStore::new());
    db.put_raw(Kind::Flag, "read", flag_json("read", 1));
    db.put_raw(Kind::Flag, "unread", flag_json("unread", 1));
    db.set_initialized(true);
    let client = builder(&rt, "http://127.0.0.1:1")
        .daemon(db.clone(), CacheConfig::infinite())
        .build()
        .unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    // Listed whole before the client is ready.
    assert_eq!(client.snapshot().len(Kind::Flag), 2);
    assert!(eventually(&rt, 3 * SEC, || client.flag("read").is_some()).await);
    db.put_raw(Kind::Flag, "read", flag_json("read", 5));
    db.put_raw(
        Kind::Flag,
        "unread",
        r#"{"key":"unread","version":5,"deleted":true}"#,
    );
    // The first point read of "unread" reads the store: deleted.
    for _ in 0..20 {
        let _ = client.flag("unread");
        sleep(&rt, Duration::from_millis(20)).await;
    }
    assert!(client.flag("unread").is_none());
    // "read" was cached for good: the change never shows.
    assert_eq!(client.flag("read").map(|f| f.version), Some(1));
    client.close().await;
}

#[cfg(feature = "eval")]
fn bool_flag(key: &str, version: u64, serve: bool) -> String {
    let variation = if serve { 0 } else { 1 };
    format!(
        r#"{{"key":"{key}","version":{version},"on":true,"variations":[true,false],"fallthrough":{{"variation":{variation}}}}}"#
    )
}

/// A store change made by another process shows on the very next evaluation when the
/// cache is off, as in LaunchDarkly's SDKs (the harness's "store mode … no cache"):
/// the read waits for the store, also from a task of the client's own runtime.
#[cfg(feature = "eval")]
async fn a_read_without_a_live_entry_reads_the_store_at_once(rt: Rt) {
    let db = Arc::new(InMemoryStore::new());
    db.set_initialized(true);
    let client = builder(&rt, "http://127.0.0.1:1")
        .daemon(db.clone(), CacheConfig::disabled())
        .build()
        .unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    let context = flagsync::eval::ContextBuilder::new("u").build().unwrap();
    db.put_raw(Kind::Flag, "f", bool_flag("f", 1, true));
    assert!(
        client.bool_variation("f", &context, false),
        "the first read"
    );
    db.put_raw(Kind::Flag, "f", bool_flag("f", 2, false));
    assert!(!client.bool_variation("f", &context, true), "every read");
    // The same from a task spawned on the runtime (a worker thread on tokio).
    let (tx, rx) = async_channel::bounded(1);
    let (c, ctx, store) = (client.clone(), context.clone(), db.clone());
    rt.spawn(Box::pin(async move {
        store.put_raw(Kind::Flag, "f", bool_flag("f", 3, true));
        let first = c.bool_variation("f", &ctx, false);
        store.put_raw(Kind::Flag, "f", bool_flag("f", 4, false));
        let second = c.bool_variation("f", &ctx, true);
        let _ = tx.send((first, second)).await;
    }));
    let answers = timeout(&rt, 5 * SEC, rx.recv()).await.and_then(Result::ok);
    assert_eq!(answers, Some((true, false)));
    client.close().await;
}

/// A warm start: before the data source answers, an evaluation finds the store holds a
/// data set (`$inited`) and evaluates from it, as LaunchDarkly's SDKs do; a store
/// without one gives the default.
#[cfg(feature = "eval")]
async fn before_the_source_answers_an_initialized_store_is_evaluated(rt: Rt) {
    let context = flagsync::eval::ContextBuilder::new("u").build().unwrap();
    let server = Server::start(|_, _| After::Hold);
    for inited in [false, true] {
        let db = Arc::new(InMemoryStore::new());
        db.put_raw(Kind::Flag, "f", bool_flag("f", 1, true));
        db.set_initialized(inited);
        let client = builder(&rt, &server.url())
            .persistent_store(db.clone(), StoreMode::ReadOnly, CacheConfig::disabled())
            .build()
            .unwrap();
        client.start().unwrap();
        // No waiting for initialization: the data source never answers.
        assert_eq!(
            client.bool_variation("f", &context, false),
            inited,
            "$inited {inited}"
        );
        if !inited {
            // The store is initialized by another process: the next evaluation sees it.
            db.set_initialized(true);
            assert!(
                client.bool_variation("f", &context, false),
                "$inited written"
            );
        }
        client.close().await;
    }
}
