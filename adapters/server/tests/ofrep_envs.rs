//! More OFREP over raw HTTP (beside `ofrep.rs`): several environments (chosen by SDK
//! key and payload filter, not ready yet, named on the analytics payloads), `Expect:
//! 100-continue` and keep-alive, the periodic flush, notices of a replaced data set,
//! Private Network Access preflights.

mod common;

use common::{Response, read_response};

use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use flagsync_server::{Environment, Server};
use serde_json::{Value, json};

fn post(addr: SocketAddr, path: &str, key: &str, body: &Value) -> Response {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = body.to_string();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-API-Key: {key}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    read_response(&mut BufReader::new(s))
}

fn value(r: &Response) -> Value {
    serde_json::from_slice::<Value>(&r.body).unwrap()["value"].clone()
}

#[test]
fn environments_filters_readiness_and_event_names() {
    let server = Server::builder()
        .environment(
            Environment::new("prod", "sdk-prod").data(json!({"flagValues": {"a": 1, "b": "x"}})),
        )
        .environment(
            Environment::new("prod/mobile", "sdk-prod")
                .payload_filter("mobile")
                .data(json!({"flagValues": {"a": 2}})),
        )
        .environment(Environment::new("staging", "sdk-staging"))
        .start()
        .unwrap();
    let a = server.addr();
    let events = server.subscribe_events(8);
    let ctx = json!({"context": {"targetingKey": "u1"}});
    let single = "/ofrep/v1/evaluate/flags/a";
    assert_eq!(value(&post(a, single, "sdk-prod", &ctx)), json!(1));
    let filtered = post(
        a,
        "/ofrep/v1/evaluate/flags/a?filter=mobile",
        "sdk-prod",
        &ctx,
    );
    assert_eq!(value(&filtered), json!(2));
    let r = post(
        a,
        "/ofrep/v1/evaluate/flags/b?filter=mobile",
        "sdk-prod",
        &ctx,
    );
    assert_eq!(r.status, 404);
    let r = post(a, "/ofrep/v1/evaluate/flags?filter=other", "sdk-prod", &ctx);
    assert_eq!(r.status, 403);
    // No data yet.
    let r = post(a, single, "sdk-staging", &ctx);
    assert_eq!((r.status, r.header("retry-after")), (503, Some("1")));
    let r = post(a, single, "sdk-unknown", &ctx);
    assert_eq!(r.status, 401);
    // The filtered environment's evaluations are its key's environment's events.
    server.flush_ofrep_events();
    let payload = events.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(payload.environment.as_deref(), Some("prod"));
    let summary = payload
        .events()
        .iter()
        .find(|e| e["kind"] == "summary")
        .unwrap()
        .clone();
    // Both evaluations of `a` (its filtered data holds `a` at the same version and
    // variation), and the filtered data's missing `b`.
    let counters = &summary["features"]["a"]["counters"];
    assert_eq!(counters[0]["count"], 2, "{summary}");
    assert_eq!(
        summary["features"]["b"]["counters"][0]["unknown"], true,
        "{summary}"
    );
    assert!(events.recv_timeout(Duration::from_millis(100)).is_err());
}

#[test]
fn expect_continue_and_keep_alive() {
    let server = Server::builder()
        .data(json!({"flagValues": {"a": 1}}))
        .start()
        .unwrap();
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let body = json!({"context": {"targetingKey": "u1"}}).to_string();
    write!(
        s,
        "POST /ofrep/v1/evaluate/flags/a HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    let (status, _) = common::read_head(&mut r);
    assert_eq!(status, 100);
    s.write_all(body.as_bytes()).unwrap();
    let first = read_response(&mut r);
    assert_eq!((first.status, value(&first)), (200, json!(1)));
    // The same connection again.
    write!(
        s,
        "POST /ofrep/v1/evaluate/flags HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let second = read_response(&mut r);
    assert_eq!(second.status, 200);
    let flags = serde_json::from_slice::<Value>(&second.body).unwrap()["flags"].clone();
    assert_eq!(flags[0]["value"], 1);
}

#[test]
fn events_are_flushed_periodically_without_being_asked() {
    let server = Server::builder()
        .data(json!({"flagValues": {"a": 1}}))
        .start()
        .unwrap();
    let events = server.subscribe_events(4);
    let ctx = json!({"context": {"targetingKey": "u1"}});
    assert_eq!(
        post(server.addr(), "/ofrep/v1/evaluate/flags/a", "any", &ctx).status,
        200
    );
    // The processor's flush interval is 5 s; the server's timer thread delivers.
    let payload = events.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        payload.events().iter().any(|e| e["kind"] == "summary"),
        "{:?}",
        payload.body
    );
}

#[test]
fn a_replaced_data_set_sends_a_notice_too() {
    use std::io::BufRead;
    let server = Server::builder()
        .data(json!({"flagValues": {"a": 1}}))
        .start()
        .unwrap();
    let ctx = json!({"context": {"targetingKey": "u1"}});
    let bulk = post(server.addr(), "/ofrep/v1/evaluate/flags", "any", &ctx);
    let body: Value = serde_json::from_slice(&bulk.body).unwrap();
    let uri = body["eventStreams"][0]["endpoint"]["requestUri"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {uri} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut r = BufReader::new(s);
    assert_eq!(common::read_head(&mut r).0, 200);
    assert!(server.wait_for_streams(1, Duration::from_secs(5)));
    server
        .replace_all(json!({"flagValues": {"a": 2, "b": 3}}))
        .unwrap();
    let mut seen = String::new();
    let mut line = String::new();
    while !seen.contains("refetchEvaluation") {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "stream ended: {seen}");
        seen.push_str(&line);
    }
    // The re-fetch sees the new data.
    let again = post(server.addr(), "/ofrep/v1/evaluate/flags", "any", &ctx);
    let flags = serde_json::from_slice::<Value>(&again.body).unwrap()["flags"].clone();
    assert_eq!(
        (flags[0]["value"].clone(), flags[1]["key"].clone()),
        (json!(2), json!("b"))
    );
}

#[test]
fn private_network_access_is_allowed_when_asked() {
    let server = Server::builder()
        .data(json!({"flagValues": {"a": 1}}))
        .start()
        .unwrap();
    let preflight = |extra: &str| {
        let mut s = TcpStream::connect(server.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "OPTIONS /ofrep/v1/evaluate/flags HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
             Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n{extra}\r\n"
        )
        .unwrap();
        read_response(&mut BufReader::new(s))
    };
    let r = preflight("Access-Control-Request-Private-Network: true\r\n");
    assert_eq!(r.status, 204);
    assert_eq!(
        r.header("access-control-allow-private-network"),
        Some("true")
    );
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    let r = preflight("");
    assert_eq!(r.header("access-control-allow-private-network"), None);
}
