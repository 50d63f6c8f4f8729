//! Analytics events end to end, on every runtime feature: flags from the local flag
//! server, events posted to a scripted events service on 127.0.0.1.
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
use flagsync::eval::{Context, ContextBuilder};
use flagsync::events::EventsOptions;
use flagsync::migration::{Migrator, Stage};
use flagsync::server::{self as flag_server, ServerHandle};
use serde_json::{Value, json};

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    evaluations_tracks_and_identifies_reach_the_events_service,
    close_sends_what_is_queued,
    a_hanging_events_service_never_blocks_evaluations_or_close,
    an_unrecoverable_status_stops_delivery,
    a_failed_post_is_sent_once_more_with_the_same_payload_id,
    migration_operations_are_reported_by_default,
    summaries_count_every_evaluation_from_many_threads_across_flushes,
    a_diagnostic_init_event_describes_the_client,
    the_official_sdk_s_track_calls_send_the_same_custom_events,
);

fn flag(extra: Value) -> Value {
    let mut f = json!({"on": true, "salt": "s", "targets": [], "contextTargets": [],
        "rules": [], "prerequisites": [], "fallthrough": {"variation": 1}, "offVariation": 0,
        "variations": [false, true], "trackEvents": false, "version": 3});
    for (k, v) in extra.as_object().unwrap() {
        f[k] = v.clone();
    }
    f
}

fn serve_flags() -> ServerHandle {
    let data = json!({
        "flags": {
            "plain": flag(json!({})),
            "tracked": flag(json!({"trackEvents": true})),
            "migration": flag(json!({"variations": ["off", "dualwrite", "shadow", "live"],
                "fallthrough": {"variation": 3}})),
        },
        "segments": {}
    });
    flag_server::Server::builder().data(data).start().unwrap()
}

/// An events service answering every post with `status` (read at each request).
fn events_service(status: Arc<AtomicU16>) -> Server {
    Server::start(move |_req, resp| {
        let code = status.load(Ordering::SeqCst);
        resp.send(format!(
            "HTTP/1.1 {code} X\r\nDate: Sat, 01 Jan 2000 00:00:00 GMT\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ));
        After::Close
    })
}

fn client_builder(rt: &Rt, flags: &ServerHandle, events: &Server) -> flagsync::ClientBuilder {
    let mut options = EventsOptions::default();
    options.events_uri = Some(events.url());
    options.diagnostic_opt_out = true;
    // Only explicit flushes and close send.
    options.flush_interval = Duration::from_secs(3600);
    builder(rt, &flags.url()).events(options)
}

async fn ready(_rt: &Rt, b: flagsync::ClientBuilder) -> flagsync::Client {
    let client = b.build().unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    client
}

fn user(key: &str) -> Context {
    ContextBuilder::new(key).build().unwrap()
}

/// The analytics payloads received so far.
fn bulk(server: &Server) -> Vec<(common::server::Request, Value)> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.target == "/bulk")
        .map(|r| {
            let body = serde_json::from_slice(&r.body).expect("a JSON payload");
            (r, body)
        })
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

async fn evaluations_tracks_and_identifies_reach_the_events_service(rt: Rt) {
    let flags = serve_flags();
    let events = events_service(Arc::new(AtomicU16::new(202)));
    let client = ready(&rt, client_builder(&rt, &flags, &events)).await;
    assert!(client.sends_events());
    let anna = user("anna");
    for _ in 0..3 {
        assert!(client.bool_variation("plain", &anna, false));
    }
    client.bool_variation_detail("tracked", &user("bob"), false);
    client.bool_variation("missing", &anna, false);
    client.track("clicked", &anna, Some(json!({"button": "buy"})), Some(2.5));
    client.identify(&user("carol"));
    client.flush();
    assert!(eventually(&rt, 5 * SEC, || !bulk(&events).is_empty()).await);
    let (request, body) = bulk(&events).remove(0);
    assert_eq!(request.method, "POST");
    assert_eq!(request.header("authorization"), Some(SDK_KEY));
    assert_eq!(request.header("x-launchdarkly-event-schema"), Some("4"));
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert!(request.header("x-launchdarkly-payload-id").is_some());
    assert!(
        request
            .header("user-agent")
            .unwrap()
            .starts_with("flagsync/")
    );
    assert_eq!(
        kinds(&body),
        ["custom", "feature", "identify", "index", "index", "summary"]
    );
    let find = |kind: &str| {
        body.as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == kind)
            .unwrap()
            .clone()
    };
    let feature = find("feature");
    assert_eq!(feature["key"], "tracked");
    assert_eq!(feature["version"], 3);
    assert_eq!(feature["value"], true);
    assert_eq!(feature["reason"], json!({"kind": "FALLTHROUGH"}));
    assert_eq!(feature["context"], json!({"kind": "user", "key": "bob"}));
    let custom = find("custom");
    assert_eq!(custom["data"], json!({"button": "buy"}));
    assert_eq!(custom["metricValue"], 2.5);
    let summary = find("summary");
    assert_eq!(
        summary["features"]["plain"]["counters"],
        json!([{"variation": 1, "version": 3, "value": true, "count": 3}])
    );
    assert_eq!(
        summary["features"]["missing"]["counters"],
        json!([{"unknown": true, "value": false, "count": 1}])
    );
    assert_eq!(
        summary["features"]["plain"]["contextKinds"],
        json!(["user"])
    );
    client.close().await;
}

