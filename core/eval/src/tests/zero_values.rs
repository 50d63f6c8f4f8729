//! Fields left out of a flag or segment read as their zero values, as LaunchDarkly's Go
//! and Python SDKs read them; wrong types stay malformed.

use serde_json::{Value, json};

use bytes::Bytes;
use flagsync_core::Kind;
use flagsync_core::store::{Change, ChangeSet, Store as CoreStore};
use launchdarkly_server_sdk_evaluation as official;

use super::{ours, snapshot, user};
use crate::{
    Context, ContextBuilder, Detail, EvalError, FlagValue, Models, MultiContextBuilder, Reason,
    SlotModels,
};

/// Each `(sparse, complete)` pair is one flag: `sparse` leaves out fields LaunchDarkly's
/// Go and Python SDKs read as their zero values, `complete` writes those values out.
/// Both must evaluate alike, for every context.
fn sparse_and_complete_flags() -> Vec<(Value, Value)> {
    vec![
        // Only key, version, variations, fallthrough and offVariation: `on` is false.
        (
            json!({"key": "f1", "version": 1, "variations": ["a", "b"],
                   "fallthrough": {"variation": 0}, "offVariation": 1}),
            json!({"key": "f1", "version": 1, "on": false, "variations": ["a", "b"],
                   "fallthrough": {"variation": 0}, "offVariation": 1, "salt": "",
                   "targets": [], "contextTargets": [], "rules": [], "prerequisites": [],
                   "clientSide": false, "trackEvents": false,
                   "trackEventsFallthrough": false, "deleted": false}),
        ),
        // On, a rule without id/trackEvents whose clauses lack negate, a target without
        // contextKind, no salt.
        (
            json!({"key": "f2", "version": 2, "on": true, "variations": [0, 1, 2],
                   "fallthrough": {"variation": 0},
                   "targets": [{"values": ["alice"], "variation": 2}],
                   "rules": [{"variation": 1,
                              "clauses": [{"attribute": "country", "op": "in", "values": ["DE"]}]}]}),
            json!({"key": "f2", "version": 2, "on": true, "variations": [0, 1, 2],
                   "fallthrough": {"variation": 0}, "salt": "", "prerequisites": [],
                   "targets": [{"contextKind": "user", "values": ["alice"], "variation": 2}],
                   "rules": [{"id": "", "variation": 1, "trackEvents": false,
                              "clauses": [{"attribute": "country", "op": "in", "values": ["DE"],
                                           "negate": false}]}]}),
        ),
        // A rule without clauses (matches everyone) with a rollout whose buckets lack
        // `untracked`, and a context target.
        (
            json!({"key": "f3", "version": 1, "on": true, "salt": "s", "variations": [false, true],
                   "fallthrough": {"variation": 0},
                   "contextTargets": [{"contextKind": "org", "values": ["acme"], "variation": 0}],
                   "rules": [{"id": "r", "rollout": {"variations": [
                       {"variation": 0, "weight": 50000}, {"variation": 1, "weight": 50000}]}}]}),
            json!({"key": "f3", "version": 1, "on": true, "salt": "s", "variations": [false, true],
                   "fallthrough": {"variation": 0}, "targets": [], "prerequisites": [],
                   "contextTargets": [{"contextKind": "org", "values": ["acme"], "variation": 0}],
                   "rules": [{"id": "r", "trackEvents": false, "clauses": [], "rollout": {"variations": [
                       {"variation": 0, "weight": 50000, "untracked": false},
                       {"variation": 1, "weight": 50000, "untracked": false}]}}]}),
        ),
        // A prerequisite on f2 (variation 0: its fallthrough), and null lists.
        (
            json!({"key": "f4", "version": 1, "on": true, "variations": ["x", "y"],
                   "offVariation": 0, "fallthrough": {"variation": 1},
                   "prerequisites": [{"key": "f2", "variation": 0}],
                   "targets": null, "rules": null, "contextTargets": null}),
            json!({"key": "f4", "version": 1, "on": true, "variations": ["x", "y"],
                   "offVariation": 0, "fallthrough": {"variation": 1}, "salt": "",
                   "prerequisites": [{"key": "f2", "variation": 0}],
                   "targets": [], "rules": [], "contextTargets": []}),
        ),
        // A segment match on sparse segments; `clientSideAvailability` without
        // `usingMobileKey`.
        (
            json!({"key": "f5", "version": 1, "on": true, "variations": ["out", "in"],
                   "fallthrough": {"variation": 0},
                   "clientSideAvailability": {"usingEnvironmentId": true},
                   "rules": [{"variation": 1, "clauses": [
                       {"attribute": "", "op": "segmentMatch", "values": ["s-keys", "s-rules", "s-orgs"]}]}]}),
            json!({"key": "f5", "version": 1, "on": true, "variations": ["out", "in"],
                   "fallthrough": {"variation": 0}, "salt": "", "targets": [],
                   "prerequisites": [],
                   "clientSideAvailability": {"usingEnvironmentId": true, "usingMobileKey": false},
                   "rules": [{"id": "", "trackEvents": false, "variation": 1, "clauses": [
                       {"attribute": "", "op": "segmentMatch", "negate": false,
                        "values": ["s-keys", "s-rules", "s-orgs"]}]}]}),
        ),
        // On without a fallthrough: as in Go, the zero fallthrough serves no variation,
        // an error (MALFORMED_FLAG) for contexts no target catches.
        (
            json!({"key": "f6", "version": 1, "on": true, "variations": [true],
                   "targets": [{"values": ["alice"], "variation": 0}]}),
            json!({"key": "f6", "version": 1, "on": true, "variations": [true], "salt": "",
                   "fallthrough": {}, "rules": [], "prerequisites": [],
                   "targets": [{"values": ["alice"], "variation": 0}]}),
        ),
    ]
}

