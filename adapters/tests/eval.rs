//! Evaluation and migrations against flags served by the local flag server, on every
//! runtime feature: typed variations with reasons, prerequisites, segment matches
//! (user keys, context kinds, rules), updates, `all_flags_state`, the not-ready path,
//! and a migrator driven by a live migration flag.
#![cfg(all(feature = "server", feature = "eval"))]
#![cfg_attr(
    not(any(feature = "tokio", feature = "smol", feature = "async-std")),
    allow(dead_code, unused_imports)
)]

#[macro_use]
#[allow(unused_imports)] // this binary uses the flag server, not the scripted one
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use flagsync::eval::{
    AllFlagsOptions, Context, ContextBuilder, EvalError, FlagValue, MultiContextBuilder, Reason,
};
use flagsync::migration::{MemorySink, Migrator, Origin, Stage};
use flagsync::server::{self as flag_server, ServerHandle};
use serde_json::{Value, json};

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    typed_variations_and_reasons,
    prerequisites,
    segment_matches,
    updates_reach_evaluations,
    all_flags_state_json,
    not_ready_before_data,
    migration_stage_and_migrator_from_a_live_flag,
);

/// A flag with every field the evaluation engine requires, plus `extra`.
fn flag(variations: Value, extra: Value) -> Value {
    let mut f = json!({"on": true, "salt": "salt", "targets": [], "contextTargets": [],
        "rules": [], "prerequisites": [], "fallthrough": {"variation": 0}, "offVariation": 0,
        "variations": variations, "trackEvents": false});
    for (k, v) in extra.as_object().unwrap() {
        f[k] = v.clone();
    }
    f
}

fn rule(id: &str, clauses: Value, variation: usize) -> Value {
    json!({"id": id, "clauses": clauses, "variation": variation, "trackEvents": false})
}

fn segment_match(keys: &[&str]) -> Value {
    json!([{"attribute": "", "op": "segmentMatch", "values": keys, "negate": false}])
}

fn data() -> Value {
    json!({
        "flags": {
            "bool-flag": flag(json!([false, true]), json!({
                "targets": [{"values": ["alice"], "variation": 1}],
                "rules": [rule("r-mail", json!([{"attribute": "email", "op": "endsWith",
                                                  "values": ["@example.com"]}]), 1)],
            })),
            "string-flag": flag(json!(["red", "green"]), json!({"fallthrough": {"variation": 1}})),
            "number-flag": flag(json!([1.5, 42]), json!({"fallthrough": {"variation": 1}})),
            "json-flag": flag(json!([{"limit": 10}, {"limit": 99}]), json!({})),
            "off-flag": flag(json!(["on-value", "off-value"]), json!({"on": false, "offVariation": 1})),
            "off-without-off-variation": flag(json!([true]), json!({"on": false, "offVariation": null})),
            "bad-variation": flag(json!([true]), json!({"fallthrough": {"variation": 5}})),
            "child": flag(json!(["a", "b"]), json!({
                "rules": [rule("r-child", json!([{"attribute": "key", "op": "in",
                                                   "values": ["bob"]}]), 1)],
            })),
            "parent": flag(json!([false, true]), json!({
                "prerequisites": [{"key": "child", "variation": 1}],
                "fallthrough": {"variation": 1},
            })),
            "grandparent": flag(json!([false, true]), json!({
                "prerequisites": [{"key": "parent", "variation": 1}],
                "fallthrough": {"variation": 1},
            })),
            "orphan": flag(json!([false, true]), json!({
                "prerequisites": [{"key": "no-such-flag", "variation": 0}],
                "fallthrough": {"variation": 1},
            })),
            "beta-flag": flag(json!(["control", "beta"]), json!({
                "rules": [rule("r-beta", segment_match(&["beta-users"]), 1)],
            })),
            "migration": flag(json!(["off", "dualwrite", "shadow", "live", "rampdown", "complete"]),
                json!({"fallthrough": {"variation": 3}, "migration": {"checkRatio": 1}})),
            "not-a-stage": flag(json!(["sideways"]), json!({})),
        },
        "segments": {
            "beta-users": {
                "salt": "seg", "included": ["bob"], "excluded": ["carol"],
                "includedContexts": [{"contextKind": "org", "values": ["acme"]}],
                "excludedContexts": [],
                "rules": [{"id": "sr", "clauses": [{"contextKind": "user", "attribute": "country",
                           "op": "in", "values": ["DE"]}]}],
            }
        }
    })
}

fn serve() -> ServerHandle {
    flag_server::Server::builder().data(data()).start().unwrap()
}

async fn ready_client(rt: &Rt, server: &ServerHandle) -> flagsync::Client {
    let client = builder(rt, &server.url()).build().unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    client
}

