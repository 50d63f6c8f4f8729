//! `flagsync serve` (and a relay) under network load, as a child process: thousands of
//! idle connections and slow senders of a request head held by a fixed number of
//! threads, the descriptor limit raised at start and refused connections past it, and
//! a `/metrics` exposition `promtool check metrics` accepts.
//!
//! The tests that open thousands of sockets run one at a time (they share this
//! process's descriptors and the machine's two cores); each says what it measured on
//! standard error (`--nocapture`).

#[path = "common/net.rs"]
mod net;
#[path = "common/serve.rs"]
#[allow(dead_code)] // with_env is for the relay tests
mod serve;

use std::io::{ErrorKind, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use net::{Seen, Trickle};
use serve::Serve;

const KEY: &str = "sdk-network-test";
/// Connections that connect and send nothing.
const IDLE: usize = 5_000;
/// Connections that send a request head one byte a second.
const SLOW: usize = 2_000;
/// `--head-timeout` of the servers the slow senders try.
const HEAD_TIMEOUT: Duration = Duration::from_secs(3);
/// How late after the head timeout a slow sender may still be answered.
const GRACE: Duration = Duration::from_secs(2);
/// How long a poll may take while the connections are held.
const POLL_BUDGET: Duration = Duration::from_secs(1);
/// The longest a refused connection may wait for its answer.
const REFUSAL_BUDGET: Duration = Duration::from_secs(5);

/// One test with thousands of sockets at a time.
fn heavy() -> MutexGuard<'static, ()> {
    static HEAVY: Mutex<()> = Mutex::new(());
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

fn data_file(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("flagsync-cli-net-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let flag = serde_json::json!({"key": "f", "version": 1, "on": true, "variations": [false, true],
                                  "fallthrough": {"variation": 1}, "offVariation": 0, "salt": "s"});
    std::fs::write(&path, serde_json::json!({"flags": {"f": flag}}).to_string()).unwrap();
    path
}

/// `flagsync serve --data` (of a fresh file named `name`) with `KEY` and `extra`,
/// started through `wrapper` (e.g. `prlimit …`) when not empty.
fn serve_data(name: &str, wrapper: &[&str], extra: &[&str]) -> Serve {
    let file = data_file(name);
    let mut args = vec!["--data", file.to_str().expect("UTF-8"), "--sdk-key", KEY];
    args.extend_from_slice(extra);
    let server = Serve::start_via(wrapper, &args);
    assert!(
        server.banner.starts_with("flagsync: serving on "),
        "{:?}",
        server.banner
    );
    server
}

