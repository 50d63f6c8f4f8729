//! The FDv2 data system under virtual time: PROTOCOL.md C.2 (FDv2 rows), Part E 28–38,
//! the B §5.7 coordinator table and the A.4.6 fixes.

use super::*;
use crate::config::{CoordinatorTiming, Fdv2Config, SourceSpec};
use crate::status::{ErrorKind, State};
use crate::store::Selector;
use crate::testing::{End, Reply, Response};
use crate::{Command, DataAvailability, Event, Input};

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

// ---- streaming synchronizer ----------------------------------------------------

#[test]
fn stream_request_shape_and_first_connect_without_basis() {
    let mut c = fdv2_config(Fdv2Config::streaming());
    c.payload_filter = Some("mine".into());
    let mut h = harness(c);
    h.start(ms(1));
    let r = &h.requests[0];
    assert_eq!(r.line, "GET /sdk/stream?filter=mine HTTP/1.1");
    assert_eq!(r.header("Authorization"), Some("sdk-test-key"));
    assert_eq!(r.header("Accept"), Some("text/event-stream"));
    assert_eq!(r.query("basis"), None);
    assert_eq!(h.system.active_source(), Some("streaming"));
}

#[test]
fn nothing_is_visible_before_payload_transferred() {
    let mut h = fdv2(stream_only());
    let first = intent("xfer-full") + &put_flag("a", 1) + &delete_flag("b", 2);
    h.reply_to(
        STREAM,
        Reply::Respond(Response::sse(&first, End::Hang).then(secs(1), &transferred("s1", 1))),
    );
    h.start(ms(500));
    assert!(flags(&h).is_empty());
    assert!(!h.system.initialized());
    assert_eq!(h.system.data_availability(), DataAvailability::Defaults);
    assert_eq!(h.system.status().state, State::Initializing);
    h.run_until(ms(1500));
    assert_eq!(flags(&h), kv(&[("a", 1)]));
    assert_eq!(h.system.status().state, State::Valid);
    assert_eq!(h.system.data_availability(), DataAvailability::Refreshed);
    assert_eq!(h.system.store().selector().state, "s1");
    // The delete left a tombstone.
    assert!(
        h.system
            .store()
            .data()
            .get_including_deleted(Kind::Flag, "b")
            .is_some_and(|i| i.deleted)
    );
}

#[test]
fn put_before_any_intent_interrupts_and_reconnects() {
    let mut h = fdv2(stream_only());
    h.reply_to(STREAM, stream(&(put_flag("a", 1) + &transferred("s", 1))));
    h.reply_to(STREAM, stream(&full(&[("b", 1)], "s2")));
    h.start(secs(5));
    assert_eq!(h.requests_to(STREAM).len(), 2);
    assert_eq!(flags(&h), kv(&[("b", 1)]));
    assert_eq!(states(&h), [State::Initializing, State::Valid]);
    assert_eq!(
        h.statuses()[0].error.as_ref().unwrap().kind,
        ErrorKind::InvalidData
    );
}

#[test]
fn invalid_json_in_server_intent_is_invalid_data_then_restart() {
    let mut h = fdv2(stream_only());
    h.reply_to(STREAM, stream(&sse("server-intent", "{nope")));
    h.reply_to(STREAM, stream(&full(&[("a", 2)], "s")));
    h.start(secs(5));
    let st = h.statuses();
    assert_eq!(st[0].state, State::Initializing);
    assert_eq!(st[0].error.as_ref().unwrap().kind, ErrorKind::InvalidData);
    assert_eq!(h.system.status().state, State::Valid);
    assert_eq!(flags(&h), kv(&[("a", 2)]));
}

#[test]
fn second_full_transfer_replaces_and_changes_merge() {
    let mut h = fdv2(stream_only());
    let body = full(&[("a", 1), ("b", 1)], "s1");
    let changes = intent("xfer-changes") + &put_flag("c", 1) + &transferred("s2", 2);
    let replace = full(&[("c", 5)], "s3");
    h.reply_to(
        STREAM,
        Reply::Respond(
            Response::sse(&body, End::Hang)
                .then(secs(1), &changes)
                .then(secs(1), &replace),
        ),
    );
    h.start(ms(500));
    assert_eq!(flags(&h), kv(&[("a", 1), ("b", 1)]));
    h.run_until(ms(1500));
    assert_eq!(flags(&h), kv(&[("a", 1), ("b", 1), ("c", 1)]));
    assert_eq!(h.system.store().selector().state, "s2");
    h.run_until(ms(2500));
    assert_eq!(flags(&h), kv(&[("c", 5)]));
    assert_eq!(h.system.store().selector().state, "s3");
}

#[test]
fn later_payloads_on_one_connection_are_changes_even_after_xfer_full() {
    // B §5.3: after `finish`, a full intent becomes changes for the next payload.
    let mut h = fdv2(stream_only());
    let body = full(&[("a", 1), ("b", 1)], "s1") + &put_flag("c", 1) + &transferred("s2", 2);
    h.reply_to(STREAM, stream(&body));
    h.start(ms(500));
    assert_eq!(flags(&h), kv(&[("a", 1), ("b", 1), ("c", 1)]));
}

