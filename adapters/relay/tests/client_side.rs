//! Client-side (JavaScript) and mobile SDKs through a relay: an upstream
//! `flagsync_server` with a client-side ID, a mobile key and goals; the relay in front
//! of it serves `evalx` from the environment's data, forwards browser and mobile
//! events to the upstream's matching endpoints, and serves the upstream's goals.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{KEY, config, relay, wait_for};
use flagsync_server::{EventOrigin, PayloadKind, Server, ServerHandle};
use serde_json::{Value, json};

const ENV_ID: &str = "env-up";
const MOBILE_KEY: &str = "mob-up";
const GOALS: &str = r#"[{"key":"signup","kind":"click","selector":"button"}]"#;
/// `{"kind":"user","key":"u1"}`, URL-safe base64.
const CTX: &str = "eyJraW5kIjoidXNlciIsImtleSI6InUxIn0";

fn upstream() -> ServerHandle {
    let flag = json!({"key": "web", "version": 2, "on": true, "variations": ["on", "off"],
        "fallthrough": {"variation": 0}, "offVariation": 1,
        "clientSideAvailability": {"usingEnvironmentId": true, "usingMobileKey": true}});
    Server::builder()
        .sdk_key(Some(KEY.into()))
        .client_side_id(Some(ENV_ID.into()))
        .mobile_key(Some(MOBILE_KEY.into()))
        .goals(GOALS.as_bytes().to_vec().into())
        .data(json!({"flags": {"web": flag}}))
        .start()
        .expect("upstream")
}

/// One request to `addr`: the status and the body.
fn send(addr: &str, method: &str, path: &str, auth: Option<&str>, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let auth = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    let status = all.split(' ').nth(1).unwrap().parse().unwrap();
    let body = all.split_once("\r\n\r\n").unwrap().1.to_owned();
    (status, body)
}

#[test]
fn client_side_and_mobile_sdks_through_a_relay() {
    let up = upstream();
    let events = up.subscribe_events(100);
    let relay = relay(config(json!({
        "upstream": up.url(), "eventsUri": up.url(), "clientSideUri": up.url(),
        "environments": {"web": {"sdkKey": KEY, "envId": ENV_ID, "mobileKey": MOBILE_KEY}}
    })));
    let addr = relay.server().addr().to_string();

    // evalx from the relayed data, once it arrived.
    let evalx = format!("/sdk/evalx/{ENV_ID}/contexts/{CTX}");
    wait_for("the relay's data", Duration::from_secs(10), || {
        send(&addr, "GET", &evalx, None, "").0 == 200
    });
    let (_, body) = send(&addr, "GET", &evalx, None, "");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["web"]["value"], "on");
    assert_eq!(body["web"]["flagVersion"], 2);
    let (status, body) = send(
        &addr,
        "GET",
        &format!("/msdk/evalx/contexts/{CTX}"),
        Some(&format!("api_key {MOBILE_KEY}")),
        "",
    );
    assert_eq!(status, 200, "{body}");
    let (status, _) = send(
        &addr,
        "GET",
        &format!("/msdk/evalx/contexts/{CTX}"),
        Some(KEY),
        "",
    );
    assert_eq!(status, 401, "the SDK key is not the mobile key");
    let (status, _) = send(
        &addr,
        "GET",
        &format!("/sdk/evalx/other/contexts/{CTX}"),
        None,
        "",
    );
    assert_eq!(status, 404);

    // The upstream's goals.
    wait_for("the goals", Duration::from_secs(10), || {
        send(&addr, "GET", &format!("/sdk/goals/{ENV_ID}"), None, "").1 == GOALS
    });

    // Browser and mobile events reach the upstream's matching endpoints.
    let bulk = json!([{"kind": "identify", "creationDate": 1, "context": {"key": "u1"}}]);
    let diag = json!({"kind": "diagnostic-init", "id": {"diagnosticId": "d"}});
    let posts = [
        (format!("/events/bulk/{ENV_ID}"), None, &bulk),
        (format!("/events/diagnostic/{ENV_ID}"), None, &diag),
        ("/mobile/events/bulk".to_owned(), Some(MOBILE_KEY), &bulk),
        (
            "/mobile/events/diagnostic".to_owned(),
            Some(MOBILE_KEY),
            &diag,
        ),
    ];
    for (path, auth, body) in &posts {
        let (status, _) = send(&addr, "POST", path, *auth, &body.to_string());
        assert_eq!(status, 202, "{path}");
    }
    let mut seen = Vec::new();
    wait_for("four payloads upstream", Duration::from_secs(10), || {
        seen.extend(std::iter::from_fn(|| events.try_recv()));
        seen.len() >= 4
    });
    seen.sort_by(|a, b| a.path.cmp(&b.path));
    let got: Vec<(&str, PayloadKind, &EventOrigin)> = seen
        .iter()
        .map(|p| (p.path.as_str(), p.kind, &p.origin))
        .collect();
    let client = EventOrigin::ClientSide {
        env_id: ENV_ID.into(),
    };
    assert_eq!(
        got,
        [
            ("/events/bulk/env-up", PayloadKind::Bulk, &client),
            (
                "/events/diagnostic/env-up",
                PayloadKind::Diagnostic,
                &client
            ),
            (
                "/mobile/events/bulk",
                PayloadKind::Bulk,
                &EventOrigin::Mobile
            ),
            (
                "/mobile/events/diagnostic",
                PayloadKind::Diagnostic,
                &EventOrigin::Mobile
            ),
        ]
    );
    assert_eq!(seen[0].body, bulk);
    let report = relay.shutdown();
    assert_eq!((report.failed, report.dropped), (0, 0));
    up.shutdown();
}
