//! The client-side (JavaScript) and mobile SDK endpoints, with raw HTTP requests:
//! `evalx` polling (GET and REPORT, contexts and users), the flag filters, reasons,
//! secure mode, CORS, goals, the browser and mobile events endpoints, and hostile
//! input. The streams are in `client_side_streams.rs`.

mod common;

use common::client::*;

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use flagsync_eval::{Context, Flag, Options, SecureModeKey, Segment, Store};
use flagsync_server::{Environment, EventOrigin, PayloadKind, Server};
use serde_json::{Value, json};

struct Direct {
    flags: HashMap<String, Arc<Flag>>,
    segments: HashMap<String, Arc<Segment>>,
}

impl Store for Direct {
    fn flag(&self, key: &str) -> Option<Arc<Flag>> {
        self.flags.get(key).cloned()
    }
    fn segment(&self, key: &str) -> Option<Arc<Segment>> {
        self.segments.get(key).cloned()
    }
}

/// Flag `key` evaluated for `context` by the engine directly, as JSON.
fn direct(data: &Value, key: &str, context: &Value) -> Value {
    let mut store = Direct {
        flags: HashMap::new(),
        segments: HashMap::new(),
    };
    for (k, f) in data["flags"].as_object().unwrap() {
        let raw = f.to_string();
        store.flags.insert(
            k.clone(),
            Arc::new(Flag::from_json(raw.as_bytes(), k).unwrap()),
        );
    }
    for (k, s) in data["segments"].as_object().unwrap() {
        let raw = s.to_string();
        store.segments.insert(
            k.clone(),
            Arc::new(Segment::from_json(raw.as_bytes(), k).unwrap()),
        );
    }
    let context: Context = serde_json::from_value(context.clone()).unwrap();
    let flag = store.flag(key).unwrap();
    let detail = flagsync_eval::evaluate(&store, &flag, &context, Options::default());
    let value = serde_json::to_value(detail.value.unwrap()).unwrap();
    // The server writes integral numbers as integers.
    match value.as_f64() {
        Some(n) if n.fract() == 0.0 => json!(n as i64),
        _ => value,
    }
}

#[test]
fn evalx_get_report_and_user_forms_match_the_engine() {
    let server = start();
    let addr = server.addr();
    let data = sample();
    for context in [
        json!({"kind": "user", "key": "u-in", "name": "In"}),
        json!({"kind": "user", "key": "u-out"}),
    ] {
        let get_ctx = get(
            addr,
            &format!("/sdk/evalx/{ENV_ID}/contexts/{}", ctx_path(&context)),
        );
        let report = request(
            addr,
            "REPORT",
            &format!("/sdk/evalx/{ENV_ID}/context"),
            &[],
            context.to_string().as_bytes(),
        );
        let user = json!({"key": context["key"]});
        let std_b64 = b64(user.to_string().as_bytes(), false);
        let get_user = get(addr, &format!("/sdk/evalx/{ENV_ID}/users/{std_b64}"));
        let report_user = request(
            addr,
            "REPORT",
            &format!("/sdk/evalx/{ENV_ID}/user"),
            &[],
            user.to_string().as_bytes(),
        );
        for r in [&get_ctx, &report, &get_user, &report_user] {
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            assert_eq!(r.header("content-type"), Some("application/json"));
            let body = json_of(r);
            let mut keys: Vec<&String> = body.as_object().unwrap().keys().collect();
            keys.sort();
            assert_eq!(keys, ["cs", "legacy"], "client-side flags only");
            for key in ["cs", "legacy"] {
                assert_eq!(body[key]["value"], direct(&data, key, &context), "{key}");
                assert_eq!(body[key]["flagVersion"], 3);
                assert!(body[key]["version"].as_u64().is_some());
                assert!(body[key].get("reason").is_none(), "no reasons unless asked");
            }
            assert_eq!(body["legacy"]["trackEvents"], true);
        }
        // Integral numbers as integers, as LaunchDarkly's service writes them.
        let text = String::from_utf8(get_ctx.body.clone()).unwrap();
        assert!(
            !text.contains("\"value\":1.0") && !text.contains("\"value\":2.0"),
            "{text}"
        );
    }
    let inside = json_of(&get(
        addr,
        &format!(
            "/sdk/evalx/{ENV_ID}/contexts/{}",
            ctx_path(&json!({"key": "u-in"}))
        ),
    ));
    assert_eq!(inside["cs"]["value"], 2, "the segment's rule");
    assert_eq!(inside["cs"]["variation"], 1);
    server.shutdown();
}

