//! Instruction counts for the evaluation bench (`benches/evaluation.rs`), which do not
//! depend on machine load: the same fixtures, then `N` evaluations in one of four
//! `#[inline(never)]` functions, so that callgrind can count only those.
//!
//! ```sh
//! cargo build --release -p flagsync --features server --example count_eval
//! valgrind --tool=callgrind --toggle-collect='count_eval::run_*' \
//!     target/release/examples/count_eval in_segment
//! callgrind_annotate callgrind.out.* | grep run_
//! ```
//!
//! The argument picks the case: `in_segment` (a key of the 10,000-key list),
//! `in_no_list`, or `typical` (3 rules of 2 string clauses, a rollout, a prerequisite;
//! no client run). Each function runs 10,000 evaluations (`run_official_by_value`: 100).

#[path = "../benches/common/mod.rs"]
mod common;

use rustc_hash::FxHashMap as HashMap;
use std::hint::black_box;
use std::sync::Arc;

use flagsync::Client;
use flagsync::eval::engine::{self, Options};
use flagsync::eval::{Context, ContextBuilder, FlagValue};
use launchdarkly_server_sdk_evaluation as official;
use serde_json::{Map, Value, json};

const N: usize = 10_000;

struct Official {
    flags: HashMap<String, official::Flag>,
    segments: HashMap<String, official::Segment>,
}

impl official::Store for Official {
    fn flag(&self, key: &str) -> Option<official::Flag> {
        self.flags.get(key).cloned()
    }
    fn segment(&self, key: &str) -> Option<official::Segment> {
        self.segments.get(key).cloned()
    }
}

#[derive(Default)]
struct Ours {
    flags: HashMap<String, Arc<engine::Flag>>,
    segments: HashMap<String, Arc<engine::Segment>>,
}

impl engine::Store for Ours {
    fn flag(&self, key: &str) -> Option<Arc<engine::Flag>> {
        self.flags.get(key).cloned()
    }
    fn segment(&self, key: &str) -> Option<Arc<engine::Segment>> {
        self.segments.get(key).cloned()
    }
}

fn official(flags: &Map<String, Value>, segments: &Map<String, Value>) -> Official {
    fn parse<T: serde::de::DeserializeOwned>(m: &Map<String, Value>) -> HashMap<String, T> {
        m.iter()
            .map(|(k, v)| (k.clone(), serde_json::from_value(v.clone()).unwrap()))
            .collect()
    }
    Official {
        flags: parse(flags),
        segments: parse(segments),
    }
}

fn ours(flags: &Map<String, Value>, segments: &Map<String, Value>) -> Ours {
    let mut o = Ours::default();
    for (k, f) in flags {
        let f = engine::Flag::from_json(f.to_string().as_bytes(), k).unwrap();
        o.flags.insert(k.clone(), Arc::new(f));
    }
    for (k, s) in segments {
        let s = engine::Segment::from_json(s.to_string().as_bytes(), k).unwrap();
        o.segments.insert(k.clone(), Arc::new(s));
    }
    o
}

#[inline(never)]
fn run_flagsync(client: &Client, key: &str, ctx: &Context) -> usize {
    (0..N)
        .filter(|_| black_box(client.bool_variation_detail(key, ctx, false)).value == Some(true))
        .count()
}

#[inline(never)]
fn run_engine(store: &Ours, flag: &engine::Flag, ctx: &Context) -> usize {
    (0..N)
        .filter(|_| {
            black_box(engine::evaluate(store, flag, ctx, Options::default())).value
                == Some(&FlagValue::Bool(true))
        })
        .count()
}

#[inline(never)]
fn run_official_floor(store: &Official, flag: &official::Flag, ctx: &Context) -> usize {
    (0..N)
        .filter(|_| {
            black_box(official::evaluate(store, flag, ctx, None)).value
                == Some(&FlagValue::Bool(true))
        })
        .count()
}

