//! Evaluation over the core's snapshots: the segment projection against the official
//! engine with its plain by-value store, unreadable items, fields left at their zero
//! values, and the all-flags state.

mod all_flags;
mod zero_values;

use flagsync_core::Snapshot;

use launchdarkly_server_sdk_evaluation as official;
use serde_json::{Value, json};

use crate::official::{ByValue, from_official, official_context};
use crate::{
    Context, ContextBuilder, Detail, EvalError, FlagValue, MultiContextBuilder, Options, Reason,
    SlotModels, evaluate_flag,
};

/// A snapshot holding `flags` and `segments` (JSON objects with key and version).
pub(super) fn snapshot(flags: &[Value], segments: &[Value]) -> Snapshot {
    flagsync_core::testing::snapshot_of(flags, segments)
}

fn ours(snapshot: &Snapshot, key: &str, context: &Context) -> Detail<FlagValue> {
    evaluate_flag(
        snapshot,
        &SlotModels,
        key,
        context,
        Options::default(),
        |_, d| d.map(Clone::clone),
    )
}

pub(super) fn user(key: &str) -> Context {
    ContextBuilder::new(key).build().unwrap()
}

/// Random segments, flags and contexts from a small key universe, so that included,
/// excluded, context-kind lists, rules, nested segments, rollouts and prerequisites
/// all come up; every flag is evaluated for every context both ways.
#[test]
fn projected_segments_evaluate_like_the_engine_with_full_segments() {
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let users: Vec<String> = (0..16).map(|i| format!("u{i}")).collect();
    let orgs: Vec<String> = (0..8).map(|i| format!("o{i}")).collect();
    let countries = ["US", "DE", "JP"];
    let pick = |rng: &mut fastrand::Rng, from: &[String], p: f64| -> Vec<String> {
        from.iter().filter(|_| rng.f64() < p).cloned().collect()
    };
    let mut seen = std::collections::BTreeSet::new();
    for round in 0..40 {
        let mut segments = Vec::new();
        for s in 0..6 {
            let mut rules = Vec::new();
            for _ in 0..rng.usize(0..3) {
                let clause = if s > 0 && rng.bool() {
                    json!({"attribute": "", "op": "segmentMatch",
                           "values": [format!("s{}", rng.usize(0..s))], "negate": rng.u8(..4) == 0})
                } else {
                    json!({"contextKind": "user", "attribute": "country", "op": "in",
                           "values": [countries[rng.usize(..3)]], "negate": false})
                };
                // A weighted rule only where the clause needs a user: for a context
                // without the rollout's kind, the official engine buckets at 0 where
                // Go (and flagsync) do not match (see engine/differential.rs).
                let needs_user = clause["op"] == "in";
                let mut rule = json!({"id": format!("r{s}"), "clauses": [clause]});
                if needs_user && rng.u8(..4) == 0 {
                    rule["weight"] = json!(rng.u32(0..100_000));
                    rule["bucketBy"] = json!("key");
                    rule["rolloutContextKind"] = json!("user");
                }
                rules.push(rule);
            }
            let mut segment = json!({
                "key": format!("s{s}"), "version": round + 1, "salt": format!("salt{s}"),
                "included": pick(&mut rng, &users, 0.2),
                "excluded": pick(&mut rng, &users, 0.2),
                "rules": rules,
            });
            if rng.bool() {
                segment["includedContexts"] =
                    json!([{"contextKind": "org", "values": pick(&mut rng, &orgs, 0.3)}]);
                segment["excludedContexts"] =
                    json!([{"contextKind": "org", "values": pick(&mut rng, &orgs, 0.3)}]);
            }
            segments.push(segment);
        }
        let mut flags = Vec::new();
        for f in 0..8 {
            let mut rules = Vec::new();
            for r in 0..rng.usize(1..4) {
                let segs: Vec<String> = (0..rng.usize(1..3))
                    .map(|_| format!("s{}", rng.usize(0..7))) // s6 does not exist
                    .collect();
                rules.push(json!({
                    "id": format!("f{f}r{r}"),
                    "clauses": [{"attribute": "", "op": "segmentMatch", "values": segs,
                                 "negate": rng.u8(..5) == 0}],
                    "variation": rng.usize(0..3), "trackEvents": false,
                }));
            }
            let prerequisites: Vec<Value> = if f > 0 && rng.u8(..3) == 0 {
                vec![json!({"key": format!("f{}", rng.usize(0..f)), "variation": rng.usize(0..3)})]
            } else {
                vec![]
            };
            flags.push(json!({
                "key": format!("f{f}"), "version": round + 1, "on": rng.u8(..8) != 0,
                "salt": format!("fs{f}"), "variations": ["a", "b", "c"],
                "offVariation": 2, "fallthrough": {"variation": 0},
                "targets": [], "contextTargets": [], "rules": rules,
                "prerequisites": prerequisites,
            }));
        }
        let snap = snapshot(&flags, &segments);
        let reference = ByValue::new(&flags, &segments);
        let mut contexts = Vec::new();
        for u in &users {
            let mut b = ContextBuilder::new(u.clone());
            b.set_string("country", countries[rng.usize(..3)]);
            let user = b.build().unwrap();
            let org = ContextBuilder::new(orgs[rng.usize(..orgs.len())].clone())
                .kind("org")
                .build()
                .unwrap();
            let multi = MultiContextBuilder::new()
                .add_context(user.clone())
                .add_context(org.clone())
                .build()
                .unwrap();
            contexts.extend([user, org, multi]);
        }
        for flag in &flags {
            let key = flag["key"].as_str().unwrap();
            let parsed = &reference.flags[key];
            for context in &contexts {
                let expected = from_official(
                    official::evaluate(&reference, parsed, &official_context(context), None)
                        .map(Clone::clone),
                );
                seen.insert(match expected.reason {
                    Reason::Off => "off",
                    Reason::Fallthrough { .. } => "fallthrough",
                    Reason::RuleMatch { .. } => "rule",
                    Reason::PrerequisiteFailed { .. } => "prerequisite",
                    _ => "other",
                });
                assert_eq!(
                    ours(&snap, key, context),
                    expected,
                    "round {round}, flag {key}, context {context:?}"
                );
            }
        }
    }
    // The generator reaches every outcome.
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["fallthrough", "off", "prerequisite", "rule"]
    );
}

