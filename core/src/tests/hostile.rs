//! A hostile or broken flag server: redirects that would carry the SDK key off its
//! origin, `retry:` values that would defeat the backoff, and responses that trickle in
//! forever (PROTOCOL.md A.3, A.5).

use super::*;
use crate::status::{Cause, ErrorKind, RedirectRefusal, State};
use crate::testing::{End, Reply, Response};
use crate::{Input, Status};

fn redirect(code: u16, location: &str) -> Reply {
    Reply::Respond(Response::status(code, "").header("Location", location))
}

fn poll_ok(body: &str) -> Reply {
    Reply::Respond(Response::status(200, body).header("Content-Type", "application/json"))
}

fn last_error(h: &Harness) -> crate::ErrorInfo {
    h.system
        .status()
        .error
        .clone()
        .expect("an error is reported")
}

/// No request but those to the configured origin carries the SDK key.
fn key_stays_home(h: &Harness, home: &str) {
    for r in &h.requests {
        if r.header("Authorization").is_some() {
            assert_eq!(r.host, home, "the SDK key went to {r:?}");
        }
    }
}

fn refused(error: &crate::ErrorInfo, code: u16, refusal: RedirectRefusal, to: &str) {
    assert_eq!(error.kind, ErrorKind::ErrorResponse);
    assert_eq!(error.status_code, code);
    assert_eq!(
        error.cause,
        Cause::RedirectRefused {
            refusal,
            to: to.into()
        }
    );
}

#[test]
fn stream_redirect_to_another_host_or_port_is_refused_and_retried_at_home() {
    for (location, to) in [
        ("http://evil.test:8030/all", "http://evil.test:8030"),
        ("http://stream.test:9999/all", "http://stream.test:9999"),
        ("//evil.test/all", "http://evil.test"),
        ("https://stream.test:8030/all", "https://stream.test:8030"),
    ] {
        let mut h = harness(config(Mode::Streaming));
        h.reply(redirect(307, location));
        h.reply(stream(&put(&[("a", 1)], &[])));
        h.start(ms(400));
        assert_eq!(h.requests.len(), 1, "{location}: not followed");
        refused(&last_error(&h), 307, RedirectRefusal::CrossOrigin, to);
        assert_eq!(h.system.status().state, State::Initializing);
        assert_eq!(h.open_connections(), 0);
        // The next attempt goes to the configured URL, with backoff.
        h.run_until(secs(2));
        assert_eq!(h.requests.len(), 2);
        assert_eq!(h.requests[1].host, "stream.test:8030");
        assert_eq!(h.requests[1].target(), "/all");
        assert!(h.system.initialized());
        key_stays_home(&h, "stream.test:8030");
    }
}

