//! The engine on hand-written flags: operators, targets, rollouts, prerequisites,
//! segments and big segments (with an in-test `BigSegmentLookup`).
#![allow(
    clippy::disallowed_types,
    reason = "the in-test big-segment lookup is `Sync`, as the engine asks; a Mutex counts its queries"
)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::{Context, ContextBuilder, FlagValue, MultiContextBuilder};
use flagsync_core::bigseg::{BigSegmentLookup, BigSegmentsStatus, LookupResult, Membership};
use serde_json::{Value, json};

use super::*;

#[derive(Default)]
struct Mem {
    flags: HashMap<String, Arc<Flag>>,
    segments: HashMap<String, Arc<Segment>>,
}

impl Mem {
    fn new(flags: &[Value], segments: &[Value]) -> Self {
        let mut m = Self::default();
        for f in flags {
            let key = f["key"].as_str().unwrap().to_owned();
            let flag = Flag::from_json(f.to_string().as_bytes(), &key).unwrap();
            m.flags.insert(key, Arc::new(flag));
        }
        for s in segments {
            let key = s["key"].as_str().unwrap().to_owned();
            let seg = Segment::from_json(s.to_string().as_bytes(), &key).unwrap();
            m.segments.insert(key, Arc::new(seg));
        }
        m
    }

    fn eval(&self, key: &str, context: &Context) -> Detail<FlagValue> {
        self.eval_with(key, context, Options::default())
    }

    fn eval_with(&self, key: &str, context: &Context, options: Options<'_>) -> Detail<FlagValue> {
        let flag = &self.flags[key];
        evaluate(self, flag, context, options).map(Clone::clone)
    }
}

impl Store for Mem {
    fn flag(&self, key: &str) -> Option<Arc<Flag>> {
        self.flags.get(key).cloned()
    }
    fn segment(&self, key: &str) -> Option<Arc<Segment>> {
        self.segments.get(key).cloned()
    }
}

fn user(key: &str) -> Context {
    ContextBuilder::new(key).build().unwrap()
}

fn user_with(key: &str, attrs: Value) -> Context {
    let mut b = ContextBuilder::new(key);
    for (k, v) in attrs.as_object().unwrap() {
        b.set_value(k, (&v.clone()).into());
    }
    b.build().unwrap()
}

fn kind(kind: &str, key: &str) -> Context {
    ContextBuilder::new(key).kind(kind).build().unwrap()
}

/// A flag serving variation 1 (`true`) when `clause` matches, 0 otherwise.
fn with_clause(clause: Value) -> Value {
    json!({"key": "f", "on": true, "variations": [false, true], "fallthrough": {"variation": 0},
           "rules": [{"id": "r", "variation": 1, "clauses": [clause]}]})
}

fn matches(clause: Value, context: &Context) -> bool {
    Mem::new(&[with_clause(clause)], &[])
        .eval("f", context)
        .value
        == Some(FlagValue::Bool(true))
}

fn rule(i: usize) -> Reason {
    Reason::RuleMatch {
        rule_index: i,
        rule_id: "r".into(),
        in_experiment: false,
        big_segments_status: None,
    }
}

