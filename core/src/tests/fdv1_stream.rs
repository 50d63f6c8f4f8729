use super::*;
use crate::source::UnrecoverablePolicy;
use crate::status::{ErrorKind, State};
use crate::testing::{End, Reply, Response};
use crate::{Command, Event, Input};

fn started(body: &str) -> Harness {
    let mut h = harness(config(Mode::Streaming));
    h.reply(stream(body));
    h.start(ms(10));
    h
}

#[test]
fn request_shape() {
    let h = started("");
    let r = &h.requests[0];
    assert_eq!(r.line, "GET /all HTTP/1.1");
    assert_eq!(r.host, "stream.test:8030");
    assert_eq!(r.header("Host"), Some("stream.test:8030"));
    assert_eq!(r.header("Authorization"), Some("sdk-test-key"));
    assert_eq!(
        r.header("User-Agent"),
        Some(concat!("flagsync/", env!("CARGO_PKG_VERSION")))
    );
    assert_eq!(r.header("Accept"), Some("text/event-stream"));
    assert_eq!(r.header("Cache-Control"), Some("no-cache"));
    assert_eq!(r.header("Last-Event-ID"), None);
    assert_eq!(r.header("Accept-Encoding"), None);
}

#[test]
fn payload_filter_becomes_the_filter_query() {
    let mut c = config(Mode::Streaming);
    c.payload_filter = Some("my filter".into());
    let mut h = harness(c);
    h.start(ms(1));
    assert_eq!(h.requests[0].target(), "/all?filter=my+filter");
}

#[test]
fn put_initializes_with_or_without_path() {
    for body in [
        put(&[("a", 1)], &[("s", 1)]),
        format!(
            "event: put\ndata: {{\"data\":{}}}\n\n",
            all_data(&[("a", 1)], &[("s", 1)])
        ),
    ] {
        let h = started(&body);
        assert_eq!(items(&h, Kind::Flag), [("a".into(), 1)]);
        assert_eq!(items(&h, Kind::Segment), [("s".into(), 1)]);
        assert!(h.system.initialized());
        assert_eq!(h.system.status().state, State::Valid);
        assert!(h.events.iter().any(|(_, e)| *e == Event::Ready));
    }
}

#[test]
fn patch_and_delete_apply_only_newer_versions() {
    for kind in Kind::ALL {
        for (version, applied) in [(101, true), (100, false), (99, false)] {
            let base = if kind == Kind::Flag {
                put(&[("x", 100)], &[])
            } else {
                put(&[], &[("x", 100)])
            };
            let h = started(&(base.clone() + &patch(kind, "x", version)));
            let expect = if applied { version } else { 100 };
            assert_eq!(
                items(&h, kind),
                [("x".into(), expect)],
                "{kind} patch {version}"
            );
            let h = started(&(base + &delete(kind, "x", version)));
            let expect: Vec<(String, u64)> = if applied {
                vec![]
            } else {
                vec![("x".into(), 100)]
            };
            assert_eq!(items(&h, kind), expect, "{kind} delete {version}");
        }
    }
}

#[test]
fn stored_items_own_their_bytes_not_the_read_they_came_in() {
    // The put and both patches arrive in one read: each stored item must still be a
    // buffer of its own (nothing else refers to it), holding the same JSON.
    let body = put(&[("a", 1), ("b", 1)], &[("s", 1)])
        + &patch(Kind::Flag, "a", 2)
        + &patch(Kind::Flag, "b", 3);
    let h = started(&body);
    assert_eq!(items(&h, Kind::Flag), [("a".into(), 2), ("b".into(), 3)]);
    let data = h.system.snapshot();
    for (kind, key, version) in [
        (Kind::Flag, "a", 2),
        (Kind::Flag, "b", 3),
        (Kind::Segment, "s", 1),
    ] {
        let item = data.get(kind, key).unwrap();
        assert!(item.raw.is_unique(), "{kind} {key} shares its buffer");
        let expect = match kind {
            Kind::Flag => flag_json(key, version),
            Kind::Segment => format!(r#"{{"key":"{key}","version":{version}}}"#),
        };
        assert_eq!(item.raw_str(), expect, "{kind} {key}");
    }
}

#[test]
fn delete_of_missing_item_is_kept_as_a_tombstone() {
    let body = put(&[], &[]) + &delete(Kind::Flag, "f", 100) + &patch(Kind::Flag, "f", 100);
    let h = started(&body);
    assert!(items(&h, Kind::Flag).is_empty());
    let h = started(&(put(&[], &[]) + &patch(Kind::Segment, "new", 1)));
    assert_eq!(items(&h, Kind::Segment), [("new".into(), 1)]);
}

#[test]
fn change_events_name_only_applied_writes() {
    let body = put(&[("a", 1)], &[]) + &patch(Kind::Flag, "a", 1) + &patch(Kind::Flag, "a", 2);
    let h = started(&body);
    let changes: Vec<Vec<String>> = h
        .events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::StoreChanged { changed_flags } => Some(changed_flags.keys()),
            _ => None,
        })
        .collect();
    assert_eq!(changes, [vec!["a".to_owned()], vec!["a".to_owned()]]);
}

