//! Evaluation throughput (issues 8 and 16), in one run:
//! - `flagsync`: `Client::bool_variation_detail` of a realistic flag (rules, a
//!   `segmentMatch` on a 10,000-key segment) in a 50,001-flag store served by the local
//!   flag server: snapshot, model cache, engine;
//! - `engine`: flagsync's engine (`flagsync::eval::engine::evaluate`) called directly on
//!   the compiled flag, with a store of compiled segments and flags (`Arc`s);
//! - `official_floor`: the official `launchdarkly_server_sdk_evaluation::evaluate` on
//!   the same flag with a store that hands out, per context, the smallest segments that
//!   give the same answers (prepared once): the official engine's own cost (the "engine
//!   floor" of BENCHMARKS.md), which bounds any store around it from below;
//! - `official_by_value`: the official engine with a store of parsed models handed out
//!   by value (the official Rust SDK's in-memory store: every call clones the segment).
//!
//! Cases: the realistic flag for a user in the segment's key list (the rule matches)
//! and one in no list (every rule is tried, then the fallthrough); and `typical`, a
//! flag with 3 rules of 2 clauses on string attributes, a percentage rollout in the
//! fallthrough and one prerequisite, for a context that matches no rule.
//!
//! Run: `cargo bench -p flagsync --features server --bench evaluation`.

mod common;
#[path = "common/engines.rs"]
mod engines;

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use engines::{ByValue, Compiled, by_value, compiled, floor_segments, typical};
use flagsync::eval::engine::{self, Options};
use flagsync::eval::{Context, ContextBuilder, Detail, FlagValue};
use launchdarkly_server_sdk_evaluation as official;
use serde_json::{Value, json};

/// The official engine's floor for `data`'s segments (see `engines::floor_segments`).
fn floor(data: &Value, member: Option<&str>) -> ByValue {
    let segments = data["segments"].as_object().unwrap();
    by_value(&serde_json::Map::new(), &floor_segments(segments, member))
}

fn as_bool(d: Detail<&FlagValue>) -> Detail<bool> {
    d.map(|v| matches!(v, FlagValue::Bool(true)))
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

    let segments = data["segments"].as_object().unwrap().clone();
    let mut one_flag = serde_json::Map::new();
    one_flag.insert(flag_key.clone(), data["flags"][&flag_key].clone());
    let ours = compiled(&one_flag, &segments);
    let theirs = by_value(&one_flag, &segments);
    let (typical_flags, typical_ctx) = typical();
    let ours_typical = compiled(&typical_flags, &serde_json::Map::new());
    let theirs_typical = by_value(&typical_flags, &serde_json::Map::new());

    let cases: Vec<(&str, &str, Context, &Compiled, &ByValue, ByValue)> = vec![
        (
            "in_segment",
            &flag_key,
            ContextBuilder::new(keys[5_000].clone()).build().unwrap(),
            &ours,
            &theirs,
            floor(&data, Some(&segment_key)),
        ),
        (
            "in_no_list",
            &flag_key,
            ContextBuilder::new("visitor-1").build().unwrap(),
            &ours,
            &theirs,
            floor(&data, None),
        ),
        (
            "typical",
            "typical",
            typical_ctx,
            &ours_typical,
            &theirs_typical,
            by_value(&typical_flags, &serde_json::Map::new()),
        ),
    ];
    let live = common::live(data);
    let client = &live.client;

    let mut g = c.benchmark_group("evaluation");
    g.sample_size(50)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(4));
    for (name, key, ctx, ours, theirs, floor) in &cases {
        // The official engine reads its own context type: a copy made before timing.
        let official_ctx = &engines::official_context(ctx);
        let flag = &ours.flags[*key];
        let parsed = &theirs.flags[*key];
        // All agree before anything is timed.
        let mine = as_bool(engine::evaluate(*ours, flag, ctx, Options::default()));
        let official = official::evaluate(*theirs, parsed, official_ctx, None);
        let least = official::evaluate(floor, parsed, official_ctx, None);
        assert_eq!(official, least);
        assert_eq!(
            mine.value,
            official.value.map(|v| v.as_bool() == Some(true))
        );
        assert_eq!(mine.variation_index, official.variation_index);
        assert_eq!(
            serde_json::to_value(&mine.reason).unwrap(),
            serde_json::to_value(&official.reason).unwrap()
        );
        eprintln!("{name}: {:?}", mine.reason);
        if *key == flag_key.as_str() {
            let via_client = client.bool_variation_detail(key, ctx, false);
            assert_eq!(via_client, mine);
            g.bench_function(format!("flagsync/{name}"), |b| {
                b.iter(|| client.bool_variation_detail(key, ctx, false))
            });
        }
        g.bench_function(format!("engine/{name}"), |b| {
            b.iter(|| as_bool(engine::evaluate(*ours, flag, ctx, Options::default())))
        });
        g.bench_function(format!("official_floor/{name}"), |b| {
            b.iter(|| {
                official::evaluate(floor, parsed, official_ctx, None)
                    .map(|v| v.as_bool() == Some(true))
            })
        });
        g.bench_function(format!("official_by_value/{name}"), |b| {
            b.iter(|| {
                official::evaluate(*theirs, parsed, official_ctx, None)
                    .map(|v| v.as_bool() == Some(true))
            })
        });
    }
    g.finish();
    live.runtime.block_on(client.close());
}

criterion_group!(benches, bench);
criterion_main!(benches);
