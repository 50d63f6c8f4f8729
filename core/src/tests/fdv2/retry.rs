//! Retry timing across synchronizer restarts (issue 42): a synchronizer the coordinator
//! restarts goes on from its previous instance's backoff streak and pending retry or
//! poll (`system::coordinator`, "Retry timing across synchronizer restarts").

use super::*;
use crate::backoff::BackoffConfig;

/// The shortest gap the `n`-th retry of one streak may follow the attempt before it:
/// half the base (subtractive jitter), the base doubling from 1 s to 30 s.
fn min_gap(n: u32) -> Duration {
    secs(1).saturating_mul(1 << (n - 1).min(5)).min(secs(30)) / 2
}

fn outage(h: &mut Harness, path: &str, n: usize) {
    for _ in 0..n {
        h.reply_to(path, json(503, ""));
    }
}

#[test]
fn a_restarted_stream_goes_on_from_its_backoff_streak() {
    let mut h = fdv2(Fdv2Config::streaming());
    outage(&mut h, STREAM, 100);
    h.start(secs(120));
    let at: Vec<Duration> = h.requests_to(STREAM).iter().map(|r| r.at).collect();
    // Eleven fallback checks restarted the stream; none of them started a new streak.
    for (n, pair) in (1..).zip(at.windows(2)) {
        assert!(
            pair[1] - pair[0] >= min_gap(n),
            "retry {n} after {:?}: {at:?}",
            pair[1] - pair[0]
        );
    }
    // 1, 2, 4, 8, 16, then 30 s, each at least half: at most 11 requests in 120 s (the
    // reference's fresh streak at every restart made 53).
    assert!((8..=11).contains(&at.len()), "{at:?}");
    assert!(!at.contains(&secs(10)) && !at.contains(&secs(20)), "{at:?}");
    assert_eq!(h.system.active_source(), Some("streaming"));
}

#[test]
fn a_restarted_stream_waits_for_the_retry_it_had_scheduled() {
    // No jitter: the retries fall due at 1, 3, 7, 15, 31 s. The restarts at 10 and 20 s
    // do not connect; the one at 30 s waits for 31 s.
    let mut c = fdv2_config(Fdv2Config::streaming());
    c.backoff = BackoffConfig {
        jitter: 0.0,
        ..BackoffConfig::default()
    };
    let mut h = harness(c);
    outage(&mut h, STREAM, 20);
    h.start(secs(70));
    let at: Vec<Duration> = h.requests_to(STREAM).iter().map(|r| r.at).collect();
    assert_eq!(at, [0, 1, 3, 7, 15, 31, 61].map(secs));
}

#[test]
fn alternating_synchronizers_each_keep_their_own_timing() {
    // Streaming and polling (every 30 s) take turns every 10 s; the poller polls no
    // more often than its interval, the stream keeps its streak.
    let mut c = fdv2_config(two_synchronizers());
    c.backoff = BackoffConfig {
        jitter: 0.0,
        ..BackoffConfig::default()
    };
    let mut h = harness(c);
    outage(&mut h, STREAM, 20);
    outage(&mut h, POLL, 20);
    h.start(secs(120));
    let stream: Vec<Duration> = h.requests_to(STREAM).iter().map(|r| r.at).collect();
    let poll: Vec<Duration> = h.requests_to(POLL).iter().map(|r| r.at).collect();
    // Stream turns: [0,10) [20,30) [40,50) …; due at 1, 3, 7, then 15 (waits for the
    // turn at 20), 36 (waits for 40), 70 (the check at 70 ends the turn first: waits
    // for 80), 110 (likewise: waits for 120).
    assert_eq!(stream, [0, 1, 3, 7, 20, 40, 80, 120].map(secs));
    // Poll turns: [10,20) [30,40) …; due every 30 s from the last poll: 10, then 40
    // (waits for the turn at 50), 80 (waits for 90).
    assert_eq!(poll, [10, 50, 90].map(secs));
}

#[test]
fn a_removed_synchronizer_leaves_no_timing_behind() {
    // The stream fails, falls back to polling, then is refused for good on its next
    // turn; polling alone goes on at its interval.
    let mut h = fdv2(two_synchronizers());
    outage(&mut h, STREAM, 4);
    h.reply_to(STREAM, json(401, ""));
    outage(&mut h, POLL, 20);
    h.start(secs(200));
    assert_eq!(h.requests_to(STREAM).len(), 5);
    let poll: Vec<Duration> = h.requests_to(POLL).iter().map(|r| r.at).collect();
    assert_eq!(poll[0], secs(10));
    for pair in poll.windows(2) {
        assert!(pair[1] - pair[0] >= secs(30), "{poll:?}");
    }
    assert_eq!(h.system.active_source(), Some("polling"));
}