fn reconnects_after(bad: &str, kind: ErrorKind) {
    let mut h = harness(config(Mode::Streaming));
    h.reply(stream(
        &(put(&[("a", 1)], &[]) + bad + &patch(Kind::Flag, "a", 5)),
    ));
    h.reply(stream(&put(&[("a", 2)], &[])));
    h.start(secs(5));
    assert_eq!(h.requests.len(), 2, "{bad}");
    assert_eq!(items(&h, Kind::Flag), [("a".into(), 2)], "{bad}");
    let st = h.statuses();
    assert_eq!(st[1].state, State::Interrupted);
    assert_eq!(st[1].error.as_ref().unwrap().kind, kind, "{bad}");
    assert_eq!(st[2].state, State::Valid);
    assert_eq!(h.closed.len(), 1, "the bad connection was closed");
}

#[test]
fn malformed_json_drops_the_stream_with_invalid_data() {
    for name in ["put", "patch", "delete"] {
        reconnects_after(
            &format!("event: {name}\ndata: {{sorry\n\n"),
            ErrorKind::InvalidData,
        );
    }
}

#[test]
fn schema_mismatch_drops_the_stream_with_unknown() {
    reconnects_after(
        "event: put\ndata: {\"data\":{\"flags\": true, \"segments\":{}}}\n\n",
        ErrorKind::Unknown,
    );
    reconnects_after(
        "event: patch\ndata: {\"path\":\"/flags/x\",\"data\":true}\n\n",
        ErrorKind::Unknown,
    );
    reconnects_after(
        "event: delete\ndata: {\"path\":\"/flags/x\",\"version\":\"no\"}\n\n",
        ErrorKind::Unknown,
    );
}

#[test]
fn unknown_events_and_paths_are_ignored_without_reconnecting() {
    for bad in [
        "event: whatever\ndata: {}\n\n",
        "event: whatever\ndata: not JSON\n\n",
        "event: patch\ndata: {\"path\": \"/cats/Jack\", \"data\": {}}\n\n",
    ] {
        let h = started(&(put(&[("a", 1)], &[]) + bad + &patch(Kind::Flag, "a", 2)));
        assert_eq!(h.requests.len(), 1);
        assert_eq!(items(&h, Kind::Flag), [("a".into(), 2)]);
    }
}

#[test]
fn recoverable_statuses_and_io_errors_are_retried() {
    for first in [
        Reply::Respond(Response::status(400, "")),
        Reply::Respond(Response::status(408, "")),
        Reply::Respond(Response::status(429, "")),
        Reply::Respond(Response::status(500, "")),
        Reply::Respond(Response::status(503, "")),
        Reply::Refuse,
    ] {
        let mut h = harness(config(Mode::Streaming));
        h.reply(first.clone())
            .reply(first)
            .reply(stream(&put(&[("a", 1)], &[])));
        h.start(secs(120));
        assert_eq!(h.requests.len(), 3);
        assert!(h.system.initialized());
        let st = h.statuses();
        assert!(
            st[..2]
                .iter()
                .all(|s| s.state == State::Initializing && s.error.is_some())
        );
        assert_eq!(st[2].state, State::Valid);
        // The error is sticky through VALID (PROTOCOL.md B §3.2).
        assert!(st[2].error.is_some());
    }
}

