//! Differential property test: random flags, segments and contexts evaluated by
//! flagsync's engine and by the official `launchdarkly_server_sdk_evaluation::evaluate`
//! (the reference, a dev-only use of that crate's engine, given the official copy of
//! each context, made through its JSON). Values, variation indexes and reasons must
//! agree.
//!
//! Where the two engines differ, LaunchDarkly's Go evaluator (which the harness checks,
//! and which flagsync follows) decides, and the generator stays out of the official
//! crate's deviations:
//! - a weighted segment rule, for a context without the rule's `rolloutContextKind`:
//!   Go does not match (`bucketingFailureContextLacksDesiredKind`); the official crate
//!   buckets such a context at 0 and matches. Weighted rules here first require a user.
//! - a prerequisite whose own evaluation failed on an out-of-range variation: Go
//!   reports PREREQUISITE_FAILED (the prerequisite served no variation); the official
//!   crate makes the dependent flag MALFORMED_FLAG. Variation indexes here are valid.
//! - a rollout whose weights do not reach the bucket (the last-bucket fallback) for a
//!   context without the rollout's kind: Go keeps `inExperiment`, the official crate
//!   drops it. Weights here add up to 100,000.
//! - flag data the official model refuses (missing `salt`, `trackEvents`, …): flagsync
//!   reads the zero values, as Go and Python do. The generator writes every field.
//! - clause values that the parsers read differently (one-digit hours in timestamps,
//!   `v`-prefixed or four-part versions): the generator draws from well-formed ones.

use std::collections::HashMap;
use std::sync::Arc;

use crate::{Context, ContextBuilder, FlagValue, MultiContextBuilder};
use launchdarkly_server_sdk_evaluation as official;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::{Detail, Flag, Options, Segment, Store, evaluate};
use crate::official::{from_official, official_context};

const USERS: [&str; 5] = ["u0", "u1", "u2", "u3", "u4"];
const ORGS: [&str; 3] = ["o0", "o1", "o2"];

fn keys(from: &'static [&'static str]) -> impl Strategy<Value = Vec<&'static str>> {
    proptest::sample::subsequence(from, 0..=from.len())
}

/// A clause on the contexts' attributes (or a segment match).
fn clause(segments: bool) -> impl Strategy<Value = Value> {
    let attr_clause = prop_oneof![
        (keys(&USERS), any::<bool>()).prop_map(|(v, n)| json!({"contextKind": "user", "attribute": "key", "op": "in", "values": v, "negate": n})),
        (keys(&ORGS), any::<bool>()).prop_map(|(v, n)| json!({"contextKind": "org", "attribute": "key", "op": "in", "values": v, "negate": n})),
        prop::sample::select(vec!["US", "DE", "FR"]).prop_map(|c| json!({"attribute": "country", "op": "in", "values": [c], "negate": false})),
        prop::sample::select(vec!["startsWith", "endsWith", "contains", "matches"]).prop_map(|op| json!({"contextKind": "user", "attribute": "email", "op": op, "values": ["a", "example.com", "^b.*"], "negate": false})),
        (prop::sample::select(vec!["lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual"]), prop::sample::select(vec![5.0, 20.0, 30.5])).prop_map(|(op, v)| json!({"attribute": "age", "op": op, "values": [v], "negate": false})),
        (prop::sample::select(vec!["before", "after"]), prop::sample::select(vec![json!("2020-01-01T00:00:00Z"), json!(1_600_000_000_000u64), json!("2021-06-01T12:00:00.5+02:00")])).prop_map(|(op, v)| json!({"attribute": "joined", "op": op, "values": [v], "negate": false})),
        (prop::sample::select(vec!["semVerEqual", "semVerLessThan", "semVerGreaterThan"]), prop::sample::select(vec!["1.0.0", "2.1.0-beta", "2", "2.1"])).prop_map(|(op, v)| json!({"attribute": "version", "op": op, "values": [v], "negate": false})),
        prop::sample::select(vec!["user", "org"]).prop_map(|k| json!({"attribute": "kind", "op": "in", "values": [k], "negate": false})),
        prop::sample::select(vec!["a", "b"]).prop_map(|t| json!({"attribute": "tags", "op": "in", "values": [t], "negate": true})),
    ];
    if segments {
        prop_oneof![
            3 => attr_clause,
            1 => (keys(&["s0", "s1", "s2", "s3"]), any::<bool>()).prop_map(|(v, n)| json!({"attribute": "", "op": "segmentMatch", "values": v, "negate": n})),
        ]
        .boxed()
    } else {
        attr_clause.boxed()
    }
}

