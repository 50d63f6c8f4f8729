//! The server as a network service: where it listens, its deadlines and connection
//! limit, its threads, `/status` and `/metrics`, and the streams' maximum lifetime.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use flagsync_server::{ConnectionState, Environment, Server, UpstreamError};
use serde_json::{Value, json};

const T: Duration = Duration::from_secs(5);

fn data() -> Value {
    json!({"flagValues": {"a": true}})
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    s
}

/// The status, headers and `Content-Length` body of one response read from `r`.
fn response(r: &mut impl BufRead) -> (u16, String, Vec<u8>) {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let len = head
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    (status, head, body)
}

fn get(addr: SocketAddr, path: &str, key: Option<&str>) -> (u16, String, Vec<u8>) {
    let mut s = connect(addr);
    let auth = key
        .map(|k| format!("Authorization: {k}\r\n"))
        .unwrap_or_default();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n").unwrap();
    response(&mut BufReader::new(s))
}

#[test]
fn listens_on_every_address_given_ipv4_and_ipv6() {
    let server = Server::builder()
        .listen("127.0.0.2:0".parse().unwrap())
        .listen("[::1]:0".parse().unwrap())
        .data(data())
        .start()
        .unwrap();
    let addrs = server.addrs().to_vec();
    assert_eq!(addrs[0].ip().to_string(), "127.0.0.2");
    assert_eq!(addrs[1].ip().to_string(), "::1");
    for addr in addrs {
        let (status, _, body) = get(addr, "/sdk/latest-all", None);
        assert_eq!(status, 200, "{addr}");
        assert!(String::from_utf8_lossy(&body).contains("\"a\""));
    }
    assert!(
        server.url().starts_with("http://127.0.0.2:"),
        "{}",
        server.url()
    );
    // The same port on both families of the unspecified address.
    let both = Server::builder()
        .listen("0.0.0.0:0".parse().unwrap())
        .start()
        .unwrap();
    let port = both.addr().port();
    drop(both);
    let both = Server::builder()
        .listen(SocketAddr::from(([0, 0, 0, 0], port)))
        .listen(SocketAddr::from(([0u16; 8], port)))
        .start()
        .unwrap();
    assert!(
        both.url().starts_with("http://127.0.0.1:"),
        "{}",
        both.url()
    );
    assert_eq!(get(both.addrs()[1], "/sdk/latest-all", None).0, 200);
}

#[test]
fn a_taken_address_is_an_error_naming_it() {
    let first = Server::builder().start().unwrap();
    let e = Server::builder().listen(first.addr()).start().unwrap_err();
    assert!(e.to_string().contains(&first.addr().to_string()), "{e}");
}

#[test]
fn a_request_head_trickled_past_its_deadline_gets_408_and_the_connection_closes() {
    let server = Server::builder()
        .head_timeout(Duration::from_secs(1))
        .data(data())
        .start()
        .unwrap();
    let mut s = connect(server.addr());
    let started = Instant::now();
    s.write_all(b"GET /sdk/latest-all HTTP/1.1\r\nX-Slow: ")
        .unwrap();
    // A byte every 200 ms keeps an idle timeout from ever firing; the head's deadline
    // counts from its first byte.
    let mut writer = s.try_clone().unwrap();
    let trickle = thread::spawn(move || {
        for _ in 0..20 {
            thread::sleep(Duration::from_millis(200));
            if writer.write_all(b"x").is_err() {
                return;
            }
        }
    });
    let mut r = BufReader::new(s);
    let (status, head, _) = response(&mut r);
    let took = started.elapsed();
    assert_eq!(status, 408, "{head}");
    assert!(head.contains("Connection: close"), "{head}");
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(4),
        "{took:?}"
    );
    let mut rest = Vec::new();
    let _ = r.read_to_end(&mut rest);
    trickle.join().unwrap();
    // An idle keep-alive connection that sent nothing is closed without an answer.
    let server = Server::builder()
        .idle_timeout(Duration::from_millis(300))
        .data(data())
        .start()
        .unwrap();
    let mut s = connect(server.addr());
    write!(s, "GET /sdk/latest-all HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut r = BufReader::new(s);
    assert_eq!(response(&mut r).0, 200);
    let mut rest = Vec::new();
    assert_eq!(r.read_to_end(&mut rest).unwrap(), 0, "closed, nothing said");
}

