//! The local flag server, exercised with a raw `TcpStream` client.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{Response, read_head, read_response};
use flagsync_server::{Endpoint, Server, ServerHandle};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(5);

fn sample() -> Value {
    json!({
        "flags": {
            "a": {"key": "a", "version": 3, "on": true, "variations": [false, true],
                  "fallthrough": {"variation": 1}, "offVariation": 0},
            "b": {"on": false}
        },
        "segments": {"s": {"included": ["u1"]}}
    })
}

fn start() -> ServerHandle {
    Server::builder()
        .sdk_key(Some("sdk-good".into()))
        .env_id(Some("env-1".into()))
        .data(sample())
        .start()
        .unwrap()
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    s
}

/// One request on a fresh connection, `Content-Length`-framed response.
fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut s = connect(addr);
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    read_response(&mut BufReader::new(s))
}

/// A response body read as it arrives: the chunked transfer coding decoded (with a
/// check of its framing), any other body passed through.
struct Body {
    r: BufReader<TcpStream>,
    chunked: bool,
    /// Bytes left in the current chunk.
    left: usize,
    /// The last chunk was read: the body ended cleanly.
    ended: bool,
}

impl Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.chunked {
            return self.r.read(buf);
        }
        if self.ended {
            return Ok(0);
        }
        if self.left == 0 {
            let mut line = String::new();
            if self.r.read_line(&mut line)? == 0 {
                return Ok(0); // The connection ended without the last chunk.
            }
            let size = line.trim_end_matches("\r\n");
            self.left = usize::from_str_radix(size, 16)
                .unwrap_or_else(|_| panic!("bad chunk size line {line:?}"));
            if self.left == 0 {
                line.clear();
                self.r.read_line(&mut line)?;
                assert_eq!(line, "\r\n", "no trailers after the last chunk");
                self.ended = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left);
        let n = self.r.read(&mut buf[..want])?;
        self.left -= n;
        if self.left == 0 {
            let mut crlf = [0u8; 2];
            self.r.read_exact(&mut crlf)?;
            assert_eq!(&crlf, b"\r\n", "a chunk ends with CRLF");
        }
        Ok(n)
    }
}

struct Stream {
    r: BufReader<Body>,
    status: u16,
    headers: Vec<(String, String)>,
    comments: usize,
}

fn open_stream(addr: SocketAddr, key: &str) -> Stream {
    open_path(addr, "/all", key)
}

fn open_path(addr: SocketAddr, target: &str, key: &str) -> Stream {
    let mut s = connect(addr);
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: {key}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r);
    let chunked = headers
        .iter()
        .any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v == "chunked");
    Stream {
        r: BufReader::new(Body {
            r,
            chunked,
            left: 0,
            ended: false,
        }),
        status,
        headers,
        comments: 0,
    }
}

impl Stream {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the body ended with the chunked coding's last chunk.
    fn ended_cleanly(&self) -> bool {
        self.r.get_ref().ended
    }

    /// The names of the next `n` events, and the data of the last one.
    fn next_names(&mut self, n: usize) -> (Vec<String>, Value) {
        let mut names = Vec::new();
        let mut last = Value::Null;
        for _ in 0..n {
            let (name, data) = self.next_event().expect("an event");
            names.push(name);
            last = data;
        }
        (names, last)
    }

    /// The next event, or `None` at end of stream.
    fn next_event(&mut self) -> Option<(String, Value)> {
        let (mut name, mut data) = (String::from("message"), String::new());
        let mut line = String::new();
        loop {
            line.clear();
            if self.r.read_line(&mut line).ok()? == 0 {
                return None;
            }
            let l = line.trim_end_matches('\n');
            if l.starts_with(':') {
                self.comments += 1;
            } else if let Some(v) = l.strip_prefix("event: ") {
                name = v.to_owned();
            } else if let Some(v) = l.strip_prefix("data: ") {
                data.push_str(v);
            } else if l.is_empty() && !data.is_empty() {
                return Some((name, serde_json::from_str(&data).unwrap()));
            }
        }
    }
}

