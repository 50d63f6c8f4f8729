//! `flagsync serve --upstream` / `--relay` (relay mode), end to end: an upstream
//! `flagsync_server` in this process, the relay binary in front of it, and flagsync
//! clients on every runtime behind it (the official SDKs run through a relay in
//! `conformance/official/*.py --relay`).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::redis_server::RedisServer;
use common::serve::Serve;
use flagsync::eval::{Context, ContextBuilder};
use flagsync::runtime::Runtime;
use flagsync::server::{Environment, PayloadKind, Server, ServerHandle};
use flagsync::{Client, Fdv2Config};
use serde_json::{Value, json};

const KEY: &str = "sdk-relay-test";

fn user(key: &str) -> Context {
    ContextBuilder::new(key).build().expect("a context")
}

fn flag(value: Value, version: u64) -> Value {
    json!({"key": "f", "version": version, "on": true, "variations": [value],
           "fallthrough": {"variation": 0}, "offVariation": 0})
}

fn upstream_on(port: u16, value: Value) -> ServerHandle {
    Server::builder()
        .port(port)
        .sdk_key(Some(KEY.into()))
        .data(json!({"flags": {"f": flag(value, 1)}}))
        .start()
        .expect("upstream")
}

/// The relay binary with `args`; killed on drop.
struct Relay(Serve);

impl std::ops::Deref for Relay {
    type Target = Serve;
    fn deref(&self) -> &Serve {
        &self.0
    }
}

impl Relay {
    fn start(args: &[&str]) -> Self {
        let serve = Serve::start(args);
        assert!(
            serve.banner.starts_with("flagsync: relaying on "),
            "not a relay: {:?}",
            serve.banner
        );
        Self(serve)
    }

    fn upstream(upstream: &ServerHandle, extra: &[&str]) -> Self {
        let url = upstream.url();
        let mut args = vec![
            "--upstream",
            &url,
            "--sdk-key",
            KEY,
            "--upstream-events",
            &url,
        ];
        args.extend_from_slice(extra);
        Self::start(&args)
    }
}