#[test]
fn a_body_past_its_deadline_gets_408() {
    let server = Server::builder()
        .body_timeout(Duration::from_millis(500))
        .start()
        .unwrap();
    let mut s = connect(server.addr());
    s.write_all(b"POST /bulk HTTP/1.1\r\nContent-Length: 100\r\n\r\n[")
        .unwrap();
    let (status, _, _) = response(&mut BufReader::new(s));
    assert_eq!(status, 408);
}

#[test]
fn past_the_connection_limit_a_connection_gets_503_with_retry_after() {
    let server = Server::builder()
        .max_connections(2)
        .data(data())
        .start()
        .unwrap();
    assert_eq!(server.max_connections(), 2);
    let held: Vec<TcpStream> = (0..2).map(|_| connect(server.addr())).collect();
    thread::sleep(Duration::from_millis(100));
    let (status, head, _) = get(server.addr(), "/sdk/latest-all", None);
    assert_eq!(status, 503, "{head}");
    assert!(head.contains("Retry-After: 1"), "{head}");
    // One that sends nothing is told too, at once.
    let started = Instant::now();
    let (status, _, _) = response(&mut BufReader::new(connect(server.addr())));
    assert_eq!(status, 503);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    drop(held);
    // Once the server has seen them close, there is room again.
    let deadline = Instant::now() + T;
    let mut status = 0;
    while status != 200 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
        status = get(server.addr(), "/sdk/latest-all", None).0;
    }
    assert_eq!(status, 200);
}

#[test]
fn status_reports_each_environment_and_never_a_key() {
    let server = Server::builder()
        .environment(
            Environment::new("prod", "sdk-prod-secret")
                .env_id("e-prod")
                .data(data()),
        )
        .environment(Environment::new("staging", "sdk-staging-secret"))
        .disconnected_status_time(Duration::ZERO)
        .start()
        .unwrap();
    let status = |server: &flagsync_server::ServerHandle| {
        let (code, head, body) = get(server.addr(), "/status", None);
        assert_eq!(code, 200);
        assert!(head.contains("application/json"), "{head}");
        let text = String::from_utf8(body).unwrap();
        assert!(!text.contains("secret"), "{text}");
        serde_json::from_str::<Value>(&text).unwrap()
    };
    let s = status(&server);
    assert_eq!(s["status"], "degraded", "staging has no data yet: {s}");
    assert_eq!(s["environments"]["prod"]["status"], "connected");
    assert_eq!(s["environments"]["prod"]["envId"], "e-prod");
    assert_eq!(
        s["environments"]["staging"]["connectionStatus"]["state"],
        "INITIALIZING"
    );
    assert!(s["environments"].get("default").is_none(), "{s}");

    let staging = server.environment("staging").unwrap();
    staging.replace_all(data()).unwrap();
    staging.report_upstream(ConnectionState::Valid, None);
    assert_eq!(status(&server)["status"], "healthy");
    staging.report_upstream(
        ConnectionState::Interrupted,
        Some(UpstreamError::new("NETWORK_ERROR", "connection refused")),
    );
    staging.report_data_store(false);
    let s = status(&server);
    assert_eq!(s["status"], "degraded");
    let env = &s["environments"]["staging"];
    assert_eq!(env["status"], "disconnected");
    assert_eq!(
        env["connectionStatus"]["lastError"]["kind"],
        "NETWORK_ERROR"
    );
    assert_eq!(env["dataStoreStatus"]["state"], "INTERRUPTED");
    staging.report_upstream(ConnectionState::Valid, None);
    assert_eq!(status(&server)["status"], "healthy");
    // Not an SDK route: no key asked, and another method is refused.
    let mut s = connect(server.addr());
    write!(s, "POST /status HTTP/1.1\r\nContent-Length: 0\r\n\r\n").unwrap();
    assert_eq!(response(&mut BufReader::new(s)).0, 405);
}

