//! The streaming synchronizer: request shape, payloads and intents, heartbeats,
//! `error` and `goodbye` events, reconnects with the basis.

use super::*;

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