/// Buckets whose weights add up to 100,000.
fn buckets() -> impl Strategy<Value = Value> {
    (prop::collection::vec((0..3usize, 1..100u32, any::<bool>()), 1..4)).prop_map(|b| {
        let total: u32 = b.iter().map(|x| x.1).sum();
        let mut left = 100_000u32;
        let n = b.len();
        let out: Vec<Value> = b
            .iter()
            .enumerate()
            .map(|(i, (v, w, u))| {
                let weight = if i + 1 == n {
                    left
                } else {
                    w * 100_000 / total
                };
                left -= weight;
                json!({"variation": v, "weight": weight, "untracked": u})
            })
            .collect();
        Value::Array(out)
    })
}

fn serve() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0..3usize).prop_map(|v| json!({"variation": v})),
        (
            buckets(),
            any::<bool>(),
            prop::option::of(any::<i32>()),
            prop::sample::select(vec![None, Some("org"), Some("user")]),
            prop::sample::select(vec![None, Some("age"), Some("country")])
        )
            .prop_map(|(b, exp, seed, kind, by)| {
                let mut r =
                    json!({"variations": b, "kind": if exp { "experiment" } else { "rollout" }});
                if let Some(seed) = seed {
                    r["seed"] = json!(seed);
                }
                if let Some(kind) = kind {
                    r["contextKind"] = json!(kind);
                }
                if let Some(by) = by {
                    r["bucketBy"] = json!(by);
                }
                json!({"rollout": r})
            }),
    ]
}

fn flag(i: usize) -> impl Strategy<Value = Value> {
    (
        any::<bool>(),
        prop::option::of(0..3usize),
        prop::collection::vec((keys(&USERS), 0..3usize), 0..2),
        prop::collection::vec((prop::sample::select(vec!["user", "org"]), keys(&USERS), 0..3usize), 0..2),
        prop::collection::vec((prop::collection::vec(clause(true), 1..3), serve(), any::<bool>()), 0..4),
        serve(),
        prop::collection::vec((0..4usize, 0..3usize), 0..2),
    )
        .prop_map(move |(on, off, targets, ctx_targets, rules, fallthrough, prereqs)| {
            let targets: Vec<Value> = targets.into_iter().map(|(v, var)| json!({"values": v, "variation": var})).collect();
            let context_targets: Vec<Value> = ctx_targets
                .into_iter()
                .map(|(k, v, var)| {
                    let values: Vec<&str> = if k == "org" { ORGS.iter().copied().filter(|o| v.len() % 2 == 0 || *o != "o1").collect() } else { v };
                    json!({"contextKind": k, "values": values, "variation": var})
                })
                .collect();
            let rules: Vec<Value> = rules
                .into_iter()
                .enumerate()
                .map(|(r, (clauses, serve, track))| {
                    let mut rule = json!({"id": format!("f{i}r{r}"), "clauses": clauses, "trackEvents": track});
                    for (k, v) in serve.as_object().unwrap() { rule[k] = v.clone(); }
                    rule
                })
                .collect();
            let prerequisites: Vec<Value> = prereqs.into_iter().map(|(f, v)| json!({"key": format!("f{f}"), "variation": v})).collect();
            let mut f = json!({"key": format!("f{i}"), "version": 1, "on": on, "salt": format!("salt{i}"),
                "variations": ["a", "b", "c"], "targets": targets, "contextTargets": context_targets,
                "rules": rules, "fallthrough": fallthrough, "prerequisites": prerequisites,
                "trackEvents": false, "trackEventsFallthrough": false, "deleted": false});
            if let Some(off) = off { f["offVariation"] = json!(off); }
            f
        })
}