#[test]
fn stream_redirect_from_https_to_http_is_refused_as_a_downgrade() {
    for location in [
        "http://stream.test:8030/all",
        "http://stream.test/all",
        "http://evil.test/all",
    ] {
        let mut c = config(Mode::Streaming);
        c.stream_uri = "https://stream.test:8030".into();
        let mut h = harness(c);
        h.reply(redirect(301, location));
        h.start(ms(400));
        assert_eq!(h.requests.len(), 1, "{location}: not followed");
        let error = last_error(&h);
        assert!(
            matches!(
                error.cause,
                Cause::RedirectRefused {
                    refusal: RedirectRefusal::Downgrade,
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(error.status_code, 301);
        key_stays_home(&h, "stream.test:8030");
    }
}

#[test]
fn stream_redirect_on_the_same_origin_keeps_the_key() {
    let mut h = harness(config(Mode::Streaming));
    h.reply(redirect(308, "http://stream.test:8030/moved"));
    h.reply(stream(&put(&[("a", 1)], &[])));
    h.start(ms(10));
    assert_eq!(h.requests.len(), 2);
    assert_eq!(h.requests[1].header("Authorization"), Some("sdk-test-key"));
    assert!(h.system.initialized());
}

#[test]
fn poll_redirect_off_the_origin_is_refused() {
    let mut c = config(Mode::Polling);
    c.polling_uri = "https://poll.test:8031".into();
    let mut h = harness(c);
    h.reply(redirect(302, "https://evil.test:8031/sdk/latest-all"));
    h.reply(redirect(307, "http://poll.test:8031/sdk/latest-all"));
    h.reply(redirect(307, "/sdk/elsewhere"));
    h.reply(poll_ok(&all_data(&[("a", 1)], &[])));
    h.start(secs(1));
    assert_eq!(h.requests.len(), 1);
    refused(
        &last_error(&h),
        302,
        RedirectRefusal::CrossOrigin,
        "https://evil.test:8031",
    );
    h.run_until(secs(31));
    assert_eq!(h.requests.len(), 2);
    let error = last_error(&h);
    refused(
        &error,
        307,
        RedirectRefusal::Downgrade,
        "http://poll.test:8031",
    );
    // A relative location stays on the origin and is followed with the key.
    h.run_until(secs(61));
    assert_eq!(h.requests.len(), 4);
    assert_eq!(h.requests[3].target(), "/sdk/elsewhere");
    assert_eq!(h.requests[3].header("Authorization"), Some("sdk-test-key"));
    assert!(h.system.initialized());
    key_stays_home(&h, "poll.test:8031");
}

/// A server that sends `retry:` and closes each stream at once; the FDv2 polling
/// initializer gets an empty data set.
fn retry_then_close(h: &mut Harness, mode: Mode, retry: &str, n: usize) {
    let body = format!("retry: {retry}\n\n");
    for _ in 0..n {
        h.reply_to(
            stream_path(mode),
            Reply::Respond(Response::sse(&body, End::Close)),
        );
    }
    h.reply_to("/sdk/poll", poll_ok(&all_data(&[], &[])));
}

fn stream_path(mode: Mode) -> &'static str {
    if mode == Mode::Fdv2 {
        "/sdk/stream"
    } else {
        "/all"
    }
}

#[test]
fn retry_zero_does_not_make_the_client_spin() {
    for mode in [Mode::Streaming, Mode::Fdv2] {
        let mut h = harness(config(mode));
        retry_then_close(&mut h, mode, "0", 100_000);
        // 10 s: before FDv2 falls back to polling (and later starts a new stream).
        h.start(secs(10));
        let requests = h.requests_to(stream_path(mode));
        // About 100 ms, 200 ms, 400 ms … 6.4 s (jitter subtracts up to half): at most 9.
        assert!(
            requests.len() <= 9,
            "{mode:?}: {} reconnects in 10 s",
            requests.len()
        );
        let first_gap = requests[1].at - requests[0].at;
        assert!(first_gap >= ms(50), "{first_gap:?}");
    }
}

#[test]
fn retry_never_resets_the_failure_streak() {
    let mut h = harness(config(Mode::Streaming));
    retry_then_close(&mut h, Mode::Streaming, "1000", 1000);
    h.start(secs(30));
    // 1, 2, 4, 8, 16 s (jitter subtracts up to half): as without `retry:`.
    assert!(
        (5..=8).contains(&h.requests.len()),
        "{} reconnects in 30 s",
        h.requests.len()
    );
}

#[test]
fn a_huge_retry_never_raises_the_cap() {
    for mode in [Mode::Streaming, Mode::Fdv2] {
        let mut h = harness(config(mode));
        retry_then_close(&mut h, mode, "1000000000000", 1);
        h.reply_to(stream_path(mode), stream(""));
        h.start(secs(31));
        let requests = h.requests_to(stream_path(mode));
        assert_eq!(requests.len(), 2, "{mode:?}: reconnected within the cap");
        let gap = requests[1].at - requests[0].at;
        assert!(gap <= secs(30), "{gap:?}");
    }
}

/// A poll body that trickles in one byte every 5 s.
fn trickle(body: &str) -> Reply {
    let mut r = Response::status(200, "").header("Content-Type", "application/json");
    r.headers
        .retain(|(n, _)| !n.eq_ignore_ascii_case("Content-Length"));
    r.headers
        .push(("Content-Length".into(), body.len().to_string()));
    r.chunks.clear();
    for b in body.chars() {
        r = r.then(secs(5), &b.to_string());
    }
    Reply::Respond(r)
}

#[test]
fn a_poll_that_trickles_in_ends_at_its_total_deadline_and_polls_again() {
    let mut h = harness(config(Mode::Polling));
    h.reply(trickle(&all_data(&[("a", 1)], &[])));
    h.reply(poll_ok(&all_data(&[("a", 2)], &[])));
    h.start(secs(59));
    assert_eq!(h.requests.len(), 1);
    assert!(h.system.status().error.is_none());
    h.run_until(secs(60));
    let error = last_error(&h);
    assert_eq!(
        (error.kind, &error.cause),
        (ErrorKind::NetworkError, &Cause::ResponseTimeout)
    );
    assert_eq!(h.open_connections(), 0, "the trickling poll is closed");
    // The poll overran its interval: the next starts at once.
    assert_eq!(h.requests.len(), 2);
    assert_eq!(h.requests[1].at, secs(60));
    assert_eq!(items(&h, Kind::Flag), [("a".into(), 2)]);
}

#[test]
fn the_poll_deadline_is_configurable() {
    let mut c = config(Mode::Polling);
    c.poll_response_timeout = secs(12);
    let mut h = harness(c);
    h.reply(trickle(&all_data(&[("a", 1)], &[])));
    h.start(secs(13));
    assert_eq!(last_error(&h).cause, Cause::ResponseTimeout);
    assert_eq!(error_times(&h), [secs(12)]);
}

/// When each status that carried a new error was reported.
fn error_times(h: &Harness) -> Vec<Duration> {
    let mut last = None;
    h.events
        .iter()
        .filter_map(|(at, e)| match e {
            crate::Event::StatusChanged(s) if s.error != last => {
                last = s.error.clone();
                Some(*at)
            }
            _ => None,
        })
        .collect()
}

/// Feed a response head one byte every 5 s on the first connection.
fn trickle_head(h: &mut Harness, until: Duration) -> Vec<Status> {
    let conn = h.requests[0].conn;
    h.input(Input::Connected { conn });
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    let mut t = h.elapsed();
    for b in head {
        t += secs(5);
        if t > until {
            break;
        }
        h.run_until(t);
        h.input(Input::Data {
            conn,
            bytes: std::slice::from_ref(b),
        });
    }
    h.run_until(until);
    h.statuses()
}

#[test]
fn a_stream_head_that_trickles_in_ends_at_its_deadline() {
    let mut h = harness(config(Mode::Streaming));
    h.start(ms(1));
    let statuses = trickle_head(&mut h, secs(31));
    let error = statuses
        .last()
        .and_then(|s| s.error.clone())
        .expect("a timeout is reported");
    assert_eq!(
        (error.kind, &error.cause),
        (ErrorKind::NetworkError, &Cause::ResponseTimeout)
    );
    assert_eq!(error_times(&h), [secs(30)]);
    assert!(h.closed.contains(&h.requests[0].conn));
    // And it reconnects with backoff.
    h.run_until(secs(32));
    assert_eq!(h.requests.len(), 2);
}

#[test]
fn a_slow_stream_body_is_bounded_by_the_read_timeout_only() {
    let mut h = harness(config(Mode::Streaming));
    let mut r = Response::sse(&put(&[("a", 1)], &[]), End::Hang);
    for _ in 0..20 {
        r = r.then(secs(5), ":\n");
    }
    h.reply(Reply::Respond(r));
    h.start(secs(90));
    assert_eq!(h.requests.len(), 1);
    assert_eq!(h.system.status().state, State::Valid);
    assert!(h.system.status().error.is_none());
}

/// A body of about 1 MB that inflates past the poll's body limit (64 MiB by default,
/// issue 19): refused as too large, never kept whole.
#[test]
fn a_gzip_bomb_poll_is_refused_at_the_default_body_limit() {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(br#"{"flags":{},"segments":{},"padding":""#)
        .unwrap();
    let zeros = vec![b'0'; 1 << 20];
    for _ in 0..80 {
        enc.write_all(&zeros).unwrap();
    }
    enc.write_all(br#""}"#).unwrap();
    let gz = enc.finish().unwrap();
    assert!(gz.len() < 1 << 20, "{} bytes compressed", gz.len());
    let mut r = Response::status(200, "").header("Content-Encoding", "gzip");
    r.headers[0].1 = gz.len().to_string();
    r.chunks = vec![(Duration::ZERO, bytes::Bytes::from(gz))];
    let mut h = harness(config(Mode::Polling));
    h.reply(Reply::Respond(r));
    h.start(secs(1));
    assert!(!h.system.initialized());
    let error = last_error(&h);
    assert!(
        matches!(
            error.cause,
            Cause::Http(crate::http1::Error::BodyTooLarge { limit }) if limit == 64 << 20
        ),
        "{error:?}"
    );
    assert_eq!(crate::Config::new("k").limits.max_poll_body, 64 << 20);
}
