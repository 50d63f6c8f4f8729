//! Harness-side tests of the `sse-contract-service` binary (PROTOCOL.md Part D): the
//! service, a mock SSE stream server and a callback receiver, all on 127.0.0.1.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A running service process, killed on drop.
struct Service {
    port: u16,
    child: Child,
}

impl Service {
    /// Start the service on a port it binds itself (`--port 0`), read from the line it
    /// prints: a port picked here and bound later could be taken meanwhile by another
    /// test's server, which would then answer this test's requests.
    fn start() -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sse-contract-service"))
            .args(["--port", "0"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let port = lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|l| {
                l.split_once("listening on 127.0.0.1:")?
                    .1
                    .trim()
                    .parse()
                    .ok()
            })
            .expect("the service prints its port");
        // Keep draining its standard error, so that it never blocks on a full pipe.
        thread::spawn(move || lines.for_each(drop));
        Self { port, child }
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, String, String) {
        http(self.port, method, path, body)
    }

    /// Create a stream; returns its path.
    fn create(&self, params: Value) -> String {
        let (status, head, _) = self.call("POST", "/", Some(&params));
        assert!((200..300).contains(&status), "create: {status}");
        header(&head, "location").expect("Location")
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_owned())
    })
}

/// One HTTP/1.1 request with `Connection: close`; (status, head, body).
fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> (u16, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_owned(), body.to_owned())
}

#[derive(Debug, Clone)]
struct SeenRequest {
    method: String,
    head: String,
    body: String,
}

/// A mock SSE server: connection `n` gets `responses[n]` (the last one repeats), then
/// the connection is closed (`close: true`) or held open.
struct StreamServer {
    port: u16,
    requests: Arc<Mutex<Vec<SeenRequest>>>,
}

impl StreamServer {
    fn start(responses: Vec<(&'static str, bool)>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        thread::spawn(move || {
            for (i, conn) in listener.incoming().enumerate() {
                let Ok(mut conn) = conn else { continue };
                let (bytes, close) = responses[i.min(responses.len() - 1)];
                let seen = seen.clone();
                thread::spawn(move || {
                    let Some((head, body)) = read_head_and_body(&mut conn) else {
                        return;
                    };
                    seen.lock().unwrap().push(SeenRequest {
                        method: head.split(' ').next().unwrap_or("").to_owned(),
                        head,
                        body,
                    });
                    let _ = conn.write_all(bytes.as_bytes());
                    let _ = conn.flush();
                    if !close {
                        let mut buf = [0u8; 256];
                        while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
                    }
                });
            }
        });
        Self { port, requests }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/stream", self.port)
    }

    fn requests(&self) -> Vec<SeenRequest> {
        self.requests.lock().unwrap().clone()
    }
}

fn read_head_and_body(conn: &mut TcpStream) -> Option<(String, String)> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if conn.read(&mut byte).ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let len = header(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0usize);
    let mut body = vec![0u8; len];
    conn.read_exact(&mut body).ok()?;
    Some((head, String::from_utf8_lossy(&body).into_owned()))
}

/// Receives callbacks: (path, JSON body) in arrival order.
struct Callbacks {
    port: u16,
    got: Arc<Mutex<Vec<(String, Value)>>>,
}

impl Callbacks {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let g = got.clone();
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                if let Some((head, body)) = read_head_and_body(&mut conn) {
                    let path = head.split(' ').nth(1).unwrap_or("").to_owned();
                    let value = serde_json::from_str(&body).unwrap_or(Value::Null);
                    g.lock().unwrap().push((path, value));
                }
                let _ = conn.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n");
            }
        });
        Self { port, got }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/cb", self.port)
    }

    /// Wait until at least `n` callbacks arrived (or 5 s), then return them all.
    fn wait(&self, n: usize) -> Vec<(String, Value)> {
        let end = Instant::now() + Duration::from_secs(5);
        while self.got.lock().unwrap().len() < n && Instant::now() < end {
            thread::sleep(Duration::from_millis(10));
        }
        self.got.lock().unwrap().clone()
    }
}

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n\r\n";

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

