//! OFREP through a relay: an OpenFeature OFREP request to the relay is evaluated on the
//! relayed data, and its analytics events reach the upstream events service with the
//! environment's SDK key (the upstream refuses any other), as a downstream SDK's do.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{KEY, one_environment, relay, upstream, wait_for};
use flagsync_server::PayloadKind;
use serde_json::{Value, json};

/// `POST path` with the SDK key as a bearer token; the status and the JSON body.
fn post(addr: SocketAddr, path: &str, body: &Value) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = body.to_string();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status = line[9..12].parse().unwrap();
    let mut len = 0;
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((n, v)) = l.split_once(':')
            && n.eq_ignore_ascii_case("content-length")
        {
            len = v.trim().parse().unwrap();
        }
    }
    let mut bytes = vec![0; len];
    r.read_exact(&mut bytes).unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

#[test]
fn ofrep_evaluations_of_a_relay_are_forwarded_upstream_with_the_environments_key() {
    let up = upstream(KEY, json!("relayed"));
    let events = up.subscribe_events(16);
    let relay = relay(one_environment(&up, "fdv2"));
    let addr = relay.server().addr();
    let ctx = json!({"context": {"targetingKey": "u1"}});
    let path = "/ofrep/v1/evaluate/flags/f";
    wait_for("the relay's data", Duration::from_secs(10), || {
        post(addr, path, &ctx).0 == 200
    });
    let (status, body) = post(addr, path, &ctx);
    assert_eq!(status, 200);
    assert_eq!(
        (&body["value"], &body["variant"]),
        (&json!("relayed"), &json!("0"))
    );
    relay.server().flush_ofrep_events();
    let mut summary = None;
    wait_for("the OFREP events upstream", Duration::from_secs(10), || {
        while let Some(p) = events.try_recv() {
            assert_eq!(p.kind, PayloadKind::Bulk);
            summary = p
                .events()
                .iter()
                .find(|e| e["kind"] == "summary")
                .cloned()
                .or(summary.take());
        }
        summary.is_some()
    });
    let summary = summary.unwrap();
    // Two evaluations of `f` (the readiness probe's and the one above), at least.
    let count = summary["features"]["f"]["counters"][0]["count"]
        .as_u64()
        .unwrap();
    assert!(count >= 2, "{summary}");
    relay.shutdown();
}
