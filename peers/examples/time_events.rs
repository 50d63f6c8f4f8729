//! The events' cost in time, robust to a noisy machine: events off and events on
//! (`benches/events.rs`'s contenders, one context) timed in alternating batches, the
//! fastest batch of each kept (noise only ever adds time).
//!
//! `cargo run --profile bench --manifest-path peers/Cargo.toml --example time_events [ROUNDS] [one|pool]`
//!
//! `one`: the same user every time; `pool`: each evaluation a user from 10,000, in turn.

use std::hint::black_box;
use std::time::Instant;

use flagsync_peers::{Contenders, Contexts, FLAG, context, context_pool};

/// Evaluations per batch.
const BATCH: usize = 20_000;

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|r| r.parse().ok())
        .unwrap_or(200);
    let workload = std::env::args().nth(2).unwrap_or_else(|| "one".into());
    let Contexts { ours, .. } = Contexts::new(match workload.as_str() {
        "pool" => context_pool(),
        "one" => vec![context(1)],
        other => panic!("unknown workload {other}: one or pool"),
    });
    let c = Contenders::start();
    let mut next = 0;
    let clients = [&c.events_off, &c.events_on];
    let mut best = [f64::MAX; 2];
    let mut ratios = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let mut this = [0.0; 2];
        for k in 0..2 {
            let who = (round + k) % 2;
            let client = clients[who];
            let start = Instant::now();
            for _ in 0..BATCH {
                let ctx = &ours[next];
                next = if next + 1 == ours.len() { 0 } else { next + 1 };
                black_box(client.bool_variation(FLAG, black_box(ctx), false));
            }
            this[who] = start.elapsed().as_nanos() as f64 / BATCH as f64;
            best[who] = best[who].min(this[who]);
        }
        ratios.push(this[1] / this[0]);
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "{workload}: fastest batch of {rounds}: off {:.1} ns, on {:.1} ns, on/off {:.3}; median per-round on/off {:.3}",
        best[0],
        best[1],
        best[1] / best[0],
        ratios[rounds / 2]
    );
    drop(c.close());
}