#[test]
fn put_on_connect_then_patches_and_deletes() {
    let server = start();
    let mut st = open_stream(server.addr(), "sdk-good");
    assert_eq!(st.status, 200);
    let ct = st
        .headers
        .iter()
        .find(|(n, _)| n == "Content-Type")
        .unwrap();
    assert_eq!(ct.1, "text/event-stream; charset=utf-8");
    // Framed as LaunchDarkly frames streams: chunked, never cached, no length.
    assert_eq!(st.header("transfer-encoding"), Some("chunked"));
    assert_eq!(st.header("cache-control"), Some("no-cache"));
    assert_eq!(st.header("content-length"), None);
    assert!(
        st.headers
            .iter()
            .any(|(n, v)| n == "X-LD-EnvID" && v == "env-1")
    );
    let (name, put) = st.next_event().unwrap();
    assert_eq!(name, "put");
    assert_eq!(put["path"], "/");
    assert_eq!(put["data"]["flags"]["a"]["version"], 3);
    assert_eq!(put["data"]["flags"]["b"]["key"], "b");
    assert_eq!(put["data"]["flags"]["b"]["version"], 1);
    assert_eq!(put["data"]["segments"]["s"]["included"][0], "u1");

    assert_eq!(server.set_flag("a", json!({"on": false})).unwrap(), 4);
    let (name, patch) = st.next_event().unwrap();
    assert_eq!(name, "patch");
    assert_eq!(patch["path"], "/flags/a");
    assert_eq!(patch["data"]["version"], 4);
    assert_eq!(patch["data"]["key"], "a");

    assert_eq!(server.set_segment("s", json!({"version": 9})).unwrap(), 9);
    let (_, patch) = st.next_event().unwrap();
    assert_eq!(patch["path"], "/segments/s");

    assert_eq!(server.delete_flag("b"), 2);
    let (name, del) = st.next_event().unwrap();
    assert_eq!(name, "delete");
    assert_eq!(del, json!({"path": "/flags/b", "version": 2}));

    // Replaced data: what changed goes out as changes (one new flag: one patch).
    let unchanged = json!({"a": {"on": false, "version": 4}});
    let segments = json!({"s": {"version": 9}});
    let mut flags = unchanged.clone();
    flags["c"] = json!({});
    server
        .replace_all(json!({"flags": flags, "segments": segments}))
        .unwrap();
    let (name, patch) = st.next_event().unwrap();
    assert_eq!(name, "patch");
    assert_eq!(
        patch,
        json!({"path": "/flags/c", "data": {"key": "c", "version": 1}})
    );
    // A flag gone: one delete, above the version served.
    server
        .replace_all(json!({"flags": {"c": {}}, "segments": segments}))
        .unwrap();
    let (name, del) = st.next_event().unwrap();
    assert_eq!(name, "delete");
    assert_eq!(del, json!({"path": "/flags/a", "version": 5}));
    // More than 64 changes: the whole data set.
    let many: serde_json::Map<String, Value> =
        (0..65).map(|i| (format!("f{i}"), json!({}))).collect();
    server.replace_all(json!({"flags": many})).unwrap();
    let (name, put) = st.next_event().unwrap();
    assert_eq!(name, "put");
    assert_eq!(put["data"]["flags"].as_object().unwrap().len(), 65);
    assert_eq!(put["data"]["segments"], json!({}));
}

#[test]
fn every_stream_gets_every_change() {
    let server = start();
    let mut streams: Vec<_> = (0..3)
        .map(|_| open_stream(server.addr(), "sdk-good"))
        .collect();
    for s in &mut streams {
        assert_eq!(s.next_event().unwrap().0, "put");
    }
    assert_eq!(server.open_streams(), 3);
    server.set_flag("new", json!({"on": true})).unwrap();
    for s in &mut streams {
        let (name, p) = s.next_event().unwrap();
        assert_eq!((name.as_str(), &p["path"]), ("patch", &json!("/flags/new")));
    }
}