#[test]
fn segments_are_put_and_deleted_like_flags() {
    let mut h = fdv2(stream_only());
    let body = intent("xfer-full")
        + &put_segment("s1", 3)
        + &put_segment("s2", 1)
        + &transferred("a", 1)
        + &intent("xfer-changes")
        + &sse(
            "delete-object",
            r#"{"version":4,"kind":"segment","key":"s1"}"#,
        )
        + &transferred("b", 2);
    h.reply_to(STREAM, stream(&body));
    h.start(ms(500));
    assert_eq!(items(&h, Kind::Segment), kv(&[("s2", 1)]));
    let tomb = h
        .system
        .store()
        .data()
        .get_including_deleted(Kind::Segment, "s1")
        .cloned()
        .unwrap();
    assert!(tomb.deleted);
    assert_eq!(tomb.version, 4, "the tombstone takes the envelope version");
}

#[test]
fn intent_none_means_up_to_date() {
    let mut h = fdv2(stream_only());
    h.reply_to(
        STREAM,
        Reply::Respond(
            Response::sse(&full(&[("a", 1)], "s1"), End::Hang).then(secs(1), &intent("none")),
        ),
    );
    h.start(ms(500));
    let changes_before = h
        .events
        .iter()
        .filter(|(_, e)| matches!(e, Event::StoreChanged { .. }))
        .count();
    h.run_until(secs(2));
    let changes_after = h
        .events
        .iter()
        .filter(|(_, e)| matches!(e, Event::StoreChanged { .. }))
        .count();
    assert_eq!(changes_before, changes_after);
    assert_eq!(flags(&h), kv(&[("a", 1)]));
    assert_eq!(h.system.store().selector().state, "s1");
    assert_eq!(h.system.status().state, State::Valid);
}

#[test]
fn intent_none_first_makes_the_source_valid_without_data() {
    let mut h = fdv2(stream_only());
    h.reply_to(STREAM, stream(&intent("none")));
    h.start(ms(500));
    assert_eq!(h.system.status().state, State::Valid);
    assert!(h.system.ready());
    assert!(!h.system.initialized());
}

#[test]
fn model_versions_are_ignored_inside_payloads() {
    let mut h = fdv2(stream_only());
    let body = full(&[("a", 100)], "s1")
        + &intent("xfer-changes")
        + &put_flag("a", 1)
        + &transferred("s2", 2);
    h.reply_to(STREAM, stream(&body));
    h.start(ms(500));
    assert_eq!(flags(&h), kv(&[("a", 1)]));
}

#[test]
fn heartbeats_and_unknown_events_are_ignored_anywhere() {
    let mut h = fdv2(stream_only());
    let body = sse("heart-beat", "not json")
        + &sse("whatever", "{")
        + &intent("xfer-full")
        + &sse("heartbeat", "")
        + &put_flag("a", 1)
        + &sse("whatever", "not json")
        + &sse(
            "put-object",
            r#"{"version":1,"kind":"widget","key":"w","object":{}}"#,
        )
        + &transferred("s", 1);
    h.reply_to(STREAM, stream(&body));
    h.start(ms(500));
    assert_eq!(flags(&h), kv(&[("a", 1)]));
    assert_eq!(h.requests.len(), 1);
    assert!(h.statuses().iter().all(|s| s.error.is_none()));
}

