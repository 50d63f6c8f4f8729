//! Payload filters: a request with `?filter=KEY` gets the environment that serves that
//! filter, and a filter nobody serves gets `404` naming it, never the unfiltered data.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{Response, read_head, read_response};
use flagsync_server::{Environment, Server, ServerHandle};
use serde_json::{Value, json};

fn start() -> ServerHandle {
    Server::builder()
        .environment(
            Environment::new("prod", "sdk-prod")
                .data(json!({"flagValues": {"web-only": 1, "shared": 2}})),
        )
        .environment(
            Environment::new("prod/mobile", "sdk-prod")
                .payload_filter("mobile")
                .data(json!({"flagValues": {"shared": 2}})),
        )
        .environment(Environment::new("other", "sdk-other").data(json!({"flagValues": {"o": 3}})))
        .start()
        .unwrap()
}

fn request(addr: SocketAddr, path: &str, key: &str) -> Response {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: {key}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    read_response(&mut BufReader::new(s))
}

fn flag_keys(body: &[u8], path: &str) -> Vec<String> {
    let v: Value = serde_json::from_slice(body).unwrap();
    if path.starts_with("/sdk/poll") {
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == "put-object")
            .map(|e| e["data"]["key"].as_str().unwrap().to_owned())
            .collect()
    } else {
        v["flags"].as_object().unwrap().keys().cloned().collect()
    }
}

#[test]
fn polls_get_the_environment_of_their_filter() {
    let server = start();
    let addr = server.addr();
    for path in ["/sdk/latest-all", "/sdk/poll"] {
        let whole = request(addr, path, "sdk-prod");
        assert_eq!(whole.status, 200);
        assert_eq!(flag_keys(&whole.body, path), ["shared", "web-only"]);
        for query in ["?filter=mobile", "?basis=x&filter=mobile"] {
            let filtered = request(addr, &format!("{path}{query}"), "sdk-prod");
            assert_eq!(filtered.status, 200, "{path}{query}");
            assert_eq!(flag_keys(&filtered.body, path), ["shared"], "{path}{query}");
        }
        // An empty filter is no filter, as the SDKs send none.
        let empty = request(addr, &format!("{path}?filter="), "sdk-prod");
        assert_eq!(flag_keys(&empty.body, path), ["shared", "web-only"]);
    }
}

#[test]
fn a_filter_nobody_serves_is_refused_by_name() {
    let server = start();
    let addr = server.addr();
    for path in ["/sdk/latest-all", "/sdk/poll", "/all", "/sdk/stream"] {
        for key in ["sdk-prod", "sdk-other"] {
            let r = request(addr, &format!("{path}?filter=tablet"), key);
            assert_eq!(r.status, 404, "{path} {key}");
            let body: Value = serde_json::from_slice(&r.body).unwrap();
            let message = body["message"].as_str().unwrap();
            assert!(message.contains("\"tablet\""), "{message}");
        }
        // A key nobody serves stays unauthorized, filter or not.
        let r = request(addr, &format!("{path}?filter=mobile"), "sdk-nobody");
        assert_eq!(r.status, 401, "{path}");
    }
}

#[test]
fn a_filtered_stream_gets_its_data_and_its_changes() {
    let server = start();
    let mobile = server.environment("prod/mobile").unwrap();
    let prod = server.environment("prod").unwrap();
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET /all?filter=mobile HTTP/1.1\r\nHost: x\r\nAuthorization: sdk-prod\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let (status, _) = read_head(&mut r);
    assert_eq!(status, 200);
    let mut data_lines = Vec::new();
    let mut line = String::new();
    while data_lines.len() < 2 {
        line.clear();
        r.read_line(&mut line).unwrap();
        if let Some(data) = line.strip_prefix("data: ") {
            data_lines.push(data.trim_end().to_owned());
            if data_lines.len() == 1 {
                // A change to the unfiltered environment does not reach this stream;
                // one to the filtered one does.
                prod.set_flag("web-only", json!({"on": true})).unwrap();
                mobile.set_flag("shared", json!({"on": true})).unwrap();
            }
        }
    }
    let put: Value = serde_json::from_str(&data_lines[0]).unwrap();
    let keys: Vec<&String> = put["data"]["flags"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["shared"]);
    let patch: Value = serde_json::from_str(&data_lines[1]).unwrap();
    assert_eq!(patch["path"], "/flags/shared");
}

#[test]
fn events_go_to_the_environment_of_the_key() {
    let server = start();
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let body = "[]";
    write!(
        s,
        "POST /bulk?filter=tablet HTTP/1.1\r\nHost: x\r\nAuthorization: sdk-prod\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    assert_eq!(read_response(&mut BufReader::new(s)).status, 202);
}

#[test]
fn the_default_environment_serves_no_filter() {
    let server = Server::builder()
        .data(json!({"flagValues": {"x": 1}}))
        .start()
        .unwrap();
    let r = request(server.addr(), "/sdk/latest-all?filter=mobile", "any");
    assert_eq!(r.status, 404);
    assert_eq!(request(server.addr(), "/sdk/latest-all", "any").status, 200);
}

#[test]
fn the_default_environment_serves_the_filters_it_is_given() {
    for sdk_key in [None, Some("sdk-k")] {
        let server = Server::builder()
            .sdk_key(sdk_key.map(Into::into))
            .data(json!({"flagValues": {"web-only": 1, "shared": 2}}))
            .filtered_data("mobile", json!({"flagValues": {"shared": 2}}))
            .start()
            .unwrap();
        let key = sdk_key.unwrap_or("any");
        let addr = server.addr();
        for path in ["/sdk/latest-all", "/sdk/poll"] {
            let r = request(addr, &format!("{path}?filter=mobile"), key);
            assert_eq!(flag_keys(&r.body, path), ["shared"], "{path} {sdk_key:?}");
            let r = request(addr, path, key);
            assert_eq!(flag_keys(&r.body, path), ["shared", "web-only"]);
            assert_eq!(
                request(addr, &format!("{path}?filter=tablet"), key).status,
                404
            );
        }
        if sdk_key.is_some() {
            let r = request(addr, "/sdk/latest-all?filter=mobile", "sdk-wrong");
            assert_eq!(r.status, 401);
        }
        let mobile = server.environment("default/mobile").unwrap();
        mobile.set_flag("shared", json!({"on": true})).unwrap();
        let r = request(addr, "/sdk/latest-all?filter=mobile", key);
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["flags"]["shared"]["on"], true);
    }
}