#[test]
fn mobile_sees_mobile_flags_with_its_key() {
    let server = start();
    let addr = server.addr();
    let ctx = ctx_path(&json!({"kind": "user", "key": "u"}));
    for auth in [format!("api_key {MOBILE_KEY}"), MOBILE_KEY.to_owned()] {
        let r = request(
            addr,
            "GET",
            &format!("/msdk/evalx/contexts/{ctx}"),
            &[("Authorization", &auth)],
            b"",
        );
        assert_eq!(r.status, 200);
        let body = json_of(&r);
        let mut keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["cs", "legacy", "mobile-only"]);
        assert_eq!(body["mobile-only"]["value"], "b");
        assert!(
            r.header("access-control-allow-origin").is_none(),
            "no CORS for mobile"
        );
    }
    let r = request(
        addr,
        "REPORT",
        "/msdk/evalx/user",
        &[("Authorization", MOBILE_KEY)],
        br#"{"key":"u"}"#,
    );
    assert_eq!(r.status, 200);
    assert_eq!(json_of(&r)["mobile-only"]["value"], "b");
    let r = get(addr, &format!("/msdk/evalx/users/{ctx}"));
    assert_eq!(r.status, 401, "no key");
    let r = request(
        addr,
        "GET",
        &format!("/msdk/evalx/contexts/{ctx}"),
        &[("Authorization", "api_key wrong")],
        b"",
    );
    assert_eq!(r.status, 401);
    assert!(json_of(&r)["message"].is_string());
    // The SDK key is not a mobile key.
    let r = request(
        addr,
        "GET",
        &format!("/msdk/evalx/contexts/{ctx}"),
        &[("Authorization", SDK_KEY)],
        b"",
    );
    assert_eq!(r.status, 401);
    server.shutdown();
}

#[test]
fn with_reasons_and_unknown_environment_ids() {
    let server = start();
    let addr = server.addr();
    let ctx = ctx_path(&json!({"key": "u-in"}));
    let r = get(
        addr,
        &format!("/sdk/evalx/{ENV_ID}/contexts/{ctx}?withReasons=true"),
    );
    let body = json_of(&r);
    assert_eq!(body["cs"]["reason"]["kind"], "RULE_MATCH");
    assert_eq!(body["legacy"]["reason"]["kind"], "FALLTHROUGH");
    let r = get(addr, &format!("/sdk/evalx/other-env/contexts/{ctx}"));
    assert_eq!(r.status, 404);
    assert!(json_of(&r)["message"].is_string());
    let r = get(addr, &format!("/eval/other-env/{ctx}"));
    assert_eq!(r.status, 404);
    server.shutdown();
    // Without a configured client-side ID, any ID is served.
    let open = Server::builder().data(sample()).start().unwrap();
    let r = get(open.addr(), &format!("/sdk/evalx/whatever/contexts/{ctx}"));
    assert_eq!(r.status, 200);
    let r = request(
        open.addr(),
        "GET",
        &format!("/msdk/evalx/contexts/{ctx}"),
        &[("Authorization", "any")],
        b"",
    );
    assert_eq!(r.status, 200);
    open.shutdown();
}

#[test]
fn environments_by_client_side_id_and_secure_mode() {
    let server = Server::builder()
        .environment(
            Environment::new("a", "sdk-a")
                .client_side_id("id-a")
                .data(json!({"flagValues": {"f": 1}})),
        )
        .environment(
            Environment::new("b", "sdk-b")
                .client_side_id("id-b")
                .secure_mode(true)
                .data(sample()),
        )
        .start()
        .unwrap();
    let addr = server.addr();
    let user = json!({"kind": "user", "key": "u-in"});
    let ctx = ctx_path(&user);
    // A `flagValues` flag is not available to client-side SDKs.
    let a = get(addr, &format!("/sdk/evalx/id-a/contexts/{ctx}"));
    assert_eq!(a.status, 200);
    assert_eq!(json_of(&a), json!({}));
    let missing = get(addr, &format!("/sdk/evalx/id-b/contexts/{ctx}"));
    assert_eq!(missing.status, 400, "secure mode needs `h`");
    let context: Context = serde_json::from_value(user).unwrap();
    let h = SecureModeKey::new("sdk-b").context_hash(&context);
    let ok = get(addr, &format!("/sdk/evalx/id-b/contexts/{ctx}?h={h}"));
    assert_eq!(ok.status, 200);
    assert_eq!(json_of(&ok)["cs"]["value"], 2);
    let wrong_key = SecureModeKey::new("sdk-a").context_hash(&context);
    let wrong = get(
        addr,
        &format!("/sdk/evalx/id-b/contexts/{ctx}?h={wrong_key}"),
    );
    assert_eq!(wrong.status, 400);
    let stream = get_stream(addr, &format!("/eval/id-b/{ctx}"));
    assert_eq!(stream.status, 400);
    server.shutdown();
}