#[test]
fn status_code_is_reported_before_and_after_initialization() {
    let mut h = harness(config(Mode::Streaming));
    h.reply(Reply::Respond(Response::status(503, "")));
    h.reply(Reply::Respond(Response::sse(
        &put(&[("a", 1)], &[]),
        End::Close,
    )));
    h.reply(Reply::Respond(Response::status(500, "")));
    h.start(secs(10));
    let st = h.statuses();
    let summary: Vec<_> = st
        .iter()
        .map(|s| (s.state, s.error.as_ref().map(|e| (e.kind, e.status_code))))
        .collect();
    assert_eq!(
        summary,
        [
            (State::Initializing, Some((ErrorKind::ErrorResponse, 503))),
            (State::Valid, Some((ErrorKind::ErrorResponse, 503))),
            (State::Interrupted, Some((ErrorKind::NetworkError, 0))),
            (State::Interrupted, Some((ErrorKind::ErrorResponse, 500))),
        ]
    );
}

#[test]
fn unrecoverable_statuses_stop_under_the_legacy_policy() {
    for code in [401, 403, 404, 405] {
        let mut c = config(Mode::Streaming);
        c.unrecoverable = UnrecoverablePolicy::Stop;
        let mut h = harness(c);
        h.reply(Reply::Respond(Response::status(code, "")));
        h.start(secs(3600));
        assert_eq!(h.requests.len(), 1);
        let st = h.system.status();
        assert_eq!(st.state, State::Off);
        assert_eq!(st.error.as_ref().unwrap().status_code, code);
        assert!(
            h.events.iter().any(|(_, e)| *e == Event::Ready),
            "waiting ends"
        );
        assert_eq!(h.open_connections(), 0);
    }
}

#[test]
fn unrecoverable_statuses_enter_the_extended_regime_under_retry() {
    let mut h = harness(config(Mode::Streaming));
    for _ in 0..4 {
        h.reply(Reply::Respond(Response::status(401, "")));
    }
    h.reply(stream(&put(&[("a", 1)], &[])));
    h.start(ms(100));
    assert_eq!(h.requests.len(), 1, "no reconnect within 100 ms");
    h.run_until(secs(310));
    assert_eq!(h.requests.len(), 2, "reconnect within 5 min 10 s");
    assert!(h.requests[1].at >= secs(150));
    assert_eq!(h.system.status().state, State::Initializing);
    while !h.system.initialized() && h.elapsed() < secs(4 * 3600) {
        let next = h.elapsed() + secs(60);
        h.run_until(next);
    }
    assert_eq!(h.requests.len(), 5, "keeps retrying");
    let gaps: Vec<_> = h.requests.windows(2).map(|w| w[1].at - w[0].at).collect();
    assert!(gaps[2] > secs(600) && gaps[3] <= secs(3600), "{gaps:?}");
}

#[test]
fn healthy_stream_for_a_minute_reconnects_at_normal_timing() {
    let mut h = harness(config(Mode::Streaming));
    h.reply(Reply::Respond(Response::status(401, "")));
    h.reply(Reply::Respond(
        Response::sse(&put(&[("a", 1)], &[]), End::Close).then(secs(61), ": still here\n"),
    ));
    h.reply(stream(""));
    h.start(secs(400));
    assert_eq!(h.requests.len(), 3);
    let reopened = h.requests[2].at - h.requests[1].at;
    assert!(reopened <= secs(61 + 1), "{reopened:?}");
}

#[test]
fn clean_eof_is_interrupted_network_error_and_reconnects() {
    let mut h = harness(config(Mode::Streaming));
    h.reply(Reply::Respond(Response::sse(
        &put(&[("a", 1)], &[]),
        End::Close,
    )));
    h.reply(stream(&put(&[("a", 2)], &[])));
    h.start(secs(5));
    let st = h.statuses();
    assert_eq!(st[1].state, State::Interrupted);
    assert_eq!(st[1].error.as_ref().unwrap().kind, ErrorKind::NetworkError);
    assert_eq!(items(&h, Kind::Flag), [("a".into(), 2)]);
    assert!(
        h.requests[1].at >= ms(500) && h.requests[1].at <= secs(1),
        "initial delay honoured"
    );
}