#[test]
fn error_event_discards_the_partial_payload_and_the_stream_goes_on() {
    let mut h = fdv2(stream_only());
    let body = intent("xfer-full")
        + &put_flag("lost", 1)
        + &sse("error", r#"{"payloadId":"p1","reason":"oops"}"#)
        + &put_flag("kept", 1)
        + &transferred("s", 1);
    h.reply_to(STREAM, stream(&body));
    h.start(ms(500));
    assert_eq!(flags(&h), kv(&[("kept", 1)]));
    assert_eq!(h.requests.len(), 1);
}

#[test]
fn error_event_then_a_new_full_intent_replaces_the_store() {
    let mut h = fdv2(stream_only());
    let body = full(&[("old", 1)], "s1")
        + &intent("xfer-changes")
        + &put_flag("lost", 1)
        + &sse("error", r#"{"payloadId":"p2","reason":"oops"}"#)
        + &full(&[("new", 1)], "s3");
    h.reply_to(STREAM, stream(&body));
    h.start(ms(500));
    assert_eq!(flags(&h), kv(&[("new", 1)]));
}

#[test]
fn goodbye_disconnects_discards_and_reconnects_with_basis() {
    let mut h = fdv2(stream_only());
    let body = full(&[("a", 1)], "state-1")
        + &intent("xfer-changes")
        + &put_flag("uncommitted", 1)
        + &sse("goodbye", r#"{"reason":"bye"}"#);
    h.reply_to(STREAM, stream(&body));
    h.reply_to(
        STREAM,
        stream(&(intent("xfer-changes") + &put_flag("b", 1) + &transferred("state-2", 2))),
    );
    h.start(secs(5));
    let reqs = h.requests_to(STREAM);
    assert_eq!(reqs.len(), 2);
    assert_eq!(h.closed[0], reqs[0].conn, "the client closes on goodbye");
    assert_eq!(reqs[0].query("basis"), None);
    assert_eq!(reqs[1].query("basis"), Some("state-1"));
    assert_eq!(flags(&h), kv(&[("a", 1), ("b", 1)]));
    // A goodbye is not a failure.
    assert!(h.statuses().iter().all(|s| s.error.is_none()));
}

/// A `goodbye` announces the close, so the close is reported the same way whether it
/// arrives after the goodbye (its own input, for a connection the source has already
/// closed) or with it (the body ends in the same read): nothing but the VALID of the
/// payload, and the same reconnect with the basis (PROTOCOL.md A.3).
#[test]
fn goodbye_reports_the_same_whether_the_close_comes_after_it_or_with_it() {
    use crate::{CloseCause, IoCause};
    let events = full(&[("a", 1)], "state-1")
        + &intent("xfer-changes")
        + &put_flag("uncommitted", 1)
        + &sse("goodbye", r#"{"reason":"bye"}"#);
    let chunked = |body: String| {
        let mut r = Response::sse("", End::Hang).header("Transfer-Encoding", "chunked");
        r.chunks = vec![(Duration::ZERO, bytes::Bytes::from(body))];
        Reply::Respond(r)
    };
    let framed = format!("{:x}\r\n{events}\r\n", events.len());
    let reset = CloseCause::Io(IoCause {
        kind: std::io::ErrorKind::ConnectionReset,
        message: "connection reset".into(),
    });
    let hanging = || Reply::Respond(Response::sse(&events, End::Hang));
    let cases = [
        // The close arrives as its own input after the goodbye.
        ("eof after", hanging(), Some(CloseCause::Eof)),
        ("reset after", hanging(), Some(reset)),
        // The body ends in the same read as the goodbye.
        (
            "end of chunked body with it",
            chunked(format!("{framed}0\r\n\r\n")),
            None,
        ),
        (
            "bad chunk framing with it",
            chunked(format!("{framed}zz\r\n")),
            None,
        ),
        (
            "end of content-length body with it",
            Reply::Respond(
                Response::sse(&events, End::Hang)
                    .header("Content-Length", &events.len().to_string()),
            ),
            None,
        ),
    ];
    let mut runs = Vec::new();
    for (name, reply, close_after) in cases {
        let mut h = fdv2(stream_only());
        h.reply_to(STREAM, reply);
        h.reply_to(STREAM, stream(&intent("none")));
        h.start(ms(100));
        assert_eq!(
            h.closed.len(),
            1,
            "{name}: the goodbye closed the connection"
        );
        if let Some(cause) = close_after {
            let conn = h.requests_to(STREAM)[0].conn;
            h.input(Input::Closed { conn, cause });
        }
        h.run_until(secs(5));
        let statuses: Vec<_> = h
            .statuses()
            .iter()
            .map(|s| (s.state, s.error.as_ref().map(|e| e.kind)))
            .collect();
        let reqs: Vec<_> = h
            .requests_to(STREAM)
            .iter()
            .map(|r| (r.at, r.target().to_owned()))
            .collect();
        assert_eq!(flags(&h), kv(&[("a", 1)]), "{name}");
        runs.push((name, statuses, reqs));
    }
    let (_, statuses, reqs) = &runs[0];
    assert_eq!(*statuses, [(State::Valid, None)]);
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].1, "/sdk/stream?basis=state-1");
    for (name, s, r) in &runs[1..] {
        assert_eq!((s, r), (statuses, reqs), "{name}");
    }
}

#[test]
fn reconnects_send_the_basis_of_the_last_payload() {
    let mut h = fdv2(stream_only());
    h.reply_to(
        STREAM,
        Reply::Respond(Response::sse(&full(&[("a", 1)], "abc/+ =x"), End::Close)),
    );
    h.reply_to(STREAM, Reply::Refuse);
    h.reply_to(STREAM, stream(""));
    h.start(secs(10));
    let reqs = h.requests_to(STREAM);
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[1].query("basis"), Some("abc%2F%2B+%3Dx"));
    assert_eq!(reqs[2].query("basis"), Some("abc%2F%2B+%3Dx"));
    // EOF after success interrupts (A.3).
    assert_eq!(
        states(&h),
        [State::Valid, State::Interrupted, State::Interrupted]
    );
}

#[test]
fn environment_id_is_recorded_only_with_valid_data() {
    let mut h = fdv2(stream_only());
    h.reply_to(
        STREAM,
        Reply::Respond(
            Response::sse(&sse("server-intent", "{bad"), End::Hang).header("X-LD-EnvID", "env-bad"),
        ),
    );
    h.reply_to(
        STREAM,
        Reply::Respond(
            Response::sse(&full(&[("a", 1)], "s"), End::Hang).header("X-LD-EnvID", "env-good"),
        ),
    );
    h.start(secs(3));
    let envs: Vec<&Event> = h
        .events
        .iter()
        .map(|(_, e)| e)
        .filter(|e| matches!(e, Event::EnvironmentId(_)))
        .collect();
    assert_eq!(envs, [&Event::EnvironmentId("env-good".into())]);
    assert_eq!(h.system.environment_id(), Some("env-good"));
}

// ---- polling -------------------------------------------------------------------

#[test]
fn polling_synchronizer_request_shape_basis_and_etag() {
    let mut c = fdv2_config(Fdv2Config::polling());
    c.payload_filter = Some("f".into());
    c.poll_interval = secs(30);
    let mut h = harness(c);
    h.reply_to(
        POLL,
        Reply::Respond(
            Response::status(200, &poll_full(&[("a", 1)], "s1"))
                .header("ETag", "\"e1\"")
                .header("Content-Type", "application/json"),
        ),
    );
    h.reply_to(POLL, json(304, ""));
    h.start(secs(31));
    let reqs = h.requests_to(POLL);
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].target(), "/sdk/poll?filter=f");
    assert_eq!(reqs[0].header("Accept-Encoding"), Some("gzip"));
    assert_eq!(reqs[1].target(), "/sdk/poll?filter=f&basis=s1");
    assert_eq!(reqs[1].header("If-None-Match"), Some("\"e1\""));
    assert_eq!(reqs[1].at, secs(30));
    assert_eq!(flags(&h), kv(&[("a", 1)]));
    assert_eq!(h.system.status().state, State::Valid);
    assert_eq!(h.system.store().selector().state, "s1");
}

