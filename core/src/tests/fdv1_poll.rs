use std::io::Write;

use bytes::Bytes;

use super::*;
use crate::source::UnrecoverablePolicy;
use crate::status::{ErrorKind, State};
use crate::testing::{Reply, Response};

fn ok(body: &str, etag: Option<&str>) -> Reply {
    let mut r = Response::status(200, body).header("Content-Type", "application/json");
    if let Some(e) = etag {
        r = r.header("ETag", e);
    }
    Reply::Respond(r)
}

#[test]
fn polls_at_once_then_at_a_fixed_rate_of_at_least_thirty_seconds() {
    let mut c = config(Mode::Polling);
    c.poll_interval = secs(5);
    let mut h = harness(c);
    for v in 1..=4 {
        h.reply(ok(&all_data(&[("a", v)], &[]), None));
    }
    h.start(secs(95));
    let at: Vec<_> = h.requests.iter().map(|r| r.at).collect();
    assert_eq!(at, [secs(0), secs(30), secs(60), secs(90)]);
    let r = &h.requests[0];
    assert_eq!(r.line, "GET /sdk/latest-all HTTP/1.1");
    assert_eq!(r.header("Accept-Encoding"), Some("gzip"));
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    assert_eq!(r.header("Authorization"), Some("sdk-test-key"));
    assert_eq!(items(&h, Kind::Flag), [("a".into(), 4)]);
    assert_eq!(h.system.status().state, State::Valid);
}

#[test]
fn longer_interval_is_respected() {
    let mut c = config(Mode::Polling);
    c.poll_interval = secs(45);
    let mut h = harness(c);
    h.reply(ok(&all_data(&[], &[]), None))
        .reply(ok(&all_data(&[], &[]), None));
    h.start(secs(50));
    assert_eq!(h.requests[1].at, secs(45));
}

#[test]
fn etag_is_sent_back_and_304_keeps_the_data() {
    let mut h = harness(config(Mode::Polling));
    h.reply(ok(&all_data(&[("a", 1)], &[]), Some("\"v1\"")));
    h.reply(Reply::Respond(Response::status(304, "")));
    h.reply(ok(&all_data(&[("a", 2)], &[]), None));
    h.reply(ok(&all_data(&[("a", 3)], &[]), None));
    h.start(secs(95));
    assert_eq!(h.requests[0].header("If-None-Match"), None);
    assert_eq!(h.requests[1].header("If-None-Match"), Some("\"v1\""));
    assert_eq!(h.requests[2].header("If-None-Match"), Some("\"v1\""));
    // A 200 without an ETag drops the cached one (PROTOCOL.md A.4.7).
    assert_eq!(h.requests[3].header("If-None-Match"), None);
    assert_eq!(items(&h, Kind::Flag), [("a".into(), 3)]);
}

/// A 304 answers a conditional request only: with no ETag held (no `If-None-Match`
/// sent) there is nothing to reuse, so it is an error, not data (PROTOCOL.md B §2.2),
/// and the poll is retried at the interval.
#[test]
fn not_modified_without_if_none_match_is_an_error_not_data() {
    let mut h = harness(config(Mode::Polling));
    h.reply(Reply::Respond(Response::status(304, "")));
    h.reply(ok(&all_data(&[("a", 1)], &[]), None));
    h.start(secs(1));
    assert_eq!(h.requests[0].header("If-None-Match"), None);
    let status = h.system.status();
    assert_eq!(status.state, State::Initializing);
    let error = status.error.as_ref().expect("an error is reported");
    assert_eq!((error.kind, error.status_code), (ErrorKind::Unknown, 0));
    assert!(!h.system.initialized());
    assert!(!h.events.iter().any(|(_, e)| *e == crate::Event::Ready));
    h.run_until(secs(31));
    assert_eq!(h.requests.len(), 2);
    assert_eq!(h.requests[1].at, secs(30));
    assert_eq!(h.system.status().state, State::Valid);
    assert!(h.system.initialized());
}

#[test]
fn gzip_bodies_are_decoded() {
    let body = all_data(&[("z", 7)], &[]);
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(body.as_bytes()).unwrap();
    let gz = enc.finish().unwrap();
    let mut r = Response::status(200, "").header("Content-Encoding", "gzip");
    r.headers[0].1 = gz.len().to_string();
    r.chunks = vec![(Duration::ZERO, Bytes::from(gz))];
    let mut h = harness(config(Mode::Polling));
    h.reply(Reply::Respond(r));
    h.start(secs(1));
    assert_eq!(items(&h, Kind::Flag), [("z".into(), 7)]);
}

