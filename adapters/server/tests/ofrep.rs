//! The OFREP endpoints over raw HTTP/1.1: values, reasons and variants against the
//! engine evaluated directly, every error code, ETag/304, auth, CORS, hostile bodies,
//! analytics payloads and change notices.

mod common;

use common::{Response, read_head, read_response};

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::Bytes;
use flagsync_core::store::{Change, ChangeSet, Store};
use flagsync_core::{Kind, Snapshot};
use flagsync_eval::{Context, Options, Reason, SlotModels, evaluate_flag};
use flagsync_server::{Server, ServerHandle, ofrep_context};
use serde_json::{Value, json};

const KEY: &str = "sdk-ofrep";
const DATA: &str = include_str!("data/ofrep.json");

fn data() -> Value {
    serde_json::from_str(DATA).unwrap()
}

fn start() -> ServerHandle {
    Server::builder()
        .sdk_key(Some(KEY.into()))
        .data(data())
        .start()
        .unwrap()
}

/// One request on a new connection; the response.
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    read_response(&mut BufReader::new(s))
}

fn post(addr: SocketAddr, path: &str, body: &Value) -> Response {
    let auth = format!("Bearer {KEY}");
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    request(addr, "POST", path, &headers, body.to_string().as_bytes())
}

fn json_of(r: &Response) -> Value {
    serde_json::from_slice(&r.body)
        .unwrap_or_else(|e| panic!("{e}: {:?}", String::from_utf8_lossy(&r.body)))
}

fn single(addr: SocketAddr, flag: &str, context: Value) -> Response {
    post(
        addr,
        &format!("/ofrep/v1/evaluate/flags/{flag}"),
        &json!({ "context": context }),
    )
}

/// The data set as the engine reads it.
fn snapshot() -> Snapshot {
    let d = data();
    let mut changes = Vec::new();
    for (kind, field) in [(Kind::Flag, "flags"), (Kind::Segment, "segments")] {
        for item in d[field].as_object().unwrap().values() {
            changes.push(Change::from_json(kind, Bytes::from(item.to_string())).unwrap());
        }
    }
    let mut store = Store::new();
    store.apply(ChangeSet::fdv1_full(changes));
    store.snapshot()
}

/// What OFREP must answer for `flag`, from the engine: (value, variant, LaunchDarkly
/// reason kind), `None` value for a code default; `Err(errorKind)`.
fn expected(
    snap: &Snapshot,
    flag: &str,
    context: &Context,
) -> Result<(Option<Value>, Option<String>, Reason), String> {
    evaluate_flag(
        snap,
        &SlotModels,
        flag,
        context,
        Options::default(),
        |_, d| {
            if let Reason::Error { error, .. } = d.reason {
                return Err(error.as_str().to_owned());
            }
            let value = d.value.map(|v| {
                let j = serde_json::to_value(v).unwrap();
                match j.as_f64() {
                    Some(n) if j.is_f64() && n.fract() == 0.0 => json!(n as i64),
                    _ => j,
                }
            });
            Ok((
                value,
                d.variation_index.map(|i| i.to_string()),
                d.reason.clone(),
            ))
        },
    )
}

fn contexts() -> Vec<Value> {
    vec![
        json!({"targetingKey": "u1"}),
        json!({"targetingKey": "u-target", "name": "T"}),
        json!({"targetingKey": "u2", "email": "ann@vip.example"}),
        json!({"targetingKey": "u-beta"}),
        json!({"kind": "org", "key": "o1"}),
        json!({"kind": "multi", "user": {"targetingKey": "u3"}, "org": {"targetingKey": "o1"}}),
        json!({"targetingKey": "zz-not-u", "anonymous": true, "privateAttributes": ["email"]}),
    ]
}

