//! Issue 33: an FDv2 payload that never completes is bounded by
//! [`crate::fdv2::PayloadLimits`] under virtual time, on a stream (`xfer-full` and
//! `xfer-changes`) and in a poll response: past the limit the partial payload is
//! dropped, the status reports INVALID_DATA naming the limit, the stream reconnects
//! with backoff, and the store keeps what it had.

use super::*;
use crate::config::{Fdv2Config, SourceSpec};
use crate::fdv2::{self, PayloadLimits};
use crate::status::{Cause, ErrorKind, State};
use crate::testing::{End, Reply, Response};

const STREAM: &str = "/sdk/stream";
const POLL: &str = "/sdk/poll";

fn sse(name: &str, data: &str) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn intent(code: &str) -> String {
    sse(
        "server-intent",
        &format!(r#"{{"payloads":[{{"id":"p","target":1,"intentCode":"{code}"}}]}}"#),
    )
}

fn put_data(key: &str, version: u64) -> String {
    format!(
        r#"{{"version":{version},"kind":"flag","key":"{key}","object":{}}}"#,
        flag_json(key, version)
    )
}

fn transferred(state: &str) -> String {
    sse(
        "payload-transferred",
        &format!(r#"{{"state":"{state}","version":1}}"#),
    )
}

fn full(flags: &[(&str, u64)], state: &str) -> String {
    let mut s = intent("xfer-full");
    for (k, v) in flags {
        s.push_str(&sse("put-object", &put_data(k, *v)));
    }
    s + &transferred(state)
}

/// 16 KiB of raw JSON and keys, 1,000 objects.
fn small() -> PayloadLimits {
    PayloadLimits {
        max_bytes: 16 << 10,
        max_objects: 1_000,
    }
}

fn limited(fdv2: Fdv2Config, limits: PayloadLimits) -> Harness {
    let mut c = config(Mode::Fdv2);
    c.fdv2 = fdv2;
    c.limits.fdv2_payload = limits;
    harness(c)
}

/// `code`, then put-objects with distinct keys every 10 ms, 20 at a time, for 100
/// rounds (2,000 objects of about 80 bytes: ten times the limit), and never a
/// `payload-transferred`.
fn endless(code: &str, first: Duration) -> Response {
    let mut r = Response::sse("", End::Hang).then(first, &intent(code));
    for round in 0..100 {
        let chunk: String = (0..20)
            .map(|i| sse("put-object", &put_data(&format!("x{round:03}-{i:02}"), 1)))
            .collect();
        r = r.then(ms(10), &chunk);
    }
    r
}

fn flags(h: &Harness) -> Vec<(String, u64)> {
    items(h, Kind::Flag)
}

fn kv(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// The last error of a status: its kind and cause.
type LastError = Option<(ErrorKind, Cause)>;

/// Every status change: (virtual time, state, the last error).
fn transcript(h: &Harness) -> Vec<(Duration, State, LastError)> {
    h.events
        .iter()
        .filter_map(|(t, e)| match e {
            crate::Event::StatusChanged(s) => Some((
                *t,
                s.state,
                s.error.as_ref().map(|e| (e.kind, e.cause.clone())),
            )),
            _ => None,
        })
        .collect()
}

fn too_large(limit: usize) -> LastError {
    Some((
        ErrorKind::InvalidData,
        Cause::Fdv2(fdv2::Error::PayloadTooLarge { limit }),
    ))
}

#[test]
fn endless_full_transfer_is_dropped_reported_and_retried_with_backoff() {
    let mut h = limited(
        Fdv2Config::custom().synchronizers([SourceSpec::streaming()]),
        small(),
    );
    // A good payload, then at 1 s a full transfer that never ends.
    let good = full(&[("a", 1), ("b", 1)], "s1");
    let mut first = endless("xfer-full", secs(1));
    first
        .chunks
        .insert(0, (Duration::ZERO, good.into_bytes().into()));
    h.reply_to(STREAM, Reply::Respond(first));
    // The reconnect (with basis s1) gets the same again; the next one a good payload.
    h.reply_to(STREAM, Reply::Respond(endless("xfer-full", Duration::ZERO)));
    h.reply_to(STREAM, stream(&full(&[("c", 2)], "s3")));
    h.start(ms(1500));

    let limit = small().max_bytes;
    let t = transcript(&h);
    assert_eq!(t.len(), 2, "{t:?}");
    assert_eq!((t[0].1, &t[0].2), (State::Valid, &None));
    assert_eq!((t[1].1, &t[1].2), (State::Interrupted, &too_large(limit)));
    // Cut off about 16 KiB in (~200 objects of ~84 bytes: ten rounds of 10 ms), not
    // after the 2,000 objects the server would send.
    let failed_at = t[1].0;
    assert!(failed_at > secs(1) && failed_at < ms(1150), "{failed_at:?}");
    // The connection was closed; the store keeps the committed payload.
    assert!(!h.closed.is_empty());
    assert_eq!(flags(&h), kv(&[("a", 1), ("b", 1)]));
    assert_eq!(h.system.store().selector().state, "s1");
    assert_eq!(h.system.status().state, State::Interrupted);

    // The reconnect waits for the backoff (1 s, jittered down to no less than half).
    h.run_until(secs(6));
    let reqs = h.requests_to(STREAM);
    assert!(reqs.len() >= 3, "{} requests", reqs.len());
    assert!(reqs[1].at >= failed_at + ms(500), "{:?}", reqs[1].at);
    assert_eq!(reqs[1].query("basis"), Some("s1"));
    assert_eq!(reqs[2].query("basis"), Some("s1"));
    // The second endless transfer failed the same way, the third payload applied.
    let t = transcript(&h);
    let states: Vec<State> = t.iter().map(|s| s.1).collect();
    assert_eq!(
        states,
        [
            State::Valid,
            State::Interrupted,
            State::Interrupted,
            State::Valid
        ]
    );
    assert_eq!(t[2].2, too_large(limit));
    assert!(reqs[2].at >= t[2].0 + ms(500));
    assert_eq!(flags(&h), kv(&[("c", 2)]));
    assert_eq!(h.system.store().selector().state, "s3");
}

#[test]
fn endless_changes_transfer_is_bounded_too() {
    let mut h = limited(
        Fdv2Config::custom().synchronizers([SourceSpec::streaming()]),
        small(),
    );
    let good = full(&[("a", 1)], "s1");
    let mut first = endless("xfer-changes", secs(1));
    first
        .chunks
        .insert(0, (Duration::ZERO, good.into_bytes().into()));
    h.reply_to(STREAM, Reply::Respond(first));
    h.start(secs(2));
    let t = transcript(&h);
    let states: Vec<State> = t.iter().map(|s| s.1).collect();
    assert_eq!(states, [State::Valid, State::Interrupted]);
    assert_eq!(t[1].2, too_large(small().max_bytes));
    assert_eq!(flags(&h), kv(&[("a", 1)]));
    assert_eq!(h.requests_to(STREAM).len(), 2);
}

#[test]
fn object_bound_applies_to_tiny_objects() {
    // Small objects stay far below the byte bound; the object bound stops them.
    let limits = PayloadLimits {
        max_bytes: 1 << 20,
        max_objects: 50,
    };
    let mut h = limited(
        Fdv2Config::custom().synchronizers([SourceSpec::streaming()]),
        limits,
    );
    let mut body = full(&[("a", 1)], "s1") + &intent("xfer-full");
    for i in 0..60 {
        body.push_str(&sse(
            "delete-object",
            &format!(r#"{{"version":1,"kind":"segment","key":"s{i}"}}"#),
        ));
    }
    h.reply_to(STREAM, stream(&body));
    h.start(ms(100));
    let t = transcript(&h);
    assert_eq!(t.len(), 2, "{t:?}");
    assert_eq!(
        t[1].2,
        Some((
            ErrorKind::InvalidData,
            Cause::Fdv2(fdv2::Error::TooManyObjects { limit: 50 })
        ))
    );
    assert_eq!(flags(&h), kv(&[("a", 1)]));
}

fn poll_body(flags: &[String], state: Option<&str>) -> String {
    let mut events = vec![
        r#"{"event":"server-intent","data":{"payloads":[{"intentCode":"xfer-full"}]}}"#.to_owned(),
    ];
    for k in flags {
        events.push(format!(
            r#"{{"event":"put-object","data":{}}}"#,
            put_data(k, 1)
        ));
    }
    if let Some(state) = state {
        events.push(format!(
            r#"{{"event":"payload-transferred","data":{{"state":"{state}","version":1}}}}"#
        ));
    }
    format!(r#"{{"events":[{}]}}"#, events.join(","))
}

fn json(body: &str) -> Reply {
    Reply::Respond(Response::status(200, body).header("Content-Type", "application/json"))
}

#[test]
fn poll_response_past_the_limit_keeps_the_store_and_polls_again() {
    let cfg = Fdv2Config::custom().synchronizers([SourceSpec::Polling {
        base_uri: None,
        interval: Some(secs(5)),
    }]);
    let mut c = config(Mode::Fdv2);
    c.fdv2 = cfg;
    c.min_poll_interval = secs(5);
    c.limits.fdv2_payload = small();
    let mut h = harness(c);
    h.reply_to(POLL, json(&poll_body(&["a".into()], Some("s1"))));
    // 400 objects of ~84 bytes (twice the limit), and complete: the limit still holds,
    // as it would for the same events on a stream.
    let many: Vec<String> = (0..400).map(|i| format!("x{i:03}")).collect();
    h.reply_to(POLL, json(&poll_body(&many, Some("s2"))));
    h.reply_to(POLL, json(&poll_body(&["b".into()], Some("s3"))));
    h.start(secs(6));
    let t = transcript(&h);
    let states: Vec<State> = t.iter().map(|s| s.1).collect();
    assert_eq!(states, [State::Valid, State::Interrupted]);
    assert_eq!(t[1].2, too_large(small().max_bytes));
    assert_eq!(flags(&h), kv(&[("a", 1)]));
    assert_eq!(h.system.store().selector().state, "s1");
    // The next poll comes at the interval and succeeds.
    h.run_until(secs(11));
    assert_eq!(h.requests_to(POLL).len(), 3);
    assert_eq!(h.system.status().state, State::Valid);
    assert_eq!(flags(&h), kv(&[("b", 1)]));
}

#[test]
fn default_limit_is_the_fdv1_put_limit() {
    let c = Config::new("k");
    assert_eq!(c.limits.fdv2_payload.max_bytes, c.limits.sse.max_event_len);
    assert_eq!(c.limits.fdv2_payload.max_bytes, 64 << 20);
}