#[test]
fn an_http_1_0_stream_is_unframed_and_ends_with_the_connection() {
    let server = start();
    let mut s = connect(server.addr());
    s.write_all(b"GET /all HTTP/1.0\r\nAuthorization: sdk-good\r\n\r\n")
        .unwrap();
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r);
    assert_eq!(status, 200);
    assert!(
        !headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding")),
        "{headers:?}"
    );
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert_eq!(line, "event: put\n", "the events come bare");
    server.drop_streams();
    let mut rest = String::new();
    r.read_to_string(&mut rest).unwrap();
    assert!(rest.starts_with("data: {\"path\":\"/\""), "{rest}");
    assert!(
        rest.ends_with("}\n\n"),
        "nothing after the events: {rest:?}"
    );
}

#[test]
fn wrong_or_missing_key_is_401() {
    let server = start();
    let st = open_stream(server.addr(), "sdk-bad");
    assert_eq!(st.status, 401);
    assert_eq!(get(server.addr(), "/sdk/latest-all", &[]).status, 401);
    let ok = get(
        server.addr(),
        "/sdk/latest-all",
        &[("Authorization", "api_key sdk-good")],
    );
    assert_eq!(ok.status, 200);
    // No key configured: anything goes.
    let open = Server::builder().start().unwrap();
    assert_eq!(open_stream(open.addr(), "whatever").status, 200);
}

#[test]
fn polling_etag_304_and_gzip() {
    let server = start();
    let auth = ("Authorization", "sdk-good");
    let r = get(server.addr(), "/sdk/latest-all?other=x", &[auth]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("x-ld-envid"), Some("env-1"));
    let body: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["flags"]["a"]["version"], 3);
    assert!(body["segments"]["s"].is_object());
    assert_eq!(body.as_object().unwrap().len(), 2);
    let etag = r.header("etag").unwrap().to_owned();

    let same = get(
        server.addr(),
        "/sdk/latest-all",
        &[auth, ("If-None-Match", &etag)],
    );
    assert_eq!(same.status, 304);
    assert!(same.body.is_empty());

    server.set_flag("a", json!({})).unwrap();
    let changed = get(
        server.addr(),
        "/sdk/latest-all",
        &[auth, ("If-None-Match", &etag)],
    );
    assert_eq!(changed.status, 200);
    assert_ne!(changed.header("etag").unwrap(), etag);

    let gz = get(
        server.addr(),
        "/sdk/latest-all",
        &[auth, ("Accept-Encoding", "gzip")],
    );
    assert_eq!(gz.status, 200);
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&gz.body[..])
        .read_to_end(&mut plain)
        .unwrap();
    assert_eq!(plain, changed.body);
    assert_eq!(String::from_utf8(plain).unwrap(), server.data_json());
}