/// The numbers of a banner's `descriptors: soft limit N (was M), hard limit H`.
fn descriptors_line(server: &Serve) -> (String, String, String) {
    let line = server.line_containing("descriptors:", Duration::from_secs(5));
    let after = |what: &str| {
        let rest = line
            .split_once(what)
            .unwrap_or_else(|| panic!("no {what:?} in {line:?}"))
            .1;
        rest.split(|c: char| !c.is_ascii_alphanumeric())
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    (after("soft limit "), after("(was "), after("hard limit "))
}

fn assert_quick_200(what: &str, (r, took): (net::Response, Duration)) -> Duration {
    assert_eq!(r.status, 200, "{what}: {}{}", r.head, r.text());
    assert!(
        r.text().contains("\"flags\""),
        "{what}: not the flags: {}",
        r.text()
    );
    assert!(
        took < POLL_BUDGET,
        "{what}: answered 200 but took {took:?} (budget {POLL_BUDGET:?})"
    );
    took
}

/// The idle connections and slow senders against `server`; `what` names it.
fn idle_and_slow(server: &Serve, what: &str) {
    net::raise_fd_limit((IDLE + SLOW + 200) as u64);
    let addr = server.addr().to_owned();
    let pid = server.pid();
    net::wait_until_served(&addr, KEY, Duration::from_secs(15));
    for _ in 0..3 {
        assert_quick_200("a warm-up poll", net::poll(&addr, KEY));
    }
    let before = net::threads(pid);

    let start = Instant::now();
    let idle: Vec<TcpStream> = net::connect_many(&addr, IDLE, 4)
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            c.unwrap_or_else(|e| panic!("{what}: idle connection {i}: {e}"))
                .0
        })
        .collect();
    let idle_opened = start.elapsed();
    let mut trickle = Trickle::start(&addr, SLOW);
    let all_opened = start.elapsed();
    let until = Instant::now() + HEAD_TIMEOUT + GRACE + Duration::from_secs(1);
    let stepper = std::thread::spawn(move || {
        trickle.run(until);
        trickle
    });

    // Everything is held now: the server's threads, and a poll beside them.
    let during = net::threads(pid);
    let polled = net::poll(&addr, KEY);
    let during_after_poll = net::threads(pid);
    let probed = Instant::now();
    let idle_open = idle.iter().filter(|s| net::look(s) == Seen::Open).count();
    let probe_at = start.elapsed();
    let trickle = stepper.join().expect("the slow senders' thread");
    let report = trickle.report();
    let idle_open_after = idle.iter().filter(|s| net::look(s) == Seen::Open).count();
    eprintln!(
        "{what}: {IDLE} idle connections opened in {idle_opened:?}, {SLOW} slow senders by \
         {all_opened:?}; threads before {before}, while held {during} / {during_after_poll}; \
         poll while held: {} in {:?} (probe done at {probe_at:?}, idle still open then: \
         {idle_open}); slow senders: {} answered 408, {} closed silently, {} other {:?}, \
         {} still open, ended {:?}..{:?} after their first byte, at most {} header bytes \
         trickled; idle connections still open {:?} after opening: {idle_open_after}",
        polled.0.status,
        polled.1,
        report.answered_408,
        report.closed_silently,
        report.senders - report.answered_408 - report.closed_silently - report.still_open,
        report.answered_other,
        report.still_open,
        report.fastest,
        report.slowest,
        report.most_bytes_trickled,
        start.elapsed(),
    );

    assert!(
        during.max(during_after_poll) <= before + 2,
        "{what}: the server ran {before} threads before and {during} / {during_after_poll} \
         while {IDLE} idle connections and {SLOW} slow senders were held"
    );
    assert_quick_200(&format!("{what}: a poll while all were held"), polled);
    assert_eq!(
        idle_open, IDLE,
        "{what}: only {idle_open} of {IDLE} idle connections were still open when the \
         probe ended ({probe_at:?} after the first connected; head timeout {HEAD_TIMEOUT:?})"
    );
    assert!(
        report.first_end.is_none_or(|t| t > probed),
        "{what}: a slow sender was answered or closed before the probe ended: {report:?}"
    );
    assert_eq!(
        report.still_open, 0,
        "{what}: slow senders never answered: {report:?}"
    );
    assert!(
        report.answered_other.is_empty(),
        "{what}: slow senders answered other than 408: {report:?}"
    );
    assert!(
        report.slowest <= HEAD_TIMEOUT + GRACE,
        "{what}: a slow sender was answered {:?} after its first byte (head timeout \
         {HEAD_TIMEOUT:?}, allowed {:?}): {report:?}",
        report.slowest,
        HEAD_TIMEOUT + GRACE
    );
    assert!(
        report.fastest + Duration::from_millis(100) >= HEAD_TIMEOUT,
        "{what}: a slow sender was cut off {:?} after its first byte, before the head \
         timeout {HEAD_TIMEOUT:?}: {report:?}",
        report.fastest
    );
}

#[test]
fn a_file_server_holds_idle_and_slow_connections_on_a_fixed_number_of_threads() {
    let _one = heavy();
    let server = serve_data("idle-slow.json", &[], &["--head-timeout", "3"]);
    idle_and_slow(&server, "serve --data");
}

#[test]
fn a_relay_holds_idle_and_slow_connections_on_a_fixed_number_of_threads() {
    let _one = heavy();
    let upstream = serve_data("relay-upstream.json", &[], &[]);
    let relay = Serve::start(&[
        "--upstream",
        &upstream.url,
        "--sdk-key",
        KEY,
        "--head-timeout",
        "3",
    ]);
    assert!(
        relay.banner.starts_with("flagsync: relaying on "),
        "not a relay: {:?}",
        relay.banner
    );
    idle_and_slow(&relay, "relay");
}