#[inline(never)]
fn run_official_by_value(store: &Official, flag: &official::Flag, ctx: &Context) -> usize {
    (0..N / 100)
        .filter(|_| {
            black_box(official::evaluate(store, flag, ctx, None)).value
                == Some(&FlagValue::Bool(true))
        })
        .count()
}

/// The `typical` flag of the bench.
fn typical() -> Map<String, Value> {
    let clause = |attr: &str, op: &str, values: Value| json!({"contextKind": "user", "attribute": attr, "op": op, "values": values, "negate": false});
    let rules: Vec<Value> = (0..3)
        .map(|i| {
            json!({"id": format!("rule-{i}"), "variation": 1, "trackEvents": false, "clauses": [
                clause("country", "in", json!([format!("C{i}"), format!("D{i}"), "FR"])),
                clause("email", "endsWith", json!([format!("@corp{i}.example")])),
            ]})
        })
        .collect();
    let mut flags = Map::new();
    flags.insert(
        "typical".into(),
        json!({"key": "typical", "version": 3, "on": true, "salt": "c2FsdA",
        "variations": [true, false], "offVariation": 1, "targets": [], "contextTargets": [],
        "prerequisites": [{"key": "typical-pre", "variation": 0}], "rules": rules,
        "fallthrough": {"rollout": {"variations": [{"variation": 0, "weight": 60000},
                                                    {"variation": 1, "weight": 40000}]}}}),
    );
    flags.insert(
        "typical-pre".into(),
        json!({"key": "typical-pre", "version": 1, "on": true,
        "salt": "cHJl", "variations": [true, false], "offVariation": 1, "targets": [],
        "contextTargets": [], "prerequisites": [], "rules": [], "fallthrough": {"variation": 0}}),
    );
    flags
}

fn main() {
    let which = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "in_no_list".into());
    if which == "typical" {
        let flags = typical();
        let mut b = ContextBuilder::new("visitor-42");
        b.set_string("country", "DE")
            .set_string("email", "someone@example.com");
        let ctx = b.build().unwrap();
        let (o, t) = (ours(&flags, &Map::new()), official(&flags, &Map::new()));
        let a = run_engine(&o, &o.flags["typical"], &ctx);
        let b = run_official_floor(&t, &t.flags["typical"], &ctx);
        assert_eq!(a, b);
        println!("typical: {a} of {N} true");
        return;
    }
    let mut data: Value = serde_json::from_slice(&common::payload(50_000)).unwrap();
    let (flag_key, segment_key) = common::realistic_flag(&data);
    let keys = common::segment_keys();
    data["segments"][&segment_key]["included"] = json!(keys);
    let (ctx, member) = match which.as_str() {
        "in_segment" => (
            ContextBuilder::new(keys[5_000].clone()).build().unwrap(),
            true,
        ),
        _ => (ContextBuilder::new("visitor-1").build().unwrap(), false),
    };
    let segments = data["segments"].as_object().unwrap().clone();
    let mut flags = Map::new();
    flags.insert(flag_key.clone(), data["flags"][&flag_key].clone());
    let by_value = official(&flags, &segments);
    let mut floor_segments = segments.clone();
    for (key, s) in floor_segments.iter_mut() {
        if member && *key == segment_key {
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
    let floor = official(&flags, &floor_segments);
    let compiled = ours(&flags, &segments);
    let live = common::live(data);
    // Compile the flag and segments into the client's cache before counting.
    live.client.bool_variation_detail(&flag_key, &ctx, false);
    let a = run_flagsync(&live.client, &flag_key, &ctx);
    let e = run_engine(&compiled, &compiled.flags[&flag_key], &ctx);
    let b = run_official_floor(&floor, &floor.flags[&flag_key], &ctx);
    let c = run_official_by_value(&by_value, &by_value.flags[&flag_key], &ctx);
    assert_eq!((a, e, b, c * 100), (a, a, a, a));
    println!(
        "{which}: {a} of {N} true; flagsync, engine, official floor: {N} each; official by value: {}",
        N / 100
    );
    live.runtime.block_on(live.client.close());
}
