//! Synchronizer fallback, removal and recovery (the B §5.7 coordinator table).

use super::*;

// ---- synchronizer fallback, removal, recovery -----------------------------------

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
