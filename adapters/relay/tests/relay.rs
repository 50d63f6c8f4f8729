//! The relay as a library: an upstream `flagsync_server` in this process, the relay in
//! front of it, flagsync clients behind it.

mod common;

use std::time::Duration;

use common::redis_server::RedisServer;
use common::{
    KEY, client, config, eventually, f, flag, one_environment, relay, started_client, upstream,
    user, wait_for,
};
use flagsync_relay::{Relay, RelayError};
use flagsync_server::{Endpoint, PayloadKind, Server};
use serde_json::{Value, json};

/// Values and their changes reach downstream clients (FDv1 and FDv2 both) through a
/// relay that is itself on `protocol` upstream.
async fn values_and_changes(protocol: &str) {
    let up = upstream(KEY, json!("v-1"));
    let relay = relay(one_environment(&up, protocol));
    for (round, fdv2) in [(2, false), (3, true)] {
        let c = started_client(&relay, KEY, fdv2).await;
        assert_eq!(
            f(&c),
            json!(format!("v-{}", round - 1)),
            "{protocol}, fdv2 {fdv2}"
        );
        let next = json!(format!("v-{round}"));
        up.set_flag("f", flag("f", next.clone(), round)).unwrap();
        eventually(
            &format!("{protocol} upstream, fdv2 {fdv2} downstream: the change"),
            Duration::from_secs(5),
            || f(&c) == next,
        )
        .await;
        c.close().await;
    }
    // A flag deleted upstream is deleted downstream too.
    let c = started_client(&relay, KEY, true).await;
    up.delete_flag("f");
    eventually("the deletion", Duration::from_secs(5), || {
        f(&c) == Value::Null
    })
    .await;
    c.close().await;
    let report = tokio::task::spawn_blocking(move || relay.shutdown())
        .await
        .unwrap();
    assert_eq!((report.failed, report.dropped), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_fdv2_upstream_s_values_and_changes_reach_downstream_clients() {
    values_and_changes("fdv2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_fdv1_upstream_s_values_and_changes_reach_downstream_clients() {
    values_and_changes("fdv1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downstream_events_are_forwarded_to_the_upstream_events_service() {
    let up = upstream(KEY, json!("v"));
    let relay = relay(one_environment(&up, "fdv2"));
    let events = up.subscribe_events(100);
    let c = started_client(&relay, KEY, true).await;
    let ctx = user("u1");
    assert_eq!(c.json_variation("f", &ctx, Value::Null), json!("v"));
    c.track_event("relayed", &ctx);
    c.flush();
    // The bulk payloads that reach the upstream, as the downstream SDK sent them.
    let mut bulk = Vec::new();
    eventually("a custom event upstream", Duration::from_secs(10), || {
        bulk.extend(
            std::iter::from_fn(|| events.try_recv()).filter(|p| p.kind == PayloadKind::Bulk),
        );
        bulk.iter()
            .flat_map(|p| p.events())
            .any(|e| e["kind"] == "custom")
    })
    .await;
    for p in &bulk {
        let agent = p.user_agent.as_deref().unwrap_or("");
        assert!(
            agent.contains("flagsync"),
            "the downstream SDK's headers: {p:?}"
        );
    }
    let metrics = get(&relay, "/metrics");
    let forwarded = metrics
        .lines()
        .find_map(|l| l.strip_prefix("flagsync_server_events_forwarded_total "))
        .and_then(|v| v.parse::<u64>().ok());
    assert!(forwarded.is_some_and(|n| n >= 1), "{metrics}");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_events_service_that_rejects_the_key_is_reported_at_shutdown() {
    let up = upstream(KEY, json!("v"));
    let events = Server::builder().start().unwrap();
    events.fail_endpoint("/bulk".parse::<Endpoint>().unwrap(), Some(401));
    let relay = relay(config(json!({
        "upstream": up.url(), "eventsUri": events.url(),
        "environments": {"only": {"sdkKey": KEY}}})));
    let c = started_client(&relay, KEY, true).await;
    c.track_event("relayed", &user("u"));
    c.flush();
    eventually("the post refused", Duration::from_secs(10), || {
        events.request_count() > 0
    })
    .await;
    c.close().await;
    let report = tokio::task::spawn_blocking(move || relay.shutdown())
        .await
        .unwrap();
    assert!(report.failed >= 1, "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_environments_are_each_served_by_their_own_key() {
    let prod = upstream(KEY, json!("prod"));
    let staging = upstream("sdk-staging", json!("staging"));
    let relay = relay(config(json!({"environments": {
        "prod": {"sdkKey": KEY, "upstream": prod.url()},
        "staging": {"sdkKey": "sdk-staging", "upstream": staging.url()}}})));
    let p = started_client(&relay, KEY, true).await;
    let s = started_client(&relay, "sdk-staging", false).await;
    assert_eq!((f(&p), f(&s)), (json!("prod"), json!("staging")));
    staging
        .set_flag("f", flag("f", json!("staging-2"), 2))
        .unwrap();
    eventually("the staging change", Duration::from_secs(5), || {
        f(&s) == json!("staging-2")
    })
    .await;
    assert_eq!(f(&p), json!("prod"), "prod is untouched");
    // A key of no environment is refused.
    let stranger = client(&relay, "sdk-stranger", false);
    stranger.start().unwrap();
    assert!(
        !stranger
            .wait_for_initialization(Duration::from_secs(1))
            .await
    );
    for c in [p, s, stranger] {
        c.close().await;
    }
}

#[test]
fn it_starts_and_stops_from_a_plain_thread_and_inside_a_runtime() {
    // No runtime around: the relay brings its own.
    let up = upstream(KEY, json!("plain"));
    let plain = relay(one_environment(&up, "fdv2"));
    wait_for("the data served", Duration::from_secs(10), || {
        plain
            .server()
            .environment("only")
            .is_some_and(|e| e.is_ready())
    });
    // Inside a current-thread runtime: started, used and shut down (blocking) there,
    // and a second one dropped there.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let inner = relay(one_environment(&up, "fdv1"));
        let c = started_client(&inner, KEY, false).await;
        assert_eq!(f(&c), json!("plain"));
        c.close().await;
        inner.shutdown();
        drop(relay(one_environment(&up, "fdv2")));
    });
    drop(rt);
    let report = plain.shutdown();
    assert_eq!((report.failed, report.dropped), (0, 0));
}

#[test]
fn bad_settings_are_typed_errors_without_secrets() {
    let up = upstream(KEY, json!("v"));
    let err = Relay::builder(one_environment(&up, "fdv2"))
        .redis(flagsync_redis::RedisStore::builder(
            "redis://user:s3cret@127.0.0.1:1/not-a-db",
        ))
        .start()
        .unwrap_err();
    assert!(
        matches!(err, RelayError::Redis { ref environment, .. } if environment == "only"),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        !message.contains("s3cret") && !message.contains(KEY),
        "{message}"
    );

    let taken = Server::builder().start().unwrap();
    let err = Relay::builder(one_environment(&up, "fdv2"))
        .server(Server::builder().port(taken.addr().port()))
        .start()
        .unwrap_err();
    assert!(matches!(err, RelayError::Server(_)), "{err:?}");
    assert!(!err.to_string().contains(KEY), "{err}");
}

#[test]
fn the_relay_keeps_redis_current_under_each_environment_s_prefix() {
    let redis = RedisServer::start();
    let prod = upstream(KEY, json!("r1"));
    let staging = upstream("sdk-staging", json!("s1"));
    let relay = Relay::builder(config(json!({"environments": {
        "prod": {"sdkKey": KEY, "upstream": prod.url(), "redisPrefix": "prod"},
        "staging": {"sdkKey": "sdk-staging", "upstream": staging.url()}}})))
    .redis(redis.store_builder().prefix("relayed"))
    .start()
    .unwrap();
    let version_in_redis = |prefix: &str| {
        let raw = redis.cli(&["HGET", &format!("{prefix}:features"), "f"]);
        serde_json::from_str::<Value>(raw.trim())
            .ok()
            .and_then(|v| v["version"].as_u64())
    };
    wait_for("both data sets in Redis", Duration::from_secs(10), || {
        version_in_redis("prod") == Some(1) && version_in_redis("relayed") == Some(1)
    });
    prod.set_flag("f", flag("f", json!("r2"), 7)).unwrap();
    wait_for("the change in Redis", Duration::from_secs(10), || {
        version_in_redis("prod") == Some(7)
    });
    assert_eq!(version_in_redis("relayed"), Some(1), "staging is untouched");
    assert_eq!(redis.cli(&["EXISTS", "prod:$inited"]).trim(), "1");
    relay.shutdown();
}

/// The body of the relay's answer to `GET path` (never holding an SDK key).
fn get(relay: &flagsync_relay::RelayHandle, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(relay.server().addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    let body = all.split_once("\r\n\r\n").unwrap().1.to_owned();
    assert!(!body.contains(KEY), "no key in {path}: {body}");
    body
}

/// The relay's `GET /status`, parsed.
fn status(relay: &flagsync_relay::RelayHandle) -> Value {
    serde_json::from_str(&get(relay, "/status")).unwrap()
}

#[test]
fn status_turns_degraded_while_the_upstream_is_down_and_healthy_again_after() {
    let up = upstream(KEY, json!(1));
    let port = up.addr().port();
    let relay = Relay::builder(one_environment(&up, "fdv2"))
        .server(
            Server::builder()
                .port(0)
                .disconnected_status_time(Duration::ZERO),
        )
        .start()
        .unwrap();
    let env_state = |s: &Value| s["environments"]["only"]["connectionStatus"]["state"].clone();
    wait_for("healthy", Duration::from_secs(10), || {
        status(&relay)["status"] == "healthy"
    });
    let s = status(&relay);
    assert_eq!(env_state(&s), "VALID", "{s}");
    assert_eq!(s["environments"]["only"]["status"], "connected");

    up.shutdown();
    wait_for("degraded", Duration::from_secs(15), || {
        status(&relay)["status"] == "degraded"
    });
    let s = status(&relay);
    assert_eq!(env_state(&s), "INTERRUPTED", "{s}");
    let error = &s["environments"]["only"]["connectionStatus"]["lastError"];
    assert!(error["kind"].is_string() && error["time"].is_u64(), "{s}");

    // The upstream back on its port: healthy again.
    let _back = Server::builder()
        .port(port)
        .sdk_key(Some(KEY.into()))
        .data(json!({"flags": {"f": flag("f", json!(2), 2)}}))
        .start()
        .unwrap();
    wait_for("healthy again", Duration::from_secs(30), || {
        status(&relay)["status"] == "healthy"
    });
    assert_eq!(env_state(&status(&relay)), "VALID");
    relay.shutdown();
}