#[test]
fn operators() {
    let c = user_with(
        "k",
        json!({"s": "hello world", "n": 5, "t": "2020-01-01T00:00:00Z", "ms": 1_577_836_800_000u64,
               "v": "2.1.0-beta", "list": ["a", 7], "b": true, "o": {"x": 1}}),
    );
    let cases = [
        (
            json!({"attribute": "s", "op": "in", "values": ["x", "hello world"]}),
            true,
        ),
        (
            json!({"attribute": "s", "op": "in", "values": ["hello"]}),
            false,
        ),
        (
            json!({"attribute": "s", "op": "startsWith", "values": ["hell"]}),
            true,
        ),
        (
            json!({"attribute": "s", "op": "endsWith", "values": ["world"]}),
            true,
        ),
        (
            json!({"attribute": "s", "op": "contains", "values": ["o w"]}),
            true,
        ),
        (
            json!({"attribute": "s", "op": "matches", "values": ["^h.*d$"]}),
            true,
        ),
        (
            json!({"attribute": "s", "op": "matches", "values": ["(", "wor"]}),
            true,
        ),
        (json!({"attribute": "n", "op": "in", "values": [5.0]}), true),
        (
            json!({"attribute": "n", "op": "lessThan", "values": [6]}),
            true,
        ),
        (
            json!({"attribute": "n", "op": "lessThanOrEqual", "values": [5]}),
            true,
        ),
        (
            json!({"attribute": "n", "op": "greaterThan", "values": [5]}),
            false,
        ),
        (
            json!({"attribute": "n", "op": "greaterThanOrEqual", "values": ["4"]}),
            false,
        ),
        (
            json!({"attribute": "t", "op": "before", "values": ["2020-01-01T00:00:01Z"]}),
            true,
        ),
        (
            json!({"attribute": "t", "op": "after", "values": [1_577_836_799_000u64]}),
            true,
        ),
        (
            json!({"attribute": "ms", "op": "after", "values": ["2019-12-31T23:59:59Z"]}),
            true,
        ),
        (
            json!({"attribute": "ms", "op": "before", "values": ["bad"]}),
            false,
        ),
        (
            json!({"attribute": "v", "op": "semVerLessThan", "values": ["2.1.0"]}),
            true,
        ),
        (
            json!({"attribute": "v", "op": "semVerGreaterThan", "values": ["2"]}),
            true,
        ),
        (
            json!({"attribute": "v", "op": "semVerEqual", "values": ["2.1.0-beta+x"]}),
            true,
        ),
        (
            json!({"attribute": "list", "op": "in", "values": [7]}),
            true,
        ),
        (
            json!({"attribute": "list", "op": "startsWith", "values": ["a"]}),
            true,
        ),
        (
            json!({"attribute": "b", "op": "in", "values": [true]}),
            true,
        ),
        (
            json!({"attribute": "b", "op": "in", "values": ["true"]}),
            false,
        ),
        (
            json!({"attribute": "o", "op": "in", "values": [{"x": 1}]}),
            true,
        ),
        (
            json!({"attribute": "s", "op": "noSuchOp", "values": ["hello world"]}),
            false,
        ),
        (
            json!({"attribute": "missing", "op": "in", "values": ["x"], "negate": true}),
            false,
        ),
        (
            json!({"attribute": "s", "op": "in", "values": ["x"], "negate": true}),
            true,
        ),
        (
            json!({"attribute": "key", "op": "in", "values": ["k"]}),
            true,
        ),
        (
            json!({"attribute": "kind", "op": "in", "values": ["user"]}),
            true,
        ),
        (
            json!({"contextKind": "user", "attribute": "/o/x", "op": "in", "values": [1]}),
            true,
        ),
        (
            json!({"attribute": "/o/x", "op": "in", "values": [1]}),
            false,
        ),
        (
            json!({"contextKind": "org", "attribute": "key", "op": "in", "values": ["k"]}),
            false,
        ),
    ];
    for (clause, want) in cases {
        assert_eq!(matches(clause.clone(), &c), want, "{clause}");
    }
}

#[test]
fn kind_clauses_and_multi_contexts() {
    let multi = MultiContextBuilder::new()
        .add_context(user("u"))
        .add_context(kind("org", "o"))
        .build()
        .unwrap();
    let clause = |kinds: Value| json!({"attribute": "kind", "op": "in", "values": kinds});
    assert!(matches(clause(json!(["org"])), &multi));
    assert!(!matches(clause(json!(["multi"])), &multi));
    assert!(matches(
        json!({"contextKind": "org", "attribute": "key", "op": "in", "values": ["o"]}),
        &multi
    ));
    assert!(matches(
        json!({"attribute": "kind", "op": "startsWith", "values": ["us"]}),
        &user("x")
    ));
}

