//! The all-flags state: values, failed evaluations, and the prerequisites reached.

use serde_json::{Value, json};

use super::{snapshot, user};
use crate::{AllFlagsOptions, SlotModels, SnapshotStore, flags_state};

/// A complete flag `key` at `version` with `variations` and the fields in `extra`.
fn full_flag(key: &str, version: u64, variations: Value, extra: Value) -> Value {
    let mut f = json!({"key": key, "version": version, "on": true, "salt": "", "targets": [],
        "rules": [], "prerequisites": [], "fallthrough": {"variation": 0},
        "variations": variations});
    for (k, v) in extra.as_object().unwrap() {
        f[k] = v.clone();
    }
    f
}

/// `flags_state` of `flags` for user `u` as JSON.
fn flags_state_json(flags: &[Value], options: AllFlagsOptions) -> Value {
    let snap = snapshot(flags, &[]);
    let state = flags_state(
        &snap,
        &SlotModels,
        &SnapshotStore::new(&snap, &SlotModels),
        None,
        &user("u"),
        options,
        0,
    );
    serde_json::to_value(&state).unwrap()
}

/// The sdk-test-harness's "error in flag" and "compact representations" cases
/// (sdktests/server_side_eval_all_flags.go), and each other way a variation index can
/// be out of range: a flag whose evaluation fails has a null value and no `variation`.
#[test]
fn flags_whose_evaluation_fails_have_no_value_and_no_variation() {
    let always = json!([{"attribute": "key", "op": "in", "values": [""], "negate": true}]);
    let flags = [
        full_flag(
            "off-low",
            100,
            json!(["a", "b"]),
            json!({"on": false, "offVariation": -1}),
        ),
        full_flag(
            "off-high",
            101,
            json!(["a", "b"]),
            json!({"on": false, "offVariation": 2}),
        ),
        full_flag(
            "fall-high",
            102,
            json!(["a"]),
            json!({"fallthrough": {"variation": 1}}),
        ),
        full_flag(
            "target-high",
            103,
            json!(["a"]),
            json!({"targets": [{"values": ["u"], "variation": 9}]}),
        ),
        full_flag(
            "rule-high",
            104,
            json!(["a"]),
            json!({"rules": [{"id": "r", "trackEvents": false, "variation": 7, "clauses": always}]}),
        ),
        full_flag(
            "rollout-high",
            105,
            json!(["a"]),
            json!({"fallthrough": {"rollout": {"variations": [{"variation": 4, "weight": 100000}]}}}),
        ),
        full_flag(
            "fine",
            200,
            json!(["x", "y", "value2"]),
            json!({"on": false, "offVariation": 2}),
        ),
    ];
    let failed = [
        "off-low",
        "off-high",
        "fall-high",
        "target-high",
        "rule-high",
        "rollout-high",
    ];
    let mut want = json!({"fine": "value2", "$valid": true,
        "$flagsState": {"fine": {"variation": 2, "version": 200}}});
    for (key, version) in failed.iter().zip(100..) {
        want[key] = Value::Null;
        want["$flagsState"][key] = json!({"version": version});
    }
    assert_eq!(flags_state_json(&flags, AllFlagsOptions::new()), want);

    let with_reasons = AllFlagsOptions::new().with_reasons(true);
    want["$flagsState"]["fine"]["reason"] = json!({"kind": "OFF"});
    for key in failed {
        want["$flagsState"][key]["reason"] =
            json!({"kind": "ERROR", "errorKind": "MALFORMED_FLAG"});
    }
    assert_eq!(flags_state_json(&flags, with_reasons), want);
}