/// The OFREP reason a LaunchDarkly reason must become: `flagsync-openfeature`'s.
fn ofrep_reason(reason: &Reason) -> &'static str {
    match reason {
        Reason::Off => "DISABLED",
        Reason::TargetMatch { .. } => "TARGETING_MATCH",
        Reason::RuleMatch { .. } => "RULE_MATCH",
        Reason::Fallthrough { .. } => "FALLTHROUGH",
        Reason::PrerequisiteFailed { .. } => "PREREQUISITE_FAILED",
        Reason::Error { .. } => unreachable!(),
    }
}

fn check_evaluation(
    flag: &str,
    got: &Value,
    want: &Result<(Option<Value>, Option<String>, Reason), String>,
) {
    assert_eq!(got["key"], flag, "{got}");
    match want {
        Err(kind) => {
            let code = if kind == "FLAG_NOT_FOUND" {
                "FLAG_NOT_FOUND"
            } else {
                "PARSE_ERROR"
            };
            assert_eq!(got["errorCode"], code, "{flag}: {got}");
            assert!(got.get("value").is_none(), "{got}");
        }
        Ok((value, variant, reason)) => {
            assert_eq!(got.get("value"), value.as_ref(), "{flag}: {got}");
            // Integers as integers, not `2.0`.
            if let Some(v) = value.as_ref().filter(|v| v.is_i64()) {
                assert_eq!(got["value"].to_string(), v.to_string(), "{flag}");
            }
            assert_eq!(got["variant"].as_str(), variant.as_deref(), "{flag}: {got}");
            assert_eq!(got["reason"], ofrep_reason(reason), "{flag}: {got}");
            let kind = serde_json::to_value(reason).unwrap()["kind"].clone();
            assert_eq!(got["metadata"]["ld.reason.kind"], kind, "{flag}: {got}");
            assert!(got.get("errorCode").is_none(), "{got}");
        }
    }
}

