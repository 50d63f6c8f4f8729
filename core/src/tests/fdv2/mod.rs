//! The FDv2 data system under virtual time: PROTOCOL.md C.2 (FDv2 rows), Part E 28–38,
//! the B §5.7 coordinator table and the A.4.6 fixes; one file per topic, the helpers they
//! share here.

use super::*;
use crate::config::{CoordinatorTiming, Fdv2Config, SourceSpec};
use crate::status::{ErrorKind, State};
use crate::store::Selector;
use crate::testing::{End, Reply, Response};
use crate::{Command, DataAvailability, Event, Input};

mod doubtful;
mod fallback;
mod fallback_directive;
mod initializers;
mod lifecycle;
mod polling;
mod retry;
mod streaming;

const STREAM: &str = "/sdk/stream";
const POLL: &str = "/sdk/poll";
const FDV1_POLL: &str = "/sdk/latest-all";

fn fdv2_config(fdv2: Fdv2Config) -> Config {
    let mut c = config(Mode::Fdv2);
    c.fdv2 = fdv2;
    c
}

fn fdv2(fdv2: Fdv2Config) -> Harness {
    harness(fdv2_config(fdv2))
}

fn sse(name: &str, data: &str) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn intent(code: &str) -> String {
    sse(
        "server-intent",
        &format!(r#"{{"payloads":[{{"id":"p1","target":1,"intentCode":"{code}","reason":"r"}}]}}"#),
    )
}

fn put_flag(key: &str, version: u64) -> String {
    sse(
        "put-object",
        &format!(
            r#"{{"version":{version},"kind":"flag","key":"{key}","object":{}}}"#,
            flag_json(key, version)
        ),
    )
}

fn put_segment(key: &str, version: u64) -> String {
    sse(
        "put-object",
        &format!(
            r#"{{"version":{version},"kind":"segment","key":"{key}","object":{{"key":"{key}","version":{version}}}}}"#
        ),
    )
}

fn delete_flag(key: &str, version: u64) -> String {
    sse(
        "delete-object",
        &format!(r#"{{"version":{version},"kind":"flag","key":"{key}"}}"#),
    )
}

fn transferred(state: &str, version: u64) -> String {
    sse(
        "payload-transferred",
        &format!(r#"{{"state":"{state}","version":{version}}}"#),
    )
}

/// A full payload of `flags` with selector `state`.
fn full(flags: &[(&str, u64)], state: &str) -> String {
    let mut s = intent("xfer-full");
    for (k, v) in flags {
        s.push_str(&put_flag(k, *v));
    }
    s.push_str(&transferred(state, 1));
    s
}

/// The events of `stream_body` as a polling response body.
fn poll_body(events: &[(&str, String)]) -> String {
    let e: Vec<String> = events
        .iter()
        .map(|(n, d)| format!(r#"{{"event":"{n}","data":{d}}}"#))
        .collect();
    format!(r#"{{"events":[{}]}}"#, e.join(","))
}

fn poll_full(flags: &[(&str, u64)], state: &str) -> String {
    let mut events = vec![(
        "server-intent",
        r#"{"payloads":[{"intentCode":"xfer-full"}]}"#.to_owned(),
    )];
    for (k, v) in flags {
        events.push((
            "put-object",
            format!(
                r#"{{"version":{v},"kind":"flag","key":"{k}","object":{}}}"#,
                flag_json(k, *v)
            ),
        ));
    }
    events.push((
        "payload-transferred",
        format!(r#"{{"state":"{state}","version":1}}"#),
    ));
    poll_body(&events)
}

fn json(status: u16, body: &str) -> Reply {
    Reply::Respond(Response::status(status, body).header("Content-Type", "application/json"))
}

fn flags(h: &Harness) -> Vec<(String, u64)> {
    items(h, Kind::Flag)
}

fn kv(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

fn states(h: &Harness) -> Vec<State> {
    h.statuses().iter().map(|s| s.state).collect()
}

fn ready_at(h: &Harness) -> Option<Duration> {
    h.events
        .iter()
        .find(|(_, e)| *e == Event::Ready)
        .map(|(t, _)| *t)
}

/// Streaming alone, no FDv1 fallback.
fn stream_only() -> Fdv2Config {
    Fdv2Config::custom().synchronizers([SourceSpec::streaming()])
}

/// A streaming primary and a polling secondary.
fn two_synchronizers() -> Fdv2Config {
    Fdv2Config::custom().synchronizers([
        SourceSpec::streaming(),
        SourceSpec::Polling {
            base_uri: None,
            interval: Some(secs(30)),
        },
    ])
}
