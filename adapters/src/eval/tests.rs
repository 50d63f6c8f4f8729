//! Evaluation over snapshots: the segment projection against the engine with its
//! plain by-value store, the model cache, and the not-ready path.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use flagsync_core::Snapshot;
use flagsync_core::store::{Change, ChangeSet, Kind, Store as CoreStore};
use launchdarkly_server_sdk_evaluation::{
    Context, ContextBuilder, Detail, Error as EvalError, Flag, FlagValue, MultiContextBuilder,
    Reason, Segment, Store, evaluate,
};
use serde_json::{Value, json};

use super::{ModelCache, evaluate_in};

/// A snapshot holding `flags` and `segments` (JSON objects with key and version).
fn snapshot(flags: &[Value], segments: &[Value]) -> Snapshot {
    let mut store = CoreStore::new();
    let changes = flags
        .iter()
        .map(|f| (Kind::Flag, f))
        .chain(segments.iter().map(|s| (Kind::Segment, s)))
        .map(|(kind, v)| Change::from_json(kind, Bytes::from(v.to_string())).unwrap())
        .collect();
    store.apply(ChangeSet::fdv1_full(changes));
    store.snapshot()
}

/// The engine's own way: parsed models, handed out by clone.
struct ByValue {
    flags: HashMap<String, Flag>,
    segments: HashMap<String, Segment>,
}

impl ByValue {
    fn new(flags: &[Value], segments: &[Value]) -> Self {
        let parse = |v: &Value| (v["key"].as_str().unwrap().to_owned(), v.clone());
        Self {
            flags: flags
                .iter()
                .map(parse)
                .map(|(k, v)| (k, serde_json::from_value(v).unwrap()))
                .collect(),
            segments: segments
                .iter()
                .map(parse)
                .map(|(k, v)| (k, serde_json::from_value(v).unwrap()))
                .collect(),
        }
    }
}

impl Store for ByValue {
    fn flag(&self, key: &str) -> Option<Flag> {
        self.flags.get(key).cloned()
    }
    fn segment(&self, key: &str) -> Option<Segment> {
        self.segments.get(key).cloned()
    }
}

fn ours(
    snapshot: &Snapshot,
    models: &ModelCache,
    key: &str,
    context: &Context,
) -> Detail<FlagValue> {
    evaluate_in(snapshot, models, None, key, context, None, |_, d| {
        d.map(Clone::clone)
    })
}