/// `prerequisites` lists the flag's direct prerequisites the evaluation reached, in
/// order: as the sdk-test-harness pins (top level only; not those after a failed one;
/// none for an off flag), and as Python's `_check_prerequisites` records them
/// (ldclient/impl/evaluator.py): also a prerequisite flag that is missing, or whose
/// evaluation failed (a cycle), but not the flag itself.
#[test]
fn prerequisites_lists_every_direct_prerequisite_the_evaluation_reached() {
    let prereq = |key: &str, variation: i64| json!({"key": key, "variation": variation});
    let flags = [
        full_flag(
            "p1",
            1,
            json!(["p1"]),
            json!({"prerequisites": [prereq("p3", 0)]}),
        ),
        full_flag("p2", 1, json!(["p2"]), json!({})),
        full_flag("p3", 1, json!(["p3"]), json!({})),
        full_flag(
            "top",
            1,
            json!(["top"]),
            json!({"prerequisites": [prereq("p1", 0), prereq("p2", 0)]}),
        ),
        full_flag(
            "failed",
            1,
            json!(["on", "off"]),
            json!({"offVariation": 1,
            "prerequisites": [prereq("p1", 1), prereq("p2", 0)]}),
        ),
        full_flag(
            "off",
            1,
            json!(["off"]),
            json!({"on": false, "offVariation": 0,
            "prerequisites": [prereq("p1", 0)]}),
        ),
        full_flag(
            "orphan",
            1,
            json!(["on", "off"]),
            json!({"offVariation": 1,
            "prerequisites": [prereq("p1", 0), prereq("nope", 0), prereq("p2", 0)]}),
        ),
        full_flag(
            "c1",
            1,
            json!(["c1"]),
            json!({"prerequisites": [prereq("c2", 0)]}),
        ),
        full_flag(
            "c2",
            1,
            json!(["c2"]),
            json!({"prerequisites": [prereq("c1", 0)]}),
        ),
        full_flag(
            "selfish",
            1,
            json!(["s"]),
            json!({"prerequisites": [prereq("selfish", 0)]}),
        ),
        full_flag(
            "bad",
            1,
            json!(["b"]),
            json!({"fallthrough": {"variation": 3}}),
        ),
        full_flag(
            "needs-bad",
            1,
            json!(["n"]),
            json!({"prerequisites": [prereq("p2", 0), prereq("bad", 0), prereq("p3", 0)]}),
        ),
    ];
    let got = flags_state_json(&flags, AllFlagsOptions::new());
    let state = &got["$flagsState"];
    let want = json!({
        "p1": {"variation": 0, "version": 1, "prerequisites": ["p3"]},
        "top": {"variation": 0, "version": 1, "prerequisites": ["p1", "p2"]},
        "failed": {"variation": 1, "version": 1, "prerequisites": ["p1"]},
        "off": {"variation": 0, "version": 1},
        "orphan": {"variation": 1, "version": 1, "prerequisites": ["p1", "nope"]},
        "c1": {"version": 1, "prerequisites": ["c2"]},
        "c2": {"version": 1, "prerequisites": ["c1"]},
        "selfish": {"version": 1},
    });
    for (key, want) in want.as_object().unwrap() {
        assert_eq!(&state[key], want, "{key}");
    }
    assert_eq!(
        (&got["c1"], &got["selfish"], &got["orphan"]),
        (&Value::Null, &Value::Null, &json!("off"))
    );
    assert_eq!(state["needs-bad"]["prerequisites"], json!(["p2", "bad"]));
}

/// The client-side and mobile filters, alone and together (a flag available to either
/// is kept, as the official SDK's `CLIENT | MOBILE`); an unreadable flag is left out by
/// either filter.
#[test]
fn client_side_and_mobile_filters() {
    let avail = |env: bool, mobile: bool| json!({"clientSideAvailability": {"usingEnvironmentId": env, "usingMobileKey": mobile}});
    let flags = [
        full_flag("both", 1, json!([true]), avail(true, true)),
        full_flag("js", 1, json!([true]), avail(true, false)),
        full_flag("mobile", 1, json!([true]), avail(false, true)),
        full_flag("neither", 1, json!([true]), avail(false, false)),
        full_flag("default", 1, json!([true]), json!({})),
        json!({"key": "broken", "version": 1, "variations": 3}),
    ];
    let keys = |options: AllFlagsOptions| -> Vec<String> {
        let state = flags_state_json(&flags, options);
        let mut keys: Vec<String> = state
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| !k.starts_with('$'))
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    assert_eq!(
        keys(AllFlagsOptions::new()),
        ["both", "broken", "default", "js", "mobile", "neither"]
    );
    assert_eq!(
        keys(AllFlagsOptions::new().client_side_only(true)),
        ["both", "js"]
    );
    assert_eq!(
        keys(AllFlagsOptions::new().mobile_only(true)),
        ["both", "default", "mobile"]
    );
    assert_eq!(
        keys(
            AllFlagsOptions::new()
                .client_side_only(true)
                .mobile_only(true)
        ),
        ["both", "default", "js", "mobile"]
    );
}