/// A raw GET to the relay: the status and the first bytes of the body.
fn get(url: &str, path: &str, key: &str) -> (u16, String) {
    let addr = url.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {key}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = vec![0; 64 * 1024];
    let mut got = Vec::new();
    // Enough for the head and the first payload; streams never end.
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        if got.windows(4).any(|w| w == b"\r\n\r\n") && path.ends_with("stream") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn client(relay: &Relay, rt: Arc<dyn Runtime>, fdv2: bool) -> Client {
    let mut events = flagsync::events::EventsOptions::default();
    events.events_uri = Some(relay.url.clone());
    events.flush_interval = Duration::from_millis(100);
    let mut b = Client::builder(KEY)
        .stream_uri(relay.url.clone())
        .polling_uri(relay.url.clone())
        .events(events)
        .runtime(rt)
        .no_proxy();
    if fdv2 {
        b = b.fdv2(Fdv2Config::default());
    }
    b.build().expect("client")
}

async fn values_changes_and_events(relay: &Relay, upstream: &ServerHandle, rt: Arc<dyn Runtime>) {
    let ctx = user("u1");
    for fdv2 in [false, true] {
        let c = client(relay, rt.clone(), fdv2);
        c.start().unwrap();
        assert!(
            c.wait_for_initialization(Duration::from_secs(10)).await,
            "fdv2 {fdv2}"
        );
        let before = c.json_variation("f", &ctx, Value::Null);
        let events = upstream.subscribe_events(100);
        let next = json!(format!("v-{}", upstream.payload_version() + 1));
        upstream
            .set_flag("f", flag(next.clone(), upstream.payload_version() + 1))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while c.json_variation("f", &ctx, Value::Null) != next {
            assert!(
                Instant::now() < deadline,
                "fdv2 {fdv2}: {before} never became {next}"
            );
            rt.sleep_until(Instant::now() + Duration::from_millis(20))
                .await;
        }
        c.track_event("relayed", &ctx);
        c.flush();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut kinds = Vec::new();
        while !kinds.iter().any(|k| k == "custom") {
            assert!(
                Instant::now() < deadline,
                "fdv2 {fdv2}: no custom event upstream: {kinds:?}"
            );
            if let Some(p) = events.try_recv() {
                if p.kind == PayloadKind::Bulk {
                    assert!(
                        p.user_agent.as_deref().unwrap_or("").contains("flagsync"),
                        "{p:?}"
                    );
                    kinds.extend(
                        p.events()
                            .iter()
                            .map(|e| e["kind"].as_str().unwrap_or("").to_owned()),
                    );
                }
            } else {
                rt.sleep_until(Instant::now() + Duration::from_millis(20))
                    .await;
            }
        }
        c.close().await;
    }
}

#[test]
fn relays_values_changes_and_events_on_every_runtime() {
    let upstream = upstream_on(0, json!("v-1"));
    let relay = Relay::upstream(&upstream, &[]);
    let tokio = tokio::runtime::Runtime::new().unwrap();
    tokio.block_on(async {
        let rt = Arc::new(flagsync::runtime::TokioRuntime::try_current().unwrap());
        values_changes_and_events(&relay, &upstream, rt).await;
    });
    smol::block_on(values_changes_and_events(
        &relay,
        &upstream,
        Arc::new(flagsync::runtime::SmolRuntime),
    ));
    async_std::task::block_on(values_changes_and_events(
        &relay,
        &upstream,
        Arc::new(flagsync::runtime::AsyncStdRuntime),
    ));
}

#[test]
fn a_relay_configured_only_by_variables_serves_each_environment_and_never_shows_a_key() {
    let upstream = Server::builder()
        .environment(Environment::new("p", KEY).data(json!({"flagValues": {"f": "prod"}})))
        .environment(Environment::new("s", "sdk-staging").data(json!({"flagValues": {"g": 1}})))
        .start()
        .unwrap();
    let url = upstream.url();
    let vars = [
        ("FLAGSYNC_UPSTREAM", url.as_str()),
        ("FLAGSYNC_ENV_prod", KEY),
        ("FLAGSYNC_ENV_ID_prod", "env-prod"),
        ("FLAGSYNC_ENV_staging", "sdk-staging"),
        ("FLAGSYNC_LISTEN", "127.0.0.1:0"),
    ];
    let relay = Relay(Serve::with_env(&["serve"], &vars));
    assert!(
        relay.banner.starts_with("flagsync: relaying on "),
        "{}",
        relay.banner
    );
    wait_for("both served", Duration::from_secs(10), || {
        get(&relay.url, "/sdk/latest-all", KEY)
            .1
            .contains("X-LD-EnvID: env-prod")
            && get(&relay.url, "/sdk/latest-all", "sdk-staging")
                .1
                .contains("\"g\"")
    });
    let (status, body) = get(&relay.url, "/status", "");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("\"prod\"") && body.contains("\"staging\""),
        "{body}"
    );
    assert!(
        !body.contains(KEY) && !body.contains("sdk-staging"),
        "{body}"
    );
    // A setting that cannot be used is named; the key is not shown.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flagsync"))
        .arg("serve")
        .envs([
            ("FLAGSYNC_UPSTREAM", url.as_str()),
            ("FLAGSYNC_SDK_KEY", "sdk-secret with a space"),
            ("FLAGSYNC_PORT", "0"),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("SDK key is malformed") && !err.contains("secret"),
        "{err}"
    );
}

#[test]
fn a_wrong_key_is_refused_and_each_environment_serves_its_own_flags() {
    let prod = upstream_on(0, json!("prod"));
    let staging = Server::builder()
        .sdk_key(Some("sdk-staging".into()))
        .data(json!({"flagValues": {"g": 1}}))
        .start()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("flagsync-relay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("relay.json");
    std::fs::write(
        &config,
        json!({"environments": {
            "prod": {"sdkKey": KEY, "upstream": prod.url(), "envId": "env-prod"},
            "staging": {"sdkKey": "sdk-staging", "upstream": staging.url()}}})
        .to_string(),
    )
    .unwrap();
    let relay = Relay::start(&["--relay", config.to_str().unwrap()]);
    wait_for("prod served", Duration::from_secs(10), || {
        get(&relay.url, "/sdk/latest-all", KEY).0 == 200
    });
    let (status, body) = get(&relay.url, "/sdk/latest-all", KEY);
    assert_eq!(status, 200);
    assert!(
        body.contains("X-LD-EnvID: env-prod") && body.contains("\"prod\""),
        "{body}"
    );
    wait_for("staging served", Duration::from_secs(10), || {
        let (s, b) = get(&relay.url, "/sdk/latest-all", "sdk-staging");
        s == 200 && b.contains("\"g\"") && !b.contains("\"f\"")
    });
    for path in ["/sdk/latest-all", "/all", "/sdk/stream", "/sdk/poll"] {
        assert_eq!(get(&relay.url, path, "sdk-wrong").0, 401, "{path}");
    }
}

#[test]
fn before_it_has_data_polls_get_503_and_waiting_streams_get_the_data_when_it_comes() {
    let upstream = upstream_on(0, json!("late"));
    upstream.hang(true);
    let dir = std::env::temp_dir().join(format!("flagsync-relay-wait-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("relay.json");
    std::fs::write(
        &config,
        json!({"upstream": upstream.url(), "protocol": "fdv1", "initTimeoutSecs": 1,
               "environments": {"only": {"sdkKey": KEY}}})
        .to_string(),
    )
    .unwrap();
    let relay = Relay::start(&["--relay", config.to_str().unwrap()]);
    assert_eq!(get(&relay.url, "/sdk/latest-all", KEY).0, 503);
    assert_eq!(
        get(&relay.url, "/all", KEY).0,
        503,
        "streams too, within initTimeout"
    );
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(
        get(&relay.url, "/sdk/latest-all", KEY).0,
        503,
        "polls: still no data"
    );
    // Past the timeout a stream is accepted and waits for the data.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let tokio_rt = Arc::new(flagsync::runtime::TokioRuntime::try_current().unwrap());
        let c = client(&relay, tokio_rt, false);
        c.start().unwrap();
        assert!(!c.wait_for_initialization(Duration::from_millis(500)).await);
        upstream.hang(false);
        assert!(
            c.wait_for_initialization(Duration::from_secs(15)).await,
            "the data arrived"
        );
        assert_eq!(
            c.json_variation("f", &user("u"), Value::Null),
            json!("late")
        );
        c.close().await;
    });
}

#[test]
fn an_upstream_outage_keeps_the_last_data_and_recovery_brings_the_changes() {
    let upstream = upstream_on(0, json!("before"));
    let port = upstream.addr().port();
    let relay = Relay::upstream(&upstream, &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let tokio_rt = Arc::new(flagsync::runtime::TokioRuntime::try_current().unwrap());
        let c = client(&relay, tokio_rt, false);
        c.start().unwrap();
        assert!(c.wait_for_initialization(Duration::from_secs(10)).await);
        let ctx = user("u");
        upstream.shutdown();
        drop(upstream);
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(c.json_variation("f", &ctx, Value::Null), json!("before"));
        assert_eq!(
            get(&relay.url, "/sdk/latest-all", KEY).0,
            200,
            "the last data is served"
        );
        assert!(
            c.status().state == flagsync::State::Valid,
            "the downstream stream stays open"
        );
        let back = upstream_on(port, json!("after"));
        back.set_flag("f", flag(json!("after"), 5)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(40);
        while c.json_variation("f", &ctx, Value::Null) != json!("after") {
            assert!(
                Instant::now() < deadline,
                "the recovered upstream's change never arrived"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        c.close().await;
    });
}

#[test]
fn the_relay_keeps_redis_current() {
    let redis = RedisServer::start();
    let upstream = upstream_on(0, json!("r1"));
    let url = redis.url();
    let relay = Relay::upstream(&upstream, &["--redis", &url, "--prefix", "relayed"]);
    let version_in_redis = || {
        let raw = redis.cli(&["HGET", "relayed:features", "f"]);
        serde_json::from_str::<Value>(raw.trim())
            .ok()
            .and_then(|v| v["version"].as_u64())
    };
    wait_for("the data set in Redis", Duration::from_secs(10), || {
        version_in_redis() == Some(1)
    });
    upstream.set_flag("f", flag(json!("r2"), 7)).unwrap();
    wait_for("the change in Redis", Duration::from_secs(10), || {
        version_in_redis() == Some(7)
    });
    assert_eq!(redis.cli(&["EXISTS", "relayed:$inited"]).trim(), "1");
    drop(relay);
}

/// The relay's --redis on Redis Cluster (`--redis-cluster`, a hash-tagged prefix): the
/// data set and its changes reach the cluster.
#[test]
fn the_relay_keeps_a_redis_cluster_current() {
    let cluster = common::topology::RedisCluster::start();
    let upstream = upstream_on(0, json!("c1"));
    let seeds = cluster.seeds();
    let relay = Relay::upstream(
        &upstream,
        &[
            "--redis-cluster",
            &seeds[0],
            "--redis-cluster",
            &seeds[1],
            "--prefix",
            "{relayed}",
        ],
    );
    let version_in_redis = || {
        let raw = cluster.cli(&["HGET", "{relayed}:features", "f"]);
        serde_json::from_str::<Value>(raw.trim())
            .ok()
            .and_then(|v| v["version"].as_u64())
    };
    wait_for(
        "the data set in the cluster",
        Duration::from_secs(10),
        || version_in_redis() == Some(1),
    );
    upstream.set_flag("f", flag(json!("c2"), 7)).unwrap();
    wait_for("the change in the cluster", Duration::from_secs(10), || {
        version_in_redis() == Some(7)
    });
    drop(relay);
}