fn user(key: &str) -> Context {
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
                let mut rule = json!({"id": format!("r{s}"), "clauses": [clause]});
                if rng.u8(..4) == 0 {
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
        let models = ModelCache::default();
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
                let expected = evaluate(&reference, parsed, context, None).map(Clone::clone);
                seen.insert(match expected.reason {
                    Reason::Off => "off",
                    Reason::Fallthrough { .. } => "fallthrough",
                    Reason::RuleMatch { .. } => "rule",
                    Reason::PrerequisiteFailed { .. } => "prerequisite",
                    _ => "other",
                });
                assert_eq!(
                    ours(&snap, &models, key, context),
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
    let detail = ours(&snap, &ModelCache::default(), "f", &user("u"));
    assert_eq!(
        detail.reason,
        Reason::Error {
            error: EvalError::MalformedFlag
        }
    );
}

#[test]
fn models_are_parsed_once_per_version_and_shared() {
    let flag = |v: u64, on: bool| {
        json!({"key": "f", "version": v, "on": on, "salt": "", "variations": [false, true],
               "offVariation": 0, "fallthrough": {"variation": 1}, "targets": [], "rules": [],
               "prerequisites": []})
    };
    let models = ModelCache::default();
    let old = snapshot(&[flag(1, true)], &[]);
    let a = models.live_flag(&old, "f").unwrap();
    let b = models.live_flag(&old, "f").unwrap();
    assert!(Arc::ptr_eq(&a, &b), "one parse per version");
    let new = snapshot(&[flag(2, false)], &[]);
    let c = models.live_flag(&new, "f").unwrap();
    assert_eq!((c.version, models.len()), (2, (1, 0)));
    // A reader still on the old snapshot gets its own version, and the newer entry stays.
    assert_eq!(models.live_flag(&old, "f").unwrap().version, 1);
    assert!(Arc::ptr_eq(&models.live_flag(&new, "f").unwrap(), &c));
    let ctx = user("u");
    assert_eq!(
        ours(&old, &models, "f", &ctx).value,
        Some(FlagValue::Bool(true))
    );
    assert_eq!(
        ours(&new, &models, "f", &ctx).value,
        Some(FlagValue::Bool(false))
    );
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
    let models = ModelCache::default();
    let ctx = user("u");
    assert_eq!(
        ours(&snap, &models, "missing", &ctx).reason,
        Reason::Error {
            error: EvalError::FlagNotFound
        }
    );
    assert_eq!(
        ours(&snap, &models, "bad", &ctx).reason,
        Reason::Error {
            error: EvalError::MalformedFlag
        }
    );
    // Twice: the failure is cached, not re-parsed into a different answer.
    assert_eq!(
        ours(&snap, &models, "bad", &ctx).reason,
        Reason::Error {
            error: EvalError::MalformedFlag
        }
    );
    // An unreadable segment reads as absent, as a missing one does.
    let d = ours(&snap, &models, "needs-bad-segment", &ctx);
    assert_eq!(
        (d.value, d.reason),
        (
            Some(FlagValue::Bool(false)),
            Reason::Fallthrough {
                in_experiment: false
            }
        )
    );
}

#[test]
fn entries_of_deleted_items_are_swept() {
    let models = ModelCache::default();
    let flag = |k: usize| {
        json!({"key": format!("f{k}"), "version": 1, "on": false, "salt": "", "variations": [0],
               "offVariation": 0, "fallthrough": {"variation": 0}, "targets": [], "rules": [],
               "prerequisites": []})
    };
    let all: Vec<Value> = (0..5000).map(flag).collect();
    let snap = snapshot(&all, &[]);
    for k in 0..4000 {
        models.live_flag(&snap, &format!("f{k}")).unwrap();
    }
    assert_eq!(models.len().0, 4000);
    // The store now holds the first 100 and 200 new ones; the insertion that triggers
    // the sweep (every 4096th) drops the entries of the 3,900 flags that left.
    let bigger: Vec<Value> = all[..100]
        .iter()
        .cloned()
        .chain((5000..5200).map(flag))
        .collect();
    let later = snapshot(&bigger, &[]);
    for k in 5000..5200 {
        models.live_flag(&later, &format!("f{k}")).unwrap();
    }
    assert!(models.len().0 <= 300, "{} entries left", models.len().0);
}

#[test]
fn a_client_without_data_answers_defaults_with_client_not_ready() {
    let client = crate::Client::builder("sdk-key").build().unwrap();
    let ctx = user("u");
    let not_ready = Reason::Error {
        error: EvalError::ClientNotReady,
    };
    assert!(client.bool_variation("f", &ctx, true));
    let d = client.bool_variation_detail("f", &ctx, true);
    assert_eq!(
        (d.value, d.variation_index, d.reason),
        (Some(true), None, not_ready.clone())
    );
    assert_eq!(client.string_variation("f", &ctx, "dflt"), "dflt");
    assert_eq!(
        client.float_variation_detail("f", &ctx, 1.5).reason,
        not_ready
    );
    assert_eq!(client.int_variation("f", &ctx, 7), 7);
    assert_eq!(
        client.json_variation("f", &ctx, json!({"a": 1})),
        json!({"a": 1})
    );
    assert_eq!(
        client.variation("f", &ctx, "x".to_owned()),
        FlagValue::Str("x".into())
    );
    let state = client.all_flags_state(&ctx, super::AllFlagsOptions::new());
    assert!(!state.valid() && state.is_empty());
    assert_eq!(state.to_json(), r#"{"$flagsState":{},"$valid":false}"#);
}