#[test]
fn a_low_soft_descriptor_limit_is_raised_at_start() {
    const CONNECTIONS: usize = 2_000;
    let _one = heavy();
    let hard = net::raise_fd_limit((CONNECTIONS + 200) as u64);
    net::require_tool("prlimit", "util-linux");
    let hard = if hard == u64::MAX {
        "unlimited".to_owned()
    } else {
        hard.to_string()
    };
    let nofile = format!("--nofile=1024:{hard}");
    let server = serve_data("soft-limit.json", &["prlimit", &nofile], &[]);
    let (soft_now, was, hard_said) = descriptors_line(&server);
    eprintln!(
        "soft limit 1024, hard {hard}: the banner says soft {soft_now} (was {was}), hard \
         {hard_said}; /proc says {:?}",
        net::open_files_limit(server.pid())
    );
    assert_eq!(
        (soft_now.as_str(), was.as_str(), hard_said.as_str()),
        (hard.as_str(), "1024", hard.as_str()),
        "the banner's descriptors line (soft, was, hard)"
    );
    assert_eq!(
        net::open_files_limit(server.pid()),
        (hard.clone(), hard.clone()),
        "the server's limits in /proc"
    );

    let addr = server.addr().to_owned();
    let start = Instant::now();
    let conns: Vec<TcpStream> = net::connect_many(&addr, CONNECTIONS, 4)
        .into_iter()
        .enumerate()
        .map(|(i, c)| c.unwrap_or_else(|e| panic!("connection {i}: {e}")).0)
        .collect();
    let opened = start.elapsed();
    let took = assert_quick_200("a poll beside 2,000 connections", net::poll(&addr, KEY));
    let open = conns.iter().filter(|s| net::look(s) == Seen::Open).count();
    eprintln!(
        "{CONNECTIONS} connections opened in {opened:?}, a poll beside them in {took:?}, \
         {open} still open"
    );
    assert_eq!(
        open, CONNECTIONS,
        "connections refused or closed under a raised limit"
    );
}

/// How the connections opened under a hard limit of 1,024 fared.
#[derive(Debug, Default)]
struct Outcomes {
    /// Answered `503` with `Retry-After`.
    refused_503: usize,
    /// Answered `200` (a request within the limit).
    served_200: usize,
    /// Answered anything else: how many, and the first such answer.
    other: usize,
    first_other: Option<String>,
    /// Closed, or reset, without an answer.
    closed: usize,
    reset: usize,
    /// Refused at connect.
    refused_at_connect: usize,
    /// Neither answered nor closed when the wait ended.
    unanswered: usize,
    /// The longest wait for a 503 or a close, from connect.
    slowest_refusal: Duration,
}

