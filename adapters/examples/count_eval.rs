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
#[path = "../benches/common/engines.rs"]
mod engines;

use std::hint::black_box;

use engines::{ByValue, Compiled, by_value, compiled, floor_segments, official_context, typical};
use flagsync::Client;
use flagsync::eval::engine::{self, Options};
use flagsync::eval::{Context, ContextBuilder, FlagValue};
use launchdarkly_server_sdk_evaluation as official;
use serde_json::{Map, Value, json};

const N: usize = 10_000;

#[inline(never)]
fn run_flagsync(client: &Client, key: &str, ctx: &Context) -> usize {
    (0..N)
        .filter(|_| black_box(client.bool_variation_detail(key, ctx, false)).value == Some(true))
        .count()
}

#[inline(never)]
fn run_engine(store: &Compiled, flag: &engine::Flag, ctx: &Context) -> usize {
    (0..N)
        .filter(|_| {
            black_box(engine::evaluate(store, flag, ctx, Options::default())).value
                == Some(&FlagValue::Bool(true))
        })
        .count()
}

#[inline(never)]
fn run_official_floor(store: &ByValue, flag: &official::Flag, ctx: &official::Context) -> usize {
    (0..N)
        .filter(|_| {
            black_box(official::evaluate(store, flag, ctx, None)).value
                == Some(&official::FlagValue::Bool(true))
        })
        .count()
}

#[inline(never)]
fn run_official_by_value(store: &ByValue, flag: &official::Flag, ctx: &official::Context) -> usize {
    (0..N / 100)
        .filter(|_| {
            black_box(official::evaluate(store, flag, ctx, None)).value
                == Some(&official::FlagValue::Bool(true))
        })
        .count()
}

/// The `typical` flag of the bench.
fn main() {
    let which = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "in_no_list".into());
    if which == "typical" {
        let (flags, ctx) = typical();
        let (o, t) = (compiled(&flags, &Map::new()), by_value(&flags, &Map::new()));
        let a = run_engine(&o, &o.flags["typical"], &ctx);
        let b = run_official_floor(&t, &t.flags["typical"], &official_context(&ctx));
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
    let by_value_store = by_value(&flags, &segments);
    let member = member.then_some(segment_key.as_str());
    let floor = by_value(&flags, &floor_segments(&segments, member));
    let compiled_store = compiled(&flags, &segments);
    // The official engine's context, converted once before counting.
    let official_ctx = official_context(&ctx);
    let live = common::live(data);
    // Compile the flag and segments into the client's cache before counting.
    live.client.bool_variation_detail(&flag_key, &ctx, false);
    let a = run_flagsync(&live.client, &flag_key, &ctx);
    let e = run_engine(&compiled_store, &compiled_store.flags[&flag_key], &ctx);
    let b = run_official_floor(&floor, &floor.flags[&flag_key], &official_ctx);
    let c = run_official_by_value(
        &by_value_store,
        &by_value_store.flags[&flag_key],
        &official_ctx,
    );
    assert_eq!((a, e, b, c * 100), (a, a, a, a));
    println!(
        "{which}: {a} of {N} true; flagsync, engine, official floor: {N} each; official by value: {}",
        N / 100
    );
    live.runtime.block_on(live.client.close());
}
