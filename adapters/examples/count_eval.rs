//! Instruction counts for the evaluation bench (`benches/evaluation.rs`), which do not
//! depend on machine load: the same fixture, then `N` evaluations in one of three
//! `#[inline(never)]` functions, so that callgrind can count only those.
//!
//! ```sh
//! cargo build --release -p flagsync --features server --example count_eval
//! valgrind --tool=callgrind --toggle-collect='count_eval::run_*' \
//!     target/release/examples/count_eval in_segment
//! callgrind_annotate callgrind.out.* | grep run_
//! ```
//!
//! The argument picks the context: `in_segment` (a key of the 10,000-key list) or
//! `in_no_list`. Each function runs 10,000 evaluations.

#[path = "../benches/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::hint::black_box;

use flagsync::Client;
use flagsync::eval::engine::{self, Flag, Segment, Store};
use flagsync::eval::{Context, ContextBuilder};
use serde_json::{Value, json};

const N: usize = 10_000;

struct Segments(HashMap<String, Segment>);

impl Store for Segments {
    fn flag(&self, _: &str) -> Option<Flag> {
        None
    }
    fn segment(&self, key: &str) -> Option<Segment> {
        self.0.get(key).cloned()
    }
}

fn segments(data: &Value, change: impl Fn(&str, &mut Value)) -> Segments {
    let mut out = HashMap::new();
    for (key, s) in data["segments"].as_object().unwrap() {
        let mut s = s.clone();
        change(key, &mut s);
        out.insert(key.clone(), serde_json::from_value(s).unwrap());
    }
    Segments(out)
}

#[inline(never)]
fn run_flagsync(client: &Client, key: &str, ctx: &Context) -> usize {
    (0..N)
        .filter(|_| black_box(client.bool_variation_detail(key, ctx, false)).value == Some(true))
        .count()
}

#[inline(never)]
fn run_engine_floor(store: &Segments, flag: &Flag, ctx: &Context) -> usize {
    (0..N)
        .filter(|_| {
            black_box(engine::evaluate(store, flag, ctx, None))
                .value
                .and_then(|v| v.as_bool())
                == Some(true)
        })
        .count()
}

#[inline(never)]
fn run_engine_by_value(store: &Segments, flag: &Flag, ctx: &Context) -> usize {
    (0..N / 100)
        .filter(|_| {
            black_box(engine::evaluate(store, flag, ctx, None))
                .value
                .and_then(|v| v.as_bool())
                == Some(true)
        })
        .count()
}

fn main() {
    let which = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "in_no_list".into());
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
    let flag: Flag = serde_json::from_value(data["flags"][&flag_key].clone()).unwrap();
    let by_value = segments(&data, |_, _| {});
    let floor = segments(&data, |key, s| {
        if member && key == segment_key {
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
    });
    let live = common::live(data);
    // Parse the flag and segments into the model cache before counting.
    live.client.bool_variation_detail(&flag_key, &ctx, false);
    let a = run_flagsync(&live.client, &flag_key, &ctx);
    let b = run_engine_floor(&floor, &flag, &ctx);
    let c = run_engine_by_value(&by_value, &flag, &ctx);
    assert_eq!((a, b, c * 100), (a, a, a));
    println!(
        "{which}: {a} of {N} true; flagsync, floor: {N} each; by value: {}",
        N / 100
    );
    live.runtime.block_on(live.client.close());
}
