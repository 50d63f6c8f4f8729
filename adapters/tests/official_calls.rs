//! The official SDKs' calls that flagsync gained for parity, on every runtime feature:
//! a flush that can be awaited (`flush_and_wait`, `flush_and_wait_blocking`), offline
//! mode (no connection of any kind), and `track_migration_op` on the client. Events go
//! to a scripted events service on 127.0.0.1, as in `events.rs`.
#![cfg(all(feature = "server", feature = "eval"))]
#![cfg_attr(
    not(any(feature = "tokio", feature = "smol", feature = "async-std")),
    allow(dead_code, unused_imports)
)]

#[macro_use]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use common::*;
use flagsync::Kind;
use flagsync::eval::{AllFlagsOptions, Context, ContextBuilder, EvalError, Reason};
use flagsync::events::EventsOptions;
use flagsync::migration::{Operation, Origin, Stage, TrackerError};
use flagsync::persist::{CacheConfig, InMemoryStore, StoreMode};
use flagsync::server::{self as flag_server, ServerHandle};
use serde_json::{Value, json};

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    flush_and_wait_returns_once_the_events_are_delivered,
    flush_and_wait_is_false_when_the_events_are_not_delivered,
    flush_and_wait_without_events_or_before_start,
    track_migration_op_sends_the_tracker_s_event,
    an_offline_client_connects_to_nothing,
    an_offline_client_ignores_its_stores,
);

fn serve_flags() -> ServerHandle {
    let flag = |variations: Value, fallthrough: u64| {
        json!({"on": true, "salt": "s", "targets": [], "contextTargets": [], "rules": [],
            "prerequisites": [], "fallthrough": {"variation": fallthrough}, "offVariation": 0,
            "variations": variations, "trackEvents": false, "version": 3})
    };
    let data = json!({
        "flags": {
            "plain": flag(json!([false, true]), 1),
            "migration": flag(json!(["off", "dualwrite", "shadow", "live"]), 2),
        },
        "segments": {}
    });
    flag_server::Server::builder().data(data).start().unwrap()
}

/// An events service answering every post with `status` (read at each request), after
/// `delay_ms`.
fn events_service(status: Arc<AtomicU16>, delay_ms: u64) -> Server {
    Server::start(move |_req, resp| {
        resp.pause(delay_ms);
        let code = status.load(Ordering::SeqCst);
        resp.send(format!(
            "HTTP/1.1 {code} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ));
        After::Close
    })
}

fn client_builder(rt: &Rt, flags: &ServerHandle, events: &Server) -> flagsync::ClientBuilder {
    let mut options = EventsOptions::default();
    options.events_uri = Some(events.url());
    options.diagnostic_opt_out = true;
    // Only explicit flushes send.
    options.flush_interval = Duration::from_secs(3600);
    builder(rt, &flags.url()).events(options)
}

async fn ready(b: flagsync::ClientBuilder) -> flagsync::Client {
    let client = b.build().unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    client
}

fn user(key: &str) -> Context {
    ContextBuilder::new(key).build().unwrap()
}

/// The analytics payloads received so far.
fn bulk(server: &Server) -> Vec<Value> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.target == "/bulk")
        .map(|r| serde_json::from_slice(&r.body).expect("a JSON payload"))
        .collect()
}

fn kinds(body: &Value) -> Vec<String> {
    let mut k: Vec<String> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap().to_owned())
        .collect();
    k.sort();
    k
}