#[test]
fn reconnect_sends_the_last_committed_event_id() {
    let mut h = harness(config(Mode::Streaming));
    let body = "id: 1\nevent: x\ndata: a\n\nid: 2\n\nid: 3\nevent: x\ndata: unfinished";
    h.reply(Reply::Respond(Response::sse(body, End::Close)));
    h.reply(Reply::Respond(Response::sse("id:\n\n", End::Close)));
    h.reply(stream(""));
    h.start(secs(10));
    assert_eq!(h.requests[1].header("Last-Event-ID"), Some("2"));
    assert_eq!(
        h.requests[2].header("Last-Event-ID"),
        None,
        "an empty id clears it"
    );
}

/// PROTOCOL.md A.2: the `id` field sets the last event id buffer, and the blank line
/// commits it even though a block without data dispatches no event.
#[test]
fn id_only_block_sets_the_last_event_id_of_the_reconnect() {
    let mut h = harness(config(Mode::Streaming));
    h.reply(Reply::Respond(Response::sse("id: 7\n\n", End::Close)));
    h.reply(stream(""));
    h.start(secs(10));
    assert_eq!(h.requests[1].header("Last-Event-ID"), Some("7"));
}

#[test]
fn no_content_stops_reconnecting() {
    let mut h = harness(config(Mode::Streaming));
    h.reply(Reply::Respond(Response::status(204, "")));
    h.start(secs(600));
    assert_eq!(h.requests.len(), 1);
    assert_eq!(h.system.status().state, State::Off);
}

#[test]
fn redirects_are_followed_and_a_missing_location_is_an_error() {
    let mut h = harness(config(Mode::Streaming));
    h.reply(Reply::Respond(
        Response::status(307, "").header("Location", "http://STREAM.test:8030/moved"),
    ));
    h.reply(stream(&put(&[("a", 1)], &[])));
    h.start(secs(1));
    assert_eq!(h.requests[1].host, "STREAM.test:8030");
    assert_eq!(h.requests[1].target(), "/moved");
    assert!(h.system.initialized());

    let mut h = harness(config(Mode::Streaming));
    h.reply(Reply::Respond(Response::status(301, "")));
    h.start(ms(100));
    assert_eq!(h.requests.len(), 1, "no loop");
    assert_eq!(
        h.statuses()[0].error.as_ref().unwrap().kind,
        ErrorKind::Unknown
    );

    let mut h = harness(config(Mode::Streaming));
    for _ in 0..5 {
        h.reply(Reply::Respond(
            Response::status(302, "").header("Location", "/again"),
        ));
    }
    h.start(ms(100));
    assert_eq!(h.requests.len(), 4, "at most 3 redirects: {:?}", h.requests);
}

#[test]
fn silent_stream_times_out_but_comments_keep_it_alive() {
    let mut h = harness(config(Mode::Streaming));
    let body = put(&[("a", 1)], &[]);
    h.reply(Reply::Respond(
        Response::sse(&body, End::Hang)
            .then(secs(200), ":\n")
            .then(secs(200), ":\n"),
    ));
    h.reply(stream(""));
    h.start(secs(699));
    assert_eq!(h.requests.len(), 1);
    h.run_until(secs(702));
    assert_eq!(h.requests.len(), 2);
    let err = h.statuses()[1].error.clone().unwrap();
    assert_eq!(
        (err.kind, err.cause),
        (ErrorKind::NetworkError, crate::status::Cause::ReadTimeout)
    );
}

#[test]
fn connect_timeout_is_enforced() {
    let mut h = harness(config(Mode::Streaming));
    h.reply(Reply::Hang);
    h.start(secs(11));
    assert_eq!(
        h.statuses()[0].error.as_ref().unwrap().cause,
        crate::status::Cause::ConnectTimeout
    );
    assert_eq!(h.closed.len(), 1);
}