#[test]
fn status_lists_every_capability() {
    let service = Service::start();
    let (status, _, body) = service.call("GET", "/", None);
    assert_eq!(status, 200);
    let caps: Value = serde_json::from_str(&body).unwrap();
    for cap in [
        "comments",
        "headers",
        "last-event-id",
        "post",
        "report",
        "read-timeout",
        "restart",
        "bom",
        "event-type-listeners",
        "server-directed-shutdown-request",
    ] {
        assert!(
            caps["capabilities"]
                .as_array()
                .unwrap()
                .contains(&json!(cap)),
            "{cap}"
        );
    }
}

#[test]
fn events_comments_bom_and_numbered_callbacks() {
    let service = Service::start();
    let body = leak(format!(
        "{SSE_HEAD}\u{feff}:hello\nid: 5\nevent: greeting\ndata: one\ndata: two\n\ndata: plain\n\n"
    ));
    let stream = StreamServer::start(vec![(body, false)]);
    let cb = Callbacks::start();
    service.create(json!({"streamUrl": stream.url(), "callbackUrl": cb.url(), "tag": "basic"}));
    let got = cb.wait(3);
    let paths: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["/cb/1", "/cb/2", "/cb/3"]);
    assert_eq!(got[0].1, json!({"kind": "comment", "comment": "hello"}));
    assert_eq!(
        got[1].1,
        json!({"kind": "event", "event": {"type": "greeting", "data": "one\ntwo", "id": "5"}})
    );
    assert_eq!(
        got[2].1,
        json!({"kind": "event", "event": {"type": "message", "data": "plain", "id": "5"}})
    );
    let r = &stream.requests()[0];
    assert_eq!(r.method, "GET");
    assert_eq!(
        header(&r.head, "accept").as_deref(),
        Some("text/event-stream")
    );
}

#[test]
fn headers_method_body_and_last_event_id_on_every_attempt() {
    let service = Service::start();
    let first = leak(format!("{SSE_HEAD}id: 42\ndata: x\n\n"));
    for method in ["POST", "REPORT"] {
        let stream = StreamServer::start(vec![(first, true), (SSE_HEAD, false)]);
        let cb = Callbacks::start();
        let before = 0;
        let loc = service.create(json!({
            "streamUrl": stream.url(), "callbackUrl": cb.url(), "initialDelayMs": 0,
            "lastEventId": "abc", "method": method, "body": "{\"q\":1}",
            "headers": {"x-custom": "yes", "authorization": "key"}
        }));
        let end = Instant::now() + Duration::from_secs(5);
        while stream.requests().len() < before + 2 && Instant::now() < end {
            thread::sleep(Duration::from_millis(10));
        }
        let reqs = stream.requests();
        let (a, b) = (&reqs[before], &reqs[before + 1]);
        for r in [a, b] {
            assert_eq!(r.method, method);
            assert_eq!(r.body, "{\"q\":1}");
            assert_eq!(header(&r.head, "x-custom").as_deref(), Some("yes"));
            assert_eq!(header(&r.head, "authorization").as_deref(), Some("key"));
        }
        assert_eq!(header(&a.head, "last-event-id").as_deref(), Some("abc"));
        assert_eq!(header(&b.head, "last-event-id").as_deref(), Some("42"));
        assert_eq!(service.call("DELETE", &loc, None).0 / 100, 2);
    }
}

#[test]
fn read_timeout_reports_an_error_and_reconnects() {
    let service = Service::start();
    let stream = StreamServer::start(vec![(SSE_HEAD, false)]);
    let cb = Callbacks::start();
    service.create(json!({
        "streamUrl": stream.url(), "callbackUrl": cb.url(), "readTimeoutMs": 200, "initialDelayMs": 0
    }));
    let got = cb.wait(1);
    assert_eq!(got[0].1["kind"], "error");
    assert!(got[0].1["error"].is_string());
    thread::sleep(Duration::from_millis(300));
    assert!(stream.requests().len() >= 2);
}

