//! Availability, readiness, stop, configuration, the selector the store holds, and the
//! check grid.

use super::*;

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