#[test]
fn backoff_doubles_and_honours_server_retry() {
    let mut h = harness(config(Mode::Streaming));
    for _ in 0..5 {
        h.reply(Reply::Refuse);
    }
    h.start(secs(200));
    let gaps: Vec<_> = h.requests.windows(2).map(|w| w[1].at - w[0].at).collect();
    for (gap, base) in gaps.iter().zip([1u64, 2, 4, 8, 16]) {
        assert!(*gap > secs(base) / 2 && *gap <= secs(base), "{gaps:?}");
    }

    let mut h = harness(config(Mode::Streaming));
    h.reply(Reply::Respond(Response::sse(
        "retry: 10000\n\n",
        End::Close,
    )));
    h.start(secs(30));
    let gap = h.requests[1].at - h.requests[0].at;
    assert!(gap > secs(5) && gap <= secs(10), "{gap:?}");
}

#[test]
fn stop_closes_the_connection_and_reports_off() {
    let mut h = started(&put(&[("a", 1)], &[]));
    assert_eq!(h.open_connections(), 1);
    h.input(Input::Command(Command::Stop));
    assert_eq!(h.open_connections(), 0);
    assert_eq!(h.system.status().state, State::Off);
    h.run_until(secs(3600));
    assert_eq!(h.requests.len(), 1);
}

#[test]
fn environment_id_comes_from_successful_responses_only() {
    let mut h = harness(config(Mode::Streaming));
    h.reply(Reply::Respond(
        Response::status(503, "").header("X-LD-EnvID", "bad"),
    ));
    h.reply(Reply::Respond(
        Response::sse(&put(&[], &[]), End::Hang).header("X-LD-EnvID", "env-1"),
    ));
    h.start(secs(5));
    assert_eq!(h.system.environment_id(), Some("env-1"));
    assert!(
        !h.events
            .iter()
            .any(|(_, e)| *e == Event::EnvironmentId("bad".into()))
    );
}

#[test]
fn wrong_content_type_is_retried_as_unknown() {
    let mut h = harness(config(Mode::Streaming));
    h.reply(Reply::Respond(
        Response::status(200, "{}").header("Content-Type", "application/json"),
    ));
    h.reply(stream(&put(&[], &[])));
    h.start(secs(5));
    assert_eq!(
        h.statuses()[0].error.as_ref().unwrap().kind,
        ErrorKind::Unknown
    );
    assert!(h.system.initialized());
}

#[test]
fn oversized_event_is_a_typed_error_and_a_reconnect() {
    let mut c = config(Mode::Streaming);
    c.limits.sse.max_line_len = 1024;
    c.limits.sse.max_event_len = 1024;
    let mut h = harness(c);
    let big = format!("event: put\ndata: {}\n\n", "x".repeat(4096));
    h.reply(stream(&big));
    h.reply(stream(&put(&[("a", 1)], &[])));
    h.start(secs(5));
    assert_eq!(
        h.statuses()[0].error.as_ref().unwrap().kind,
        ErrorKind::InvalidData
    );
    assert!(h.system.initialized());
}

#[test]
fn store_failure_is_reported_as_store_error_and_kept() {
    let mut h = started(&put(&[("a", 1)], &[]));
    h.input(Input::StoreFailed);
    let st = h.system.status().clone();
    assert_eq!(st.state, State::Interrupted);
    assert_eq!(st.error.as_ref().unwrap().kind, ErrorKind::StoreError);
    // Nothing else happened on the stream: the kind stays STORE_ERROR.
    h.run_until(secs(10));
    assert_eq!(
        h.system.status().error.as_ref().unwrap().kind,
        ErrorKind::StoreError
    );
}

#[test]
fn a_long_initial_delay_is_honoured() {
    let mut c = config(Mode::Streaming);
    c.backoff.initial = secs(10);
    let mut h = harness(c);
    h.reply(Reply::Respond(Response::sse(
        &put(&[("a", 1)], &[]),
        End::Close,
    )));
    h.reply(stream(""));
    h.start(ms(100));
    assert_eq!(h.requests.len(), 1, "no reconnect within 100 ms");
    h.run_until(secs(11));
    assert_eq!(h.requests.len(), 2);
}