/// An explicit FDv2 poll interval only raises the 30 s minimum (the v3 harness's
/// "polling interval below minimum is clamped"); one above it is kept.
#[test]
fn polling_synchronizer_interval_is_clamped_to_the_minimum() {
    for (asked, expected) in [(secs(1), secs(30)), (secs(45), secs(45))] {
        let cfg = Fdv2Config::custom().synchronizers([SourceSpec::Polling {
            base_uri: None,
            interval: Some(asked),
        }]);
        let mut h = fdv2(cfg);
        h.reply_to(POLL, json(200, &poll_full(&[("a", 1)], "s1")));
        h.reply_to(POLL, json(200, &poll_full(&[("a", 2)], "s2")));
        h.start(secs(100));
        let reqs = h.requests_to(POLL);
        assert!(reqs.len() >= 2, "{asked:?}: {} polls", reqs.len());
        assert_eq!(reqs[1].at - reqs[0].at, expected, "asked {asked:?}");
    }
}

#[test]
fn polling_synchronizer_network_error_interrupts_and_does_not_remove() {
    let cfg = Fdv2Config::custom().synchronizers([SourceSpec::Polling {
        base_uri: None,
        interval: Some(secs(5)),
    }]);
    let mut c = fdv2_config(cfg);
    c.min_poll_interval = secs(5);
    let mut h = harness(c);
    h.reply_to(POLL, json(200, &poll_full(&[("a", 1)], "s1")));
    h.reply_to(POLL, Reply::Refuse);
    h.reply_to(POLL, json(200, &poll_full(&[("a", 2)], "s2")));
    h.start(secs(11));
    assert_eq!(h.requests_to(POLL).len(), 3);
    assert_eq!(states(&h), [State::Valid, State::Interrupted, State::Valid]);
    assert_eq!(
        h.statuses()[1].error.as_ref().unwrap().kind,
        ErrorKind::NetworkError
    );
    assert_eq!(flags(&h), kv(&[("a", 2)]));
}

