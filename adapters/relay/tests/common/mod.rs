//! Test support: an upstream flag service, a relay in front of it, a flagsync client
//! behind it; and a redis-server started per test (the Redis crate's helper).
#![allow(dead_code, unreachable_pub)]

#[path = "../../../redis/tests/common/redis_server.rs"]
pub mod redis_server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use flagsync::eval::{Context, ContextBuilder};
use flagsync::{Client, Fdv2Config};
use flagsync_relay::{Relay, RelayConfig, RelayHandle};
use flagsync_server::{Server, ServerHandle};
use serde_json::{Value, json};

/// The SDK key of the first environment, upstream and downstream.
pub const KEY: &str = "sdk-relay-lib-test";

pub fn user(key: &str) -> Context {
    ContextBuilder::new(key).build().expect("a context")
}

/// Flag `key` serving `value` to everyone, at `version`.
pub fn flag(key: &str, value: Value, version: u64) -> Value {
    json!({"key": key, "version": version, "on": true, "variations": [value],
           "fallthrough": {"variation": 0}, "offVariation": 0})
}

/// An upstream flag service for `key`, serving flag `f` = `value` (version 1).
pub fn upstream(key: &str, value: Value) -> ServerHandle {
    Server::builder()
        .sdk_key(Some(key.into()))
        .data(json!({"flags": {"f": flag("f", value, 1)}}))
        .start()
        .expect("upstream")
}

/// A relay configuration file's contents.
pub fn config(file: Value) -> RelayConfig {
    RelayConfig::parse(file.to_string().as_bytes()).expect("a relay configuration")
}

/// One environment ([`KEY`]) relayed from `upstream` (its events too), by `protocol`.
pub fn one_environment(upstream: &ServerHandle, protocol: &str) -> RelayConfig {
    config(
        json!({"upstream": upstream.url(), "eventsUri": upstream.url(),
                  "protocol": protocol, "environments": {"only": {"sdkKey": KEY}}}),
    )
}

/// A relay of `config` on a free port.
pub fn relay(config: RelayConfig) -> RelayHandle {
    Relay::builder(config)
        .server(Server::builder().port(0))
        .start()
        .expect("the relay")
}

/// A client of the relay for `key` (FDv2 or FDv1 streaming), its events flushed every
/// 100 ms to the relay; on the caller's tokio runtime.
pub fn client(relay: &RelayHandle, key: &str, fdv2: bool) -> Client {
    let url = relay.server().url();
    let mut events = flagsync::events::EventsOptions::default();
    events.events_uri = Some(url.clone());
    events.flush_interval = Duration::from_millis(100);
    let rt = flagsync::runtime::TokioRuntime::try_current().expect("inside a tokio runtime");
    let mut b = Client::builder(key)
        .stream_uri(url.clone())
        .polling_uri(url)
        .events(events)
        .runtime(Arc::new(rt))
        .no_proxy();
    if fdv2 {
        b = b.fdv2(Fdv2Config::default());
    }
    b.build().expect("client")
}

/// A started client of the relay, initialized.
pub async fn started_client(relay: &RelayHandle, key: &str, fdv2: bool) -> Client {
    let c = client(relay, key, fdv2);
    c.start().expect("started");
    assert!(
        c.wait_for_initialization(Duration::from_secs(10)).await,
        "the client never got the relay's data (fdv2 {fdv2})"
    );
    c
}

/// Wait (up to `timeout`) until `ok`; fails the test naming `what` otherwise.
pub async fn eventually(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// As [`eventually`], blocking the thread.
pub fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The value of flag `f` for a user, as `c` evaluates it.
pub fn f(c: &Client) -> Value {
    c.json_variation("f", &user("u"), Value::Null)
}