#[test]
fn keep_alive_serves_several_polls_on_one_connection() {
    let server = start();
    let mut s = connect(server.addr());
    let req = "GET /sdk/latest-all HTTP/1.1\r\nHost: x\r\nAuthorization: sdk-good\r\n\r\n";
    s.write_all(format!("{req}{req}").as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    for _ in 0..2 {
        let (status, headers) = read_head(&mut r);
        assert_eq!(status, 200);
        let len: usize = headers
            .iter()
            .find(|(n, _)| n == "Content-Length")
            .unwrap()
            .1
            .parse()
            .unwrap();
        let mut body = vec![0; len];
        r.read_exact(&mut body).unwrap();
    }
}

#[test]
fn heartbeats_are_sent() {
    let server = Server::builder()
        .heartbeat(Duration::from_millis(50))
        .start()
        .unwrap();
    let mut st = open_stream(server.addr(), "");
    assert_eq!(st.next_event().unwrap().0, "put");
    std::thread::sleep(Duration::from_millis(300));
    server.set_flag("x", json!({})).unwrap();
    assert_eq!(st.next_event().unwrap().0, "patch");
    assert!(st.comments >= 3, "only {} heartbeats", st.comments);
}

#[test]
fn shutdown_closes_streams_and_stops_listening() {
    let server = start();
    let addr = server.addr();
    let mut st = open_stream(addr, "sdk-good");
    st.next_event().unwrap();
    // An idle keep-alive connection too.
    let idle = connect(addr);
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    server.shutdown();
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert!(st.next_event().is_none());
    let mut buf = [0u8; 1];
    assert!(matches!((&idle).read(&mut buf), Ok(0) | Err(_)));
    assert!(TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err());
    server.shutdown(); // idempotent
}

#[test]
fn fault_fail_next() {
    let server = start();
    server.fail_next(2, 503);
    assert_eq!(open_stream(server.addr(), "sdk-good").status, 503);
    let r = get(
        server.addr(),
        "/sdk/latest-all",
        &[("Authorization", "sdk-good")],
    );
    assert_eq!(r.status, 503);
    assert_eq!(open_stream(server.addr(), "sdk-good").status, 200);
    assert_eq!(server.request_count(), 3);
    let reqs = server.requests();
    assert_eq!(reqs[0].target, "/all");
    assert_eq!(reqs[0].header("authorization"), Some("sdk-good"));
}

#[test]
fn fault_drop_streams() {
    let server = start();
    let mut st = open_stream(server.addr(), "sdk-good");
    st.next_event().unwrap();
    assert!(server.wait_for_streams(1, T));
    server.drop_streams();
    assert!(st.next_event().is_none());
    assert!(st.ended_cleanly(), "the body ends with the last chunk");
    assert_eq!(server.open_streams(), 0);
    // New streams still work.
    let mut again = open_stream(server.addr(), "sdk-good");
    assert_eq!(again.next_event().unwrap().0, "put");
}

#[test]
fn fault_hang() {
    let server = start();
    server.hang(true);
    let mut s = connect(server.addr());
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    s.write_all(b"GET /sdk/latest-all HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 16];
    let err = s.read(&mut buf).unwrap_err();
    assert!(matches!(
        err.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    ));
    s.set_read_timeout(Some(T)).unwrap();
    server.hang(false);
    // The held connection is closed without an answer; new ones are served.
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0);
    assert_eq!(
        get(
            server.addr(),
            "/sdk/latest-all",
            &[("Authorization", "sdk-good")]
        )
        .status,
        200
    );
}

#[test]
fn unknown_paths_and_methods() {
    let server = Server::builder().start().unwrap();
    assert_eq!(get(server.addr(), "/nope", &[]).status, 404);
    let mut s = connect(server.addr());
    s.write_all(b"POST /all HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        .unwrap();
    let (status, _) = read_head(&mut BufReader::new(s));
    assert_eq!(status, 405);
    // A base path prefix is fine.
    assert_eq!(get(server.addr(), "/relay/sdk/latest-all", &[]).status, 200);
}

#[test]
fn invalid_data_is_rejected() {
    assert!(Server::builder().data(json!([1, 2])).start().is_err());
    let server = Server::builder().start().unwrap();
    assert!(server.set_flag("k", json!("not an object")).is_err());
    assert!(server.replace_all(json!({"flags": 1})).is_err());
}

// ---------------------------------------------------------------------------------
// FDv2

const AUTH: (&str, &str) = ("Authorization", "sdk-good");

#[test]
fn fdv2_stream_full_payload_then_changes() {
    let server = start();
    let mut st = open_path(server.addr(), "/sdk/stream?other=x", "sdk-good");
    assert_eq!(st.status, 200);
    assert_eq!(st.header("x-ld-envid"), Some("env-1"));
    assert_eq!(st.header("x-ld-fd-fallback"), None);
    let (name, intent) = st.next_event().unwrap();
    assert_eq!(name, "server-intent");
    let payload = &intent["payloads"][0];
    assert_eq!(payload["intentCode"], "xfer-full");
    assert_eq!(payload["reason"], "payload-missing");
    assert_eq!(payload["target"], 1);
    let mut puts = Vec::new();
    for _ in 0..3 {
        let (name, put) = st.next_event().unwrap();
        assert_eq!(name, "put-object");
        puts.push((
            put["kind"].clone(),
            put["key"].clone(),
            put["version"].clone(),
        ));
    }
    assert_eq!(
        puts,
        [
            (json!("flag"), json!("a"), json!(3)),
            (json!("flag"), json!("b"), json!(1)),
            (json!("segment"), json!("s"), json!(1)),
        ]
    );
    let (name, done) = st.next_event().unwrap();
    assert_eq!(name, "payload-transferred");
    let state = server.fdv2_state();
    assert_eq!(done, json!({"state": state, "version": 1}));

    // A change: one put-object, then the new selector.
    server.set_flag("a", json!({"on": false})).unwrap();
    let (name, put) = st.next_event().unwrap();
    assert_eq!(name, "put-object");
    assert_eq!(
        (&put["key"], &put["version"], &put["object"]["version"]),
        (&json!("a"), &json!(4), &json!(4))
    );
    let (name, done) = st.next_event().unwrap();
    assert_eq!(name, "payload-transferred");
    assert_eq!(done["version"], 2);
    assert_eq!(done["state"], server.fdv2_state().as_str());
    assert_ne!(done["state"], state.as_str());

    server.delete_segment("s");
    let (names, done) = st.next_names(2);
    assert_eq!(names, ["delete-object", "payload-transferred"]);
    assert_eq!(done["version"], 3);

    // Replaced data: its changes, as one xfer-changes payload (a flag added and the
    // others gone).
    server.replace_all(json!({"flags": {"c": {}}})).unwrap();
    let (names, done) = st.next_names(4);
    assert_eq!(
        names,
        [
            "delete-object",
            "delete-object",
            "put-object",
            "payload-transferred"
        ]
    );
    assert_eq!(done["version"], 4);
    assert_eq!(server.payload_version(), 4);
    // More than 64 changes: a new full transfer.
    let many: serde_json::Map<String, Value> =
        (0..65).map(|i| (format!("f{i}"), json!({}))).collect();
    server.replace_all(json!({"flags": many})).unwrap();
    let (name, intent) = st.next_event().unwrap();
    assert_eq!(name, "server-intent");
    assert_eq!(intent["payloads"][0]["intentCode"], "xfer-full");
    let (names, done) = st.next_names(66);
    assert_eq!(
        names.last().map(String::as_str),
        Some("payload-transferred")
    );
    assert_eq!(done["version"], 5);
}

#[test]
fn fdv2_current_basis_gets_intent_none_and_later_changes() {
    let server = start();
    let state = server.fdv2_state();
    let mut st = open_path(
        server.addr(),
        &format!("/sdk/stream?basis={state}"),
        "sdk-good",
    );
    let (name, intent) = st.next_event().unwrap();
    assert_eq!(name, "server-intent");
    assert_eq!(intent["payloads"][0]["intentCode"], "none");
    assert_eq!(intent["payloads"][0]["reason"], "up-to-date");
    assert!(server.wait_for_streams(1, T));
    server.set_flag("new", json!({})).unwrap();
    let (names, _) = st.next_names(2);
    assert_eq!(names, ["put-object", "payload-transferred"]);

    // A stale basis gets everything again.
    let mut stale = open_path(
        server.addr(),
        &format!("/sdk/stream?basis={state}"),
        "sdk-good",
    );
    let (_, intent) = stale.next_event().unwrap();
    assert_eq!(intent["payloads"][0]["intentCode"], "xfer-full");
    assert_eq!(intent["payloads"][0]["reason"], "cant-catchup");
}

#[test]
fn fdv2_poll_is_the_same_payload_as_one_body() {
    let server = start();
    let r = get(server.addr(), "/sdk/poll", &[AUTH]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("x-ld-envid"), Some("env-1"));
    let body: Value = serde_json::from_slice(&r.body).unwrap();
    let events = body["events"].as_array().unwrap();
    let names: Vec<_> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "server-intent",
            "put-object",
            "put-object",
            "put-object",
            "payload-transferred"
        ]
    );
    assert_eq!(events[1]["data"]["object"]["key"], "a");
    assert_eq!(events[4]["data"]["state"], server.fdv2_state().as_str());

    let current = format!("/sdk/poll?basis={}", server.fdv2_state());
    let r = get(
        server.addr(),
        &current,
        &[AUTH, ("Accept-Encoding", "gzip")],
    );
    assert_eq!(r.header("content-encoding"), Some("gzip"));
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&r.body[..])
        .read_to_end(&mut plain)
        .unwrap();
    let body: Value = serde_json::from_slice(&plain).unwrap();
    assert_eq!(body["events"].as_array().unwrap().len(), 1);
    assert_eq!(
        body["events"][0]["data"]["payloads"][0]["intentCode"],
        "none"
    );
    assert_eq!(get(server.addr(), "/sdk/poll", &[]).status, 401);
}