#[test]
fn restart_command_reconnects() {
    let service = Service::start();
    let body = leak(format!("{SSE_HEAD}data: hi\n\n"));
    let stream = StreamServer::start(vec![(body, false)]);
    let cb = Callbacks::start();
    let loc = service
        .create(json!({"streamUrl": stream.url(), "callbackUrl": cb.url(), "initialDelayMs": 0}));
    cb.wait(1);
    let (status, _, _) = service.call("POST", &loc, Some(&json!({"command": "restart"})));
    assert_eq!(status / 100, 2);
    let got = cb.wait(2);
    assert!(
        got.iter().filter(|(_, v)| v["kind"] == "event").count() >= 2,
        "{got:?}"
    );
    assert!(stream.requests().len() >= 2);
}

#[test]
fn listen_filters_unlistened_types() {
    let service = Service::start();
    // The mock waits before sending, so the listen command arrives first.
    let stream = DelayedStream::start(
        Duration::from_millis(300),
        "event: other\ndata: no\n\nevent: greeting\ndata: yes\n\ndata: msg\n\n",
    );
    let cb = Callbacks::start();
    let loc = service.create(json!({"streamUrl": stream, "callbackUrl": cb.url()}));
    let (status, _, _) = service.call(
        "POST",
        &loc,
        Some(&json!({"command": "listen", "listen": {"type": "greeting"}})),
    );
    assert_eq!(status / 100, 2);
    let got = cb.wait(2);
    thread::sleep(Duration::from_millis(200));
    let got2 = cb.wait(2);
    assert_eq!(got.len(), got2.len());
    let types: Vec<&str> = got2
        .iter()
        .map(|(_, v)| v["event"]["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(types, ["greeting", "message"]);
}

/// A mock stream that sends its head, waits, then sends `body` and holds.
struct DelayedStream;

impl DelayedStream {
    fn start(delay: Duration, body: &'static str) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                thread::spawn(move || {
                    let _ = read_head_and_body(&mut conn);
                    let _ = conn.write_all(SSE_HEAD.as_bytes());
                    thread::sleep(delay);
                    let _ = conn.write_all(body.as_bytes());
                    let mut buf = [0u8; 256];
                    while matches!(conn.read(&mut buf), Ok(n) if n > 0) {}
                });
            }
        });
        format!("http://127.0.0.1:{port}/stream")
    }
}

#[test]
fn http_204_stops_reconnecting() {
    let service = Service::start();
    let stream = StreamServer::start(vec![("HTTP/1.1 204 No Content\r\n\r\n", true)]);
    let cb = Callbacks::start();
    service
        .create(json!({"streamUrl": stream.url(), "callbackUrl": cb.url(), "initialDelayMs": 0}));
    let got = cb.wait(1);
    assert_eq!(got[0].1["kind"], "error");
    thread::sleep(Duration::from_millis(500));
    assert_eq!(stream.requests().len(), 1);
}

#[test]
fn stream_resources_and_errors() {
    let service = Service::start();
    assert_eq!(service.call("POST", "/", Some(&json!({"tag": "x"}))).0, 400);
    assert_eq!(
        service
            .call("POST", "/streams/999", Some(&json!({"command": "restart"})))
            .0,
        404
    );
    assert_eq!(service.call("DELETE", "/streams/999", None).0, 404);
    let stream = StreamServer::start(vec![(SSE_HEAD, false)]);
    let cb = Callbacks::start();
    let loc = service.create(json!({"streamUrl": stream.url(), "callbackUrl": cb.url()}));
    assert_eq!(
        service
            .call("POST", &loc, Some(&json!({"command": "dance"})))
            .0,
        400
    );
    assert_eq!(service.call("DELETE", &loc, None).0 / 100, 2);
    assert_eq!(service.call("DELETE", &loc, None).0, 404);
}

#[test]
fn delete_root_stops_the_service() {
    let mut service = Service::start();
    assert_eq!(service.call("DELETE", "/", None).0 / 100, 2);
    let end = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(status) = service.child.try_wait().unwrap() {
            assert!(status.success());
            break;
        }
        assert!(Instant::now() < end, "service still running");
        thread::sleep(Duration::from_millis(20));
    }
}