/// The segments `sparse_and_complete_flags` match on, the same way.
fn sparse_and_complete_segments() -> Vec<(Value, Value)> {
    vec![
        // Only a key, a version (the store needs one) and an included list.
        (
            json!({"key": "s-keys", "version": 1, "included": ["alice"]}),
            json!({"key": "s-keys", "version": 1, "included": ["alice"], "excluded": [],
                   "includedContexts": [], "excludedContexts": [], "rules": [], "salt": ""}),
        ),
        // Rules only: one without id, one excluded by its clause (no negate).
        (
            json!({"key": "s-rules", "version": 3, "excluded": ["carol"],
                   "rules": [{"clauses": [{"attribute": "country", "op": "in", "values": ["DE"]}]}]}),
            json!({"key": "s-rules", "version": 3, "included": [], "excluded": ["carol"],
                   "salt": "", "rules": [{"clauses": [{"attribute": "country", "op": "in",
                                                       "values": ["DE"], "negate": false}]}]}),
        ),
        // Context lists only.
        (
            json!({"key": "s-orgs", "version": 1,
                   "includedContexts": [{"contextKind": "org", "values": ["acme"]}]}),
            json!({"key": "s-orgs", "version": 1, "included": [], "excluded": [], "rules": [],
                   "salt": "", "includedContexts": [{"contextKind": "org", "values": ["acme"]}],
                   "excludedContexts": []}),
        ),
    ]
}

#[test]
fn sparse_flags_and_segments_evaluate_as_with_their_zero_values_written_out() {
    let (sparse_flags, complete_flags): (Vec<Value>, Vec<Value>) =
        sparse_and_complete_flags().into_iter().unzip();
    let (sparse_segments, complete_segments): (Vec<Value>, Vec<Value>) =
        sparse_and_complete_segments().into_iter().unzip();
    let sparse = snapshot(&sparse_flags, &sparse_segments);
    let complete = snapshot(&complete_flags, &complete_segments);
    let mut contexts: Vec<Context> = ["alice", "bob", "carol", "dave", "erin"]
        .iter()
        .map(|k| user(k))
        .collect();
    let mut german = ContextBuilder::new("dieter");
    german.set_string("country", "DE");
    contexts.push(german.build().unwrap());
    let mut carol_de = ContextBuilder::new("carol");
    carol_de.set_string("country", "DE");
    contexts.push(carol_de.build().unwrap());
    contexts.push(ContextBuilder::new("acme").kind("org").build().unwrap());
    let mut reasons = std::collections::BTreeSet::new();
    for flag in &complete_flags {
        let key = flag["key"].as_str().unwrap();
        for context in &contexts {
            let want = ours(&complete, key, context);
            let got = ours(&sparse, key, context);
            assert_eq!(got, want, "flag {key}, context {:?}", context.key());
            reasons.insert(format!("{key} {:?}", want.reason));
        }
    }
    // The cases are not vacuous: each flag answers, and the answers differ.
    assert!(
        reasons.iter().any(|r| r.starts_with("f1 Off")),
        "{reasons:?}"
    );
    assert!(reasons.iter().any(|r| r.starts_with("f2 TargetMatch")));
    assert!(reasons.iter().any(|r| r.starts_with("f2 RuleMatch")));
    assert!(reasons.iter().any(|r| r.starts_with("f3 TargetMatch")));
    assert!(reasons.iter().any(|r| r.starts_with("f4 Fallthrough")));
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("f4 PrerequisiteFailed"))
    );
    assert!(reasons.iter().any(|r| r.starts_with("f5 RuleMatch")));
    assert!(reasons.iter().any(|r| r.starts_with("f5 Fallthrough")));
    assert!(reasons.iter().any(|r| r.starts_with("f6 TargetMatch")));
    assert!(reasons.iter().any(|r| r.starts_with("f6 Error")));
    // Sparse or complete, f5 is visible to client-side SDKs.
    assert!(
        SlotModels
            .live_flag(&sparse, "f5")
            .unwrap()
            .using_environment_id()
    );
}