/// `serve --data` under `prlimit --nofile=1024:1024` with `extra`: a keep-alive
/// connection polled before 2,000 more connections (each sending a poll when `ask`,
/// else nothing); past what it can hold (`may_hold` at most, besides the keep-alive
/// one) they are answered `503` or closed within `REFUSAL_BUDGET`, the keep-alive
/// connection is still served, and a new connection is served once they closed.
/// `/metrics` counts refusals for `reason` (`limit`, `descriptors`).
fn under_a_hard_limit(name: &str, extra: &[&str], ask: bool, may_hold: usize, reason: &str) {
    const MORE: usize = 2_000;
    let _one = heavy();
    net::raise_fd_limit((MORE + 200) as u64);
    net::require_tool("prlimit", "util-linux");
    let server = serve_data(name, &["prlimit", "--nofile=1024:1024"], extra);
    let fds = descriptors_line(&server);
    assert_eq!(
        fds,
        ("1024".into(), "1024".into(), "1024".into()),
        "{fds:?}"
    );
    let addr = server.addr().to_owned();
    let what = format!(
        "hard limit 1024, {extra:?}, connections that {}",
        if ask { "poll" } else { "send nothing" }
    );

    let mut keep = TcpStream::connect(&addr).expect("connect");
    let keep_poll = |keep: &mut TcpStream| {
        let start = Instant::now();
        keep.write_all(net::request("GET", "/sdk/latest-all", KEY, "", false).as_bytes())
            .expect("a poll on the keep-alive connection");
        let r = net::read_response(keep, false).unwrap_or_else(|e| {
            panic!(
                "{what}: the keep-alive connection: no answer after {:?}: {e}",
                start.elapsed()
            )
        });
        (r, start.elapsed())
    };
    assert_quick_200(
        "the keep-alive connection's first poll",
        keep_poll(&mut keep),
    );

    let start = Instant::now();
    let mut conns = Vec::new();
    let mut o = Outcomes::default();
    for c in net::connect_many(&addr, MORE, 4) {
        match c {
            Ok((s, connected)) => conns.push((s, connected, false)),
            Err(e) if e.kind() == ErrorKind::TimedOut => {
                panic!("{what}: a connection hung in connect for {REFUSAL_BUDGET:?}")
            }
            Err(_) => o.refused_at_connect += 1,
        }
    }
    if ask {
        let poll = net::request("GET", "/sdk/latest-all", KEY, "", false);
        for (s, ..) in &conns {
            // A refused connection may be closed before it asks.
            let _ = (&*s).write_all(poll.as_bytes());
        }
    }
    let opened = start.elapsed();
    let mut keep_polls = Vec::new();
    for i in 0..3 {
        let poll = format!("{what}: keep-alive poll {i} beside {MORE} more connections");
        keep_polls.push(assert_quick_200(&poll, keep_poll(&mut keep)));
    }
    // Wait until no more than it may hold are left without an answer, at most the
    // budget after the last connected.
    let last = conns.iter().map(|c| c.1).max().unwrap_or(start);
    loop {
        let now = Instant::now();
        for (s, connected, ended) in conns.iter_mut().filter(|c| !c.2) {
            let seen = net::look(s);
            if seen == Seen::Open {
                continue;
            }
            *ended = true;
            let text = match &seen {
                Seen::Data(bytes) => String::from_utf8_lossy(bytes).into_owned(),
                _ => String::new(),
            };
            if text.starts_with("HTTP/1.1 200 ") {
                o.served_200 += 1;
                continue;
            }
            o.slowest_refusal = o.slowest_refusal.max(now - *connected);
            match seen {
                Seen::Data(_)
                    if text.starts_with("HTTP/1.1 503 ") && text.contains("Retry-After:") =>
                {
                    o.refused_503 += 1;
                }
                Seen::Data(_) => {
                    o.other += 1;
                    o.first_other.get_or_insert(text);
                }
                Seen::Closed => o.closed += 1,
                _ => o.reset += 1,
            }
        }
        o.unanswered = conns.iter().filter(|c| !c.2).count();
        let done = if ask {
            o.unanswered == 0
        } else {
            o.unanswered <= may_hold
        };
        if done || now > last + REFUSAL_BUDGET {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let settled = start.elapsed();
    let keep_after = assert_quick_200("a keep-alive poll after the refusals", keep_poll(&mut keep));
    drop(conns);
    std::thread::sleep(Duration::from_millis(200));
    let (fresh, fresh_took) = net::poll(&addr, KEY);
    let (metrics, _) = net::fresh(&addr, "GET", "/metrics", KEY, "");
    let counted: Vec<_> = metrics
        .text()
        .lines()
        .filter(|l| l.starts_with("flagsync_server_connections_refused_total{"))
        .map(str::to_owned)
        .collect();
    eprintln!(
        "{what}: {MORE} opened in {opened:?}; keep-alive polls beside them {keep_polls:?}, \
         after {keep_after:?}; settled at {settled:?}: {o:?}; a new connection afterwards: \
         {} in {fresh_took:?}; {counted:?}",
        fresh.status
    );
    assert!(
        o.other == 0,
        "{what}: connections answered other than 200, or 503 with Retry-After: {o:?}"
    );
    assert!(
        o.unanswered + o.served_200 <= may_hold,
        "{what}: {} connections held past what it may hold ({may_hold} besides the \
         keep-alive one): {} neither answered nor closed and {} served \
         {REFUSAL_BUDGET:?} after the last connected: {o:?}",
        (o.unanswered + o.served_200).saturating_sub(may_hold),
        o.unanswered,
        o.served_200
    );
    assert!(
        o.slowest_refusal <= REFUSAL_BUDGET,
        "{what}: a refused connection waited {:?} for its answer: {o:?}",
        o.slowest_refusal
    );
    assert!(
        !ask || o.unanswered == 0,
        "{what}: polls never answered: {o:?}"
    );
    assert_eq!(
        fresh.status,
        200,
        "{what}: a new connection after the {MORE} closed: {}{}",
        fresh.head,
        fresh.text()
    );
    let series = format!("flagsync_server_connections_refused_total{{reason=\"{reason}\"}}");
    let exposition = metrics.text();
    assert!(sample(&exposition, &series) > 0.0, "{exposition}");
}

/// The value of the sample `series` (name and labels, exactly as exposed).
fn sample(exposition: &str, series: &str) -> f64 {
    exposition
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sample {series} in:\n{exposition}"))
}

/// The default connection limit under 1,024 descriptors: 1,024 less 64, the
/// keep-alive connection among them.
const DEFAULT_LIMIT_1024: usize = 1024 - 64;

#[test]
fn past_the_connection_limit_silent_connections_are_refused() {
    under_a_hard_limit(
        "limit-silent.json",
        &[],
        false,
        DEFAULT_LIMIT_1024 - 1,
        "limit",
    );
}

#[test]
fn past_the_connection_limit_polls_are_answered_503() {
    under_a_hard_limit(
        "limit-polls.json",
        &[],
        true,
        DEFAULT_LIMIT_1024 - 1,
        "limit",
    );
}

#[test]
fn out_of_descriptors_connections_are_refused_and_open_ones_served() {
    // No connection limit below the descriptors: they run out first.
    let no_limit = ["--max-connections", "100000"];
    under_a_hard_limit("no-fds.json", &no_limit, false, 1024, "descriptors");
}

#[test]
fn metrics_pass_promtool_and_count_what_happened() {
    const STREAMS: usize = 3;
    const POLLS: usize = 4;
    net::require_tool("promtool", "prometheus");
    let server = serve_data("metrics.json", &[], &[]);
    let addr = server.addr().to_owned();
    let mut streams = Vec::new();
    for _ in 0..STREAMS {
        let mut s = TcpStream::connect(&addr).expect("connect");
        s.write_all(net::request("GET", "/all", KEY, "", false).as_bytes())
            .expect("a stream request");
        let head = net::read_response(&mut s, true).expect("a stream's head");
        assert_eq!(head.status, 200, "{}", head.head);
        streams.push(s);
    }
    for _ in 0..POLLS {
        let (r, _) = net::poll(&addr, KEY);
        assert_eq!(r.status, 200, "{}", r.head);
    }
    let event = r#"[{"kind":"identify","creationDate":1,"context":{"kind":"user","key":"u1"}}]"#;
    let (r, _) = net::fresh(&addr, "POST", "/bulk", KEY, event);
    assert_eq!(r.status, 202, "{}{}", r.head, r.text());

    let (r, _) = net::fresh(&addr, "GET", "/metrics", KEY, "");
    assert_eq!(r.status, 200, "{}", r.head);
    let exposition = r.text();
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool");
    promtool
        .stdin
        .take()
        .expect("stdin")
        .write_all(r.body.as_slice())
        .expect("the exposition to promtool");
    let out = promtool.wait_with_output().expect("promtool's verdict");
    assert!(
        out.status.success(),
        "promtool check metrics: {}\nstdout: {}\nstderr: {}\nthe exposition:\n{exposition}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let value = |series: &str| sample(&exposition, series);
    let at_least = |series: &str, n: usize| {
        let v = value(series);
        assert!(v >= n as f64, "{series} is {v}, below {n}:\n{exposition}");
    };
    let streams_open = value("flagsync_server_streams_open{protocol=\"fdv1\"}");
    assert_eq!(streams_open, STREAMS as f64, "{exposition}");
    assert_eq!(
        value("flagsync_server_streams_open{protocol=\"fdv2\"}"),
        0.0,
        "{exposition}"
    );
    assert_eq!(
        value("flagsync_server_connections_open{kind=\"stream\"}"),
        STREAMS as f64,
        "{exposition}"
    );
    at_least(
        "flagsync_server_streams_opened_total{protocol=\"fdv1\"}",
        STREAMS,
    );
    at_least(
        "flagsync_server_requests_total{route=\"/sdk/latest-all\",status=\"200\"}",
        POLLS,
    );
    at_least(
        "flagsync_server_events_received_total{endpoint=\"bulk\"}",
        1,
    );
    // The streams, the polls, the event post and this scrape.
    at_least(
        "flagsync_server_connections_accepted_total{transport=\"plain\"}",
        STREAMS + POLLS + 2,
    );
    eprintln!(
        "promtool check metrics: ok ({} lines); streams_open fdv1 {streams_open}, polls \
         answered 200: {}",
        exposition.lines().count(),
        value("flagsync_server_requests_total{route=\"/sdk/latest-all\",status=\"200\"}")
    );
    drop(streams);
}
