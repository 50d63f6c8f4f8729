//! The stores and fixtures that the evaluation bench and the `count_eval` example share:
//! flagsync's engine on compiled models against the official engine on models handed
//! out by value, on the same flags, segments and contexts.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

use flagsync::eval::engine;
use flagsync::eval::{Context, ContextBuilder};
use launchdarkly_server_sdk_evaluation as official;
use serde_json::{Map, Value, json};

/// Models handed out by value (the official SDK's way), or the floor's segments.
pub struct ByValue {
    pub flags: HashMap<String, official::Flag>,
    pub segments: HashMap<String, official::Segment>,
}

impl official::Store for ByValue {
    fn flag(&self, key: &str) -> Option<official::Flag> {
        self.flags.get(key).cloned()
    }
    fn segment(&self, key: &str) -> Option<official::Segment> {
        self.segments.get(key).cloned()
    }
}

/// flagsync's compiled models.
#[derive(Default)]
pub struct Compiled {
    pub flags: HashMap<String, Arc<engine::Flag>>,
    pub segments: HashMap<String, Arc<engine::Segment>>,
}

impl engine::Store for Compiled {
    fn flag(&self, key: &str) -> Option<Arc<engine::Flag>> {
        self.flags.get(key).cloned()
    }
    fn segment(&self, key: &str) -> Option<Arc<engine::Segment>> {
        self.segments.get(key).cloned()
    }
}

/// The official crate's copy of `context`, through its JSON: made once, before
/// anything is timed (the official engine reads only its own context type).
pub fn official_context(context: &Context) -> official::Context {
    serde_json::from_value(serde_json::to_value(context).unwrap()).unwrap()
}

/// `flags` and `segments` compiled by flagsync's engine.
pub fn compiled(flags: &Map<String, Value>, segments: &Map<String, Value>) -> Compiled {
    let mut c = Compiled::default();
    for (k, f) in flags {
        let f = engine::Flag::from_json(f.to_string().as_bytes(), k).unwrap();
        c.flags.insert(k.clone(), Arc::new(f));
    }
    for (k, s) in segments {
        let s = engine::Segment::from_json(s.to_string().as_bytes(), k).unwrap();
        c.segments.insert(k.clone(), Arc::new(s));
    }
    c
}

/// `flags` and `segments` in the official engine's models.
pub fn by_value(flags: &Map<String, Value>, segments: &Map<String, Value>) -> ByValue {
    fn parse<T: serde::de::DeserializeOwned>(m: &Map<String, Value>) -> HashMap<String, T> {
        m.iter()
            .map(|(k, v)| (k.clone(), serde_json::from_value(v.clone()).unwrap()))
            .collect()
    }
    ByValue {
        flags: parse(flags),
        segments: parse(segments),
    }
}

/// Every segment with its four key lists emptied (the answer for a context in none of
/// them), and `member` replaced by a segment that always matches: the smallest
/// segments giving the official engine the same answer (the "floor").
pub fn floor_segments(segments: &Map<String, Value>, member: Option<&str>) -> Map<String, Value> {
    let mut floor = segments.clone();
    for (key, s) in floor.iter_mut() {
        if Some(key.as_str()) == member {
            s["rules"] = json!([{"clauses": []}]);
        }
        for list in [
            "included",
            "excluded",
            "includedContexts",
            "excludedContexts",
        ] {
            s[list] = json!([]);
        }
    }
    floor
}

/// The `typical` case: flag `typical` (3 rules of 2 clauses on string attributes, a
/// 60/40 rollout in the fallthrough) with a prerequisite `typical-pre`, and a context
/// that matches no rule.
pub fn typical() -> (Map<String, Value>, Context) {
    let clause = |attr: &str, op: &str, values: Value| json!({"contextKind": "user", "attribute": attr, "op": op, "values": values, "negate": false});
    let rules: Vec<Value> = (0..3)
        .map(|i| {
            json!({"id": format!("rule-{i}"), "variation": 1, "trackEvents": false, "clauses": [
                clause("country", "in", json!([format!("C{i}"), format!("D{i}"), "FR"])),
                clause("email", "endsWith", json!([format!("@corp{i}.example")])),
            ]})
        })
        .collect();
    let typical = json!({"key": "typical", "version": 3, "on": true, "salt": "c2FsdA",
        "variations": [true, false], "offVariation": 1, "targets": [], "contextTargets": [],
        "prerequisites": [{"key": "typical-pre", "variation": 0}],
        "rules": rules,
        "fallthrough": {"rollout": {"variations": [{"variation": 0, "weight": 60000},
                                                    {"variation": 1, "weight": 40000}]}},
        "trackEvents": false, "trackEventsFallthrough": false, "deleted": false});
    let pre = json!({"key": "typical-pre", "version": 1, "on": true, "salt": "cHJl",
        "variations": [true, false], "offVariation": 1, "targets": [], "contextTargets": [],
        "prerequisites": [], "rules": [], "fallthrough": {"variation": 0}, "deleted": false});
    let mut flags = Map::new();
    flags.insert("typical".into(), typical);
    flags.insert("typical-pre".into(), pre);
    let mut b = ContextBuilder::new("visitor-42");
    b.set_string("country", "DE")
        .set_string("email", "someone@example.com");
    (flags, b.build().unwrap())
}
