//! Issue 15, step 2: what analytics events cost an evaluation, in one criterion run.
//!
//! Three contenders read the same flag ([`flagsync_peers::FLAG`]: two rules, rollouts,
//! no `trackEvents`) served by flagsync's local flag server, with `bool_variation`:
//! flagsync with events off, flagsync with events on (default settings, posted to a
//! local sink that answers 202), and the official Rust SDK with its default event
//! processor posting to the same sink.
//!
//! - `one_context`: the same user every time (after the first evaluation, only a
//!   summary counter changes);
//! - `context_pool`: a different user each time, cycling through 10,000 (more than the
//!   1,000 context keys both SDKs remember, so index events are produced throughout).
//!
//! Run from the repository root:
//! `cargo bench --manifest-path peers/Cargo.toml --bench events -- --warm-up-time 1 --measurement-time 3`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use flagsync_peers::{Contenders, FLAG, POOL, context, context_pool};

fn bench(c: &mut Criterion) {
    let contenders = Contenders::start();
    let Contenders {
        events_off,
        events_on,
        official,
        ..
    } = &contenders;
    eprintln!(
        "load {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );

    let one = context(1);
    let mut g = c.benchmark_group("one_context");
    g.bench_function("flagsync_events_off", |b| {
        b.iter(|| events_off.bool_variation(FLAG, black_box(&one), false))
    });
    g.bench_function("flagsync_events_on", |b| {
        b.iter(|| events_on.bool_variation(FLAG, black_box(&one), false))
    });
    g.bench_function("official", |b| {
        b.iter(|| official.bool_variation(black_box(&one), FLAG, false))
    });
    g.finish();

    let pool = context_pool();
    let mut g = c.benchmark_group("context_pool");
    g.bench_function("flagsync_events_off", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % POOL;
            events_off.bool_variation(FLAG, &pool[i], false)
        })
    });
    g.bench_function("flagsync_events_on", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % POOL;
            events_on.bool_variation(FLAG, &pool[i], false)
        })
    });
    g.bench_function("official", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % POOL;
            official.bool_variation(&pool[i], FLAG, false)
        })
    });
    g.finish();

    for (agent, r) in contenders.close() {
        eprintln!(
            "sink, {agent}: {} posts, events {:?}, {} evaluations of {FLAG} summarized",
            r.posts, r.events, r.summarized
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