#[test]
fn fdv2_poll_etag_names_the_state_and_304s_until_a_change() {
    let server = start();
    let r = get(server.addr(), "/sdk/poll", &[AUTH]);
    let etag = r.header("etag").expect("an ETag").to_owned();
    assert!(etag.contains(&server.fdv2_state()), "{etag}");
    let again = get(
        server.addr(),
        "/sdk/poll",
        &[AUTH, ("If-None-Match", &etag)],
    );
    assert_eq!(again.status, 304);
    assert_eq!(again.header("etag"), Some(etag.as_str()));
    assert_eq!(again.header("content-length"), None);
    assert!(again.body.is_empty());
    // With a basis too (the SDKs send both), and with the fallback directive on.
    server.fdv1_fallback(true);
    let target = format!("/sdk/poll?basis={}", server.fdv2_state());
    let with_basis = get(server.addr(), &target, &[AUTH, ("If-None-Match", &etag)]);
    assert_eq!(
        (with_basis.status, with_basis.header("x-ld-fd-fallback")),
        (304, Some("true"))
    );
    server.fdv1_fallback(false);
    // A change: a new ETag and the payload.
    server.set_flag("new", json!({})).unwrap();
    let changed = get(server.addr(), &target, &[AUTH, ("If-None-Match", &etag)]);
    assert_eq!(changed.status, 200);
    assert_ne!(changed.header("etag"), Some(etag.as_str()));
    let body: Value = serde_json::from_slice(&changed.body).unwrap();
    assert_eq!(body["events"][0]["event"], "server-intent");
    assert_eq!(
        body["events"][0]["data"]["payloads"][0]["intentCode"],
        "xfer-full"
    );
}

