//! Request bodies as HTTP/1.1 allows them, posted with a raw `TcpStream`: chunked (with
//! extensions and trailers), `Expect: 100-continue`, several posts on one keep-alive
//! connection, gzip, bodies split across many reads, limits on the decoded size, and
//! malformed framing.

mod common;

use common::{Response, gzip};

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use flagsync_server::{EventPayload, EventSubscription, PayloadKind, Server, ServerHandle};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(5);

type Headers<'a> = &'a [(&'a str, &'a str)];
const KEY: &str = "sdk-bodies";

fn start(max_body: usize) -> ServerHandle {
    Server::builder()
        .sdk_key(Some(KEY.into()))
        .max_body(max_body)
        .start()
        .unwrap()
}

/// `body` in the chunked transfer coding: chunks of `size` bytes, an extension on the
/// first size line, and `trailers` after the last chunk.
fn chunked(body: &[u8], size: usize, trailers: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, piece) in body.chunks(size).enumerate() {
        let ext = if i == 0 { ";ext=\"1\"" } else { "" };
        out.extend_from_slice(format!("{:x}{ext}\r\n", piece.len()).as_bytes());
        out.extend_from_slice(piece);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n");
    for t in trailers {
        out.extend_from_slice(format!("{t}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// A request head with the SDK's usual headers and `extra` (framing included).
fn head(method: &str, path: &str, version: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut head = format!(
        "{method} {path} HTTP/{version}\r\nHost: x\r\nContent-Type: application/json\r\n\
         User-Agent: NodeJSClient/9.0.0\r\nX-LaunchDarkly-Event-Schema: 4\r\n"
    );
    for (n, v) in extra {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// One connection, written to in pieces.
struct Conn {
    r: BufReader<TcpStream>,
}

impl Conn {
    fn open(addr: SocketAddr) -> Self {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(T)).unwrap();
        s.set_nodelay(true).unwrap();
        Self {
            r: BufReader::new(s),
        }
    }

    /// Write `bytes` in pieces of `step` bytes, flushing each.
    fn write(&mut self, bytes: &[u8], step: usize) {
        let s = self.r.get_mut();
        for piece in bytes.chunks(step.max(1)) {
            s.write_all(piece).unwrap();
            s.flush().unwrap();
        }
    }

    fn read_response(&mut self) -> Response {
        common::read_response(&mut self.r)
    }

    /// Whether the server closed the connection (nothing more arrives).
    fn is_closed(&mut self) -> bool {
        let mut rest = Vec::new();
        matches!(self.r.read_to_end(&mut rest), Ok(0))
    }
}

fn next(events: &EventSubscription) -> EventPayload {
    events.recv_timeout(T).expect("an event payload")
}

fn no_payload(events: &EventSubscription) -> bool {
    events.recv_timeout(Duration::from_millis(100)).is_err()
}

fn analytics(n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| {
                json!({"kind": "custom", "key": format!("event-{i}"), "creationDate": i,
                            "context": {"kind": "user", "key": "u1"}})
            })
            .collect(),
    )
}

#[test]
fn chunked_posts_with_trailers_share_one_keep_alive_connection() {
    let server = start(1 << 20);
    let events = server.subscribe_events(16);
    let mut conn = Conn::open(server.addr());
    let bulk = serde_json::to_vec(&analytics(40)).unwrap();
    let diag = br#"{"kind":"diagnostic-init","id":{"diagnosticId":"d"}}"#;
    let te = ("Transfer-Encoding", "chunked");
    let auth = ("Authorization", KEY);
    for (path, id, body, trailers) in [
        ("/bulk", "p-1", &bulk[..], &["X-Checksum: 1"][..]),
        ("/diagnostic", "p-2", &diag[..], &[][..]),
        ("/bulk", "p-3", &bulk[..], &["A: 1", "B: 2", "C: 3"][..]),
    ] {
        let mut req = head(
            "POST",
            path,
            "1.1",
            &[auth, te, ("X-LaunchDarkly-Payload-ID", id)],
        );
        req.extend_from_slice(&chunked(body, 100, trailers));
        conn.write(&req, 4096);
        let resp = conn.read_response();
        assert_eq!(
            (resp.status, resp.header("connection")),
            (202, None),
            "{path}"
        );
        let got = next(&events);
        assert_eq!(got.path, path);
        assert_eq!(got.payload_id.as_deref(), Some(id));
        assert_eq!(got.user_agent.as_deref(), Some("NodeJSClient/9.0.0"));
        assert_eq!(got.schema.as_deref(), Some("4"));
        assert_eq!(got.body, serde_json::from_slice::<Value>(body).unwrap());
    }
    // A Content-Length post on the same connection, then `Connection: close` honoured.
    let mut req = head(
        "POST",
        "/bulk",
        "1.1",
        &[auth, ("Content-Length", "2"), ("Connection", "close")],
    );
    req.extend_from_slice(b"[]");
    conn.write(&req, 4096);
    let resp = conn.read_response();
    assert_eq!(
        (resp.status, resp.header("connection")),
        (202, Some("close"))
    );
    assert_eq!(next(&events).kind, PayloadKind::Bulk);
    assert!(conn.is_closed());
}

#[test]
fn a_body_split_across_many_reads_arrives_whole() {
    let server = start(1 << 20);
    let events = server.subscribe_events(16);
    let bulk = serde_json::to_vec(&analytics(30)).unwrap();
    let auth = ("Authorization", KEY);
    let mut conn = Conn::open(server.addr());
    // Byte by byte, chunked with chunks of 7 bytes.
    let mut req = head(
        "POST",
        "/bulk",
        "1.1",
        &[auth, ("Transfer-Encoding", "chunked")],
    );
    req.extend_from_slice(&chunked(&bulk, 7, &["X-T: 1"]));
    conn.write(&req, 1);
    assert_eq!(conn.read_response().status, 202);
    assert_eq!(next(&events).events().len(), 30);
    // In odd pieces, one large chunk.
    let mut req = head(
        "POST",
        "/bulk",
        "1.1",
        &[auth, ("Transfer-Encoding", "chunked")],
    );
    req.extend_from_slice(&chunked(&bulk, bulk.len(), &[]));
    conn.write(&req, 13);
    assert_eq!(conn.read_response().status, 202);
    assert_eq!(next(&events).events().len(), 30);
    // In odd pieces with Content-Length.
    let len = bulk.len().to_string();
    let mut req = head("POST", "/bulk", "1.1", &[auth, ("Content-Length", &len)]);
    req.extend_from_slice(&bulk);
    conn.write(&req, 333);
    assert_eq!(conn.read_response().status, 202);
    assert_eq!(next(&events).events().len(), 30);
}

#[test]
fn pipelined_chunked_posts_are_each_answered() {
    let server = start(1 << 20);
    let events = server.subscribe_events(16);
    let mut all = Vec::new();
    for i in 0..3 {
        all.extend(head(
            "POST",
            "/bulk",
            "1.1",
            &[("Authorization", KEY), ("Transfer-Encoding", "chunked")],
        ));
        all.extend(chunked(
            &serde_json::to_vec(&analytics(i + 1)).unwrap(),
            5,
            &[],
        ));
    }
    let mut conn = Conn::open(server.addr());
    conn.write(&all, all.len());
    for i in 0..3 {
        assert_eq!(conn.read_response().status, 202);
        assert_eq!(next(&events).events().len(), i + 1);
    }
}

#[test]
fn a_chunked_gzip_body_is_gunzipped_and_limited_once_decoded() {
    let limit = 4096;
    let server = start(limit);
    let events = server.subscribe_events(16);
    let gz = gzip(&serde_json::to_vec(&analytics(5)).unwrap());
    let extra = [
        ("Authorization", KEY),
        ("Transfer-Encoding", "chunked"),
        ("Content-Encoding", "gzip"),
    ];
    let mut conn = Conn::open(server.addr());
    let mut req = head("POST", "/bulk", "1.1", &extra);
    req.extend_from_slice(&chunked(&gz, 16, &[]));
    conn.write(&req, 10);
    assert_eq!(conn.read_response().status, 202);
    let got = next(&events);
    assert!(got.gzip);
    assert_eq!(got.events().len(), 5);
    // Small when chunked, too large once gunzipped: 413, the connection still usable.
    let mut inflated = b"[".to_vec();
    inflated.resize(100_000, b' ');
    inflated.push(b']');
    let bomb = gzip(&inflated);
    assert!(bomb.len() < limit);
    let mut req = head("POST", "/bulk", "1.1", &extra);
    req.extend_from_slice(&chunked(&bomb, 64, &[]));
    conn.write(&req, 4096);
    assert_eq!(conn.read_response().status, 413);
    let mut req = head("POST", "/diagnostic", "1.1", &extra);
    req.extend_from_slice(&chunked(&gzip(b"{}"), 3, &[]));
    conn.write(&req, 4096);
    assert_eq!(conn.read_response().status, 202);
    assert_eq!(next(&events).kind, PayloadKind::Diagnostic);
}

#[test]
fn a_chunked_body_over_the_limit_is_413_and_closes() {
    let server = start(1000);
    let events = server.subscribe_events(16);
    let mut conn = Conn::open(server.addr());
    let mut req = head(
        "POST",
        "/bulk",
        "1.1",
        &[("Authorization", KEY), ("Transfer-Encoding", "chunked")],
    );
    req.extend_from_slice(&chunked(&[b' '; 1001], 300, &[]));
    conn.write(&req, 4096);
    let resp = conn.read_response();
    assert_eq!(
        (resp.status, resp.header("connection")),
        (413, Some("close"))
    );
    assert!(conn.is_closed());
    assert!(no_payload(&events));
}

#[test]
fn a_malformed_chunk_is_400_and_closes() {
    let server = start(1 << 20);
    let events = server.subscribe_events(16);
    for bad in [
        &b"5\r\n[]\r\n0\r\n\r\n"[..],
        b"xyz\r\n[]\r\n0\r\n\r\n",
        b"2\r\n[]XX0\r\n\r\n",
        b"2\r\n[]\r\n0\r\nX-Trailer: 1\r\n\rX",
    ] {
        let mut conn = Conn::open(server.addr());
        let mut req = head(
            "POST",
            "/bulk",
            "1.1",
            &[("Authorization", KEY), ("Transfer-Encoding", "chunked")],
        );
        req.extend_from_slice(bad);
        conn.write(&req, 3);
        let resp = conn.read_response();
        assert_eq!(
            (resp.status, resp.header("connection")),
            (400, Some("close"))
        );
        assert!(conn.is_closed());
    }
    assert!(no_payload(&events));
}

#[test]
fn expect_100_continue_is_answered_before_the_body_is_sent() {
    let server = start(1 << 20);
    let events = server.subscribe_events(16);
    let mut conn = Conn::open(server.addr());
    for framing in [("Content-Length", "2"), ("Transfer-Encoding", "chunked")] {
        let req = head(
            "POST",
            "/bulk",
            "1.1",
            &[("Authorization", KEY), ("Expect", "100-continue"), framing],
        );
        conn.write(&req, 4096);
        // Nothing of the body sent yet: the server asks for it.
        let interim = conn.read_response();
        assert_eq!(interim.status, 100);
        let body = if framing.0 == "Content-Length" {
            b"[]".to_vec()
        } else {
            chunked(b"[]", 1, &[])
        };
        conn.write(&body, 1);
        assert_eq!(conn.read_response().status, 202);
        assert_eq!(next(&events).events().len(), 0);
    }
    // A body-less request with `Expect` gets no 100.
    let req = head(
        "GET",
        "/sdk/latest-all",
        "1.1",
        &[("Authorization", KEY), ("Expect", "100-continue")],
    );
    conn.write(&req, 4096);
    assert_eq!(conn.read_response().status, 200);
}

#[test]
fn a_refused_request_with_expect_is_answered_without_100_and_closes() {
    let server = start(1000);
    let events = server.subscribe_events(16);
    let cases: [(&str, Headers<'_>, u16); 4] = [
        (
            "/bulk",
            &[("Authorization", "wrong"), ("Content-Length", "2")],
            401,
        ),
        (
            "/bulk",
            &[("Authorization", KEY), ("Content-Length", "5000")],
            413,
        ),
        (
            "/nowhere",
            &[("Authorization", KEY), ("Transfer-Encoding", "chunked")],
            404,
        ),
        (
            "/sdk/latest-all",
            &[("Authorization", KEY), ("Content-Length", "2")],
            405,
        ),
    ];
    for (path, extra, want) in cases {
        let mut conn = Conn::open(server.addr());
        let mut headers = vec![("Expect", "100-continue")];
        headers.extend_from_slice(extra);
        conn.write(&head("POST", path, "1.1", &headers), 4096);
        let resp = conn.read_response();
        assert_eq!(
            (resp.status, resp.header("connection")),
            (want, Some("close")),
            "{path}"
        );
        assert!(conn.is_closed(), "{path}");
    }
    assert!(no_payload(&events));
}

#[test]
fn http10_posts_close_unless_kept_alive() {
    let server = start(1 << 20);
    let events = server.subscribe_events(16);
    let auth = ("Authorization", KEY);
    let mut conn = Conn::open(server.addr());
    let mut req = head("POST", "/bulk", "1.0", &[auth, ("Content-Length", "2")]);
    req.extend_from_slice(b"[]");
    conn.write(&req, 4096);
    assert_eq!(conn.read_response().status, 202);
    assert!(conn.is_closed());
    let mut conn = Conn::open(server.addr());
    for _ in 0..2 {
        let mut req = head(
            "POST",
            "/bulk",
            "1.0",
            &[
                auth,
                ("Content-Length", "2"),
                ("Connection", "keep-alive"),
                ("Expect", "100-continue"),
            ],
        );
        req.extend_from_slice(b"[]");
        conn.write(&req, 4096);
        // No 100 for HTTP/1.0 (RFC 9110 §10.1.1).
        assert_eq!(conn.read_response().status, 202);
    }
    // HTTP/1.0 knows no chunks: its framing is faulty.
    let mut req = head(
        "POST",
        "/bulk",
        "1.0",
        &[auth, ("Transfer-Encoding", "chunked")],
    );
    req.extend_from_slice(&chunked(b"[]", 1, &[]));
    conn.write(&req, 4096);
    assert_eq!(conn.read_response().status, 400);
    assert!(conn.is_closed());
    assert_eq!(next(&events).kind, PayloadKind::Bulk);
    assert_eq!(next(&events).kind, PayloadKind::Bulk);
    assert_eq!(next(&events).kind, PayloadKind::Bulk);
    assert!(no_payload(&events));
}

#[test]
fn chunked_with_content_length_is_read_as_chunked_then_closes() {
    let server = start(1 << 20);
    let events = server.subscribe_events(16);
    let mut conn = Conn::open(server.addr());
    let mut req = head(
        "POST",
        "/bulk",
        "1.1",
        &[
            ("Authorization", KEY),
            ("Transfer-Encoding", "chunked"),
            ("Content-Length", "3"),
        ],
    );
    req.extend_from_slice(&chunked(b"[1,2]", 2, &[]));
    conn.write(&req, 4096);
    let resp = conn.read_response();
    assert_eq!(
        (resp.status, resp.header("connection")),
        (202, Some("close"))
    );
    assert_eq!(next(&events).body, json!([1, 2]));
    assert!(conn.is_closed());
}