fn user(key: &str) -> Context {
    ContextBuilder::new(key).build().unwrap()
}

fn user_with(key: &str, attr: &str, value: &str) -> Context {
    let mut b = ContextBuilder::new(key);
    b.set_string(attr, value);
    b.build().unwrap()
}

fn org(key: &str) -> Context {
    ContextBuilder::new(key).kind("org").build().unwrap()
}

async fn typed_variations_and_reasons(rt: Rt) {
    let server = serve();
    let client = ready_client(&rt, &server).await;
    let anna = user("anna");

    // Target, rule and fallthrough.
    let d = client.bool_variation_detail("bool-flag", &user("alice"), false);
    assert_eq!(
        (d.value, d.variation_index, d.reason),
        (Some(true), Some(1), Reason::target_match())
    );
    let d = client.bool_variation_detail(
        "bool-flag",
        &user_with("x", "email", "x@example.com"),
        false,
    );
    assert_eq!(
        d.reason,
        Reason::RuleMatch {
            rule_index: 0,
            rule_id: "r-mail".into(),
            in_experiment: false,
            big_segments_status: None
        }
    );
    assert!(d.value.unwrap());
    let d = client.bool_variation_detail("bool-flag", &anna, true);
    assert_eq!(
        (d.value, d.reason),
        (
            Some(false),
            Reason::Fallthrough {
                in_experiment: false,
                big_segments_status: None
            }
        )
    );

    assert_eq!(
        client.string_variation("string-flag", &anna, "blue"),
        "green"
    );
    assert_eq!(client.float_variation("number-flag", &anna, 0.0), 42.0);
    assert_eq!(client.int_variation("number-flag", &anna, 0), 42);
    assert_eq!(
        client.json_variation("json-flag", &anna, json!(null)),
        json!({"limit": 10})
    );
    assert_eq!(
        client.variation("string-flag", &anna, false),
        FlagValue::Str("green".into())
    );

    // Off, with and without an off variation.
    let d = client.string_variation_detail("off-flag", &anna, "dflt");
    assert_eq!(
        (d.value.as_deref(), d.variation_index, d.reason),
        (Some("off-value"), Some(1), Reason::Off)
    );
    let d = client.bool_variation_detail("off-without-off-variation", &anna, false);
    assert_eq!(
        (d.value, d.variation_index, d.reason),
        (Some(false), None, Reason::Off)
    );

    // Errors answer the default.
    let wrong_type = Reason::error(EvalError::WrongType);
    let d = client.bool_variation_detail("string-flag", &anna, true);
    assert_eq!(
        (d.value, d.variation_index, d.reason),
        (Some(true), None, wrong_type.clone())
    );
    assert_eq!(
        client.int_variation_detail("bool-flag", &anna, 3).reason,
        wrong_type
    );
    let d = client.string_variation_detail("nope", &anna, "dflt");
    assert_eq!(
        (d.value.as_deref(), d.reason),
        (Some("dflt"), Reason::error(EvalError::FlagNotFound))
    );
    let d = client.bool_variation_detail("bad-variation", &anna, true);
    assert_eq!(
        (d.value, d.reason),
        (Some(true), Reason::error(EvalError::MalformedFlag))
    );
    client.close().await;
}

async fn prerequisites(rt: Rt) {
    let server = serve();
    let client = ready_client(&rt, &server).await;
    // bob gets child's variation 1, so parent and grandparent pass.
    let d = client.bool_variation_detail("grandparent", &user("bob"), false);
    assert_eq!(
        (d.value, d.reason),
        (
            Some(true),
            Reason::Fallthrough {
                in_experiment: false,
                big_segments_status: None
            }
        )
    );
    // anna gets child's variation 0: parent fails on child, grandparent on parent.
    let d = client.bool_variation_detail("parent", &user("anna"), true);
    assert_eq!((d.value, d.variation_index), (Some(false), Some(0)));
    assert_eq!(d.reason, Reason::prerequisite_failed("child"));
    let d = client.bool_variation_detail("grandparent", &user("anna"), true);
    assert_eq!(d.reason, Reason::prerequisite_failed("parent"));
    let d = client.bool_variation_detail("orphan", &user("bob"), true);
    assert_eq!(d.reason, Reason::prerequisite_failed("no-such-flag"));
    // Turning the prerequisite off fails it for everyone.
    let mut child = server.flag("child").unwrap();
    child["on"] = json!(false);
    child.as_object_mut().unwrap().remove("version");
    server.set_flag("child", child).unwrap();
    assert!(
        eventually(&rt, 3 * SEC, || {
            client
                .bool_variation_detail("parent", &user("bob"), true)
                .reason
                == Reason::prerequisite_failed("child")
        })
        .await
    );
    client.close().await;
}

