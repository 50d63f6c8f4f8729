//! The local flag server's events endpoints (`POST /bulk`, `POST /diagnostic`), posted
//! to with a raw `TcpStream` client as an SDK's event processor would.

mod common;

use common::{Response, gzip};

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use flagsync_server::{
    Endpoint, EventPayload, EventSubscription, PayloadKind, Server, ServerHandle,
};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(5);
const KEY: &str = "sdk-events";

fn start() -> ServerHandle {
    Server::builder().sdk_key(Some(KEY.into())).start().unwrap()
}

fn analytics() -> Value {
    json!([
        {"kind": "index", "creationDate": 1_700_000_000_000_u64,
         "context": {"kind": "user", "key": "u1", "name": "Ann"}},
        {"kind": "feature", "creationDate": 1_700_000_000_001_u64, "key": "checkout",
         "version": 5, "variation": 1, "value": true, "default": false,
         "context": {"kind": "user", "key": "u1"}},
        {"kind": "summary", "startDate": 1_700_000_000_000_u64, "endDate": 1_700_000_000_002_u64,
         "features": {"checkout": {"default": false, "contextKinds": ["user"],
                      "counters": [{"variation": 1, "version": 5, "value": true, "count": 2}]}}}
    ])
}

fn diagnostic() -> Value {
    json!({"kind": "diagnostic-init", "creationDate": 1_700_000_000_000_u64,
           "id": {"diagnosticId": "d-1", "sdkKeySuffix": "events"},
           "sdk": {"name": "flagsync", "version": "0.1.0"},
           "configuration": {"eventsCapacity": 10000}, "platform": {"name": "rust"}})
}

/// One keep-alive connection.
struct Conn {
    r: BufReader<TcpStream>,
}

impl Conn {
    fn open(addr: SocketAddr) -> Self {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(T)).unwrap();
        Self {
            r: BufReader::new(s),
        }
    }

    fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\n");
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        self.r.get_mut().write_all(&bytes).unwrap();
        self.read_response()
    }

    fn read_response(&mut self) -> Response {
        common::read_response(&mut self.r)
    }
}

/// One `POST` on a fresh connection, with the SDK's usual headers and `extra`.
fn post(addr: SocketAddr, path: &str, extra: &[(&str, &str)], body: &[u8]) -> Response {
    let mut headers = vec![
        ("Authorization", KEY),
        ("Content-Type", "application/json"),
        ("User-Agent", "FlagsyncTest/1.0"),
    ];
    headers.extend_from_slice(extra);
    Conn::open(addr).send("POST", path, &headers, body)
}

fn next(events: &EventSubscription) -> EventPayload {
    events.recv_timeout(T).expect("an event payload")
}

fn assert_none(events: &EventSubscription) {
    assert_eq!(
        events.recv_timeout(Duration::from_millis(100)),
        Err(RecvTimeoutError::Timeout)
    );
}

/// Parse an RFC 7231 IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn parse_imf_fixdate(s: &str) -> Option<SystemTime> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    let parts: Vec<&str> = s.split(' ').collect();
    let [weekday, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let weekday = weekday.strip_suffix(',')?;
    if day.len() != 2 || year.len() != 4 || time.len() != 8 {
        return None;
    }
    let (d, y): (i64, i64) = (day.parse().ok()?, year.parse().ok()?);
    let m = MONTHS.iter().position(|x| x == month)? as i64 + 1;
    let hms: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    // Days from civil (Howard Hinnant), for years after 1970.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    if DAYS[days.rem_euclid(7) as usize] != weekday {
        return None;
    }
    let secs = days * 86_400 + hms[0] * 3600 + hms[1] * 60 + hms[2];
    Some(UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
}

#[test]
fn the_test_date_parser_checks_format_and_weekday() {
    assert_eq!(
        parse_imf_fixdate("Sun, 06 Nov 1994 08:49:37 GMT"),
        Some(UNIX_EPOCH + Duration::from_secs(784_111_777))
    );
    assert_eq!(parse_imf_fixdate("Mon, 06 Nov 1994 08:49:37 GMT"), None);
    assert_eq!(parse_imf_fixdate("Sunday, 06-Nov-94 08:49:37 GMT"), None);
}

