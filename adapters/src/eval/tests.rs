//! Evaluation over snapshots: the segment projection against the engine with its
//! plain by-value store, the model cache, and the not-ready path.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use flagsync_core::Snapshot;
use flagsync_core::store::{Change, ChangeSet, Kind, Store as CoreStore};
use launchdarkly_server_sdk_evaluation as official;
use serde_json::{Value, json};

use super::engine::Options;
use super::{
    Context, ContextBuilder, Detail, EvalError, FlagValue, ModelCache, MultiContextBuilder, Reason,
    evaluate_in,
};

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

/// The official engine's way: its models, handed out by clone.
pub(super) struct ByValue {
    pub(super) flags: HashMap<String, official::Flag>,
    segments: HashMap<String, official::Segment>,
}

impl ByValue {
    pub(super) fn new(flags: &[Value], segments: &[Value]) -> Self {
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

impl official::Store for ByValue {
    fn flag(&self, key: &str) -> Option<official::Flag> {
        self.flags.get(key).cloned()
    }
    fn segment(&self, key: &str) -> Option<official::Segment> {
        self.segments.get(key).cloned()
    }
}

/// The official crate's copy of `context` (through its JSON), for its engine.
pub(super) fn official_context(context: &Context) -> official::Context {
    let json = serde_json::to_value(context).expect("a context serializes");
    serde_json::from_value(json).expect("the official crate reads every context")
}

/// The official crate's flag value as flagsync's.
fn from_official_value(v: official::FlagValue) -> FlagValue {
    match v {
        official::FlagValue::Bool(b) => FlagValue::Bool(b),
        official::FlagValue::Str(s) => FlagValue::Str(s),
        official::FlagValue::Number(n) => FlagValue::Number(n),
        official::FlagValue::Json(j) => FlagValue::Json(j),
    }
}

/// The official engine's detail in flagsync's types (its reasons have no big segments
/// status).
pub(super) fn from_official(d: official::Detail<official::FlagValue>) -> Detail<FlagValue> {
    let reason = match d.reason {
        official::Reason::Off => Reason::Off,
        official::Reason::TargetMatch => Reason::target_match(),
        official::Reason::RuleMatch {
            rule_index,
            rule_id,
            in_experiment,
        } => Reason::RuleMatch {
            rule_index,
            rule_id,
            in_experiment,
            big_segments_status: None,
        },
        official::Reason::PrerequisiteFailed { prerequisite_key } => {
            Reason::prerequisite_failed(prerequisite_key)
        }
        official::Reason::Fallthrough { in_experiment } => Reason::Fallthrough {
            in_experiment,
            big_segments_status: None,
        },
        official::Reason::Error { error } => Reason::error(match error {
            official::Error::ClientNotReady => EvalError::ClientNotReady,
            official::Error::FlagNotFound => EvalError::FlagNotFound,
            official::Error::MalformedFlag => EvalError::MalformedFlag,
            official::Error::WrongType => EvalError::WrongType,
            official::Error::Exception => EvalError::Exception,
        }),
    };
    // A failed evaluation serves no variation (the official engine may keep one).
    let failed = reason.is_error();
    Detail {
        value: d.value.filter(|_| !failed).map(from_official_value),
        variation_index: d.variation_index.filter(|_| !failed),
        reason,
    }
}

fn ours(
    snapshot: &Snapshot,
    models: &ModelCache,
    key: &str,
    context: &Context,
) -> Detail<FlagValue> {
    evaluate_in(
        snapshot,
        models,
        None,
        key,
        context,
        Options::default(),
        |_, d| d.map(Clone::clone),
    )
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
    assert_eq!(detail.reason, Reason::error(EvalError::MalformedFlag));
}

#[test]
fn a_model_is_kept_beside_its_item_and_found_there_first() {
    let flag = json!({"key": "f", "version": 1, "on": true, "variations": [false, true],
                      "fallthrough": {"variation": 1}});
    let snap = snapshot(std::slice::from_ref(&flag), &[]);
    let models = ModelCache::default();
    let a = models.live_flag(&snap, "f").unwrap();
    let (_, derived) = snap
        .get_with_derived(flagsync_core::Kind::Flag, "f")
        .unwrap();
    let kept = derived.get::<Option<Arc<super::engine::Flag>>>().unwrap();
    assert!(Arc::ptr_eq(kept.as_ref().unwrap(), &a));
    // Another cache (no shelf entry) still finds the model beside the item.
    let b = ModelCache::default().live_flag(&snap, "f").unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    // The same version stored again (a new stored item) comes from the shelf: no parse.
    let again = snapshot(&[flag], &[]);
    assert!(Arc::ptr_eq(&models.live_flag(&again, "f").unwrap(), &a));
    // An item the engine cannot read is remembered as such beside it.
    let bad = snapshot(&[json!({"key": "g", "version": 1, "variations": 3})], &[]);
    assert!(models.live_flag(&bad, "g").is_none());
    let (_, derived) = bad
        .get_with_derived(flagsync_core::Kind::Flag, "g")
        .unwrap();
    assert!(matches!(
        derived.get::<Option<Arc<super::engine::Flag>>>(),
        Some(None)
    ));
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
        Reason::error(EvalError::FlagNotFound)
    );
    assert_eq!(
        ours(&snap, &models, "bad", &ctx).reason,
        Reason::error(EvalError::MalformedFlag)
    );
    // Twice: the failure is cached, not re-parsed into a different answer.
    assert_eq!(
        ours(&snap, &models, "bad", &ctx).reason,
        Reason::error(EvalError::MalformedFlag)
    );
    // An unreadable segment reads as absent, as a missing one does.
    let d = ours(&snap, &models, "needs-bad-segment", &ctx);
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
    let not_ready = Reason::error(EvalError::ClientNotReady);
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
    let (sparse_models, complete_models) = (ModelCache::default(), ModelCache::default());
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
            let want = ours(&complete, &complete_models, key, context);
            let got = ours(&sparse, &sparse_models, key, context);
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
        sparse_models
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
        let models = ModelCache::default();
        contexts
            .iter()
            .map(|c| ours(&snap, &models, "rich", c))
            .collect()
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
    let models = ModelCache::default();
    let malformed = Reason::error(EvalError::MalformedFlag);
    // The store's dependency scan already refuses a and e.
    assert!(snap.get(Kind::Flag, "a").is_none() && snap.get(Kind::Flag, "e").is_none());
    for key in ["b", "c"] {
        assert_eq!(
            ours(&snap, &models, key, &user("alice")).reason,
            malformed,
            "{key}"
        );
    }
    // A rollout without buckets serves nothing: an error when reached (off here, so not).
    assert_eq!(
        ours(&snap, &models, "d", &user("alice")).reason,
        Reason::Off
    );
    assert!(models.segment(&snap, "s1").is_none() && models.segment(&snap, "s2").is_none());
    // Unreadable segments read as absent.
    assert_eq!(
        ours(&snap, &models, "f", &user("alice")).reason,
        malformed,
        "no fallthrough: the zero one serves nothing"
    );
}

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
fn flags_state_json(flags: &[Value], options: super::AllFlagsOptions) -> Value {
    let snap = snapshot(flags, &[]);
    let state = super::all_flags::flags_state(
        &snap,
        None,
        &ModelCache::default(),
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
    assert_eq!(
        flags_state_json(&flags, super::AllFlagsOptions::new()),
        want
    );

    let with_reasons = super::AllFlagsOptions::new().with_reasons(true);
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
    let got = flags_state_json(&flags, super::AllFlagsOptions::new());
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

/// The sdk-test-harness's cases (sdktests/server_side_secure_mode_hash.go, taken from
/// the Go SDK), then the multi-kind and plain cases of LaunchDarkly's Rust SDK
/// (launchdarkly-server-sdk src/client.rs, tests `secure_mode_hash*`).
#[test]
fn secure_mode_hash_matches_the_reference_vectors() {
    let key1 = "sdk-01234567-89ab-cdef-0123-456789abcdef";
    let key2 = "sdk-11234567-89ab-cdef-0123-456789abcdef";
    let mut with_attributes = ContextBuilder::new("user-key-123");
    with_attributes
        .anonymous(true)
        .name("a")
        .set_string("email", "b");
    let other = ContextBuilder::new("user-key-123")
        .kind("other")
        .build()
        .unwrap();
    let multi = MultiContextBuilder::new()
        .add_context(
            ContextBuilder::new("org-key|1")
                .kind("org")
                .build()
                .unwrap(),
        )
        .add_context(user("user-key:2"))
        .build()
        .unwrap();
    let cases = [
        (
            key1,
            user("user-key-123"),
            "73df666a13f2c474e50aa34ca5a761e89abb737fb139ff65fdde7fa85c9dcacd",
        ),
        (
            key1,
            with_attributes.build().unwrap(),
            "73df666a13f2c474e50aa34ca5a761e89abb737fb139ff65fdde7fa85c9dcacd",
        ),
        (
            key2,
            user("user-key-123"),
            "63538426a9845721a5547b4715f4284b060c21743702a896e1ff8a9a5b57215d",
        ),
        (
            key1,
            user("user-key-456"),
            "55be6b5ceb2a11acc6a7e9c60dbee5022d9c7084baf9ecd8cf69d12bce5a92fb",
        ),
        (
            key1,
            other,
            "98a933ca26d2951547fc021981ebcdeda95fbca2ac3f767ae67f7042d5458f72",
        ),
        (
            "secret",
            user("Message"),
            "aa747c502a898200f9e4fa21bac68136f886a0e27aec70ba06daf2e2a5cb5597",
        ),
        (
            "secret",
            multi,
            "5687e6383b920582ed50c2a96c98a115f1b6aad85a60579d761d9b8797415163",
        ),
    ];
    for (sdk_key, context, want) in cases {
        let client = crate::Client::builder(sdk_key).build().unwrap();
        assert_eq!(
            client.secure_mode_hash(&context),
            want,
            "{sdk_key} {:?}",
            context.canonical_key()
        );
        assert_eq!(
            format!("{:?}", client.inner.secure_mode),
            "SecureModeKey(<redacted>)"
        );
    }
    // The key the client sends is the one it hashes with, however it was set.
    let client = crate::Client::builder("sdk-other")
        .core_config(|c| c.identity.sdk_key = key2.to_owned())
        .build()
        .unwrap();
    assert_eq!(
        client.secure_mode_hash(&user("user-key-123")),
        "63538426a9845721a5547b4715f4284b060c21743702a896e1ff8a9a5b57215d"
    );
}