async fn segment_matches(rt: Rt) {
    let server = serve();
    let client = ready_client(&rt, &server).await;
    let beta = |ctx: &Context| client.string_variation("beta-flag", ctx, "dflt");
    assert_eq!(beta(&user("bob")), "beta", "included user key");
    assert_eq!(
        beta(&user_with("carol", "country", "DE")),
        "control",
        "excluded beats the rule"
    );
    assert_eq!(
        beta(&user_with("dave", "country", "DE")),
        "beta",
        "segment rule"
    );
    assert_eq!(beta(&user_with("erin", "country", "FR")), "control");
    assert_eq!(beta(&org("acme")), "beta", "included org key");
    assert_eq!(
        beta(&org("bob")),
        "control",
        "`included` is for user keys only"
    );
    let multi = MultiContextBuilder::new()
        .add_context(user("zed"))
        .add_context(org("acme"))
        .build()
        .unwrap();
    assert_eq!(beta(&multi), "beta", "multi-context through its org");
    let d = client.string_variation_detail("beta-flag", &user("bob"), "dflt");
    assert_eq!(
        d.reason,
        Reason::RuleMatch {
            rule_index: 0,
            rule_id: "r-beta".into(),
            in_experiment: false,
            big_segments_status: None
        }
    );
    client.close().await;
}

async fn updates_reach_evaluations(rt: Rt) {
    let server = serve();
    let client = ready_client(&rt, &server).await;
    let erin = user("erin");
    assert_eq!(
        client.string_variation("beta-flag", &erin, "dflt"),
        "control"
    );
    // A new segment version: erin is now included.
    let mut segment = data()["segments"]["beta-users"].clone();
    segment["included"] = json!(["bob", "erin"]);
    server.set_segment("beta-users", segment).unwrap();
    assert!(
        eventually(&rt, 3 * SEC, || client.string_variation(
            "beta-flag",
            &erin,
            "dflt"
        ) == "beta")
        .await
    );
    // A new flag version.
    server
        .set_flag(
            "string-flag",
            flag(
                json!(["red", "green"]),
                json!({"fallthrough": {"variation": 0}}),
            ),
        )
        .unwrap();
    assert!(
        eventually(&rt, 3 * SEC, || client.string_variation(
            "string-flag",
            &erin,
            "x"
        ) == "red")
        .await
    );
    server.delete_flag("string-flag");
    assert!(
        eventually(&rt, 3 * SEC, || {
            client
                .string_variation_detail("string-flag", &erin, "x")
                .reason
                == Reason::error(EvalError::FlagNotFound)
        })
        .await
    );
    client.close().await;
}

async fn all_flags_state_json(rt: Rt) {
    let server = flag_server::Server::builder()
        .data(json!({"flags": {
            "a": flag(json!([false, true]), json!({"version": 3, "fallthrough": {"variation": 1},
                "clientSideAvailability": {"usingEnvironmentId": true, "usingMobileKey": false}})),
            "b": flag(json!(["x", "y"]), json!({"version": 5, "prerequisites": [{"key": "a", "variation": 1}],
                "trackEvents": true, "debugEventsUntilDate": 1000})),
            "c": flag(json!([1]), json!({"version": 1, "on": false, "offVariation": null})),
        }}))
        .start()
        .unwrap();
    let client = ready_client(&rt, &server).await;
    let ctx = user("u");
    let state = client.all_flags_state(&ctx, AllFlagsOptions::new());
    assert!(state.valid());
    let got: Value = serde_json::from_str(&state.to_json()).unwrap();
    assert_eq!(
        got,
        json!({
            "a": true, "b": "x", "c": null,
            "$flagsState": {
                "a": {"variation": 1, "version": 3},
                "b": {"variation": 0, "version": 5, "trackEvents": true,
                      "debugEventsUntilDate": 1000, "prerequisites": ["a"]},
                "c": {"version": 1},
            },
            "$valid": true
        })
    );
    let state = client.all_flags_state(
        &ctx,
        AllFlagsOptions::new()
            .with_reasons(true)
            .client_side_only(true),
    );
    let got: Value = serde_json::to_value(&state).unwrap();
    assert_eq!(
        got,
        json!({"a": true, "$flagsState": {"a": {"variation": 1, "version": 3,
               "reason": {"kind": "FALLTHROUGH"}}}, "$valid": true})
    );
    // Details only for tracked flags: b tracks events, a and c lose their versions.
    let state = client.all_flags_state(
        &ctx,
        AllFlagsOptions::new()
            .with_reasons(true)
            .details_only_for_tracked_flags(true),
    );
    assert_eq!(state.flag("a").unwrap().version, None);
    assert_eq!(state.flag("b").unwrap().version, Some(5));
    assert_eq!(
        state.flag("b").unwrap().reason,
        Some(Reason::Fallthrough {
            in_experiment: false,
            big_segments_status: None
        })
    );
    assert_eq!(state.value("a"), Some(&FlagValue::Bool(true)));
    client.close().await;
}