#[test]
fn bulk_is_202_with_an_empty_body_and_a_date_and_is_observed_with_its_headers() {
    let server = start();
    let events = server.subscribe_events(16);
    let body = analytics().to_string();
    let before = SystemTime::now() - Duration::from_secs(1);
    let resp = post(
        server.addr(),
        "/bulk",
        &[
            ("X-LaunchDarkly-Event-Schema", "4"),
            (
                "X-LaunchDarkly-Payload-ID",
                "9f0c6a2e-0000-4000-8000-000000000001",
            ),
            ("X-LaunchDarkly-Wrapper", "MyWrapper/2.0"),
            (
                "X-LaunchDarkly-Tags",
                "application-id/checkout application-version/1.2",
            ),
            ("X-LaunchDarkly-Instance-Id", "inst-1"),
        ],
        body.as_bytes(),
    );
    let after = SystemTime::now() + Duration::from_secs(1);
    assert_eq!(resp.status, 202);
    assert!(resp.body.is_empty());
    assert_eq!(resp.header("content-length"), Some("0"));
    let date = resp.header("date").expect("a Date header");
    let date = parse_imf_fixdate(date).unwrap_or_else(|| panic!("not an IMF-fixdate: {date:?}"));
    assert!(before <= date && date <= after, "{date:?}");

    let p = next(&events);
    assert_eq!(p.kind, PayloadKind::Bulk);
    assert_eq!(p.path, "/bulk");
    assert_eq!(p.schema.as_deref(), Some("4"));
    assert_eq!(
        p.payload_id.as_deref(),
        Some("9f0c6a2e-0000-4000-8000-000000000001")
    );
    assert_eq!(p.user_agent.as_deref(), Some("FlagsyncTest/1.0"));
    assert_eq!(p.wrapper.as_deref(), Some("MyWrapper/2.0"));
    assert_eq!(
        p.tags.as_deref(),
        Some("application-id/checkout application-version/1.2")
    );
    assert_eq!(p.instance_id.as_deref(), Some("inst-1"));
    assert!(!p.gzip);
    assert!(before <= p.received && p.received <= after);
    assert_eq!(p.body, analytics());
    assert_eq!(p.events().len(), 3);
    assert_eq!(p.events()[1]["kind"], "feature");
    assert_none(&events);
}

#[test]
fn gzip_bodies_and_base_paths_are_accepted() {
    let server = start();
    let events = server.subscribe_events(16);
    let bulk = gzip(analytics().to_string().as_bytes());
    let resp = post(
        server.addr(),
        "/relay/bulk",
        &[("Content-Encoding", "gzip")],
        &bulk,
    );
    assert_eq!(resp.status, 202);
    let diag = gzip(diagnostic().to_string().as_bytes());
    let resp = post(
        server.addr(),
        "/relay/diagnostic",
        &[("Content-Encoding", "gzip")],
        &diag,
    );
    assert_eq!(resp.status, 202);
    assert!(resp.header("date").is_some());
    // Plain diagnostic at the root, with an `api_key ` prefix.
    let resp = Conn::open(server.addr()).send(
        "POST",
        "/diagnostic",
        &[("Authorization", &format!("api_key {KEY}"))],
        diagnostic().to_string().as_bytes(),
    );
    assert_eq!(resp.status, 202);

    let p = next(&events);
    assert_eq!(
        (p.kind, p.path.as_str(), p.gzip),
        (PayloadKind::Bulk, "/relay/bulk", true)
    );
    assert_eq!(p.body, analytics());
    let p = next(&events);
    assert_eq!(
        (p.kind, p.path.as_str(), p.gzip),
        (PayloadKind::Diagnostic, "/relay/diagnostic", true)
    );
    assert_eq!(p.events(), [diagnostic()]);
    let p = next(&events);
    assert_eq!((p.kind, p.gzip), (PayloadKind::Diagnostic, false));
    assert_none(&events);
}

#[test]
fn a_wrong_or_missing_key_is_401_and_nothing_is_observed() {
    let server = start();
    let events = server.subscribe_events(16);
    let body = analytics().to_string();
    for auth in [&[("Authorization", "sdk-wrong")][..], &[]] {
        let resp = Conn::open(server.addr()).send("POST", "/bulk", auth, body.as_bytes());
        assert_eq!(resp.status, 401, "{auth:?}");
        assert!(resp.header("date").is_some());
        let resp = Conn::open(server.addr()).send("POST", "/diagnostic", auth, b"{}");
        assert_eq!(resp.status, 401, "{auth:?}");
    }
    assert_none(&events);
    // The recorded requests keep the headers, but the payloads never carry the key.
    assert_eq!(
        post(server.addr(), "/bulk", &[], body.as_bytes()).status,
        202
    );
    let p = next(&events);
    assert!(!format!("{p:?}").contains(KEY));
}