async fn close_sends_what_is_queued(rt: Rt) {
    let flags = serve_flags();
    let events = events_service(Arc::new(AtomicU16::new(202)));
    let client = ready(&rt, client_builder(&rt, &flags, &events)).await;
    client.bool_variation("plain", &user("anna"), false);
    client.close().await;
    let posts = bulk(&events);
    assert_eq!(posts.len(), 1, "close flushes");
    assert_eq!(kinds(&posts[0].1), ["index", "summary"]);
    assert!(client.is_closed());
}

async fn a_hanging_events_service_never_blocks_evaluations_or_close(rt: Rt) {
    let flags = serve_flags();
    // Accepts the post and never answers.
    let events = Server::start(|_req, _resp| After::Hold);
    let b = client_builder(&rt, &flags, &events).close_timeout(Duration::from_millis(500));
    let client = ready(&rt, b).await;
    let started = Instant::now();
    for i in 0..20_000 {
        client.bool_variation("tracked", &user(&format!("u{i}")), false);
        if i % 5_000 == 0 {
            client.flush();
        }
    }
    assert!(
        started.elapsed() < 10 * SEC,
        "evaluations took {:?}",
        started.elapsed()
    );
    assert!(eventually(&rt, 5 * SEC, || !bulk(&events).is_empty()).await);
    let closing = Instant::now();
    client.close().await;
    assert!(
        closing.elapsed() < 2 * SEC,
        "close took {:?}",
        closing.elapsed()
    );
    assert!(eventually(&rt, 3 * SEC, || events.open_connections() == 0).await);
}

async fn an_unrecoverable_status_stops_delivery(rt: Rt) {
    let flags = serve_flags();
    let events = events_service(Arc::new(AtomicU16::new(401)));
    let client = ready(&rt, client_builder(&rt, &flags, &events)).await;
    client.bool_variation("plain", &user("anna"), false);
    client.flush();
    assert!(eventually(&rt, 5 * SEC, || bulk(&events).len() == 1).await);
    sleep(&rt, Duration::from_millis(200)).await;
    client.bool_variation("tracked", &user("bob"), false);
    client.flush();
    sleep(&rt, Duration::from_millis(1500)).await;
    assert_eq!(bulk(&events).len(), 1, "nothing after a 401");
    client.close().await;
    assert_eq!(bulk(&events).len(), 1, "not even on close");
}

async fn a_failed_post_is_sent_once_more_with_the_same_payload_id(rt: Rt) {
    let flags = serve_flags();
    let status = Arc::new(AtomicU16::new(503));
    let events = events_service(status.clone());
    let client = ready(&rt, client_builder(&rt, &flags, &events)).await;
    client.bool_variation("plain", &user("anna"), false);
    client.flush();
    assert!(eventually(&rt, 5 * SEC, || bulk(&events).len() == 2).await);
    let posts = bulk(&events);
    let id = |i: usize| {
        posts[i]
            .0
            .header("x-launchdarkly-payload-id")
            .map(str::to_owned)
    };
    assert_eq!(id(0), id(1));
    assert_eq!(posts[0].1, posts[1].1);
    // No third try.
    sleep(&rt, Duration::from_millis(1500)).await;
    assert_eq!(bulk(&events).len(), 2);
    status.store(202, Ordering::SeqCst);
    client.bool_variation("plain", &user("bob"), false);
    client.flush();
    assert!(eventually(&rt, 5 * SEC, || bulk(&events).len() == 3).await);
    assert_ne!(
        bulk(&events)[2]
            .0
            .header("x-launchdarkly-payload-id")
            .map(str::to_owned),
        id(0)
    );
    client.close().await;
}

async fn migration_operations_are_reported_by_default(rt: Rt) {
    let flags = serve_flags();
    let events = events_service(Arc::new(AtomicU16::new(202)));
    let client = ready(&rt, client_builder(&rt, &flags, &events)).await;
    let migrator: Migrator<(), &'static str, String> = Migrator::builder(client.clone())
        .read(|_| async { Ok("old") }, |_| async { Ok("new") })
        .write(|_| async { Ok("old") }, |_| async { Ok("new") })
        .build()
        .unwrap();
    let result = migrator
        .read("migration", &user("anna"), Stage::Off, ())
        .await;
    assert_eq!(result.result.unwrap(), "new");
    client.flush();
    assert!(eventually(&rt, 5 * SEC, || !bulk(&events).is_empty()).await);
    let body = &bulk(&events)[0].1;
    assert_eq!(kinds(body), ["index", "migration_op", "summary"]);
    let op = body
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "migration_op")
        .unwrap();
    assert_eq!(op["operation"], "read");
    assert_eq!(op["evaluation"]["key"], "migration");
    assert_eq!(op["evaluation"]["value"], "live");
    assert_eq!(op["context"], json!({"kind": "user", "key": "anna"}));
    client.close().await;
}

