//! The `X-LD-FD-Fallback` directive: the terminal fallback to FDv1.

use super::*;

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
