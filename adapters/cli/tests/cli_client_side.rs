//! `flagsync serve --data FILE --client-side-id ID --mobile-key KEY`: the client-side
//! and mobile endpoints with the right ID and key, and refused with others.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::serve::Serve;

const T: Duration = Duration::from_secs(10);

/// A data file with one flag for client-side and mobile SDKs and one server-only.
fn data_file(name: &str) -> std::path::PathBuf {
    let path =
        std::env::temp_dir().join(format!("flagsync-cli-{name}-{}.json", std::process::id()));
    let flag = |key: &str, env_id: bool, value: &str| {
        format!(
            r#""{key}": {{"key": "{key}", "version": 1, "on": true, "variations": [{value}, "off"],
               "fallthrough": {{"variation": 0}}, "offVariation": 1,
               "clientSideAvailability": {{"usingEnvironmentId": {env_id}, "usingMobileKey": {env_id}}}}}"#
        )
    };
    let body = format!(
        r#"{{"flags": {{{}, {}}}}}"#,
        flag("web", true, "\"on\""),
        flag("server", false, "\"srv\"")
    );
    std::fs::write(&path, body).unwrap();
    path
}

/// One request; the status and the head and body read so far (a stream: up to its
/// first event).
fn send(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str(&format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    s.write_all(req.as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    let mut text = String::new();
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status = line.split(' ').nth(1).unwrap().parse().unwrap();
    text.push_str(&line);
    let streaming = loop {
        line.clear();
        if r.read_line(&mut line).unwrap() == 0 {
            break false;
        }
        text.push_str(&line);
        if line == "\r\n" {
            break text.contains("text/event-stream");
        }
    };
    if streaming {
        // Up to the end of the first event.
        loop {
            line.clear();
            if r.read_line(&mut line).unwrap() == 0 || line.starts_with("data: ") {
                text.push_str(&line);
                break;
            }
            text.push_str(&line);
        }
    } else {
        r.read_to_string(&mut text).unwrap();
    }
    (status, text)
}

/// `{"kind":"user","key":"u1"}` in URL-safe base64.
const CTX: &str = "eyJraW5kIjoidXNlciIsImtleSI6InUxIn0";

#[test]
fn serve_answers_client_side_and_mobile_sdks_with_their_keys_only() {
    let data = data_file("keys");
    let serve = Serve::start(&[
        "--data",
        data.to_str().unwrap(),
        "--client-side-id",
        "env-x",
        "--mobile-key",
        "mob-y",
    ]);
    serve.line_containing("client-side:", T);
    let addr = serve.addr();

    let (status, text) = send(
        addr,
        "GET",
        &format!("/sdk/evalx/env-x/contexts/{CTX}"),
        &[],
        "",
    );
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains(r#""web":{"#) && text.contains(r#""value":"on""#),
        "{text}"
    );
    assert!(!text.contains("srv"), "a server-only flag: {text}");
    let (status, text) = send(
        addr,
        "REPORT",
        "/sdk/evalx/env-x/context",
        &[],
        r#"{"key":"u1"}"#,
    );
    assert_eq!(status, 200, "{text}");
    let (status, _) = send(
        addr,
        "GET",
        &format!("/sdk/evalx/env-other/contexts/{CTX}"),
        &[],
        "",
    );
    assert_eq!(status, 404);

    let (status, text) = send(addr, "GET", &format!("/eval/env-x/{CTX}"), &[], "");
    assert_eq!(status, 200, "{text}");
    assert!(
        text.contains("event: put") && text.contains(r#""value":"on""#),
        "{text}"
    );

    let mobile = [("Authorization", "api_key mob-y")];
    let (status, text) = send(
        addr,
        "GET",
        &format!("/msdk/evalx/contexts/{CTX}"),
        &mobile,
        "",
    );
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(r#""value":"on""#), "{text}");
    let (status, text) = send(addr, "GET", &format!("/meval/{CTX}"), &mobile, "");
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("event: put"), "{text}");
    for key in ["api_key wrong", "env-x"] {
        let (status, _) = send(
            addr,
            "GET",
            &format!("/meval/{CTX}"),
            &[("Authorization", key)],
            "",
        );
        assert_eq!(status, 401, "{key}");
        let (status, _) = send(
            addr,
            "GET",
            &format!("/msdk/evalx/contexts/{CTX}"),
            &[("Authorization", key)],
            "",
        );
        assert_eq!(status, 401, "{key}");
    }
    drop(serve);
    let _ = std::fs::remove_file(data);
}

#[test]
fn serve_without_an_id_accepts_any_and_secure_mode_needs_the_sdk_key() {
    let data = data_file("any");
    let serve = Serve::start(&["--data", data.to_str().unwrap()]);
    serve.line_containing("client-side:", T);
    let (status, text) = send(
        serve.addr(),
        "GET",
        &format!("/sdk/evalx/anything/contexts/{CTX}"),
        &[],
        "",
    );
    assert_eq!(status, 200, "{text}");
    drop(serve);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flagsync"))
        .args([
            "serve",
            "--port",
            "0",
            "--data",
            data.to_str().unwrap(),
            "--secure-mode",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--sdk-key"));
    let _ = std::fs::remove_file(data);
}

#[test]
fn serve_events_shows_where_browser_and_mobile_events_were_posted() {
    let data = data_file("events");
    let log =
        std::env::temp_dir().join(format!("flagsync-cli-events-{}.jsonl", std::process::id()));
    let serve = Serve::start(&[
        "--data",
        data.to_str().unwrap(),
        "--client-side-id",
        "env-x",
        "--events",
        log.to_str().unwrap(),
    ]);
    serve.line_containing("client-side:", T);
    let bulk = r#"[{"kind":"identify","creationDate":1,"context":{"key":"u1"}}]"#;
    let (status, _) = send(serve.addr(), "POST", "/events/bulk/env-x", &[], bulk);
    assert_eq!(status, 202);
    let (status, _) = send(
        serve.addr(),
        "POST",
        "/mobile/events/bulk",
        &[("Authorization", "any")],
        bulk,
    );
    assert_eq!(status, 202);
    let deadline = std::time::Instant::now() + T;
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().count() >= 2 || std::time::Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        text.contains(r#""endpoint":"/events/bulk/env-x""#),
        "{text}"
    );
    assert!(
        text.contains(r#""endpoint":"/mobile/events/bulk""#),
        "{text}"
    );
    drop(serve);
    let _ = std::fs::remove_file(data);
    let _ = std::fs::remove_file(log);
}

/// An upstream for a relay: SDK key `sdk-cli-relay`, client-side ID `env-r`, mobile
/// key `mob-r`, goals.
fn relay_upstream() -> flagsync_server::ServerHandle {
    let flag = serde_json::json!({"key": "web", "version": 1, "on": true, "variations": ["on", "off"],
        "fallthrough": {"variation": 0}, "offVariation": 1,
        "clientSideAvailability": {"usingEnvironmentId": true, "usingMobileKey": true}});
    flagsync_server::Server::builder()
        .sdk_key(Some("sdk-cli-relay".into()))
        .client_side_id(Some("env-r".into()))
        .mobile_key(Some("mob-r".into()))
        .goals(br#"[{"key":"g"}]"#.to_vec().into())
        .data(serde_json::json!({"flags": {"web": flag}}))
        .start()
        .unwrap()
}

/// The relay at `addr` serves `env-r`'s client-side and mobile SDKs and its goals.
fn check_relay(addr: &str) {
    let deadline = std::time::Instant::now() + T;
    let evalx = format!("/sdk/evalx/env-r/contexts/{CTX}");
    while send(addr, "GET", &evalx, &[], "").0 != 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "the relay never served evalx"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, text) = send(addr, "GET", &evalx, &[], "");
    assert!(text.contains(r#""value":"on""#), "{text}");
    let mobile = format!("/msdk/evalx/contexts/{CTX}");
    assert_eq!(
        send(
            addr,
            "GET",
            &mobile,
            &[("Authorization", "api_key mob-r")],
            ""
        )
        .0,
        200
    );
    assert_eq!(
        send(
            addr,
            "GET",
            &mobile,
            &[("Authorization", "api_key nope")],
            ""
        )
        .0,
        401
    );
    while !send(addr, "GET", "/sdk/goals/env-r", &[], "")
        .1
        .ends_with(r#"[{"key":"g"}]"#)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the relay never served the goals"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_relay_serves_client_side_and_mobile_sdks_from_variables_and_arguments() {
    let up = relay_upstream();
    let url = up.url();
    let vars = [
        ("FLAGSYNC_UPSTREAM", url.as_str()),
        ("FLAGSYNC_UPSTREAM_CLIENT_SIDE", url.as_str()),
        ("FLAGSYNC_ENV_web", "sdk-cli-relay"),
        ("FLAGSYNC_ENV_ID_web", "env-r"),
        ("FLAGSYNC_MOBILE_KEY_web", "mob-r"),
        ("FLAGSYNC_LISTEN", "127.0.0.1:0"),
    ];
    let relay = Serve::with_env(&["serve"], &vars);
    assert!(
        relay.banner.starts_with("flagsync: relaying on "),
        "{}",
        relay.banner
    );
    check_relay(relay.addr());
    drop(relay);
    let relay = Serve::start(&[
        "--upstream",
        &url,
        "--sdk-key",
        "sdk-cli-relay",
        "--client-side-id",
        "env-r",
        "--mobile-key",
        "mob-r",
        "--upstream-client-side",
        &url,
    ]);
    check_relay(relay.addr());
    relay.line_containing("SDKs:", T);
    drop(relay);
    up.shutdown();
}