#[test]
fn failures_on_reconnect_are_retried_until_success() {
    let mut h = harness(config(Mode::Streaming));
    h.reply(Reply::Respond(Response::sse(
        &put(&[("a", 1)], &[]),
        End::Close,
    )));
    h.reply(Reply::Respond(Response::status(503, "")));
    h.reply(Reply::Refuse);
    h.reply(stream(&put(&[("a", 2)], &[])));
    h.start(secs(60));
    assert_eq!(
        h.requests.len(),
        4,
        "exactly the failures and one success, none after"
    );
    assert_eq!(items(&h, Kind::Flag), [("a".into(), 2)]);
    let states: Vec<_> = h.statuses().iter().map(|s| s.state).collect();
    assert_eq!(
        states,
        [
            State::Valid,
            State::Interrupted,
            State::Interrupted,
            State::Interrupted,
            State::Valid
        ]
    );
}

#[test]
fn start_after_stop_does_not_reconnect() {
    let mut h = harness(config(Mode::Streaming));
    h.reply(stream(&put(&[("a", 1)], &[])));
    h.start(ms(10));
    h.input(Input::Command(Command::Stop));
    h.input(Input::Command(Command::Start));
    h.run_until(secs(100));
    assert_eq!(h.requests.len(), 1);
    assert_eq!(h.system.status().state, State::Off);
}

// ---- Large `put`s read while they arrive ----------------------------------------------
// (In tests every first `data` line is read ahead, whatever its length.)

/// An event stream sending `body` in reads of `size` bytes, then `end`.
fn in_reads(body: &str, size: usize, end: End) -> Reply {
    let mut response = Response::sse("", end);
    response.chunks = body
        .as_bytes()
        .chunks(size)
        .map(|read| (Duration::ZERO, bytes::Bytes::copy_from_slice(read)))
        .collect();
    Reply::Respond(response)
}

fn numbered_flags(n: u64) -> Vec<(String, u64)> {
    (0..n).map(|i| (format!("f{i}"), i + 1)).collect()
}

fn as_refs(items: &[(String, u64)]) -> Vec<(&str, u64)> {
    items.iter().map(|(k, v)| (k.as_str(), *v)).collect()
}

#[test]
fn a_put_read_while_it_arrives_fills_the_same_store() {
    let flags = numbered_flags(200);
    let body = put(&as_refs(&flags), &[("s", 3)]);
    let mut expected: Vec<(String, u64)> = flags.clone();
    expected.sort();
    for size in [1, 7, 64, 1000, 4096, body.len()] {
        let mut h = harness(config(Mode::Streaming));
        h.reply(in_reads(&body, size, End::Hang));
        h.start(ms(10));
        assert_eq!(items(&h, Kind::Flag), expected, "reads of {size}");
        assert_eq!(
            items(&h, Kind::Segment),
            [("s".into(), 3)],
            "reads of {size}"
        );
        assert_eq!(h.system.status().state, State::Valid);
    }
}

#[test]
fn a_put_on_two_data_lines_is_read_ahead_through_the_first() {
    // The event's data is the two lines joined by LF, which JSON reads as whitespace.
    let flags = all_data(&[("a", 1), ("b", 2)], &[]);
    let (head, tail) = flags.split_at(flags.len() - 16);
    let body = format!("event: put\ndata: {{\"path\":\"/\",\"data\":{head}\ndata: {tail}}}\n\n");
    for size in [1, 5, 40] {
        let mut h = harness(config(Mode::Streaming));
        h.reply(in_reads(&body, size, End::Hang));
        h.start(ms(10));
        assert_eq!(items(&h, Kind::Flag), [("a".into(), 1), ("b".into(), 2)]);
        assert_eq!(h.system.status().state, State::Valid);
    }
}