#[test]
fn invalid_attributes_make_the_flag_malformed() {
    for attr in ["", "/", "//a", "/a~2"] {
        let clause = json!({"contextKind": "user", "attribute": attr, "op": "in", "values": ["x"]});
        let d = Mem::new(&[with_clause(clause)], &[]).eval("f", &user("u"));
        assert_eq!(
            d.reason,
            Reason::error(EvalError::MalformedFlag),
            "{attr:?}"
        );
        assert_eq!((d.value, d.variation_index), (None, None));
    }
}

#[test]
fn targets_then_rules_then_fallthrough() {
    let flag = json!({"key": "f", "on": true, "variations": ["a", "b", "c"],
        "offVariation": 2, "fallthrough": {"variation": 0},
        "targets": [{"values": ["t1"], "variation": 1}, {"values": ["t2"], "variation": 2}],
        "contextTargets": [{"contextKind": "org", "values": ["o1"], "variation": 2},
                           {"contextKind": "user", "values": [], "variation": 1}],
        "rules": [{"id": "r", "variation": 2, "clauses": [
            {"attribute": "key", "op": "in", "values": ["t2", "r1"]}]}]});
    let m = Mem::new(&[flag], &[]);
    let d = m.eval("f", &user("t1"));
    assert_eq!(
        (d.variation_index, d.reason),
        (Some(1), Reason::target_match())
    );
    // t2's target variation (2) has no user entry in contextTargets: the rule decides.
    assert_eq!(m.eval("f", &user("t2")).reason, rule(0));
    assert_eq!(
        m.eval("f", &kind("org", "o1")).reason,
        Reason::target_match()
    );
    assert_eq!(m.eval("f", &user("zz")).reason, Reason::fallthrough());
}

#[test]
fn off_flags_and_bad_variations() {
    let m = Mem::new(
        &[
            json!({"key": "off", "variations": ["a"], "offVariation": 0}),
            json!({"key": "off-none", "variations": ["a"]}),
            json!({"key": "bad", "on": true, "variations": ["a"], "fallthrough": {"variation": 5}}),
            json!({"key": "neg", "on": true, "variations": ["a"], "fallthrough": {"variation": -1}}),
            json!({"key": "nothing", "on": true, "variations": ["a"]}),
        ],
        &[],
    );
    let u = user("u");
    let off = m.eval("off", &u);
    assert_eq!(
        (off.value, off.variation_index, off.reason),
        (Some(FlagValue::Str("a".into())), Some(0), Reason::Off)
    );
    assert_eq!(m.eval("off-none", &u), Detail::empty(Reason::Off));
    for key in ["bad", "neg", "nothing"] {
        assert_eq!(
            m.eval(key, &u),
            Detail::err(EvalError::MalformedFlag),
            "{key}"
        );
    }
}

#[test]
fn rollouts_and_experiments() {
    // userKeyA buckets at 0.42157587 with "hashKey.saltyA" (the SDKs' test vectors).
    let rollout = |kind: &str, extra: Value| {
        let mut r = json!({"kind": kind, "variations": [
            {"variation": 0, "weight": 40000}, {"variation": 1, "weight": 20000},
            {"variation": 2, "weight": 40000, "untracked": true}]});
        for (k, v) in extra.as_object().unwrap() {
            r[k] = v.clone();
        }
        json!({"key": "hashKey", "salt": "saltyA", "on": true, "variations": ["a", "b", "c"],
               "fallthrough": {"rollout": r}})
    };
    let a = user("userKeyA");
    let m = Mem::new(&[rollout("rollout", json!({}))], &[]);
    let d = m.eval("hashKey", &a);
    assert_eq!(
        (d.variation_index, d.reason),
        (Some(1), Reason::fallthrough())
    );
    let m = Mem::new(&[rollout("experiment", json!({}))], &[]);
    assert!(m.eval("hashKey", &a).reason.is_in_experiment());
    // userKeyB (0.6708485) lands in the untracked bucket: not in the experiment.
    let d = m.eval("hashKey", &user("userKeyB"));
    assert_eq!(
        (d.variation_index, d.reason.is_in_experiment()),
        (Some(2), false)
    );
    // A context without the rollout's kind: bucket 0, never in the experiment.
    let m = Mem::new(&[rollout("experiment", json!({"contextKind": "org"}))], &[]);
    let d = m.eval("hashKey", &a);
    assert_eq!(
        (d.variation_index, d.reason),
        (Some(0), Reason::fallthrough())
    );
    // An invalid bucketBy is a malformed flag.
    let m = Mem::new(
        &[rollout(
            "rollout",
            json!({"contextKind": "user", "bucketBy": "//"}),
        )],
        &[],
    );
    assert_eq!(
        m.eval("hashKey", &a).reason,
        Reason::error(EvalError::MalformedFlag)
    );
}