async fn not_ready_before_data(rt: Rt) {
    let server = serve();
    server.hang(true);
    let client = builder(&rt, &server.url()).build().unwrap();
    let ctx = user("bob");
    let not_ready = Reason::error(EvalError::ClientNotReady);
    // Before start, then started but without data.
    for started in [false, true] {
        if started {
            client.start().unwrap();
            assert!(
                !client
                    .wait_for_initialization(Duration::from_millis(200))
                    .await
            );
        }
        let d = client.string_variation_detail("beta-flag", &ctx, "dflt");
        assert_eq!(
            (d.value.as_deref(), d.variation_index, d.reason.clone()),
            (Some("dflt"), None, not_ready.clone())
        );
        assert!(client.bool_variation("bool-flag", &ctx, true));
        assert!(!client.all_flags_state(&ctx, AllFlagsOptions::new()).valid());
        let (stage, tracker) = client.migration_variation("migration", &ctx, Stage::Shadow);
        assert_eq!(
            (stage, tracker.detail().reason.clone()),
            (Stage::Shadow, not_ready.clone())
        );
    }
    server.hang(false);
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(client.string_variation("beta-flag", &ctx, "dflt"), "beta");
    client.close().await;
}

async fn migration_stage_and_migrator_from_a_live_flag(rt: Rt) {
    let server = serve();
    let client = ready_client(&rt, &server).await;
    let ctx = user("bob");
    let (stage, tracker) = client.migration_variation("migration", &ctx, Stage::Off);
    assert_eq!(
        (stage, tracker.detail().variation_index),
        (Stage::Live, Some(3))
    );
    assert_eq!(tracker.check_ratio(), 1);
    let (stage, tracker) = client.migration_variation("not-a-stage", &ctx, Stage::DualWrite);
    assert_eq!(stage, Stage::DualWrite);
    assert_eq!(tracker.detail().reason, Reason::error(EvalError::WrongType));
    assert_eq!(tracker.detail().variation_index, None);

    let sink = Arc::new(MemorySink::new());
    let migrator = Migrator::builder(client.clone())
        .read_with_comparison(
            |id: u32| async move { Ok::<_, String>(format!("row {id}")) },
            |id: u32| async move { Ok::<_, String>(format!("row {id}")) },
            |a: &String, b: &String| a == b,
        )
        .write(
            |_: u32| async { Ok::<_, String>(String::new()) },
            |_: u32| async { Err::<String, _>("new is down".to_owned()) },
        )
        .event_sink(sink.clone())
        .build()
        .unwrap();
    let read = migrator.read("migration", &ctx, Stage::Off, 7).await;
    assert_eq!(
        (read.origin, read.result),
        (Origin::New, Ok("row 7".to_owned()))
    );
    let write = migrator.write("migration", &ctx, Stage::Off, 7).await;
    assert_eq!(write.authoritative.result, Err("new is down".to_owned()));
    assert!(write.nonauthoritative.is_none());
    let events = sink.take();
    let read_event: Value = serde_json::from_str(&events[0].to_json()).unwrap();
    assert_eq!(read_event["evaluation"]["value"], "live");
    assert_eq!(read_event["evaluation"]["version"], 1);
    assert_eq!(
        read_event["measurements"][0],
        json!({"key": "invoked", "values": {"old": true, "new": true}})
    );
    assert_eq!(
        read_event["measurements"][1],
        json!({"key": "consistent", "value": true})
    );
    let write_event: Value = serde_json::from_str(&events[1].to_json()).unwrap();
    assert_eq!(write_event["operation"], "write");
    // invoked, latency_ms, error (PROTOCOL.md B §6.6).
    assert_eq!(write_event["measurements"][1]["key"], "latency_ms");
    assert_eq!(
        write_event["measurements"][2],
        json!({"key": "error", "values": {"new": true}})
    );

    // checkRatio 0: never compared.
    let mut f = server.flag("migration").unwrap();
    f["migration"] = json!({"checkRatio": 0});
    f.as_object_mut().unwrap().remove("version");
    server.set_flag("migration", f).unwrap();
    assert!(
        eventually(&rt, 3 * SEC, || {
            client
                .migration_variation("migration", &ctx, Stage::Off)
                .1
                .check_ratio()
                == 0
        })
        .await
    );
    migrator.read("migration", &ctx, Stage::Off, 8).await;
    let event = &sink.take()[0];
    assert_eq!((event.consistent, event.check_ratio), (None, 0));
    client.close().await;
}