#[test]
fn circular_segment_references_are_still_detected() {
    let segments = [
        json!({"key": "a", "version": 1, "salt": "", "included": [], "excluded": [],
               "rules": [{"clauses": [{"attribute": "", "op": "segmentMatch", "values": ["b"]}]}]}),
        json!({"key": "b", "version": 1, "salt": "", "included": [], "excluded": [],
               "rules": [{"clauses": [{"attribute": "", "op": "segmentMatch", "values": ["a"]}]}]}),
    ];
    let flags = [
        json!({"key": "f", "version": 1, "on": true, "salt": "", "variations": [false, true],
        "fallthrough": {"variation": 0}, "targets": [], "prerequisites": [],
        "rules": [{"id": "r", "variation": 1, "trackEvents": false,
                   "clauses": [{"attribute": "", "op": "segmentMatch", "values": ["a"]}]}]}),
    ];
    let snap = snapshot(&flags, &segments);
    let detail = ours(&snap, "f", &user("u"));
    assert_eq!(detail.reason, Reason::error(EvalError::MalformedFlag));
}

#[test]
fn unknown_and_malformed_flags_are_errors_not_panics() {
    let snap = snapshot(
        &[
            json!({"key": "bad", "version": 1, "on": "yes"}),
            json!({"key": "needs-bad-segment", "version": 1, "on": true, "salt": "",
                   "variations": [false, true], "fallthrough": {"variation": 0},
                   "targets": [], "prerequisites": [],
                   "rules": [{"id": "r", "variation": 1, "trackEvents": false, "clauses":
                       [{"attribute": "", "op": "segmentMatch", "values": ["broken"]}]}]}),
        ],
        &[json!({"key": "broken", "version": 1, "included": "u"})],
    );
    let ctx = user("u");
    assert_eq!(
        ours(&snap, "missing", &ctx).reason,
        Reason::error(EvalError::FlagNotFound)
    );
    assert_eq!(
        ours(&snap, "bad", &ctx).reason,
        Reason::error(EvalError::MalformedFlag)
    );
    // Twice: the failure is cached, not re-parsed into a different answer.
    assert_eq!(
        ours(&snap, "bad", &ctx).reason,
        Reason::error(EvalError::MalformedFlag)
    );
    // An unreadable segment reads as absent, as a missing one does.
    let d = ours(&snap, "needs-bad-segment", &ctx);
    assert_eq!(
        (d.value, d.reason),
        (
            Some(FlagValue::Bool(false)),
            Reason::Fallthrough {
                in_experiment: false,
                big_segments_status: None
            }
        )
    );
}
