//! Test support: the SDK's own (`adapters/tests/common`: the runtime harness, a scripted
//! HTTP/1.1 server, TLS certificates) and a redis-server started per test.
#![allow(dead_code, unreachable_pub)]

pub mod redis_server;
#[path = "../../../tests/common/mod.rs"]
mod sdk;
pub mod topology;

#[allow(unused_imports)] // not every test binary uses every helper
pub use sdk::*;

/// The flags `server` serves now: key → JSON.
pub fn served_flags(
    server: &flagsync_server::ServerHandle,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    let data: serde_json::Value = serde_json::from_str(&server.data_json()).unwrap();
    data["flags"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// redis-cli's `HGETALL` output (field and value lines in turn) of a hash of JSON items:
/// field → JSON (`null` for what is not JSON).
pub fn json_hash(out: &str) -> std::collections::BTreeMap<String, serde_json::Value> {
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    lines
        .chunks(2)
        .filter(|pair| pair.len() == 2)
        .map(|pair| {
            (
                pair[0].to_owned(),
                serde_json::from_str(pair[1]).unwrap_or(serde_json::Value::Null),
            )
        })
        .collect()
}

/// A writer client on `store`, fed by `server` and started: it has initialized, and
/// within 5 s `stored()` (the store's flags, read with redis-cli) equals what `server`
/// serves.
pub async fn started_writer(
    rt: &Rt,
    store: std::sync::Arc<dyn flagsync::persist::PersistentStore>,
    server: &flagsync_server::ServerHandle,
    stored: impl Fn() -> std::collections::BTreeMap<String, serde_json::Value>,
) -> flagsync::Client {
    let writer = builder(rt, &server.url())
        .persistent_store(
            store,
            flagsync::persist::StoreMode::ReadWrite,
            flagsync::persist::CacheConfig::default(),
        )
        .build()
        .unwrap();
    writer.start().unwrap();
    assert!(writer.wait_for_initialization(SECOND * 5).await);
    assert!(
        eventually(rt, SECOND * 5, || stored() == served_flags(server)).await,
        "the writer never wrote the data set: the store holds {:?}",
        stored()
    );
    writer
}

/// A daemon-mode reader client on `store` (items cached for 100 ms), started and
/// initialized.
pub async fn started_reader(
    rt: &Rt,
    store: std::sync::Arc<dyn flagsync::persist::PersistentStore>,
) -> flagsync::Client {
    let reader = builder(rt, "http://127.0.0.1:1")
        .daemon(
            store,
            flagsync::persist::CacheConfig::ttl(std::time::Duration::from_millis(100)),
        )
        .build()
        .unwrap();
    reader.start().unwrap();
    assert!(reader.wait_for_initialization(SECOND * 5).await);
    reader
}

const SECOND: std::time::Duration = std::time::Duration::from_secs(1);

/// The data-source statuses `statuses` has queued show a store fault
/// (INTERRUPTED, STORE_ERROR) and, after it, VALID again.
pub fn assert_store_fault_then_recovery(
    statuses: &flagsync::Subscription<flagsync::DataSourceStatus>,
) {
    use flagsync::{ErrorKind, State};
    let mut seen = Vec::new();
    while let Some(s) = statuses.try_recv() {
        seen.push((s.state, s.error.map(|e| e.kind)));
    }
    let fault = seen
        .iter()
        .position(|s| *s == (State::Interrupted, Some(ErrorKind::StoreError)));
    assert!(fault.is_some(), "no store fault in {seen:?}");
    assert!(
        seen[fault.unwrap()..].iter().any(|s| s.0 == State::Valid),
        "no recovery after the fault in {seen:?}"
    );
}

/// The next item of `sub` within 5 s.
pub async fn next_within<T>(rt: &Rt, sub: &flagsync::Subscription<T>) -> Option<T> {
    timeout(rt, SECOND * 5, sub.recv()).await.flatten()
}

/// Within 5 s `server` holds `launchdarkly:$inited` (a whole data set was written).
pub async fn inited_within(rt: &Rt, server: &redis_server::RedisServer) -> bool {
    eventually(rt, SECOND * 5, || {
        server.cli(&["EXISTS", "launchdarkly:$inited"]) == "1"
    })
    .await
}