/// JSON pointers to every object member of `value` holding a zero value (false, 0, "",
/// []), depth first.
fn zero_members(value: &Value, at: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(members) => {
            for (name, member) in members {
                let path = format!("{at}/{name}");
                let zero = match member {
                    Value::Bool(b) => !b,
                    Value::Number(n) => n.as_i64() == Some(0),
                    Value::String(s) => s.is_empty(),
                    Value::Array(a) => a.is_empty(),
                    _ => false,
                };
                if zero {
                    out.push(path.clone());
                }
                zero_members(member, &path, out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                zero_members(item, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// `value` with the member at `pointer` removed (or, with `null`, set to null).
fn without(value: &Value, pointer: &str, null: bool) -> Value {
    let mut value = value.clone();
    let (parent, name) = pointer.rsplit_once('/').unwrap();
    let members = value.pointer_mut(parent).unwrap().as_object_mut().unwrap();
    if null {
        members.insert(name.to_owned(), Value::Null);
    } else {
        members.remove(name);
    }
    value
}

/// Leave out, one at a time, each field of a flag, its prerequisites and a segment that
/// holds its zero value (or make an empty list `null`): the evaluation never changes.
/// Also pins which of those fields the engine's own model requires.
#[test]
fn each_field_holding_its_zero_value_may_be_left_out() {
    let rich = json!({
        "key": "rich", "version": 1, "on": true, "salt": "", "deleted": false,
        "clientSide": false,
        "clientSideAvailability": {"usingMobileKey": false, "usingEnvironmentId": false},
        "trackEvents": false, "trackEventsFallthrough": false, "excludeFromSummaries": false,
        "variations": ["v0", "v1", "v2", "off"], "offVariation": 3,
        "prerequisites": [{"key": "pre", "variation": 1}, {"key": "pre0", "variation": 0}],
        "targets": [{"contextKind": "user", "values": ["alice"], "variation": 0},
                    {"values": [], "variation": 1}],
        "contextTargets": [{"contextKind": "org", "values": ["acme"], "variation": 1},
                           {"contextKind": "user", "values": [], "variation": 0}],
        "rules": [
            {"id": "", "trackEvents": false, "variation": 1,
             "clauses": [{"attribute": "country", "op": "in", "values": ["DE"], "negate": false}]},
            {"id": "r1", "trackEvents": false,
             "clauses": [{"attribute": "", "op": "segmentMatch", "values": ["seg"], "negate": false}],
             "rollout": {"variations": [{"variation": 0, "weight": 0, "untracked": false},
                                        {"variation": 2, "weight": 100000, "untracked": false}]}}],
        "fallthrough": {"variation": 2}
    });
    let pre = json!({"key": "pre", "version": 1, "on": true, "salt": "", "variations": [false, true],
        "fallthrough": {"variation": 1}, "targets": [], "contextTargets": [], "rules": [],
        "prerequisites": []});
    let pre0 = json!({"key": "pre0", "version": 1, "on": true, "salt": "", "variations": [true],
        "fallthrough": {"rollout": {"variations": [{"variation": 0, "weight": 100000}]}},
        "targets": [], "rules": [], "prerequisites": []});
    let seg = json!({"key": "seg", "version": 1, "salt": "", "unbounded": false, "deleted": false,
        "included": ["bob"], "excluded": [], "excludedContexts": [],
        "includedContexts": [{"contextKind": "org", "values": ["beta"]}],
        "rules": [{"id": "", "clauses": [{"attribute": "country", "op": "in", "values": ["FR"],
                                         "negate": false}]}]});
    let with = |key: &str, country: &str| {
        let mut b = ContextBuilder::new(key);
        b.set_string("country", country);
        b.build().unwrap()
    };
    let org = |key: &str| ContextBuilder::new(key).kind("org").build().unwrap();
    let contexts = [
        user("alice"),
        user("bob"),
        with("carol", "FR"),
        with("dieter", "DE"),
        user("erin"),
        org("acme"),
        org("beta"),
        MultiContextBuilder::new()
            .add_context(user("erin"))
            .add_context(org("beta"))
            .build()
            .unwrap(),
    ];
    let evaluate_all = |items: &[Value; 4]| -> Vec<Detail<FlagValue>> {
        let snap = snapshot(&items[..3], &items[3..]);
        contexts.iter().map(|c| ours(&snap, "rich", c)).collect()
    };
    let items = [rich, pre, pre0, seg];
    let want = evaluate_all(&items);
    let reasons: std::collections::BTreeSet<String> =
        want.iter().map(|d| format!("{:?}", d.reason)).collect();
    assert_eq!(
        reasons.len(),
        4,
        "targets, rules (two) and the fallthrough all answer: {want:?}"
    );

    let mut refused = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let mut pointers = Vec::new();
        zero_members(item, "", &mut pointers);
        for pointer in pointers {
            let is_list = item.pointer(&pointer).is_some_and(Value::is_array);
            for null in [false, true].into_iter().filter(|&n| !n || is_list) {
                let mut sparse = items.clone();
                sparse[i] = without(item, &pointer, null);
                let name = format!(
                    "{}{pointer}{}",
                    item["key"],
                    if null { "=null" } else { "" }
                );
                let raw = serde_json::to_vec(&sparse[i]).unwrap();
                let strict = if i < 3 {
                    serde_json::from_slice::<official::Flag>(&raw).is_ok()
                } else {
                    serde_json::from_slice::<official::Segment>(&raw).is_ok()
                };
                if !strict && !null {
                    refused.push(name.replace('"', ""));
                }
                assert_eq!(evaluate_all(&sparse), want, "{name}");
            }
        }
    }
    // The engine's own model (launchdarkly-server-sdk-evaluation 2.2.1) refuses a flag
    // or segment without these. (It accepts a rollout bucket without `variation` or
    // `weight`, but reads the whole rollout as malformed: the evaluations above cover
    // those fields.)
    assert_eq!(
        refused,
        [
            "rich/clientSideAvailability/usingEnvironmentId",
            "rich/clientSideAvailability/usingMobileKey",
            "rich/contextTargets/1/values",
            "rich/contextTargets/1/variation",
            "rich/prerequisites/1/variation",
            "rich/rules/0/trackEvents",
            "rich/rules/1/clauses/0/attribute",
            "rich/rules/1/trackEvents",
            "rich/salt",
            "rich/targets/0/variation",
            "rich/targets/1/values",
            "pre/prerequisites",
            "pre/rules",
            "pre/salt",
            "pre/targets",
            "pre0/prerequisites",
            "pre0/rules",
            "pre0/salt",
            "pre0/targets",
            "seg/excluded",
            "seg/salt",
        ]
    );
}

/// Zero values fill in missing fields only: a field of the wrong type still makes the
/// item malformed, and no shape panics.
#[test]
fn zero_values_leave_wrong_types_malformed() {
    // Items the store itself refuses (as `prerequisites` that is no list) are left out.
    let snapshot = |flags: &[Value], segments: &[Value]| {
        let mut store = CoreStore::new();
        let changes = flags
            .iter()
            .map(|f| (Kind::Flag, f))
            .chain(segments.iter().map(|s| (Kind::Segment, s)))
            .filter_map(|(kind, v)| Change::from_json(kind, Bytes::from(v.to_string())).ok())
            .collect();
        store.apply(ChangeSet::fdv1_full(changes));
        store.snapshot()
    };
    let snap = snapshot(
        &[
            json!({"key": "a", "version": 1, "rules": [1, "x", {"clauses": 5}, {"clauses": [7]}]}),
            json!({"key": "b", "version": 1, "salt": null, "variations": [true]}),
            json!({"key": "c", "version": 1, "targets": [{"values": "alice"}]}),
            json!({"key": "d", "version": 1, "fallthrough": {"rollout": {"variations": null}}}),
            json!({"key": "e", "version": 1, "prerequisites": {"key": "a"}}),
            json!({"key": "f", "version": 1, "on": true, "variations": [true],
                   "rules": [{"variation": 0, "clauses": [
                       {"attribute": "", "op": "segmentMatch", "values": ["s1", "s2"]}]}]}),
        ],
        &[
            json!({"key": "s1", "version": 1, "included": "alice"}),
            json!({"key": "s2", "version": 1, "includedContexts": [{"contextKind": 3}]}),
        ],
    );
    let malformed = Reason::error(EvalError::MalformedFlag);
    // The store's dependency scan already refuses a and e.
    assert!(snap.get(Kind::Flag, "a").is_none() && snap.get(Kind::Flag, "e").is_none());
    for key in ["b", "c"] {
        assert_eq!(ours(&snap, key, &user("alice")).reason, malformed, "{key}");
    }
    // A rollout without buckets serves nothing: an error when reached (off here, so not).
    assert_eq!(ours(&snap, "d", &user("alice")).reason, Reason::Off);
    assert!(
        SlotModels.live_segment(&snap, "s1").is_none()
            && SlotModels.live_segment(&snap, "s2").is_none()
    );
    // Unreadable segments read as absent.
    assert_eq!(
        ours(&snap, "f", &user("alice")).reason,
        malformed,
        "no fallthrough: the zero one serves nothing"
    );
}