#[derive(Default)]
struct Log(RefCell<Vec<String>>);

impl PrerequisiteRecorder for Log {
    fn record(&self, e: &PrerequisiteEvent<'_>) {
        self.0.borrow_mut().push(format!(
            "{}<-{}:{:?}",
            e.target_flag_key, e.prerequisite_flag.key, e.result.variation_index
        ));
    }

    fn reached(&self, flag: &str, prerequisite: &str) {
        self.0.borrow_mut().push(format!("{flag}?{prerequisite}"));
    }
}

#[test]
fn prerequisites_are_recorded_and_cycles_are_malformed() {
    let flag = |key: &str, prereqs: Value, on: bool| {
        json!({"key": key, "on": on, "variations": [false, true], "offVariation": 0,
               "fallthrough": {"variation": 1}, "prerequisites": prereqs})
    };
    let m = Mem::new(
        &[
            flag("top", json!([{"key": "mid", "variation": 1}]), true),
            flag("mid", json!([{"key": "leaf", "variation": 1}]), true),
            flag("leaf", json!([]), true),
            flag("offleaf", json!([]), false),
            flag(
                "fails",
                json!([{"key": "offleaf", "variation": 1}, {"key": "leaf", "variation": 1}]),
                true,
            ),
            flag("missing", json!([{"key": "nope", "variation": 1}]), true),
            flag("a", json!([{"key": "b", "variation": 1}]), true),
            flag("b", json!([{"key": "a", "variation": 1}]), true),
            flag("self", json!([{"key": "self", "variation": 1}]), true),
        ],
        &[],
    );
    let u = user("u");
    let log = Log::default();
    let options = Options {
        recorder: Some(&log),
        big_segments: None,
    };
    assert_eq!(
        m.eval_with("top", &u, options).reason,
        Reason::fallthrough()
    );
    assert_eq!(
        log.0.take(),
        [
            "top?mid",
            "mid?leaf",
            "mid<-leaf:Some(1)",
            "top<-mid:Some(1)"
        ]
    );
    let d = m.eval_with("fails", &u, options);
    assert_eq!(
        (d.variation_index, d.reason),
        (Some(0), Reason::prerequisite_failed("offleaf"))
    );
    assert_eq!(log.0.take(), ["fails?offleaf", "fails<-offleaf:Some(0)"]);
    assert_eq!(
        m.eval("missing", &u).reason,
        Reason::prerequisite_failed("nope")
    );
    assert_eq!(
        m.eval_with("a", &u, options),
        Detail::err(EvalError::MalformedFlag)
    );
    assert_eq!(log.0.take(), ["a?b", "b?a"]);
    assert_eq!(
        m.eval_with("self", &u, options),
        Detail::err(EvalError::MalformedFlag)
    );
    assert!(
        log.0.take().is_empty(),
        "a flag naming itself is not reported"
    );
}