async fn flush_and_wait_returns_once_the_events_are_delivered(rt: Rt) {
    let flags = serve_flags();
    // A slow service: a flush that did not wait would return before the answer.
    let events = events_service(Arc::new(AtomicU16::new(202)), 300);
    let client = ready(client_builder(&rt, &flags, &events)).await;
    client.bool_variation("plain", &user("anna"), false);
    client.track_event("clicked", &user("anna"));
    let started = Instant::now();
    assert!(client.flush_and_wait(5 * SEC).await);
    assert!(started.elapsed() >= Duration::from_millis(300));
    let posts = bulk(&events);
    assert_eq!(posts.len(), 1);
    assert_eq!(kinds(&posts[0]), ["custom", "index", "summary"]);
    // Nothing queued: delivered at once.
    assert!(client.flush_and_wait(5 * SEC).await);
    assert_eq!(bulk(&events).len(), 1);

    // The blocking form, from a thread that is not the runtime's.
    client.identify(&user("bob"));
    let c = client.clone();
    let waiting = std::thread::spawn(move || c.flush_and_wait_blocking(5 * SEC));
    assert!(eventually(&rt, 10 * SEC, || waiting.is_finished()).await);
    assert!(waiting.join().unwrap());
    let posts = bulk(&events);
    assert_eq!(posts.len(), 2);
    assert_eq!(kinds(&posts[1]), ["identify"]);
    client.close().await;
}

async fn flush_and_wait_is_false_when_the_events_are_not_delivered(rt: Rt) {
    let flags = serve_flags();
    // 503 twice: the payload is retried once, then dropped.
    let events = events_service(Arc::new(AtomicU16::new(503)), 0);
    let client = ready(client_builder(&rt, &flags, &events)).await;
    client.track_event("clicked", &user("anna"));
    assert!(!client.flush_and_wait(10 * SEC).await);
    assert_eq!(bulk(&events).len(), 2, "sent, then sent once more");

    // A service that never answers: false when the timeout passes, not later.
    let hanging = Server::start(|_req, _resp| After::Hold);
    let b = client_builder(&rt, &flags, &hanging).close_timeout(Duration::from_millis(300));
    let client = ready(b).await;
    client.track_event("clicked", &user("anna"));
    let started = Instant::now();
    assert!(!client.flush_and_wait(Duration::from_millis(500)).await);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(500) && took < 3 * SEC,
        "{took:?}"
    );
    client.close().await;
}

async fn flush_and_wait_without_events_or_before_start(rt: Rt) {
    let flags = serve_flags();
    let events = events_service(Arc::new(AtomicU16::new(202)), 0);
    // Not started: nothing can be delivered.
    let client = client_builder(&rt, &flags, &events).build().unwrap();
    client.track_event("clicked", &user("anna"));
    assert!(!client.flush_and_wait(Duration::from_millis(100)).await);
    assert!(!client.flush_and_wait_blocking(Duration::from_millis(100)));
    // Events off: nothing to deliver.
    let quiet = ready(client_builder(&rt, &flags, &events).send_events(false)).await;
    quiet.track_event("clicked", &user("anna"));
    assert!(quiet.flush_and_wait(SEC).await);
    quiet.close().await;
    // Closed: the processor is gone.
    let closed = ready(client_builder(&rt, &flags, &events)).await;
    closed.close().await;
    assert!(!closed.flush_and_wait(Duration::from_millis(100)).await);
    assert!(bulk(&events).is_empty());
}

