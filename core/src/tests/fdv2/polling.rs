//! The polling synchronizer: request shape, basis and ETag, interval, errors.

use super::*;

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