#[test]
fn invalid_polling_payload_is_invalid_data() {
    let cfg = Fdv2Config::custom().synchronizers([SourceSpec::Polling {
        base_uri: None,
        interval: Some(secs(5)),
    }]);
    let mut h = fdv2(cfg);
    h.reply_to(POLL, json(200, r#"{"events":[{"event":"put-object","data":{"version":1,"kind":"flag","key":"a","object":{}}}]}"#));
    h.start(secs(1));
    let st = h.statuses();
    assert_eq!(st[0].error.as_ref().unwrap().kind, ErrorKind::InvalidData);
    assert_eq!(h.requests_to(POLL).len(), 1);
}

// ---- initializers -------------------------------------------------------------

#[test]
fn polling_initializer_then_stream_with_its_basis() {
    let mut h = fdv2(Fdv2Config::default());
    h.reply_to(POLL, json(200, &poll_full(&[("a", 1)], "init-state")));
    h.reply_to(
        STREAM,
        stream(&(intent("xfer-changes") + &put_flag("b", 1) + &transferred("s2", 2))),
    );
    h.start(ms(100));
    assert_eq!(h.requests[0].path(), POLL);
    assert_eq!(h.requests[1].path(), STREAM);
    assert_eq!(h.requests[1].query("basis"), Some("init-state"));
    assert_eq!(flags(&h), kv(&[("a", 1), ("b", 1)]));
    // Ready as soon as the initializer gave a selector; the status waited for the
    // synchronizer.
    assert_eq!(ready_at(&h), Some(Duration::ZERO));
    assert_eq!(states(&h), [State::Valid]);
    assert_eq!(h.open_connections(), 1);
}

#[test]
fn initializer_alone_leaves_the_status_initializing() {
    let cfg = Fdv2Config::default(); // streaming synchronizer hangs
    let mut h = fdv2(cfg);
    h.reply_to(POLL, json(200, &poll_full(&[("a", 1)], "s")));
    h.start(secs(1));
    assert_eq!(h.system.status().state, State::Initializing);
    assert!(h.system.ready());
    assert_eq!(h.system.data_availability(), DataAvailability::Refreshed);
}

#[test]
fn failing_initializer_falls_through_to_the_next() {
    let cfg = Fdv2Config::custom()
        .initializers([
            SourceSpec::Polling {
                base_uri: Some("http://first.test".into()),
                interval: None,
            },
            SourceSpec::polling(),
        ])
        .synchronizers([SourceSpec::streaming()]);
    let mut h = fdv2(cfg);
    h.reply(json(401, "")); // the first initializer: refused for good
    h.reply(json(200, &poll_full(&[("a", 1)], "second")));
    h.reply(stream(""));
    h.start(secs(1));
    let hosts: Vec<(&str, &str)> = h
        .requests
        .iter()
        .map(|r| (r.host.as_str(), r.path()))
        .collect();
    assert_eq!(
        hosts,
        [
            ("first.test:80", POLL),
            ("poll.test:8031", POLL),
            ("stream.test:8030", STREAM)
        ]
    );
    assert_eq!(h.requests[2].query("basis"), Some("second"));
    assert_eq!(flags(&h), kv(&[("a", 1)]));
}

#[test]
fn an_initializer_without_selector_hands_over_to_the_next_and_keeps_its_data() {
    // An FDv1-shaped body is accepted (E 38) but has no selector: the next initializer
    // still runs.
    let cfg = Fdv2Config::custom()
        .initializers([SourceSpec::polling(), SourceSpec::polling()])
        .synchronizers([SourceSpec::streaming()]);
    let mut h = fdv2(cfg);
    h.reply_to(POLL, json(200, &all_data(&[("a", 1)], &[])));
    h.reply_to(POLL, Reply::Refuse);
    h.start(secs(1));
    assert_eq!(h.requests_to(POLL).len(), 2);
    assert_eq!(h.requests_to(STREAM).len(), 1);
    assert_eq!(flags(&h), kv(&[("a", 1)]));
    assert_eq!(h.system.data_availability(), DataAvailability::Cached);
    assert!(!h.system.ready(), "no selector yet: not ready");
}

#[test]
fn initializer_304_is_no_data_and_moves_on() {
    let mut h = fdv2(Fdv2Config::default());
    h.reply_to(POLL, json(304, ""));
    h.reply_to(STREAM, stream(&full(&[("a", 1)], "s")));
    h.start(secs(1));
    assert_eq!(h.requests[1].path(), STREAM);
    assert_eq!(h.requests[1].query("basis"), None);
    assert_eq!(flags(&h), kv(&[("a", 1)]));
}

/// A 304 to a poll that sent no `If-None-Match` confirms nothing: an error, not VALID,
/// and not ready (PROTOCOL.md B §2.2); the next poll brings the data.
#[test]
fn polling_synchronizer_304_without_if_none_match_is_an_error_not_valid() {
    let mut h = fdv2(Fdv2Config::custom().synchronizers([SourceSpec::Polling {
        base_uri: None,
        interval: Some(secs(30)),
    }]));
    h.reply_to(POLL, json(304, ""));
    h.reply_to(POLL, json(200, &poll_full(&[("a", 1)], "s")));
    h.start(secs(1));
    assert_eq!(h.requests_to(POLL)[0].header("If-None-Match"), None);
    let status = h.system.status();
    assert_eq!(status.state, State::Initializing);
    let error = status.error.as_ref().expect("an error is reported");
    assert_eq!(error.kind, ErrorKind::Unknown);
    assert!(!h.system.ready());
    assert_eq!(h.system.data_availability(), DataAvailability::Defaults);
    h.run_until(secs(31));
    assert_eq!(flags(&h), kv(&[("a", 1)]));
    assert_eq!(h.system.status().state, State::Valid);
    assert!(h.system.ready());
}

// ---- synchronizer fallback, removal, recovery -----------------------------------

fn two_synchronizers() -> Fdv2Config {
    Fdv2Config::custom().synchronizers([
        SourceSpec::streaming(),
        SourceSpec::Polling {
            base_uri: None,
            interval: Some(secs(30)),
        },
    ])
}

#[test]
fn unauthorized_removes_a_synchronizer_for_good() {
    let mut cfg = two_synchronizers();
    cfg.timing.recovery = secs(60);
    let mut h = fdv2(cfg);
    h.reply_to(STREAM, json(401, ""));
    for i in 0..20 {
        h.reply_to(POLL, json(200, &poll_full(&[("a", i)], &format!("s{i}"))));
    }
    h.start(secs(600));
    // The stream was tried once; polling took over at once and nothing ever went back.
    assert_eq!(h.requests_to(STREAM).len(), 1);
    assert_eq!(h.requests_to(POLL)[0].at, Duration::ZERO);
    assert!(h.requests_to(POLL).len() >= 19);
    let first = &h.statuses()[0];
    assert_eq!(first.state, State::Initializing, "not OFF: polling remains");
    assert_eq!(first.error.as_ref().unwrap().status_code, 401);
    assert_eq!(h.system.status().state, State::Valid);
    assert_eq!(h.system.active_source(), Some("polling"));
}

#[test]
fn hanging_primary_falls_back_after_ten_seconds() {
    let mut h = fdv2(two_synchronizers());
    h.reply_to(STREAM, Reply::Hang);
    h.reply_to(POLL, json(200, &poll_full(&[("a", 1)], "s")));
    h.start(secs(30));
    let polls = h.requests_to(POLL);
    assert_eq!(polls.len(), 1);
    assert_eq!(polls[0].at, secs(10));
    assert_eq!(h.closed[0], h.requests_to(STREAM)[0].conn);
    assert_eq!(flags(&h), kv(&[("a", 1)]));
    assert_eq!(h.open_connections(), 0);
}

#[test]
fn stream_accepted_but_silent_also_falls_back() {
    let mut h = fdv2(two_synchronizers());
    h.reply_to(STREAM, stream(""));
    h.reply_to(POLL, json(200, &poll_full(&[("a", 1)], "s")));
    h.start(secs(11));
    assert_eq!(h.requests_to(POLL).len(), 1);
    assert_eq!(h.requests_to(POLL)[0].at, secs(10));
}

#[test]
fn initializing_timer_counts_from_the_current_synchronizer() {
    // The initializer hangs until its 10 s connect timeout; the stream then gets its own
    // 25 s (A.4.6). The reference counts from the data system's start and would fall
    // back at 30 s, after only 20 s of stream time.
    let mut cfg = Fdv2Config::default();
    cfg.timing.initializing_fallback = secs(25);
    let mut h = fdv2(cfg);
    h.reply_to(POLL, Reply::Hang);
    h.reply_to(STREAM, Reply::Hang);
    h.start(secs(60));
    assert_eq!(h.requests_to(STREAM)[0].at, secs(10));
    assert_eq!(h.requests_to(POLL)[1].at, secs(40));
}

#[test]
fn interrupted_for_a_minute_falls_back() {
    let mut h = fdv2(two_synchronizers());
    h.reply_to(
        STREAM,
        Reply::Respond(Response::sse(&full(&[("a", 1)], "s1"), End::Close)),
    );
    for _ in 0..100 {
        h.reply_to(STREAM, json(503, ""));
    }
    h.reply_to(POLL, json(200, &poll_full(&[("a", 2)], "s2")));
    h.start(secs(200));
    let poll = h.requests_to(POLL)[0].at;
    // Interrupted at 0 s; conditions are checked every 10 s; the first check that sees
    // a minute of interruption is at 60 s.
    assert_eq!(poll, secs(60));
    assert_eq!(flags(&h), kv(&[("a", 2)]));
}

#[test]
fn recovers_to_the_primary_after_five_minutes_valid() {
    let mut h = fdv2(two_synchronizers());
    h.reply_to(STREAM, Reply::Hang);
    for i in 0..20 {
        h.reply_to(POLL, json(200, &poll_full(&[("a", i)], &format!("s{i}"))));
    }
    h.reply_to(STREAM, stream(&full(&[("z", 9)], "primary")));
    h.start(secs(400));
    let streams = h.requests_to(STREAM);
    assert_eq!(streams.len(), 2);
    // Polling started at 10 s and was VALID from then; the check at 310 s recovers.
    assert_eq!(streams[1].at, secs(310));
    // Polls at 10, 40, …, 280 s: the tenth payload is the last one stored.
    assert_eq!(streams[1].query("basis"), Some("s9"));
    let polls_after = h
        .requests_to(POLL)
        .iter()
        .filter(|r| r.at > secs(310))
        .count();
    assert_eq!(polls_after, 0, "one synchronizer at a time");
    assert_eq!(flags(&h), kv(&[("z", 9)]));
    assert_eq!(h.system.active_source(), Some("streaming"));
}

#[test]
fn exhausted_list_is_off_and_ready() {
    let mut h = fdv2(stream_only());
    h.reply_to(STREAM, json(403, ""));
    h.start(secs(600));
    assert_eq!(h.requests.len(), 1);
    let last = h.system.status();
    assert_eq!(last.state, State::Off);
    assert_eq!(last.error.as_ref().unwrap().status_code, 403);
    assert!(h.system.ready());
    assert_eq!(h.system.active_source(), None);
    assert_eq!(h.system.poll_output(), crate::Output::Wait(None));
}

#[test]
fn single_synchronizer_fallback_restarts_it() {
    let mut h = fdv2(stream_only());
    h.reply_to(STREAM, Reply::Hang);
    h.reply_to(STREAM, stream(&full(&[("a", 1)], "s")));
    h.start(secs(15));
    let reqs = h.requests_to(STREAM);
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].at, secs(10));
    assert_eq!(flags(&h), kv(&[("a", 1)]));
}