#[test]
fn a_line_read_ahead_for_an_event_that_is_not_a_put_is_parsed_as_that_event() {
    // The type comes after the data: a `patch`, then an unknown event shaped like a put.
    let patch_data = format!(r#"{{"path":"/flags/a","data":{}}}"#, flag_json("a", 9));
    let fake_put = format!(r#"{{"path":"/","data":{}}}"#, all_data(&[("z", 1)], &[]));
    let body = put(&[("a", 1)], &[])
        + &format!("data: {patch_data}\nevent: patch\n\ndata: {fake_put}\nevent: other\n\n");
    for size in [1, 3, 50] {
        let mut h = harness(config(Mode::Streaming));
        h.reply(in_reads(&body, size, End::Hang));
        h.start(ms(10));
        assert_eq!(items(&h, Kind::Flag), [("a".into(), 9)], "reads of {size}");
        assert_eq!(h.requests.len(), 1);
    }
}

#[test]
fn a_put_cut_off_by_the_connection_is_read_again_from_the_start() {
    let first = put(&as_refs(&numbered_flags(50)), &[]);
    let second = put(&[("only", 7)], &[("s", 1)]);
    for end in [End::Close, End::Reset] {
        let mut h = harness(config(Mode::Streaming));
        h.reply(in_reads(&first[..first.len() / 2], 64, end));
        h.reply(in_reads(&second, 64, End::Hang));
        h.start(secs(5));
        assert_eq!(h.requests.len(), 2);
        assert_eq!(items(&h, Kind::Flag), [("only".into(), 7)]);
        assert_eq!(items(&h, Kind::Segment), [("s".into(), 1)]);
    }
}

#[test]
fn a_malformed_put_read_ahead_fails_as_it_would_whole() {
    for (bad, kind) in [
        (
            "{\"data\":{\"flags\":{\"a\":{\"key\":\"a\",\"version\":1}},\"segments\":{}}} x",
            ErrorKind::InvalidData,
        ),
        (
            "{\"data\":{\"flags\":{\"a\":{\"key\":\"a\",\"version\":\"1\"}},\"segments\":{}}}",
            ErrorKind::Unknown,
        ),
        (
            "{\"data\":{\"flags\":{\"a\":{\"key\":\"a\",\"version\":1}}}}",
            ErrorKind::Unknown,
        ),
    ] {
        let mut h = harness(config(Mode::Streaming));
        h.reply(in_reads(
            &format!("event: put\ndata: {bad}\n\n"),
            9,
            End::Hang,
        ));
        h.reply(stream(&put(&[("a", 2)], &[])));
        h.start(secs(5));
        assert_eq!(h.requests.len(), 2, "{bad}");
        let st = h.statuses();
        assert_eq!(st[1].error.as_ref().unwrap().kind, kind, "{bad}");
        assert_eq!(items(&h, Kind::Flag), [("a".into(), 2)]);
    }
}

/// A malformed event judged while the connection already ended in the same read (the
/// body's end came with it) reports INVALID_DATA, as when the end comes later: the
/// outcome does not depend on how the bytes were split.
#[test]
fn a_malformed_event_reports_the_same_whether_the_body_ends_with_it_or_later() {
    let body = put(&[("a", 1)], &[]) + "event: patch\ndata: {sorry\n\n";
    let mut runs = Vec::new();
    for (name, reply) in [
        (
            "the end later",
            Reply::Respond(Response::sse(&body, End::Hang)),
        ),
        (
            "the end with it",
            Reply::Respond(
                Response::sse(&body, End::Hang).header("Content-Length", &body.len().to_string()),
            ),
        ),
    ] {
        let mut h = harness(config(Mode::Streaming));
        h.reply(reply);
        h.reply(stream(&put(&[("a", 2)], &[])));
        h.start(ms(10));
        h.run_until(secs(5));
        let statuses: Vec<_> = h
            .statuses()
            .iter()
            .map(|s| (s.state, s.error.as_ref().map(|e| e.kind)))
            .collect();
        assert_eq!(h.requests.len(), 2, "{name}: reconnected once");
        runs.push((name, statuses));
    }
    assert_eq!(
        runs[0].1,
        [
            (State::Valid, None),
            (State::Interrupted, Some(ErrorKind::InvalidData)),
            (State::Valid, Some(ErrorKind::InvalidData)),
        ]
    );
    assert_eq!(runs[1].1, runs[0].1, "{}", runs[1].0);
}