async fn summaries_count_every_evaluation_from_many_threads_across_flushes(rt: Rt) {
    const THREADS: usize = 4;
    const EACH: usize = 2_000;
    let flags = serve_flags();
    let events = events_service(Arc::new(AtomicU16::new(202)));
    let client = ready(&rt, client_builder(&rt, &flags, &events)).await;
    let done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for t in 0..THREADS {
        let (client, done) = (client.clone(), done.clone());
        std::thread::spawn(move || {
            for i in 0..EACH {
                let flag = if i % 2 == 0 { "plain" } else { "tracked" };
                client.bool_variation(flag, &user(&format!("t{t}-u{}", i % 50)), false);
                if i % 500 == 0 {
                    client.flush();
                }
            }
            done.fetch_add(1, Ordering::SeqCst);
        });
    }
    assert!(eventually(&rt, 30 * SEC, || done.load(Ordering::SeqCst) == THREADS).await);
    client.close().await;
    let counted: u64 = bulk(&events)
        .iter()
        .flat_map(|(_, body)| body.as_array().unwrap().clone())
        .filter(|e| e["kind"] == "summary")
        .flat_map(|e| e["features"].as_object().unwrap().clone())
        .flat_map(|(_, f)| f["counters"].as_array().unwrap().clone())
        .map(|c| c["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, (THREADS * EACH) as u64);
    // Every tracked evaluation is a feature event (the queue's 10,000 suffice here).
    let features = bulk(&events)
        .iter()
        .flat_map(|(_, body)| body.as_array().unwrap().clone())
        .filter(|e| e["kind"] == "feature")
        .count();
    assert_eq!(features, THREADS * EACH / 2);
}

async fn a_diagnostic_init_event_describes_the_client(rt: Rt) {
    let flags = serve_flags();
    let events = events_service(Arc::new(AtomicU16::new(202)));
    let mut options = EventsOptions::default();
    options.events_uri = Some(events.url());
    options.capacity = 777;
    let client = ready(&rt, builder(&rt, &flags.url()).events(options)).await;
    let diagnostic = |events: &Server| {
        events
            .requests()
            .into_iter()
            .find(|r| r.target == "/diagnostic")
    };
    assert!(eventually(&rt, 5 * SEC, || diagnostic(&events).is_some()).await);
    let request = diagnostic(&events).unwrap();
    assert_eq!(request.header("authorization"), Some(SDK_KEY));
    assert!(request.header("x-launchdarkly-payload-id").is_none());
    let body: Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["kind"], "diagnostic-init");
    assert_eq!(body["id"]["sdkKeySuffix"], &SDK_KEY[SDK_KEY.len() - 6..]);
    assert_eq!(body["id"]["diagnosticId"].as_str().map(str::len), Some(36));
    assert_eq!(body["configuration"]["eventsCapacity"], 777);
    assert_eq!(body["configuration"]["customEventsURI"], true);
    assert_eq!(body["configuration"]["customStreamURI"], true);
    assert_eq!(body["configuration"]["streamingDisabled"], false);
    assert_eq!(body["sdk"]["name"], "flagsync");
    assert_eq!(body["platform"]["name"], "rust");
    client.close().await;
}

/// `track_event`, `track_data` and `track_metric` (the official SDK's names) send what
/// `track` sends with the same arguments.
async fn the_official_sdk_s_track_calls_send_the_same_custom_events(rt: Rt) {
    let flags = serve_flags();
    let events = events_service(Arc::new(AtomicU16::new(202)));
    let client = ready(&rt, client_builder(&rt, &flags, &events)).await;
    let anna = user("anna");
    client.track_event("plain-event", &anna);
    client
        .track_data("with-data", &anna, json!({"items": [1, 2]}))
        .unwrap();
    client.track_metric("with-metric", &anna, 9.5, Some(json!("x")));
    client.flush();
    assert!(eventually(&rt, 5 * SEC, || !bulk(&events).is_empty()).await);
    let (_, body) = bulk(&events).remove(0);
    let custom: Vec<Value> = body
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "custom")
        .map(|e| json!([e["key"], e.get("data"), e.get("metricValue")]))
        .collect();
    assert_eq!(
        custom,
        [
            json!(["plain-event", null, null]),
            json!(["with-data", {"items": [1, 2]}, null]),
            json!(["with-metric", "x", 9.5]),
        ]
    );
    client.close().await;
}