// ---- the X-LD-FD-Fallback directive -----------------------------------------------

#[test]
fn fallback_directive_on_a_stream_error() {
    let mut h = fdv2(Fdv2Config::streaming());
    h.reply_to(
        STREAM,
        Reply::Respond(Response::status(403, "").header("X-LD-FD-Fallback", "true")),
    );
    for i in 0..20 {
        h.reply_to(FDV1_POLL, json(200, &all_data(&[("v1", i)], &[])));
    }
    h.start(secs(400));
    assert_eq!(h.requests_to(STREAM).len(), 1);
    let v1 = h.requests_to(FDV1_POLL);
    assert_eq!(v1[0].at, Duration::ZERO);
    assert!(v1.len() > 5);
    assert_eq!(v1[0].query("basis"), None);
    assert_eq!(h.system.status().state, State::Valid);
    assert_eq!(h.system.data_availability(), DataAvailability::Cached);
    assert_eq!(h.system.active_source(), Some("fdv1-polling"));
    assert!(!states(&h).contains(&State::Off));
}

#[test]
fn fallback_directive_on_a_successful_stream_applies_the_payload_first() {
    let mut h = fdv2(Fdv2Config::streaming());
    h.reply_to(
        STREAM,
        Reply::Respond(
            Response::sse(&full(&[("a", 1)], "s"), End::Hang).header("X-LD-FD-Fallback", "true"),
        ),
    );
    h.reply_to(FDV1_POLL, Reply::Hang);
    h.start(secs(1));
    assert!(h.events.iter().any(|(_, e)| matches!(
        e,
        Event::StoreChanged { changed_flags } if changed_flags.keys() == ["a"]
    )));
    assert_eq!(h.closed[0], h.requests_to(STREAM)[0].conn);
    assert_eq!(h.requests_to(FDV1_POLL).len(), 1);
    assert_eq!(h.system.status().state, State::Valid);
}