#[test]
fn fault_fdv1_fallback_header_on_fdv2_responses_only() {
    let server = start();
    server.fdv1_fallback(true);
    let st = open_path(server.addr(), "/sdk/stream", "sdk-good");
    assert_eq!(
        (st.status, st.header("x-ld-fd-fallback")),
        (200, Some("true"))
    );
    let poll = get(server.addr(), "/sdk/poll", &[AUTH]);
    assert_eq!(
        (poll.status, poll.header("x-ld-fd-fallback")),
        (200, Some("true"))
    );
    // On errors too: a refused key, an injected status.
    let refused = get(server.addr(), "/sdk/poll", &[]);
    assert_eq!(
        (refused.status, refused.header("x-ld-fd-fallback")),
        (401, Some("true"))
    );
    server.fail_endpoint(Endpoint::Fdv2Poll, Some(503));
    let failed = get(server.addr(), "/sdk/poll", &[AUTH]);
    assert_eq!(
        (failed.status, failed.header("x-ld-fd-fallback")),
        (503, Some("true"))
    );
    // Never on FDv1.
    let fdv1 = get(server.addr(), "/sdk/latest-all", &[AUTH]);
    assert_eq!((fdv1.status, fdv1.header("x-ld-fd-fallback")), (200, None));
    server.fdv1_fallback(false);
    let st = open_path(server.addr(), "/sdk/stream", "sdk-good");
    assert_eq!(st.header("x-ld-fd-fallback"), None);
}