#[test]
fn interrupted_counts_as_connected_for_the_disconnected_status_time() {
    let server = Server::builder()
        .environment(Environment::new("prod", "sdk-prod").data(data()))
        .disconnected_status_time(Duration::from_secs(60))
        .start()
        .unwrap();
    let prod = server.environment("prod").unwrap();
    prod.report_upstream(ConnectionState::Interrupted, None);
    let body = get(server.addr(), "/status", None).2;
    let s: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(s["status"], "healthy", "{s}");
    assert_eq!(
        s["environments"]["prod"]["connectionStatus"]["state"],
        "INTERRUPTED"
    );
}

/// The value of the sample `name` (with its labels, as written) in `text`.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn metrics_count_connections_requests_streams_and_events() {
    let server = Server::builder()
        .sdk_key(Some("sdk-m".into()))
        .data(data())
        .start()
        .unwrap();
    for _ in 0..3 {
        assert_eq!(get(server.addr(), "/sdk/latest-all", Some("sdk-m")).0, 200);
    }
    assert_eq!(get(server.addr(), "/sdk/latest-all", Some("wrong")).0, 401);
    let mut stream = connect(server.addr());
    write!(stream, "GET /all HTTP/1.1\r\nAuthorization: sdk-m\r\n\r\n").unwrap();
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.contains("200"), "{line}");
    assert!(server.wait_for_streams(1, T));
    server
        .set_flag("a", json!({"on": true, "variations": [1]}))
        .unwrap();
    let mut post = connect(server.addr());
    let body = "[]";
    write!(
        post,
        "POST /bulk HTTP/1.1\r\nAuthorization: sdk-m\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    assert_eq!(response(&mut BufReader::new(post)).0, 202);

    // The hub counts a change once it is written to every stream: wait for it.
    let deadline = Instant::now() + T;
    let (code, head, body) = loop {
        let got = get(server.addr(), "/metrics", None);
        let text = String::from_utf8_lossy(&got.2).into_owned();
        let written = sample(&text, "flagsync_server_fanout_write_seconds_count") == Some(1.0);
        if written || Instant::now() > deadline {
            break got;
        }
        thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(code, 200);
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    let text = String::from_utf8(body).unwrap();
    assert!(!text.contains("sdk-m"), "{text}");
    let requests = |route: &str, status: u16| {
        sample(
            &text,
            &format!("flagsync_server_requests_total{{route=\"{route}\",status=\"{status}\"}}"),
        )
    };
    assert_eq!(requests("/sdk/latest-all", 200), Some(3.0), "{text}");
    assert_eq!(requests("/sdk/latest-all", 401), Some(1.0), "{text}");
    assert_eq!(requests("/all", 200), Some(1.0), "{text}");
    assert_eq!(
        sample(&text, "flagsync_server_streams_open{protocol=\"fdv1\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "flagsync_server_connections_open{kind=\"stream\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "flagsync_server_events_received_total{endpoint=\"bulk\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            "flagsync_server_environment_payload_version{environment=\"default\"}"
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(&text, "flagsync_server_fanout_write_seconds_count"),
        Some(1.0),
        "{text}"
    );
    assert!(
        sample(
            &text,
            "flagsync_server_connections_accepted_total{transport=\"plain\"}"
        )
        .unwrap()
            >= 6.0
    );
    for family in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let name = family.split(' ').nth(2).unwrap();
        assert!(text.contains(&format!("# HELP {name} ")), "{name} has help");
    }
}

#[test]
fn streams_end_after_their_maximum_lifetime() {
    let server = Server::builder()
        .max_stream_lifetime(Duration::from_secs(1))
        .data(data())
        .start()
        .unwrap();
    let started = Instant::now();
    let mut s = connect(server.addr());
    write!(s, "GET /all HTTP/1.1\r\n\r\n").unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&all);
    assert!(text.contains("event: put"), "{text}");
    assert!(
        text.ends_with("0\r\n\r\n"),
        "the stream ends cleanly: {text}"
    );
    assert!(
        took >= Duration::from_millis(700) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert_eq!(server.open_streams(), 0);
}
