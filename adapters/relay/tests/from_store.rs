//! A relay started while its upstream is down serves what Redis holds, says so in
//! `/status`, and takes the upstream's data (writing it to Redis) once it answers.

mod common;

use std::time::Duration;

use common::redis_server::RedisServer;
use common::{KEY, config, eventually, f, flag, started_client};
use flagsync_relay::Relay;
use flagsync_server::Server;
use serde_json::{Value, json};

/// The relay's `GET /status`, parsed.
fn status(relay: &flagsync_relay::RelayHandle) -> Value {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(relay.server().addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET /status HTTP/1.1\r\nConnection: close\r\n\r\n").unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    serde_json::from_str(all.split_once("\r\n\r\n").unwrap().1).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_upstream_down_redis_is_served_until_the_upstream_answers() {
    let redis = RedisServer::start();
    // Redis holds the environment, as a relay (or LaunchDarkly's Relay Proxy) left it.
    let stored = flag("f", json!("from-redis"), 4);
    redis.cli(&["HSET", "prod:features", "f", &stored.to_string()]);
    redis.cli(&["SET", "prod:$inited", ""]);
    // The upstream's port, refusing connections for now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let upstream_url = format!("http://127.0.0.1:{port}");
    let relay = Relay::builder(config(json!({"upstream": upstream_url,
        "environments": {"prod": {"sdkKey": KEY, "redisPrefix": "prod"}}})))
    .server(Server::builder().port(0))
    .redis(redis.store_builder())
    .start()
    .unwrap();

    for fdv2 in [false, true] {
        let c = started_client(&relay, KEY, fdv2).await;
        assert_eq!(f(&c), json!("from-redis"), "fdv2 {fdv2}");
        c.close().await;
    }
    let s = status(&relay);
    let env = &s["environments"]["prod"];
    assert_eq!(env["servedFrom"], "store", "{s}");
    assert_ne!(env["connectionStatus"]["state"], "VALID", "{s}");
    assert_eq!(s["status"], "degraded", "{s}");

    // The upstream answers: its data wins, downstream and in Redis.
    let c = started_client(&relay, KEY, true).await;
    let _up = Server::builder()
        .port(port)
        .sdk_key(Some(KEY.into()))
        .data(json!({"flags": {"f": flag("f", json!("from-upstream"), 9)}}))
        .start()
        .unwrap();
    eventually(
        "the upstream's value downstream",
        Duration::from_secs(40),
        || f(&c) == json!("from-upstream"),
    )
    .await;
    eventually(
        "the upstream's data in Redis",
        Duration::from_secs(10),
        || {
            let raw = redis.cli(&["HGET", "prod:features", "f"]);
            serde_json::from_str::<Value>(raw.trim()).is_ok_and(|v| v["version"] == 9)
        },
    )
    .await;
    eventually("servedFrom upstream", Duration::from_secs(10), || {
        status(&relay)["environments"]["prod"]["servedFrom"] == "upstream"
    })
    .await;
    c.close().await;
    tokio::task::spawn_blocking(move || relay.shutdown())
        .await
        .unwrap();
}
