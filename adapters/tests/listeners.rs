//! Flag value-change listeners (`Client::flag_value_changes`) on every runtime feature:
//! a change is reported only when the value the context gets changes, with the old and
//! new values; other flags, other contexts' targets and version bumps that keep the value
//! report nothing; the stream ends when the client closes.
#![cfg(feature = "eval")]
#![cfg_attr(
    not(any(feature = "tokio", feature = "smol", feature = "async-std")),
    allow(dead_code, unused_imports)
)]

#[macro_use]
mod common;

use std::time::Duration;

use common::*;
use flagsync::FlagValueChange;
use flagsync::eval::{Context, ContextBuilder};
use serde_json::{Value, json};

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    value_changes_only_when_the_value_changes,
    each_context_sees_its_own_value,
);

const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n";

/// Flag `key` at `version`: `"on"` when on, `"off"` when off; `targets` get `"target"`.
fn flag(key: &str, version: u64, on: bool, targets: &[&str]) -> Value {
    json!({"key": key, "version": version, "on": on, "salt": "salt",
        "targets": [{"values": targets, "variation": 2}], "contextTargets": [],
        "rules": [], "prerequisites": [], "fallthrough": {"variation": 0}, "offVariation": 1,
        "variations": ["on", "off", "target"], "trackEvents": false})
}

fn put(flags: &[Value]) -> String {
    let flags: serde_json::Map<String, Value> = flags
        .iter()
        .map(|f| (f["key"].as_str().unwrap().to_owned(), f.clone()))
        .collect();
    let data = json!({"path": "/", "data": {"flags": flags, "segments": {}}});
    format!("event: put\ndata: {data}\n\n")
}

fn patch(flag: Value) -> String {
    let key = flag["key"].as_str().unwrap().to_owned();
    let data = json!({"path": format!("/flags/{key}"), "data": flag});
    format!("event: patch\ndata: {data}\n\n")
}

fn user(key: &str) -> Context {
    ContextBuilder::new(key).build().unwrap()
}

/// A change of flag `f` from `old` to `new`, as comparable values.
fn change(old: &str, new: &str) -> Option<(String, Value, Value)> {
    Some(("f".to_owned(), json!(old), json!(new)))
}

/// What `c` says, as comparable values.
fn seen(c: Option<Option<FlagValueChange>>) -> Option<(String, Value, Value)> {
    c.flatten().map(|c| (c.key, c.old_value, c.new_value))
}

async fn value_changes_only_when_the_value_changes(rt: Rt) {
    let server = Server::start(|_, r| {
        r.send(SSE_HEAD);
        r.send(put(&[flag("f", 1, true, &[]), flag("g", 1, true, &[])]));
        r.pause(300);
        // The value moves to "off".
        r.send(patch(flag("f", 2, false, &[])));
        // (Changes are evaluated when read: give the reader time to read this one.)
        r.pause(300);
        // A new version with the same value, and another flag: nothing.
        r.send(patch(flag("f", 3, false, &["someone-else"])));
        r.send(patch(flag("g", 2, false, &[])));
        // Back to "on".
        r.send(patch(flag("f", 4, true, &[])));
        After::Hold
    });
    let client = builder(&rt, &server.url()).build().unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    let mut changes = client.flag_value_changes("f", &user("u"), json!("default"));
    assert_eq!(changes.key(), "f");
    let first = seen(timeout(&rt, 5 * SEC, changes.recv()).await);
    assert_eq!(first, change("on", "off"));
    let second = seen(timeout(&rt, 5 * SEC, changes.recv()).await);
    assert_eq!(second, change("off", "on"));
    // Every patch has arrived (the flag is at version 4): nothing else is pending.
    assert_eq!(client.flag("f").unwrap().version, 4);
    assert_eq!(client.flag("g").unwrap().version, 2);
    assert!(changes.try_recv().is_none());
    client.close().await;
    assert!(matches!(
        timeout(&rt, 5 * SEC, changes.recv()).await,
        Some(None)
    ));
}

async fn each_context_sees_its_own_value(rt: Rt) {
    let server = Server::start(|_, r| {
        r.send(SSE_HEAD);
        r.send(put(&[flag("f", 1, true, &[])]));
        r.pause(300);
        // Target "t": only its value changes.
        r.send(patch(flag("f", 2, true, &["t"])));
        After::Hold
    });
    let client = builder(&rt, &server.url()).build().unwrap();
    // Made before the client has data: the first value is the default.
    let mut early = client.flag_value_changes("f", &user("t"), json!("default"));
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    let mut other = client.flag_value_changes("f", &user("u"), json!("default"));
    let mut targeted = client.flag_value_changes("f", &user("t"), json!("x"));
    let early_first = seen(timeout(&rt, 5 * SEC, early.recv()).await);
    assert_eq!(early_first, change("default", "on"));
    let early_second = seen(timeout(&rt, 5 * SEC, early.recv()).await);
    assert_eq!(early_second, change("on", "target"));
    let got = seen(timeout(&rt, 5 * SEC, targeted.recv()).await);
    assert_eq!(got, change("on", "target"));
    assert_eq!(client.flag("f").unwrap().version, 2);
    assert!(other.try_recv().is_none());
    client.close().await;
    assert!(matches!(
        timeout(&rt, 5 * SEC, other.recv()).await,
        Some(None)
    ));
}