#[test]
fn malformed_json_is_400_and_the_connection_stays_usable() {
    let server = start();
    let events = server.subscribe_events(16);
    let mut conn = Conn::open(server.addr());
    let auth = [("Authorization", KEY)];
    for (path, body) in [
        ("/bulk", &b"[{\"kind\":"[..]),
        ("/bulk", b"not json"),
        ("/bulk", b""),
        ("/bulk", br#"{"kind":"custom"}"#),
        ("/diagnostic", b"[]"),
        ("/diagnostic", b"{"),
    ] {
        let resp = conn.send("POST", path, &auth, body);
        assert_eq!(resp.status, 400, "{path} {}", String::from_utf8_lossy(body));
        let msg: Value = serde_json::from_slice(&resp.body).unwrap();
        assert!(msg["message"].is_string());
    }
    let not_gzip = [("Authorization", KEY), ("Content-Encoding", "gzip")];
    assert_eq!(conn.send("POST", "/bulk", &not_gzip, b"[]").status, 400);
    let brotli = [("Authorization", KEY), ("Content-Encoding", "br")];
    assert_eq!(conn.send("POST", "/bulk", &brotli, b"[]").status, 415);
    assert_none(&events);
    // Same connection, a good payload.
    assert_eq!(conn.send("POST", "/bulk", &auth, b"[]").status, 202);
    assert_eq!(next(&events).events(), &[] as &[Value]);
}

#[test]
fn an_oversized_body_is_413_as_sent_or_once_gunzipped() {
    let limit = 4096;
    let server = Server::builder()
        .sdk_key(Some(KEY.into()))
        .max_body(limit)
        .start()
        .unwrap();
    let events = server.subscribe_events(16);
    // Exactly at the limit: accepted.
    let mut at_limit = b"[".to_vec();
    at_limit.resize(limit - 1, b' ');
    at_limit.push(b']');
    assert_eq!(post(server.addr(), "/bulk", &[], &at_limit).status, 202);
    assert_eq!(next(&events).events().len(), 0);
    // 2 MB declared and sent: refused from the head, the body read and discarded.
    let mut big = b"[".to_vec();
    big.resize(2 * 1024 * 1024 - 1, b' ');
    big.push(b']');
    let resp = post(server.addr(), "/bulk", &[], &big);
    assert_eq!(resp.status, 413);
    assert!(resp.header("date").is_some());
    // Small on the wire, too large decompressed.
    let mut inflated = b"[".to_vec();
    inflated.resize(100_000, b' ');
    inflated.push(b']');
    let bomb = gzip(&inflated);
    assert!(bomb.len() < limit);
    let resp = post(
        server.addr(),
        "/bulk",
        &[("Content-Encoding", "gzip")],
        &bomb,
    );
    assert_eq!(resp.status, 413);
    assert_none(&events);
    // The server still answers.
    assert_eq!(post(server.addr(), "/diagnostic", &[], b"{}").status, 202);
}

#[test]
fn events_endpoints_take_post_only() {
    let server = start();
    let resp = Conn::open(server.addr()).send("GET", "/bulk", &[("Authorization", KEY)], b"");
    assert_eq!((resp.status, resp.header("allow")), (405, Some("POST")));
    let resp =
        Conn::open(server.addr()).send("PUT", "/diagnostic", &[("Authorization", KEY)], b"{}");
    assert_eq!((resp.status, resp.header("allow")), (405, Some("POST")));
    let resp =
        Conn::open(server.addr()).send("POST", "/sdk/latest-all", &[("Authorization", KEY)], b"[]");
    assert_eq!((resp.status, resp.header("allow")), (405, Some("GET")));
    let reqs = server.requests();
    assert_eq!(reqs[0].endpoint(), Some(Endpoint::Bulk));
    assert_eq!(reqs[1].endpoint(), Some(Endpoint::Diagnostic));
}

#[test]
fn a_full_subscription_drops_and_counts_without_holding_up_requests() {
    let server = start();
    let slow = server.subscribe_events(2);
    let fast = server.subscribe_events(100);
    let mut conn = Conn::open(server.addr());
    let auth = [("Authorization", KEY)];
    for i in 0..10 {
        let body = json!([{"kind": "custom", "key": format!("e{i}"), "creationDate": 1}]);
        let resp = conn.send("POST", "/bulk", &auth, body.to_string().as_bytes());
        assert_eq!(resp.status, 202);
    }
    assert_eq!((slow.dropped(), fast.dropped()), (8, 0));
    let keys = |s: &EventSubscription| {
        std::iter::from_fn(|| s.try_recv())
            .map(|p| p.events()[0]["key"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(keys(&slow), ["e0", "e1"]);
    assert_eq!(keys(&fast).len(), 10);
    // A subscription that is gone costs nothing and holds nothing up.
    drop(slow);
    let last = json!([{"kind": "custom", "key": "last", "creationDate": 1}]).to_string();
    assert_eq!(
        conn.send("POST", "/bulk", &auth, last.as_bytes()).status,
        202
    );
    assert_eq!(keys(&fast), ["last"]);
}

#[test]
fn faults_apply_to_the_events_endpoints() {
    let server = start();
    let events = server.subscribe_events(16);
    server.fail_endpoint(Endpoint::Bulk, Some(503));
    assert_eq!(post(server.addr(), "/bulk", &[], b"[]").status, 503);
    assert_eq!(post(server.addr(), "/diagnostic", &[], b"{}").status, 202);
    assert_eq!(next(&events).kind, PayloadKind::Diagnostic);
    server.fail_endpoint(Endpoint::Bulk, None);
    assert_eq!(post(server.addr(), "/bulk", &[], b"[]").status, 202);
    assert_eq!(next(&events).kind, PayloadKind::Bulk);
    assert_eq!("/bulk".parse::<Endpoint>(), Ok(Endpoint::Bulk));
}

#[test]
fn shutdown_ends_subscriptions_after_the_queued_payloads() {
    let server = start();
    let events = server.subscribe_events(16);
    assert_eq!(post(server.addr(), "/bulk", &[], b"[]").status, 202);
    server.shutdown();
    assert_eq!(next(&events).kind, PayloadKind::Bulk);
    assert_eq!(events.recv(), None);
    assert_eq!(events.recv_timeout(T), Err(RecvTimeoutError::Disconnected));
}