#[test]
fn recoverable_errors_keep_polling_at_the_interval() {
    for code in [408, 429, 500, 503] {
        let mut h = harness(config(Mode::Polling));
        h.reply(Reply::Respond(Response::status(code, "")));
        h.reply(Reply::Respond(Response::status(code, "")));
        h.reply(ok(&all_data(&[], &[]), None));
        h.start(secs(61));
        assert_eq!(h.requests.len(), 3);
        let st = h.statuses();
        assert!(st[..2].iter().all(|s| s.state == State::Initializing
            && s.error.as_ref().map(|e| (e.kind, e.status_code))
                == Some((ErrorKind::ErrorResponse, code))));
        assert_eq!(st[2].state, State::Valid);
    }
}

#[test]
fn unrecoverable_error_stops_polling_under_the_legacy_policy() {
    for code in [401, 403] {
        let mut c = config(Mode::Polling);
        c.unrecoverable = UnrecoverablePolicy::Stop;
        let mut h = harness(c);
        h.reply(Reply::Respond(Response::status(code, "")));
        h.start(secs(600));
        assert_eq!(h.requests.len(), 1);
        assert_eq!(h.system.status().state, State::Off);
        assert!(h.events.iter().any(|(_, e)| *e == crate::Event::Ready));
    }
}

#[test]
fn unrecoverable_error_waits_five_minutes_under_retry_then_returns_to_the_interval() {
    let mut h = harness(config(Mode::Polling));
    h.reply(Reply::Respond(Response::status(401, "")));
    for _ in 0..3 {
        h.reply(ok(&all_data(&[], &[]), None));
    }
    h.start(secs(400));
    assert_eq!(h.requests[1].at, secs(300));
    assert_eq!(h.requests[2].at, secs(330));
    assert_eq!(h.requests[3].at, secs(360));
}

#[test]
fn bad_payloads_are_reported_and_polling_continues() {
    let mut h = harness(config(Mode::Polling));
    h.reply(ok("{sorry", None));
    h.reply(ok("{\"flags\":{}}", None));
    h.reply(ok(&all_data(&[("a", 1)], &[]), None));
    h.start(secs(61));
    let kinds: Vec<_> = h
        .statuses()
        .iter()
        .map(|s| s.error.as_ref().map(|e| e.kind))
        .collect();
    assert_eq!(
        kinds[..2],
        [Some(ErrorKind::InvalidData), Some(ErrorKind::Unknown)]
    );
    assert!(h.system.initialized());
}

#[test]
fn network_failures_and_timeouts_are_interrupted_network_errors() {
    let mut h = harness(config(Mode::Polling));
    h.reply(ok(&all_data(&[], &[]), None));
    h.reply(Reply::Refuse);
    h.reply(Reply::Hang);
    h.start(secs(71));
    let st = h.statuses();
    assert_eq!(st[1].state, State::Interrupted);
    assert_eq!(st[1].error.as_ref().unwrap().kind, ErrorKind::NetworkError);
    assert_eq!(
        st[2].error.as_ref().unwrap().cause,
        crate::status::Cause::ConnectTimeout
    );
    assert_eq!(h.open_connections(), 0);
}

#[test]
fn every_poll_connection_is_closed() {
    let mut h = harness(config(Mode::Polling));
    for _ in 0..3 {
        h.reply(ok(&all_data(&[], &[]), None));
    }
    h.start(secs(61));
    assert_eq!(h.closed.len(), 3);
    assert_eq!(h.open_connections(), 0);
}

#[test]
fn a_poll_that_overruns_its_interval_is_followed_at_once() {
    let mut c = config(Mode::Polling);
    c.poll_interval = secs(5);
    c.min_poll_interval = secs(5);
    let mut h = harness(c);
    h.reply(Reply::Hang);
    h.reply(ok(&all_data(&[], &[]), None));
    h.start(secs(12));
    let at: Vec<_> = h.requests.iter().map(|r| r.at).collect();
    assert_eq!(
        at,
        [secs(0), secs(10)],
        "the connect timeout ends the first poll at 10 s"
    );
    assert!(h.system.initialized());
}