#[test]
fn latched_stream_without_payload_waits_then_falls_back_on_error() {
    let mut h = fdv2(Fdv2Config::streaming());
    h.reply_to(
        STREAM,
        Reply::Respond(
            Response::sse(&intent("xfer-full"), End::Hang)
                .header("X-LD-FD-Fallback", "true")
                .then(secs(2), &sse("put-object", "{broken")),
        ),
    );
    h.reply_to(FDV1_POLL, Reply::Hang);
    h.start(secs(1));
    assert!(h.requests_to(FDV1_POLL).is_empty(), "nothing yet");
    h.run_until(secs(3));
    assert_eq!(h.requests_to(FDV1_POLL).len(), 1);
    assert_eq!(h.requests_to(FDV1_POLL)[0].at, secs(2));
    assert_eq!(h.requests_to(STREAM).len(), 1);
}

#[test]
fn fallback_directive_from_an_initializer_skips_fdv2_synchronizers() {
    let mut h = fdv2(Fdv2Config::default());
    h.reply_to(
        POLL,
        Reply::Respond(Response::status(500, "").header("X-LD-FD-Fallback", "true")),
    );
    h.reply_to(FDV1_POLL, json(200, &all_data(&[("a", 1)], &[])));
    h.start(secs(400));
    assert!(h.requests_to(STREAM).is_empty());
    assert_eq!(h.requests_to(POLL).len(), 1);
    assert_eq!(h.requests_to(FDV1_POLL)[0].at, Duration::ZERO);
    assert_eq!(flags(&h), kv(&[("a", 1)]));
}

#[test]
fn fallback_directive_on_a_successful_initializer_keeps_its_data() {
    let mut h = fdv2(Fdv2Config::default());
    h.reply_to(
        POLL,
        Reply::Respond(
            Response::status(200, &poll_full(&[("a", 1)], "s")).header("X-LD-FD-Fallback", "true"),
        ),
    );
    h.reply_to(FDV1_POLL, Reply::Hang);
    h.start(secs(1));
    assert_eq!(flags(&h), kv(&[("a", 1)]));
    assert!(h.requests_to(STREAM).is_empty());
    assert_eq!(h.requests_to(FDV1_POLL).len(), 1);
}

#[test]
fn fallback_directive_without_fdv1_configured_halts() {
    let mut h = fdv2(stream_only());
    h.reply_to(
        STREAM,
        Reply::Respond(Response::status(500, "").header("X-LD-FD-Fallback", "true")),
    );
    h.start(secs(600));
    assert_eq!(h.requests.len(), 1, "no retries, even on a 500");
    let st = h.system.status();
    assert_eq!(st.state, State::Off);
    assert_eq!(st.error.as_ref().unwrap().status_code, 500);
    assert!(h.system.ready());
}

#[test]
fn fallback_header_must_be_exactly_true() {
    let mut h = fdv2(Fdv2Config::streaming());
    h.reply_to(
        STREAM,
        Reply::Respond(
            Response::sse(&full(&[("a", 1)], "s"), End::Hang).header("X-LD-FD-Fallback", "TRUE"),
        ),
    );
    h.start(secs(5));
    assert!(h.requests_to(FDV1_POLL).is_empty());
}

#[test]
fn directed_fallback_is_terminal_even_when_fdv1_fails() {
    let mut h = fdv2(Fdv2Config::default());
    h.reply_to(
        POLL,
        Reply::Respond(Response::status(503, "").header("X-LD-FD-Fallback", "true")),
    );
    h.start(secs(900));
    // The FDv1 poller hangs (no replies): connect timeouts, fallbacks restart it, but
    // FDv2 is never contacted again.
    assert_eq!(h.requests_to(POLL).len(), 1);
    assert!(h.requests_to(STREAM).is_empty());
    assert!(h.requests_to(FDV1_POLL).len() > 10);
}

// ---- availability, readiness, stop --------------------------------------------------

#[test]
fn daemon_mode_is_ready_at_once_and_cached() {
    let mut h = fdv2(Fdv2Config::daemon());
    assert_eq!(h.system.data_availability(), DataAvailability::Cached);
    assert_eq!(h.system.target_availability(), DataAvailability::Cached);
    h.start(secs(60));
    assert!(h.requests.is_empty());
    assert!(h.system.ready());
    assert_eq!(h.system.poll_output(), crate::Output::Wait(None));
}

#[test]
fn stop_closes_everything_and_reports_off() {
    let mut h = fdv2(two_synchronizers());
    h.reply_to(STREAM, stream(&full(&[("a", 1)], "s")));
    h.start(secs(1));
    assert_eq!(h.open_connections(), 1);
    h.input(Input::Command(Command::Stop));
    assert_eq!(h.open_connections(), 0);
    assert_eq!(h.system.status().state, State::Off);
    h.run_until(secs(1000));
    assert_eq!(h.requests.len(), 1);
    // Data stays.
    assert_eq!(flags(&h), kv(&[("a", 1)]));
}

#[test]
fn timing_constants_are_configurable() {
    let mut cfg = two_synchronizers();
    cfg.timing = CoordinatorTiming {
        check_interval: ms(100),
        initializing_fallback: ms(300),
        interrupted_fallback: secs(1),
        recovery: secs(2),
    };
    let mut h = fdv2(cfg);
    h.reply_to(STREAM, Reply::Hang);
    h.reply_to(POLL, json(200, &poll_full(&[("a", 1)], "s")));
    h.reply_to(STREAM, stream(&full(&[("b", 1)], "t")));
    h.start(secs(5));
    let streams = h.requests_to(STREAM);
    assert_eq!(h.requests_to(POLL)[0].at, ms(300));
    assert_eq!(streams[1].at, ms(2300));
}

