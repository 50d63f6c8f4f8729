//! The events' cost in time, robust to a noisy machine: events off and events on
//! (`benches/events.rs`'s contenders, one context) timed in alternating batches, the
//! fastest batch of each kept (noise only ever adds time).
//!
//! `cargo run --profile bench --manifest-path peers/Cargo.toml --example time_events [ROUNDS]`

use std::hint::black_box;
use std::time::Instant;

use flagsync_peers::{Contenders, Contexts, FLAG, context};

/// Evaluations per batch.
const BATCH: usize = 20_000;

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|r| r.parse().ok())
        .unwrap_or(200);
    let Contexts { ours, .. } = Contexts::new(vec![context(1)]);
    let c = Contenders::start();
    let ctx = &ours[0];
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
                black_box(client.bool_variation(FLAG, black_box(ctx), false));
            }
            this[who] = start.elapsed().as_nanos() as f64 / BATCH as f64;
            best[who] = best[who].min(this[who]);
        }
        ratios.push(this[1] / this[0]);
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "fastest batch of {rounds}: off {:.1} ns, on {:.1} ns, on/off {:.3}; median per-round on/off {:.3}",
        best[0],
        best[1],
        best[1] / best[0],
        ratios[rounds / 2]
    );
    drop(c.close());
}