#[test]
fn cors_preflight_and_headers() {
    let server = Server::builder()
        .sdk_key(Some(SDK_KEY.into()))
        .client_side_id(Some(ENV_ID.into()))
        .allowed_origin("https://app.example")
        .data(sample())
        .start()
        .unwrap();
    let addr = server.addr();
    let ctx = ctx_path(&json!({"key": "u"}));
    let pre = request(
        addr,
        "OPTIONS",
        &format!("/sdk/evalx/{ENV_ID}/context"),
        &[
            ("Origin", "https://app.example"),
            ("Access-Control-Request-Method", "REPORT"),
            (
                "Access-Control-Request-Headers",
                "content-type,x-launchdarkly-user-agent",
            ),
        ],
        b"",
    );
    assert_eq!(pre.status, 200);
    assert_eq!(
        pre.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert!(
        pre.header("access-control-allow-methods")
            .unwrap()
            .contains("REPORT")
    );
    let allowed = pre
        .header("access-control-allow-headers")
        .unwrap()
        .to_ascii_lowercase();
    for h in [
        "content-type",
        "x-launchdarkly-user-agent",
        "x-launchdarkly-event-schema",
        "x-launchdarkly-payload-id",
        "x-launchdarkly-wrapper",
    ] {
        assert!(allowed.contains(h), "{h} in {allowed}");
    }
    assert_eq!(pre.header("access-control-max-age"), Some("300"));
    assert!(pre.header("access-control-allow-credentials").is_some());
    for path in [
        format!("/eval/{ENV_ID}/{ctx}"),
        format!("/events/bulk/{ENV_ID}"),
        format!("/sdk/goals/{ENV_ID}"),
        format!("/a/{ENV_ID}.gif"),
    ] {
        let r = request(
            addr,
            "OPTIONS",
            &path,
            &[("Origin", "https://app.example")],
            b"",
        );
        assert_eq!(r.status, 200, "{path}");
    }
    let r = request(
        addr,
        "GET",
        &format!("/sdk/evalx/{ENV_ID}/contexts/{ctx}"),
        &[("Origin", "https://app.example")],
        b"",
    );
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://app.example")
    );
    assert_eq!(r.header("access-control-expose-headers"), Some("Date"));
    let r = request(
        addr,
        "GET",
        &format!("/sdk/evalx/{ENV_ID}/contexts/{ctx}"),
        &[("Origin", "https://evil.example")],
        b"",
    );
    assert_ne!(
        r.header("access-control-allow-origin"),
        Some("https://evil.example")
    );
    server.shutdown();
    // Any origin by default.
    let open = start();
    let r = request(
        open.addr(),
        "GET",
        &format!("/sdk/goals/{ENV_ID}"),
        &[("Origin", "https://any.example")],
        b"",
    );
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://any.example")
    );
    open.shutdown();
}