fn segment(i: usize) -> impl Strategy<Value = Value> {
    (
        keys(&USERS),
        keys(&USERS),
        keys(&ORGS),
        keys(&ORGS),
        prop::collection::vec((prop::collection::vec(clause(true), 1..3), prop::option::of(0..100_000u32)), 0..3),
    )
        .prop_map(move |(inc, exc, inc_orgs, exc_orgs, rules)| {
            let rules: Vec<Value> = rules
                .into_iter()
                .map(|(mut clauses, weight)| {
                    let mut rule = json!({"id": "", "clauses": []});
                    if let Some(w) = weight {
                        // Weighted: only for contexts with a user (see the module docs).
                        clauses.insert(0, json!({"attribute": "kind", "op": "in", "values": ["user"], "negate": false}));
                        rule["weight"] = json!(w);
                        rule["bucketBy"] = json!("key");
                    }
                    rule["clauses"] = json!(clauses);
                    rule
                })
                .collect();
            json!({"key": format!("s{i}"), "version": 1, "salt": format!("ss{i}"),
                   "included": inc, "excluded": exc,
                   "includedContexts": [{"contextKind": "org", "values": inc_orgs}],
                   "excludedContexts": [{"contextKind": "org", "values": exc_orgs}],
                   "rules": rules, "deleted": false})
        })
}

fn context() -> impl Strategy<Value = Context> {
    let user = (
        prop::sample::select(USERS.to_vec()),
        prop::sample::select(vec!["US", "DE", "FR"]),
        prop::sample::select(vec![5.0, 20.0, 30.5, 7.0]),
        prop::sample::select(vec!["a@example.com", "bob@x.org", "carol"]),
        prop::sample::select(vec![
            json!("2019-01-01T00:00:00Z"),
            json!(1_700_000_000_000u64),
            json!("x"),
        ]),
        prop::sample::select(vec!["1.0.0", "2.1.0", "2.1.0-beta", "2", "junk"]),
        keys(&["a", "b", "c"]),
    )
        .prop_map(|(key, country, age, email, joined, version, tags)| {
            let mut b = ContextBuilder::new(key);
            b.set_string("country", country)
                .set_float("age", age)
                .set_string("email", email)
                .set_value("joined", (&joined).into())
                .set_string("version", version)
                .set_value("tags", (&json!(tags)).into());
            b.build().unwrap()
        })
        .boxed();
    let org = prop::sample::select(ORGS.to_vec())
        .prop_map(|k| ContextBuilder::new(k).kind("org").build().unwrap())
        .boxed();
    prop_oneof![
        user.clone(),
        org.clone(),
        (user, org).prop_map(|(u, o)| MultiContextBuilder::new()
            .add_context(u)
            .add_context(o)
            .build()
            .unwrap()),
    ]
}

struct Ours {
    flags: HashMap<String, Arc<Flag>>,
    segments: HashMap<String, Arc<Segment>>,
}

impl Store for Ours {
    fn flag(&self, key: &str) -> Option<Arc<Flag>> {
        self.flags.get(key).cloned()
    }
    fn segment(&self, key: &str) -> Option<Arc<Segment>> {
        self.segments.get(key).cloned()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn flagsync_and_the_official_engine_agree(
        flags in (flag(0), flag(1), flag(2), flag(3)),
        segments in (segment(0), segment(1), segment(2)),
        contexts in prop::collection::vec(context(), 1..6),
    ) {
        let flags = [flags.0, flags.1, flags.2, flags.3];
        let segments = [segments.0, segments.1, segments.2];
        let reference = crate::official::ByValue::new(&flags, &segments);
        let ours = Ours {
            flags: flags.iter().map(|f| {
                let key = f["key"].as_str().unwrap();
                (key.to_owned(), Arc::new(Flag::from_json(f.to_string().as_bytes(), key).unwrap()))
            }).collect(),
            segments: segments.iter().map(|s| {
                let key = s["key"].as_str().unwrap();
                (key.to_owned(), Arc::new(Segment::from_json(s.to_string().as_bytes(), key).unwrap()))
            }).collect(),
        };
        // The official engine reads its own contexts: copies made once, through JSON.
        let official_contexts: Vec<_> = contexts.iter().map(official_context).collect();
        for key in ["f0", "f1", "f2", "f3"] {
            for (context, official_context) in contexts.iter().zip(&official_contexts) {
                let theirs = from_official(official::evaluate(&reference, &reference.flags[key], official_context, None).map(Clone::clone));
                let mine: Detail<FlagValue> = evaluate(&ours, &ours.flags[key], context, Options::default()).map(Clone::clone);
                prop_assert_eq!(&mine, &theirs, "flag {} context {:?}\nflags {}\nsegments {}", key, context, json!(flags), json!(segments));
            }
        }
    }
}