#[test]
fn fault_goodbye_after_the_first_payload() {
    let server = start();
    server.goodbye_next(1);
    let mut st = open_path(server.addr(), "/sdk/stream", "sdk-good");
    let (names, goodbye) = st.next_names(6);
    assert_eq!(names.last().unwrap(), "goodbye");
    assert_eq!(names[4], "payload-transferred");
    assert!(goodbye["reason"].is_string());
    assert!(st.next_event().is_none(), "the stream closes after goodbye");
    assert!(st.ended_cleanly(), "the body ends with the last chunk");
    // Only the next one.
    let mut again = open_path(
        server.addr(),
        &format!("/sdk/stream?basis={}", server.fdv2_state()),
        "sdk-good",
    );
    assert_eq!(again.next_event().unwrap().0, "server-intent");
    assert!(server.wait_for_streams(1, T));
}

#[test]
fn fault_error_event_in_the_middle_of_a_payload() {
    let server = start();
    server.payload_error_next(2);
    let mut st = open_path(server.addr(), "/sdk/stream", "sdk-good");
    let (names, done) = st.next_names(8);
    assert_eq!(
        names,
        [
            "server-intent",
            "put-object",
            "put-object",
            "error",
            "put-object",
            "put-object",
            "put-object",
            "payload-transferred"
        ]
    );
    assert_eq!(done["version"], 1);
    let body: Value =
        serde_json::from_slice(&get(server.addr(), "/sdk/poll", &[AUTH]).body).unwrap();
    assert_eq!(body["events"][3]["event"], "error");
    assert_eq!(body["events"][3]["data"]["payloadId"], "flagsync-local");
    // Used up.
    let body: Value =
        serde_json::from_slice(&get(server.addr(), "/sdk/poll", &[AUTH]).body).unwrap();
    assert_eq!(body["events"].as_array().unwrap().len(), 5);
}

#[test]
fn fault_fail_and_hang_one_endpoint() {
    let server = start();
    server.fail_endpoint(Endpoint::Fdv2Stream, Some(401));
    for _ in 0..2 {
        assert_eq!(
            open_path(server.addr(), "/sdk/stream", "sdk-good").status,
            401
        );
    }
    assert_eq!(get(server.addr(), "/sdk/poll", &[AUTH]).status, 200);
    server.fail_endpoint(Endpoint::Fdv2Stream, None);
    assert_eq!(
        open_path(server.addr(), "/sdk/stream", "sdk-good").status,
        200
    );

    server.hang_endpoint(Endpoint::Fdv2Poll, true);
    let mut s = connect(server.addr());
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    s.write_all(b"GET /sdk/poll HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 16];
    assert!(s.read(&mut buf).is_err(), "no answer while hung");
    // Other endpoints answer.
    assert_eq!(get(server.addr(), "/sdk/latest-all", &[AUTH]).status, 200);
    s.set_read_timeout(Some(T)).unwrap();
    server.hang_endpoint(Endpoint::Fdv2Poll, false);
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0);
    let reqs = server.requests();
    let polls: Vec<_> = reqs
        .iter()
        .filter(|r| r.endpoint() == Some(Endpoint::Fdv2Poll))
        .collect();
    assert_eq!(polls.len(), 2);
}

#[test]
fn fdv2_heartbeats_are_heart_beat_events() {
    let server = Server::builder()
        .heartbeat(Duration::from_millis(50))
        .start()
        .unwrap();
    let mut st = open_path(server.addr(), "/sdk/stream", "");
    let (names, _) = st.next_names(2);
    assert_eq!(names, ["server-intent", "payload-transferred"]);
    let (name, data) = st.next_event().unwrap();
    assert_eq!((name.as_str(), data), ("heart-beat", json!({})));
    assert_eq!(st.comments, 0);
}