async fn track_migration_op_sends_the_tracker_s_event(rt: Rt) {
    let flags = serve_flags();
    let events = events_service(Arc::new(AtomicU16::new(202)), 0);
    let client = ready(client_builder(&rt, &flags, &events)).await;
    let anna = user("anna");
    let (stage, mut tracker) = client.migration_variation("migration", &anna, Stage::Off);
    assert_eq!(stage, Stage::Shadow);
    // Without an operation the tracker makes no event.
    assert_eq!(
        client.track_migration_op(&tracker),
        Err(TrackerError::NoOperation)
    );
    tracker.operation(Operation::Write);
    tracker.invoked(Origin::Old);
    tracker.invoked(Origin::New);
    tracker.latency(Origin::Old, Duration::from_millis(12));
    tracker.error(Origin::New);
    client.track_migration_op(&tracker).unwrap();
    assert!(client.flush_and_wait(5 * SEC).await);
    let posts = bulk(&events);
    assert_eq!(posts.len(), 1);
    assert_eq!(kinds(&posts[0]), ["index", "migration_op", "summary"]);
    let op = posts[0]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "migration_op")
        .unwrap()
        .clone();
    assert_eq!(op["operation"], "write");
    assert_eq!(op["context"], json!({"kind": "user", "key": "anna"}));
    assert_eq!(op["evaluation"]["key"], "migration");
    assert_eq!(op["evaluation"]["value"], "shadow");
    assert_eq!(op["evaluation"]["default"], "off");
    assert_eq!(op["evaluation"]["version"], 3);
    let measurements = op["measurements"].to_string();
    assert!(measurements.contains(r#""key":"error""#), "{measurements}");
    assert!(measurements.contains(r#""old":12"#), "{measurements}");
    client.close().await;
}

/// A listener that accepts, records and holds every connection.
fn recording_listener() -> Server {
    Server::start(|_req, _resp| After::Hold)
}

async fn an_offline_client_connects_to_nothing(rt: Rt) {
    let everything = recording_listener();
    let b = |offline: bool| {
        let mut options = EventsOptions::default();
        options.events_uri = Some(everything.url());
        builder(&rt, &everything.url())
            .events(options)
            .offline(offline)
    };
    // The control: online, the same settings connect to the listener.
    let online = b(false).build().unwrap();
    online.start().unwrap();
    assert!(eventually(&rt, 5 * SEC, || everything.connections() > 0).await);
    online.close().await;
    let before = everything.connections();

    let client = b(true).build().unwrap();
    assert!(client.is_offline() && !online.is_offline());
    assert!(client.initialized(), "initialized at once, before start");
    assert!(!client.sends_events());
    client.start().unwrap();
    assert!(client.wait_for_initialization(SEC).await);
    let anna = user("anna");
    let detail = client.bool_variation_detail("plain", &anna, true);
    assert_eq!(detail.value, Some(true));
    assert_eq!(detail.reason, Reason::error(EvalError::ClientNotReady));
    assert!(
        !client
            .all_flags_state(&anna, AllFlagsOptions::default())
            .valid()
    );
    client.track_event("clicked", &anna);
    client.identify(&anna);
    client.flush();
    assert!(client.flush_and_wait(SEC).await);
    sleep(&rt, Duration::from_millis(500)).await;
    assert_eq!(everything.connections(), before, "no connection offline");
    client.close().await;
    assert_eq!(everything.connections(), before);
}

async fn an_offline_client_ignores_its_stores(rt: Rt) {
    // As LaunchDarkly's Go, Python and Rust SDKs: offline, a configured store is
    // neither read nor written.
    let everything = recording_listener();
    let db = Arc::new(InMemoryStore::new());
    db.put_raw(
        Kind::Flag,
        "stored",
        r#"{"key":"stored","version":2,"on":false,"offVariation":1,"variations":["a","b"],"salt":"s","targets":[],"rules":[],"prerequisites":[],"fallthrough":{"variation":0}}"#,
    );
    db.set_initialized(true);
    let online = builder(&rt, "http://127.0.0.1:1")
        .persistent_store(db.clone(), StoreMode::ReadWrite, CacheConfig::default())
        .build()
        .unwrap();
    online.start().unwrap();
    let anna = user("anna");
    // The control: online, the store serves its flag.
    assert!(
        eventually(&rt, 5 * SEC, || online
            .string_variation("stored", &anna, "x")
            == "b")
        .await
    );
    online.close().await;
    let before = db.op_counts();

    let client = builder(&rt, &everything.url())
        .events_uri(everything.url())
        .persistent_store(db.clone(), StoreMode::ReadWrite, CacheConfig::default())
        .offline(true)
        .build()
        .unwrap();
    assert!(client.initialized());
    assert_eq!(client.store_status(), None);
    client.start().unwrap();
    let detail = client.string_variation_detail("stored", &anna, "x");
    assert_eq!(detail.value.as_deref(), Some("x"));
    assert_eq!(detail.reason, Reason::error(EvalError::ClientNotReady));
    sleep(&rt, Duration::from_millis(300)).await;
    assert_eq!(client.string_variation("stored", &anna, "x"), "x");
    assert_eq!(everything.connections(), 0);
    client.close().await;
    assert_eq!(db.op_counts(), before, "the store was not touched");
}