#[test]
fn a_stream_that_recovers_starts_a_new_streak() {
    // A failing streak, then a working stream for over a minute, then failures again:
    // the next retry waits about 1 s, not the 30 s of the old streak.
    let mut c = fdv2_config(Fdv2Config::streaming());
    c.backoff = BackoffConfig {
        jitter: 0.0,
        ..BackoffConfig::default()
    };
    let mut h = harness(c);
    outage(&mut h, STREAM, 6);
    let mut ok = Response::sse(&full(&[("a", 1)], "s1"), End::Close);
    ok.chunks.push((secs(90), bytes::Bytes::new()));
    h.reply_to(STREAM, Reply::Respond(ok));
    outage(&mut h, STREAM, 5);
    h.start(secs(400));
    let at: Vec<Duration> = h.requests_to(STREAM).iter().map(|r| r.at).collect();
    // Retries at 1, 3, 7, 15, 31 s; the 7th request connects at 61 s and stays 90 s.
    assert_eq!(at[..7], [0, 1, 3, 7, 15, 31, 61].map(secs));
    assert_eq!(at[7] - at[6], secs(90) + secs(1), "{at:?}");
}

#[test]
fn a_poll_in_flight_when_its_turn_ends_counts_as_made() {
    // The poll hangs past the 10 s check; polling's next turn (at 20 s, after the
    // stream's) does not poll again before 30 s after the hanging one started.
    let mut cfg = Fdv2Config::custom().synchronizers([
        SourceSpec::Polling {
            base_uri: None,
            interval: Some(secs(30)),
        },
        SourceSpec::streaming(),
    ]);
    cfg.timing.initializing_fallback = secs(10);
    let mut h = fdv2(cfg);
    h.reply_to(POLL, Reply::Hang);
    outage(&mut h, POLL, 10);
    outage(&mut h, STREAM, 20);
    h.start(secs(45));
    let poll: Vec<Duration> = h.requests_to(POLL).iter().map(|r| r.at).collect();
    assert_eq!(poll, [secs(0), secs(40)]);
}

/// The answer to a poll, its body `after` the head.
fn slow_json(after: Duration, body: &str) -> Reply {
    let mut r = Response::status(200, body).header("Content-Type", "application/json");
    r.chunks[0].0 = after;
    Reply::Respond(r)
}

#[test]
fn a_restart_on_a_late_timer_does_not_cut_off_the_poll_due_with_it() {
    // The live failure of `fdv2_polling_invalid_payload_is_invalid_data` on smol and
    // async-std (issue 42): the poller alone, its first poll INVALID_DATA, so the checks
    // at 10, 20 and 30 s restart it, and its carried next poll is due at 30 s, with the
    // third check. Timers that fire 1 ms late must not move the checks later at every
    // restart (to 30.002 s here): the poll would start first and the check would cut it
    // off 1 ms later, its answer lost and the next poll 30 s away.
    let mut h = fdv2(Fdv2Config::polling());
    h.timer_lateness = Duration::from_millis(1);
    h.reply_to(POLL, json(200, r#"{"events":[{"event":"put-object","data":{"version":1,"kind":"flag","key":"a","object":{}}}]}"#));
    h.reply_to(
        POLL,
        slow_json(Duration::from_millis(5), &poll_full(&[("b", 1)], "s")),
    );
    h.start(secs(31));
    let poll: Vec<Duration> = h.requests_to(POLL).iter().map(|r| r.at).collect();
    assert_eq!(poll, [Duration::ZERO, secs(30) + Duration::from_millis(1)]);
    assert_eq!(flags(&h), kv(&[("b", 1)]));
    assert_eq!(states(&h), [State::Initializing, State::Valid]);
}

#[test]
fn late_timers_make_no_more_requests_under_an_outage() {
    // Two minutes of 503 to everything, each preset, timers exact and late: lateness
    // moves requests a little later, never adds one (before the checks kept their grid,
    // a 1 ms lateness let the default preset's poller poll just before the check that
    // ended its turn, and again at its next turn).
    let run = |cfg: Fdv2Config, late: Duration| {
        let mut h = fdv2(cfg);
        h.timer_lateness = late;
        outage(&mut h, STREAM, 100);
        outage(&mut h, POLL, 100);
        h.start(secs(120));
        let at = |path| -> Vec<Duration> { h.requests_to(path).iter().map(|r| r.at).collect() };
        (at(STREAM), at(POLL))
    };
    for (name, cfg) in [
        ("streaming", Fdv2Config::streaming()),
        ("default", Fdv2Config::default()),
        ("polling", Fdv2Config::polling()),
    ] {
        let exact = run(cfg.clone(), Duration::ZERO);
        for ms in [1, 3, 7] {
            let late = run(cfg.clone(), Duration::from_millis(ms));
            assert!(
                late.0.len() <= exact.0.len() && late.1.len() <= exact.1.len(),
                "{name}, {ms} ms late: {late:?}, exact: {exact:?}"
            );
        }
    }
}