#[test]
fn goals_default_configured_and_set() {
    let server = Server::builder()
        .environment(
            Environment::new("a", "sdk-a")
                .client_side_id("id-a")
                .goals(Bytes::from_static(br#"[{"key":"g1","kind":"click"}]"#))
                .data(sample()),
        )
        .environment(
            Environment::new("b", "sdk-b")
                .client_side_id("id-b")
                .data(sample()),
        )
        .start()
        .unwrap();
    let addr = server.addr();
    let a = get(addr, "/sdk/goals/id-a");
    assert_eq!(a.status, 200);
    assert_eq!(json_of(&a), json!([{"key": "g1", "kind": "click"}]));
    assert_eq!(json_of(&get(addr, "/sdk/goals/id-b")), json!([]));
    server
        .environment("b")
        .unwrap()
        .set_goals(Bytes::from_static(b"[{\"key\":\"g2\"}]"));
    assert_eq!(
        json_of(&get(addr, "/sdk/goals/id-b")),
        json!([{"key": "g2"}])
    );
    assert_eq!(get(addr, "/sdk/goals/id-c").status, 404);
    assert_eq!(
        request(addr, "POST", "/sdk/goals/id-a", &[], b"[]").status,
        405
    );
    server.shutdown();
}

#[test]
fn browser_and_mobile_events_reach_the_subscription() {
    let server = start();
    let addr = server.addr();
    let events = server.subscribe_events(10);
    let bulk = json!([{"kind": "identify", "creationDate": 1, "context": {"key": "u"}}]);
    let r = request(
        addr,
        "POST",
        &format!("/events/bulk/{ENV_ID}"),
        &[
            ("X-LaunchDarkly-Event-Schema", "4"),
            ("Origin", "https://a.example"),
        ],
        bulk.to_string().as_bytes(),
    );
    assert_eq!(r.status, 202);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://a.example")
    );
    let p = events.recv_timeout(T).unwrap();
    assert_eq!(p.kind, PayloadKind::Bulk);
    assert_eq!(p.body, bulk);
    assert_eq!(p.schema.as_deref(), Some("4"));
    assert_eq!(
        p.origin,
        EventOrigin::ClientSide {
            env_id: ENV_ID.into()
        }
    );

    let diag = json!({"kind": "diagnostic-init", "id": {"diagnosticId": "d"}});
    let r = request(
        addr,
        "POST",
        &format!("/events/diagnostic/{ENV_ID}"),
        &[],
        diag.to_string().as_bytes(),
    );
    assert_eq!(r.status, 202);
    let p = events.recv_timeout(T).unwrap();
    assert_eq!(p.kind, PayloadKind::Diagnostic);

    let d = b64(bulk.to_string().as_bytes(), false)
        .replace('+', "%2B")
        .replace('/', "%2F")
        .replace('=', "%3D");
    let r = get(addr, &format!("/a/{ENV_ID}.gif?d={d}"));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("image/gif"));
    assert!(r.body.starts_with(b"GIF89a"));
    let p = events.recv_timeout(T).unwrap();
    assert_eq!(p.body, bulk);
    assert_eq!(
        p.origin,
        EventOrigin::ClientSide {
            env_id: ENV_ID.into()
        }
    );

    for (path, kind) in [
        ("/mobile", PayloadKind::Bulk),
        ("/mobile/events", PayloadKind::Bulk),
        ("/mobile/events/bulk", PayloadKind::Bulk),
        ("/mobile/events/diagnostic", PayloadKind::Diagnostic),
    ] {
        let body = if kind == PayloadKind::Bulk {
            &bulk
        } else {
            &diag
        };
        let r = request(
            addr,
            "POST",
            path,
            &[("Authorization", MOBILE_KEY)],
            body.to_string().as_bytes(),
        );
        assert_eq!(r.status, 202, "{path}");
        let p = events.recv_timeout(T).unwrap();
        assert_eq!((p.kind, p.origin), (kind, EventOrigin::Mobile), "{path}");
    }
    let r = request(
        addr,
        "POST",
        "/mobile/events/bulk",
        &[("Authorization", SDK_KEY)],
        bulk.to_string().as_bytes(),
    );
    assert_eq!(r.status, 401, "the SDK key is not a mobile key");
    let r = request(
        addr,
        "POST",
        &format!("/events/bulk/{ENV_ID}"),
        &[],
        b"{not json",
    );
    assert_eq!(r.status, 400);
    assert!(events.try_recv().is_none());
    server.shutdown();
}

#[test]
fn hostile_input_is_400_with_a_message() {
    let server = start();
    let addr = server.addr();
    for target in [
        format!("/sdk/evalx/{ENV_ID}/contexts/!!!"),
        format!("/sdk/evalx/{ENV_ID}/contexts/{}", b64(b"not json", true)),
        format!(
            "/sdk/evalx/{ENV_ID}/contexts/{}",
            ctx_path(&json!({"kind": "user", "key": ""}))
        ),
        format!(
            "/sdk/evalx/{ENV_ID}/contexts/{}",
            ctx_path(&json!({"kind": "kind", "key": "k"}))
        ),
        format!("/sdk/evalx/{ENV_ID}/users/{}", ctx_path(&json!([1, 2]))),
        format!("/eval/{ENV_ID}/a"),
        format!("/a/{ENV_ID}.gif?d=%%%"),
        format!("/a/{ENV_ID}.gif"),
    ] {
        let r = get(addr, &target);
        assert_eq!(r.status, 400, "{target}");
        assert!(json_of(&r)["message"].is_string(), "{target}");
    }
    for body in [&b"{"[..], b"[]", b"{\"kind\":\"multi\"}", b"\xff\xfe"] {
        let r = request(
            addr,
            "REPORT",
            &format!("/sdk/evalx/{ENV_ID}/context"),
            &[],
            body,
        );
        assert_eq!(r.status, 400);
        let r = request(
            addr,
            "REPORT",
            "/meval",
            &[("Authorization", MOBILE_KEY)],
            body,
        );
        assert_eq!(r.status, 400);
    }
    let r = request(
        addr,
        "REPORT",
        &format!("/sdk/evalx/{ENV_ID}/context"),
        &[("Content-Type", "application/json")],
        b"",
    );
    assert_eq!(r.status, 400, "no body");
    let r = request(
        addr,
        "REPORT",
        &format!("/sdk/evalx/{ENV_ID}/context"),
        &[("Content-Type", "text/plain")],
        b"",
    );
    assert_eq!(r.status, 415, "a REPORT body must be application/json");
    let r = request(
        addr,
        "PUT",
        &format!("/sdk/evalx/{ENV_ID}/context"),
        &[],
        b"{}",
    );
    assert_eq!(r.status, 405);
    // The server still answers.
    assert_eq!(get(addr, &format!("/sdk/goals/{ENV_ID}")).status, 200);
    server.shutdown();
}