#[test]
fn segments_lists_rules_weights_and_cycles() {
    let seg_flag =
        |segs: Value| with_clause(json!({"attribute": "", "op": "segmentMatch", "values": segs}));
    let segments = [
        json!({"key": "s", "salt": "x", "included": ["in"], "excluded": ["out", "in2"],
               "includedContexts": [{"contextKind": "org", "values": ["o-in"]}],
               "excludedContexts": [{"contextKind": "org", "values": ["o-out"]}],
               "rules": [{"clauses": [{"attribute": "key", "op": "startsWith", "values": ["o"]}]}]}),
        json!({"key": "half", "salt": "salt", "rules": [{"weight": 50000, "clauses": []}]}),
        json!({"key": "nested", "rules": [{"clauses": [
            {"attribute": "", "op": "segmentMatch", "values": ["s"]}]}]}),
        json!({"key": "c1", "rules": [{"clauses": [{"attribute": "", "op": "segmentMatch", "values": ["c2"]}]}]}),
        json!({"key": "c2", "rules": [{"clauses": [{"attribute": "", "op": "segmentMatch", "values": ["c1"]}]}]}),
    ];
    let hit = |segs: Value, c: &Context| {
        Mem::new(&[seg_flag(segs)], &segments).eval("f", c).value == Some(FlagValue::Bool(true))
    };
    assert!(hit(json!(["s"]), &user("in")));
    assert!(!hit(json!(["s"]), &user("out")));
    assert!(hit(json!(["s"]), &user("other")), "the rule: starts with o");
    assert!(hit(json!(["s"]), &kind("org", "o-in")));
    assert!(!hit(json!(["s"]), &kind("org", "o-out")));
    assert!(hit(json!(["nope", "nested"]), &user("in")));
    // Weighted rule: about half of the users.
    let n = (0..400)
        .filter(|i| hit(json!(["half"]), &user(&format!("u{i}"))))
        .count();
    assert!((150..250).contains(&n), "{n}");
    let d = Mem::new(&[seg_flag(json!(["c1"]))], &segments).eval("f", &user("u"));
    assert_eq!(d, Detail::err(EvalError::MalformedFlag));
}

/// A big segment store in memory, counting its queries.
struct Big {
    members: HashMap<String, Membership>,
    status: BigSegmentsStatus,
    queries: Mutex<Vec<String>>,
}

impl BigSegmentLookup for Big {
    fn membership(&self, key: &str) -> LookupResult {
        self.queries.lock().unwrap().push(key.to_owned());
        LookupResult {
            membership: self.members.get(key).cloned().map(Arc::new),
            status: self.status,
        }
    }
}

