//! Initializers: in order until one yields a selector, 304s, failures.

use super::*;

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
