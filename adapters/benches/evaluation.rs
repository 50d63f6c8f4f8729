//! Evaluation throughput (issue 8), in one run:
//! - `flagsync`: `Client::bool_variation_detail` of a realistic flag (rules, a
//!   `segmentMatch` on a 10,000-key segment) in a 50,001-flag store served by the local
//!   flag server: snapshot, model cache, segment projection, engine;
//! - `engine_by_value`: the evaluation crate's `evaluate` called directly on a freshly
//!   parsed copy of the same flag, with a store of parsed segments handed out by value
//!   (the official Rust SDK's in-memory store: every call clones the segment);
//! - `engine_floor`: `evaluate` on the same parsed flag with a store that hands out, per
//!   context, the smallest segments that give the same answers (prepared once): the
//!   engine's own cost, which bounds any store from below.
//!
//! Two contexts: a user in the segment's key list (the rule matches) and one in no list
//! (every rule is tried, then the fallthrough).
//!
//! Run: `cargo bench -p flagsync --features server --bench evaluation`.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use flagsync::eval::engine::{self, Flag, Segment, Store};
use flagsync::eval::{Context, ContextBuilder, Detail};
use serde_json::{Value, json};

/// The official SDK's way: parsed models, cloned on every lookup.
struct ByValue(HashMap<String, Segment>);

impl Store for ByValue {
    fn flag(&self, _: &str) -> Option<Flag> {
        None // the benchmarked flag has no prerequisites
    }
    fn segment(&self, key: &str) -> Option<Segment> {
        self.0.get(key).cloned()
    }
}

/// The floor: per context, the smallest segment with the same answer.
struct Floor(HashMap<String, Segment>);

impl Store for Floor {
    fn flag(&self, _: &str) -> Option<Flag> {
        None
    }
    fn segment(&self, key: &str) -> Option<Segment> {
        self.0.get(key).cloned()
    }
}

/// Every segment with its four key lists emptied (the answer for a context in none of
/// them), and `member` replaced by a segment that always matches.
fn floor(data: &Value, member: Option<&str>) -> Floor {
    let mut out = HashMap::new();
    for (key, s) in data["segments"].as_object().unwrap() {
        let mut s = s.clone();
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
        out.insert(key.clone(), serde_json::from_value(s).unwrap());
    }
    Floor(out)
}

fn bench(c: &mut Criterion) {
    let bytes = common::payload(50_000);
    let mut data: Value = serde_json::from_slice(&bytes).unwrap();
    drop(bytes);
    let (flag_key, segment_key) = common::realistic_flag(&data);
    let keys = common::segment_keys();
    data["segments"][&segment_key]["included"] = json!(keys);
    eprintln!(
        "flag {flag_key}: {} rules, segment {segment_key} with {} keys; load {}",
        data["flags"][&flag_key]["rules"].as_array().unwrap().len(),
        keys.len(),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );

    let parsed: Flag = serde_json::from_value(data["flags"][&flag_key].clone()).unwrap();
    let by_value = ByValue(
        data["segments"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, s)| (k.clone(), serde_json::from_value(s.clone()).unwrap()))
            .collect(),
    );
    let contexts: [(&str, Context, Floor); 2] = [
        (
            "in_segment",
            ContextBuilder::new(keys[5_000].clone()).build().unwrap(),
            floor(&data, Some(&segment_key)),
        ),
        (
            "in_no_list",
            ContextBuilder::new("visitor-1").build().unwrap(),
            floor(&data, None),
        ),
    ];
    let live = common::live(data);
    let client = &live.client;

    let mut g = c.benchmark_group("evaluation");
    g.sample_size(50)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(5));
    for (name, ctx, floor) in &contexts {
        // The three agree before anything is timed.
        let ours = client.bool_variation_detail(&flag_key, ctx, false);
        let theirs = engine::evaluate(&by_value, &parsed, ctx, None).map(|v| v.as_bool().unwrap());
        let least = engine::evaluate(floor, &parsed, ctx, None).map(|v| v.as_bool().unwrap());
        assert_eq!(ours, theirs);
        assert_eq!(ours, least);
        eprintln!("{name}: {:?}", ours.reason);

        g.bench_function(format!("flagsync/{name}"), |b| {
            b.iter(|| client.bool_variation_detail(&flag_key, ctx, false))
        });
        g.bench_function(format!("engine_floor/{name}"), |b| {
            b.iter(|| -> Detail<bool> {
                engine::evaluate(floor, &parsed, ctx, None).map(|v| v.as_bool().unwrap_or(false))
            })
        });
        g.bench_function(format!("engine_by_value/{name}"), |b| {
            b.iter(|| -> Detail<bool> {
                engine::evaluate(&by_value, &parsed, ctx, None)
                    .map(|v| v.as_bool().unwrap_or(false))
            })
        });
    }
    g.finish();
    live.runtime.block_on(client.close());
}

criterion_group!(benches, bench);
criterion_main!(benches);