#[test]
fn big_segments() {
    let segments = [
        json!({"key": "big", "unbounded": true, "generation": 2, "included": ["listed"],
               "rules": [{"clauses": [{"attribute": "key", "op": "in", "values": ["ruled"]}]}]}),
        json!({"key": "big2", "unbounded": true, "generation": 1}),
        json!({"key": "nogen", "unbounded": true}),
        json!({"key": "orgs", "unbounded": true, "unboundedContextKind": "org", "generation": 1}),
    ];
    let flag = |segs: Value| {
        let mut f = with_clause(json!({"attribute": "", "op": "segmentMatch", "values": segs}));
        f["key"] = json!(format!("f-{}", segs[0].as_str().unwrap()));
        f
    };
    let m = Mem::new(
        &[
            flag(json!(["big", "big2"])),
            flag(json!(["nogen"])),
            flag(json!(["orgs"])),
        ],
        &segments,
    );
    let big = Big {
        members: HashMap::from([
            (
                "yes".to_owned(),
                Membership::from_refs(["big.g2"], Vec::<String>::new()),
            ),
            (
                "no".to_owned(),
                Membership::from_refs(["big2.g1"], ["big.g2"]),
            ),
            (
                "ruled".to_owned(),
                Membership::from_refs(Vec::<String>::new(), ["big.g1"]),
            ),
            (
                "acme".to_owned(),
                Membership::from_refs(["orgs.g1"], Vec::<String>::new()),
            ),
        ]),
        status: BigSegmentsStatus::Stale,
        queries: Mutex::default(),
    };
    let options = Options {
        recorder: None,
        big_segments: Some(&big),
    };
    let status = |d: &Detail<FlagValue>| d.reason.big_segments_status();
    let d = m.eval_with("f-big", &user("yes"), options);
    assert_eq!(
        d.reason,
        rule(0).with_big_segments_status(BigSegmentsStatus::Stale)
    );
    // "no" is excluded from big but included in big2: one query for both segments.
    big.queries.lock().unwrap().clear();
    let d = m.eval_with("f-big", &user("no"), options);
    assert_eq!(
        (d.variation_index, status(&d)),
        (Some(1), Some(BigSegmentsStatus::Stale))
    );
    assert_eq!(*big.queries.lock().unwrap(), ["no"]);
    // Nothing stored for the reference (another generation): the rules decide; the
    // lists of an unbounded segment are not read.
    assert_eq!(
        m.eval_with("f-big", &user("ruled"), options)
            .variation_index,
        Some(1)
    );
    assert_eq!(
        m.eval_with("f-big", &user("listed"), options)
            .variation_index,
        Some(0)
    );
    // No generation: NOT_CONFIGURED, no match, no query.
    big.queries.lock().unwrap().clear();
    let d = m.eval_with("f-nogen", &user("yes"), options);
    assert_eq!(
        (d.variation_index, status(&d)),
        (Some(0), Some(BigSegmentsStatus::NotConfigured))
    );
    assert!(big.queries.lock().unwrap().is_empty());
    // unboundedContextKind: the org's key is asked; a context without an org never matches.
    let d = m.eval_with("f-orgs", &kind("org", "acme"), options);
    assert_eq!(d.variation_index, Some(1));
    let d = m.eval_with("f-orgs", &user("acme"), options);
    assert_eq!((d.variation_index, status(&d)), (Some(0), None));
    // No lookup configured: NOT_CONFIGURED, the rules decide.
    let d = m.eval("f-big", &user("ruled"));
    assert_eq!(
        (d.variation_index, status(&d)),
        (Some(1), Some(BigSegmentsStatus::NotConfigured))
    );
    let json = serde_json::to_value(&d.reason).unwrap();
    assert_eq!(json["bigSegmentsStatus"], "NOT_CONFIGURED");
}

#[test]
fn lenient_model_and_hostile_data() {
    // Missing fields take their zero values; null lists are empty.
    let m = Mem::new(
        &[
            json!({"key": "f", "on": true, "variations": [1], "targets": null, "rules": null,
                 "prerequisites": null, "fallthrough": {"variation": 0}}),
        ],
        &[],
    );
    assert_eq!(m.eval("f", &user("u")).variation_index, Some(0));
    for bad in [
        json!({"on": "yes"}),
        json!({"salt": null}),
        json!({"targets": [{"values": "x"}]}),
        json!({"rules": [{"clauses": 5}]}),
        json!({"variations": {}}),
    ] {
        assert!(
            Flag::from_json(bad.to_string().as_bytes(), "k").is_err(),
            "{bad}"
        );
    }
    assert!(Flag::from_json(b"[1,2]", "k").is_err());
    // Deep segment nesting is cut off, not a stack overflow.
    let segments: Vec<Value> = (0..200)
        .map(|i| {
            json!({"key": format!("s{i}"), "rules": [{"clauses": [
            {"attribute": "", "op": "segmentMatch", "values": [format!("s{}", i + 1)]}]}]})
        })
        .collect();
    let m = Mem::new(
        &[with_clause(
            json!({"attribute": "", "op": "segmentMatch", "values": ["s0"]}),
        )],
        &segments,
    );
    assert_eq!(
        m.eval("f", &user("u")),
        Detail::err(EvalError::MalformedFlag)
    );
}