#[test]
fn single_evaluations_match_the_engine_for_every_flag_and_context() {
    let server = start();
    let snap = snapshot();
    let flags: Vec<String> = data()["flags"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let mut reasons = std::collections::BTreeSet::new();
    for ctx in contexts() {
        let context = ofrep_context(&ctx).unwrap();
        for flag in &flags {
            let r = single(server.addr(), flag, ctx.clone());
            let want = expected(&snap, flag, &context);
            let status = match &want {
                Ok(_) => 200,
                Err(_) => 400,
            };
            assert_eq!(
                r.status,
                status,
                "{flag} {ctx}: {}",
                String::from_utf8_lossy(&r.body)
            );
            assert!(
                r.header("content-type")
                    .unwrap()
                    .starts_with("application/json")
            );
            let got = json_of(&r);
            check_evaluation(flag, &got, &want);
            if let Some(reason) = got["reason"].as_str() {
                reasons.insert(reason.to_owned());
            }
        }
    }
    // The data set reaches every reason the mapping makes.
    let all = [
        "DISABLED",
        "FALLTHROUGH",
        "PREREQUISITE_FAILED",
        "RULE_MATCH",
        "TARGETING_MATCH",
    ];
    assert_eq!(reasons.into_iter().collect::<Vec<_>>(), all);
    // Some pinned answers, in case the engine and the server agreed on something wrong.
    let r = json_of(&single(
        server.addr(),
        "int-flag",
        json!({"targetingKey": "u1"}),
    ));
    assert_eq!(
        r,
        json!({"key": "int-flag", "value": 2, "reason": "FALLTHROUGH", "variant": "0",
                         "metadata": {"ld.reason.kind": "FALLTHROUGH"}})
    );
    let r = json_of(&single(
        server.addr(),
        "rule-flag",
        json!({"targetingKey": "u2", "email": "a@vip.example"}),
    ));
    assert_eq!(
        r,
        json!({"key": "rule-flag", "value": "vip", "reason": "RULE_MATCH", "variant": "1",
                         "metadata": {"ld.reason.kind": "RULE_MATCH", "ld.reason.ruleIndex": 0,
                                      "ld.reason.ruleId": "rule-email"}})
    );
    let r = json_of(&single(
        server.addr(),
        "off-no-variation-flag",
        json!({"targetingKey": "u1"}),
    ));
    assert_eq!(
        r,
        json!({"key": "off-no-variation-flag", "reason": "DISABLED",
                         "metadata": {"ld.reason.kind": "OFF"}})
    );
    let r = json_of(&single(
        server.addr(),
        "prereq-flag",
        json!({"targetingKey": "u1"}),
    ));
    assert_eq!(r["metadata"]["ld.reason.prerequisiteKey"], "off-flag");
    let r = json_of(&single(
        server.addr(),
        "org-flag",
        json!({"kind": "org", "targetingKey": "o1"}),
    ));
    assert_eq!(
        (&r["value"], &r["reason"]),
        (&json!("org-o1"), &json!("RULE_MATCH"))
    );
    // A key that needs escaping in a path.
    let r = single(
        server.addr(),
        "no%2Fsuch%20flag",
        json!({"targetingKey": "u1"}),
    );
    assert_eq!(r.status, 404);
    assert_eq!(json_of(&r)["key"], "no/such flag");
}

#[test]
fn every_error_code() {
    let server = start();
    let a = server.addr();
    let u1 = json!({"targetingKey": "u1"});
    let cases: Vec<(Response, u16, &str)> = vec![
        (single(a, "nope", u1.clone()), 404, "FLAG_NOT_FOUND"),
        (single(a, "malformed-flag", u1.clone()), 400, "PARSE_ERROR"),
        (
            single(a, "bool-flag", json!({"email": "x"})),
            400,
            "TARGETING_KEY_MISSING",
        ),
        (
            single(a, "bool-flag", json!({"targetingKey": ""})),
            400,
            "TARGETING_KEY_MISSING",
        ),
        (
            single(
                a,
                "bool-flag",
                json!({"kind": "multi", "user": {"name": "no key"}}),
            ),
            400,
            "TARGETING_KEY_MISSING",
        ),
        (
            single(
                a,
                "bool-flag",
                json!({"targetingKey": "u1", "kind": "not a kind!"}),
            ),
            400,
            "INVALID_CONTEXT",
        ),
        (
            single(a, "bool-flag", json!({"kind": "multi"})),
            400,
            "INVALID_CONTEXT",
        ),
        (
            single(a, "bool-flag", json!("a string")),
            400,
            "INVALID_CONTEXT",
        ),
        (
            post(a, "/ofrep/v1/evaluate/flags/bool-flag", &json!([1, 2])),
            400,
            "PARSE_ERROR",
        ),
        (
            post(a, "/ofrep/v1/evaluate/flags/bool-flag", &json!({})),
            400,
            "TARGETING_KEY_MISSING",
        ),
        (
            post(
                a,
                "/ofrep/v1/evaluate/flags",
                &json!({"context": {"kind": "multi"}}),
            ),
            400,
            "INVALID_CONTEXT",
        ),
        (
            post(a, "/ofrep/v1/evaluate/flags", &json!({"context": {}})),
            400,
            "TARGETING_KEY_MISSING",
        ),
    ];
    for (i, (r, status, code)) in cases.into_iter().enumerate() {
        assert_eq!(
            r.status,
            status,
            "case {i}: {}",
            String::from_utf8_lossy(&r.body)
        );
        let body = json_of(&r);
        assert_eq!(body["errorCode"], code, "case {i}: {body}");
        assert!(body["errorDetails"].is_string(), "case {i}: {body}");
    }
    let auth = format!("Bearer {KEY}");
    let r = request(
        a,
        "POST",
        "/ofrep/v1/evaluate/flags/bool-flag",
        &[("Authorization", &auth)],
        b"{\"context\":",
    );
    assert_eq!(
        (r.status, json_of(&r)["errorCode"].as_str()),
        (400, Some("PARSE_ERROR"))
    );
    assert_eq!(json_of(&r)["key"], "bool-flag");
    // GENERAL (an engine exception, 500) cannot be reached from flag data: the
    // rendering's unit tests cover it.
}

#[test]
fn bulk_evaluates_every_flag_with_an_etag() {
    let server = start();
    let a = server.addr();
    let snap = snapshot();
    for ctx in contexts() {
        let context = ofrep_context(&ctx).unwrap();
        let r = post(a, "/ofrep/v1/evaluate/flags", &json!({ "context": ctx }));
        assert_eq!(r.status, 200);
        let body = json_of(&r);
        let flags = body["flags"].as_array().unwrap();
        let keys: Vec<&str> = flags.iter().map(|f| f["key"].as_str().unwrap()).collect();
        let mut all: Vec<String> = data()["flags"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        all.sort();
        assert_eq!(keys, all);
        for f in flags {
            let key = f["key"].as_str().unwrap();
            check_evaluation(key, f, &expected(&snap, key, &context));
        }
        assert!(body["metadata"]["version"].is_u64(), "{body}");
        let stream = &body["eventStreams"][0];
        assert_eq!(stream["type"], "sse");
        assert!(
            stream["endpoint"]["requestUri"]
                .as_str()
                .unwrap()
                .starts_with("/ofrep/v1/changes?channel=")
        );
    }
    // ETag and 304, for this context's answers.
    let ctx = json!({"context": {"targetingKey": "u1"}});
    let r = post(a, "/ofrep/v1/evaluate/flags", &ctx);
    let etag = r.header("etag").unwrap().to_owned();
    assert!(etag.starts_with('"'));
    let auth = format!("Bearer {KEY}");
    let cond = |etag: &str| {
        let headers = [("Authorization", auth.as_str()), ("If-None-Match", etag)];
        request(
            a,
            "POST",
            "/ofrep/v1/evaluate/flags",
            &headers,
            ctx.to_string().as_bytes(),
        )
    };
    let r = cond(&etag);
    assert_eq!((r.status, r.body.len()), (304, 0));
    assert_eq!(r.header("etag"), Some(etag.as_str()));
    assert_eq!(cond("\"other\"").status, 200);
    // Another context gets other answers, so another ETag.
    let other = post(
        a,
        "/ofrep/v1/evaluate/flags",
        &json!({"context": {"targetingKey": "u-target"}}),
    );
    assert_ne!(other.header("etag").unwrap(), etag);
    // A change that does not change u1's answers keeps the ETag (a targeted key added
    // for someone else); one that does, changes it.
    let mut f = data()["flags"]["targeted-flag"].clone();
    f["targets"][0]["values"] = json!(["u-target", "u-other"]);
    server.set_flag("targeted-flag", f).unwrap();
    assert_eq!(cond(&etag).status, 304);
    let mut f = data()["flags"]["bool-flag"].clone();
    f["on"] = json!(false);
    server.set_flag("bool-flag", f).unwrap();
    let r = cond(&etag);
    assert_eq!(r.status, 200);
    assert_ne!(r.header("etag").unwrap(), etag);
}

#[test]
fn auth_by_bearer_or_api_key_and_refusals() {
    let server = start();
    let a = server.addr();
    let body = json!({"context": {"targetingKey": "u1"}}).to_string();
    let path = "/ofrep/v1/evaluate/flags/bool-flag";
    let with = |headers: &[(&str, &str)]| request(a, "POST", path, headers, body.as_bytes()).status;
    let bearer = format!("Bearer {KEY}");
    let lower = format!("bearer {KEY}");
    assert_eq!(with(&[("Authorization", &bearer)]), 200);
    assert_eq!(with(&[("Authorization", &lower)]), 200);
    assert_eq!(with(&[("X-API-Key", KEY)]), 200);
    assert_eq!(with(&[("Authorization", KEY)]), 200);
    assert_eq!(with(&[]), 401);
    assert_eq!(with(&[("Authorization", "Bearer wrong")]), 401);
    assert_eq!(with(&[("X-API-Key", "wrong")]), 401);
    let r = request(a, "POST", "/ofrep/v1/evaluate/flags", &[], body.as_bytes());
    assert_eq!(r.status, 401);
    assert!(!String::from_utf8_lossy(&r.body).contains(KEY));
    // A payload filter this key is not served with.
    let r = request(
        a,
        "POST",
        "/ofrep/v1/evaluate/flags?filter=nope",
        &[("X-API-Key", KEY)],
        body.as_bytes(),
    );
    assert_eq!(r.status, 403);
    // Wrong methods.
    let r = request(a, "GET", path, &[("X-API-Key", KEY)], b"");
    assert_eq!((r.status, r.header("allow")), (405, Some("POST, OPTIONS")));
    // A server without an SDK key takes any key, or none.
    let open = Server::builder().data(data()).start().unwrap();
    let r = request(open.addr(), "POST", path, &[], body.as_bytes());
    assert_eq!(r.status, 200);
    let r = request(
        open.addr(),
        "POST",
        path,
        &[("X-API-Key", "anything")],
        body.as_bytes(),
    );
    assert_eq!(r.status, 200);
    // A base path before /ofrep is accepted, as for the other endpoints.
    let r = request(
        open.addr(),
        "POST",
        "/base/ofrep/v1/evaluate/flags/bool-flag",
        &[],
        body.as_bytes(),
    );
    assert_eq!(r.status, 200);
}

#[test]
fn cors_preflight_and_headers() {
    let server = start();
    let a = server.addr();
    let origin = "http://app.example:5173";
    let r = request(
        a,
        "OPTIONS",
        "/ofrep/v1/evaluate/flags",
        &[
            ("Origin", origin),
            ("Access-Control-Request-Method", "POST"),
            (
                "Access-Control-Request-Headers",
                "authorization, content-type, x-custom",
            ),
        ],
        b"",
    );
    assert_eq!(r.status, 204);
    assert_eq!(r.header("access-control-allow-origin"), Some(origin));
    let allowed = r
        .header("access-control-allow-headers")
        .unwrap()
        .to_ascii_lowercase();
    for h in [
        "authorization",
        "content-type",
        "if-none-match",
        "x-api-key",
        "x-custom",
    ] {
        assert!(allowed.contains(h), "{allowed}");
    }
    assert!(
        r.header("access-control-allow-methods")
            .unwrap()
            .contains("POST")
    );
    // The answer itself allows the origin and exposes the ETag.
    let auth = format!("Bearer {KEY}");
    let body = json!({"context": {"targetingKey": "u1"}}).to_string();
    let r = request(
        a,
        "POST",
        "/ofrep/v1/evaluate/flags",
        &[("Origin", origin), ("Authorization", &auth)],
        body.as_bytes(),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), Some(origin));
    assert_eq!(r.header("access-control-expose-headers"), Some("ETag"));
    // Errors too (a browser reads them only so).
    let r = request(
        a,
        "POST",
        "/ofrep/v1/evaluate/flags",
        &[("Origin", origin)],
        body.as_bytes(),
    );
    assert_eq!(
        (r.status, r.header("access-control-allow-origin")),
        (401, Some(origin))
    );
    // No Origin, no CORS headers.
    let r = request(
        a,
        "POST",
        "/ofrep/v1/evaluate/flags",
        &[("Authorization", &auth)],
        body.as_bytes(),
    );
    assert_eq!(r.header("access-control-allow-origin"), None);
}

#[test]
fn hostile_bodies_are_400_and_the_server_stays_up() {
    let server = start();
    let a = server.addr();
    let auth = format!("Bearer {KEY}");
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_ctx = format!(
        "{{\"context\":{{\"targetingKey\":\"u\",\"a\":{}1{}}}}}",
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let bodies: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"\x00\xff\xfe garbage".to_vec(),
        b"null".to_vec(),
        b"{\"context\":null}".to_vec(),
        b"{\"context\":{\"targetingKey\":17}}".to_vec(),
        b"{\"context\":{\"targetingKey\":\"u\",\"kind\":\"multi\",\"user\":{\"targetingKey\":[1]}}}".to_vec(),
        b"{\"context\":{\"targetingKey\":\"\\ud800\"}}".to_vec(),
        b"{\"context\":{\"targetingKey\":\"u\",\"privateAttributes\":[1,{}]}}".to_vec(),
        b"{\"context\":{\"targetingKey\":\"u\",\"n\":1e999}}".to_vec(),
        deep.into_bytes(),
        deep_ctx.into_bytes(),
        vec![b'{'; 50_000],
    ];
    for (i, body) in bodies.iter().enumerate() {
        for path in [
            "/ofrep/v1/evaluate/flags/bool-flag",
            "/ofrep/v1/evaluate/flags",
        ] {
            let r = request(a, "POST", path, &[("Authorization", &auth)], body);
            assert!(
                r.status == 400 || r.status == 200,
                "body {i} on {path}: {}",
                r.status
            );
            if r.status == 400 {
                let code = json_of(&r)["errorCode"].as_str().unwrap().to_owned();
                assert!(
                    ["PARSE_ERROR", "INVALID_CONTEXT", "TARGETING_KEY_MISSING"]
                        .contains(&code.as_str()),
                    "{code}"
                );
            }
        }
    }
    // Still serving.
    assert_eq!(
        single(a, "bool-flag", json!({"targetingKey": "u1"})).status,
        200
    );
}

#[test]
fn evaluations_reach_the_event_subscriptions_as_an_sdk_reports_them() {
    let server = start();
    let a = server.addr();
    let events = server.subscribe_events(16);
    for _ in 0..3 {
        assert_eq!(
            single(a, "bool-flag", json!({"targetingKey": "u1"})).status,
            200
        );
    }
    assert_eq!(
        single(a, "tracked-flag", json!({"targetingKey": "u1"})).status,
        200
    );
    assert_eq!(single(a, "nope", json!({"targetingKey": "u2"})).status, 404);
    let r = post(
        a,
        "/ofrep/v1/evaluate/flags",
        &json!({"context": {"targetingKey": "u2"}}),
    );
    assert_eq!(r.status, 200);
    server.flush_ofrep_events();
    let payload = events.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(payload.kind, flagsync_server::PayloadKind::Bulk);
    assert_eq!(payload.environment, None);
    let all = payload.events();
    let of_kind = |k: &str| all.iter().filter(|e| e["kind"] == k).collect::<Vec<_>>();
    // One index event per context, a feature event for each evaluation of the tracked
    // flag (a single for u1, u2's bulk).
    let indexed: Vec<&Value> = of_kind("index")
        .iter()
        .map(|e| &e["context"]["key"])
        .collect();
    assert_eq!(indexed, [&json!("u1"), &json!("u2")]);
    let features = of_kind("feature");
    assert_eq!(features.len(), 2, "{all:?}");
    for (f, key) in features.iter().zip(["u1", "u2"]) {
        assert_eq!(
            (&f["key"], &f["version"]),
            (&json!("tracked-flag"), &json!(7))
        );
        assert_eq!(f["context"]["key"], key);
    }
    let summary = of_kind("summary");
    let counters = |flag: &str| summary[0]["features"][flag]["counters"].clone();
    // bool-flag: 3 singles for u1 and once in u2's bulk, all variation 1.
    assert_eq!(
        counters("bool-flag"),
        json!([{"count": 4, "value": true, "variation": 1, "version": 1}])
    );
    assert_eq!(counters("tracked-flag")[0]["count"], 2);
    assert_eq!(
        counters("int-flag"),
        json!([{"count": 1, "value": 2, "variation": 0, "version": 3}])
    );
    assert_eq!(
        counters("nope"),
        json!([{"count": 1, "unknown": true, "value": null}])
    );
    // Nothing more until more evaluations.
    server.flush_ofrep_events();
    assert!(events.recv_timeout(Duration::from_millis(200)).is_err());
    // Shutdown flushes.
    assert_eq!(
        single(a, "string-flag", json!({"targetingKey": "u1"})).status,
        200
    );
    server.shutdown();
    let last = events.recv_timeout(Duration::from_secs(5)).unwrap();
    assert!(
        last.events()
            .iter()
            .any(|e| e["kind"] == "summary" && e["features"]["string-flag"].is_object())
    );
}

#[test]
fn change_notices_follow_data_changes() {
    let server = start();
    let a = server.addr();
    let origin = "http://app.example";
    let auth = format!("Bearer {KEY}");
    let body = json!({"context": {"targetingKey": "u1"}}).to_string();
    let r = request(
        a,
        "POST",
        "/ofrep/v1/evaluate/flags",
        &[("Authorization", &auth)],
        body.as_bytes(),
    );
    let uri = json_of(&r)["eventStreams"][0]["endpoint"]["requestUri"]
        .as_str()
        .unwrap()
        .to_owned();
    // A token nobody was given opens nothing.
    let bad = request(a, "GET", "/ofrep/v1/changes?channel=guess", &[], b"");
    assert_eq!(bad.status, 401);
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {uri} HTTP/1.1\r\nHost: x\r\nOrigin: {origin}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r);
    assert_eq!(status, 200);
    let header = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.clone())
    };
    assert!(
        header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert_eq!(
        header("access-control-allow-origin").as_deref(),
        Some(origin)
    );
    // One notice at once, of the data as it is: a change made before the stream opened
    // is never missed (the provider re-fetches; `304` when it already has it).
    let read_notice = |r: &mut BufReader<TcpStream>| {
        let mut seen = String::new();
        let mut line = String::new();
        while !seen.contains("refetchEvaluation") {
            line.clear();
            assert!(r.read_line(&mut line).unwrap() > 0, "stream ended: {seen}");
            seen.push_str(&line);
        }
        seen
    };
    let first = read_notice(&mut r);
    assert!(
        first.contains(&format!("id: {}", server.payload_version())),
        "{first}"
    );
    // `/metrics` counts it as an OFREP stream, not as a server-side SDK's.
    let metrics = request(a, "GET", "/metrics", &[], b"");
    let text = String::from_utf8_lossy(&metrics.body);
    for (protocol, open) in [("ofrep", 1), ("fdv1", 0), ("fdv2", 0), ("client", 0)] {
        let line = format!("flagsync_server_streams_open{{protocol=\"{protocol}\"}} {open}\n");
        assert!(text.contains(&line), "{line} in {text}");
    }
    let mut f = data()["flags"]["string-flag"].clone();
    f["fallthrough"]["variation"] = json!(1);
    server.set_flag("string-flag", f).unwrap();
    let seen = read_notice(&mut r);
    let data_line = seen.lines().find(|l| l.starts_with("data: ")).unwrap();
    let notice: Value = serde_json::from_str(&data_line["data: ".len()..]).unwrap();
    assert_eq!(notice["type"], "refetchEvaluation");
    assert!(notice["etag"].is_string());
    assert!(seen.contains("event: message"), "{seen}");
    assert!(
        seen.contains(&format!("id: {}", server.payload_version())),
        "{seen}"
    );
    // The re-fetch sees the change.
    let r = request(
        a,
        "POST",
        "/ofrep/v1/evaluate/flags/string-flag",
        &[("Authorization", &auth)],
        body.as_bytes(),
    );
    assert_eq!(json_of(&r)["value"], "blue");
}