#[test]
fn invalid_configurations_are_refused() {
    let c = fdv2_config(Fdv2Config::custom().initializers([SourceSpec::streaming()]));
    assert!(matches!(
        DataSystem::new(c, 1, origin()),
        Err(crate::ConfigError::StreamingInitializer)
    ));
    let c = fdv2_config(Fdv2Config::custom().synchronizers([SourceSpec::Polling {
        base_uri: Some("ftp://x".into()),
        interval: None,
    }]));
    assert!(DataSystem::new(c, 1, origin()).is_err());
}

#[test]
fn selector_survives_fdv1_fallback_only_as_undefined() {
    let mut h = fdv2(Fdv2Config::streaming());
    h.reply_to(
        STREAM,
        Reply::Respond(
            Response::sse(&full(&[("a", 1)], "s"), End::Hang).header("X-LD-FD-Fallback", "true"),
        ),
    );
    h.reply_to(FDV1_POLL, json(200, &all_data(&[("b", 1)], &[])));
    h.start(secs(1));
    assert_eq!(h.system.store().selector(), &Selector::default());
    assert_eq!(flags(&h), kv(&[("b", 1)]));
    assert_eq!(h.system.data_availability(), DataAvailability::Cached);
}

/// `DataSystem::selector` is the selector of the payload the store holds: none before
/// the first payload, then the last `payload-transferred`'s (PROTOCOL.md B §5.2, §5.8),
/// unchanged by intent `none`, and none again once FDv1 data replaced it (B §5.6).
#[test]
fn selector_is_the_last_transferred_payload_the_store_holds() {
    let sel = |state: &str, version| Selector {
        state: state.into(),
        version,
    };
    let mut h = fdv2(stream_only());
    h.reply_to(
        STREAM,
        Reply::Respond(
            Response::sse(&full(&[("a", 1)], "s1"), End::Hang)
                .then(secs(2), &(intent("xfer-changes") + &put_flag("b", 1)))
                .then(secs(1), &transferred("s2", 7))
                .then(secs(1), &intent("none")),
        ),
    );
    assert_eq!(h.system.selector(), None);
    h.input(Input::Command(Command::Start));
    assert_eq!(h.system.selector(), None, "no payload yet");
    h.run_until(secs(1));
    assert_eq!(h.system.selector(), Some(&sel("s1", 1)));
    h.run_until(secs(2) + ms(500));
    assert_eq!(
        h.system.selector(),
        Some(&sel("s1", 1)),
        "uncommitted changes"
    );
    h.run_until(secs(3) + ms(500));
    assert_eq!(h.system.selector(), Some(&sel("s2", 7)));
    h.run_until(secs(5));
    assert_eq!(h.system.selector(), Some(&sel("s2", 7)), "intent none");
    assert_eq!(h.system.selector(), Some(h.system.store().selector()));

    // FDv1 data carries no selector.
    let mut h = fdv2(Fdv2Config::streaming());
    h.reply_to(
        STREAM,
        Reply::Respond(
            Response::sse(&full(&[("a", 1)], "s"), End::Hang).header("X-LD-FD-Fallback", "true"),
        ),
    );
    h.reply_to(FDV1_POLL, json(200, &all_data(&[("b", 1)], &[])));
    h.start(secs(1));
    assert_eq!(flags(&h), kv(&[("b", 1)]));
    assert_eq!(h.system.selector(), None);
    let mut h = harness(config(Mode::Streaming));
    h.reply(stream(&super::put(&[("a", 1)], &[])));
    h.start(secs(1));
    assert!(h.system.initialized());
    assert_eq!(h.system.selector(), None, "FDv1 has no selector");
}

#[test]
fn a_long_gap_catches_up_the_check_grid_at_once() {
    // Found by the fdv2_system fuzz target: catching the grid up one interval at a time
    // took seconds after a gap of days.
    let t0 = origin();
    let mut c = fdv2_config(Fdv2Config::streaming());
    c.fdv2.timing.check_interval = ms(1);
    let mut system = DataSystem::new(c, 1, t0).unwrap();
    system.handle_input(t0, Input::Command(Command::Start));
    while !matches!(system.poll_output(), crate::Output::Wait(_)) {}
    let later = t0 + secs(10 * 86_400);
    system.handle_input(later, Input::Timeout);
    let deadline = loop {
        if let crate::Output::Wait(d) = system.poll_output() {
            break d;
        }
    };
    let d = deadline.unwrap();
    assert!(d > later && d <= later + ms(10), "{:?}", d - later);
}

#[test]
fn grid_points_are_exact() {
    use crate::system::next_on_grid as next;
    let t0 = origin();
    assert_eq!(next(t0, secs(10), t0), t0 + secs(10));
    assert_eq!(next(t0, secs(10), t0 + secs(10)), t0 + secs(20));
    assert_eq!(next(t0, secs(10), t0 + ms(19_999)), t0 + secs(20));
    assert_eq!(
        next(t0, secs(10), t0 + secs(86_400 * 400)),
        t0 + secs(86_400 * 400 + 10)
    );
}
