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
//! After the criterion groups, the same workloads are timed once more in [`ROUNDS`]
//! rounds of [`BATCH`] evaluations per contender back to back (the order rotating each
//! round): the median of the per-round ratios does not drift with the machine's load
//! as rows measured one after another do. Last, the sink's tally: how many of each
//! client's evaluations reached the events service in summaries.
//!
//! Run from the repository root:
//! `cargo bench --manifest-path peers/Cargo.toml --bench events -- --warm-up-time 1 --measurement-time 3`.

use std::cell::Cell;
use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use flagsync_peers::{Contenders, Contexts, FLAG, context, context_pool};

/// Rounds of the paired timing.
const ROUNDS: usize = 101;

/// Evaluations per contender in one round.
const BATCH: usize = 2_000;

/// The three contenders' evaluation, each counting its calls.
struct Evaluate<'a> {
    c: &'a Contenders,
    off: Cell<u64>,
    on: Cell<u64>,
    official: Cell<u64>,
}

impl Evaluate<'_> {
    /// Evaluate context `i` with contender `who` (0 events off, 1 events on, 2 official,
    /// which reads the official copy of the context).
    #[inline(always)]
    fn run(&self, who: usize, contexts: &Contexts, i: usize) -> bool {
        let count = [&self.off, &self.on, &self.official][who];
        count.set(count.get() + 1);
        match who {
            0 => (self.c.events_off).bool_variation(FLAG, black_box(&contexts.ours[i]), false),
            1 => (self.c.events_on).bool_variation(FLAG, black_box(&contexts.ours[i]), false),
            _ => (self.c.official).bool_variation(black_box(&contexts.official[i]), FLAG, false),
        }
    }
}

/// The index after `i` in a pool of `len` (no division on the measured path).
#[inline(always)]
fn next(i: usize, len: usize) -> usize {
    if i + 1 == len { 0 } else { i + 1 }
}

const NAMES: [&str; 3] = ["flagsync_events_off", "flagsync_events_on", "official"];

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The paired timing of one workload: median ns per evaluation of each contender and
/// the medians of the per-round ratios on/off and official/on.
fn paired(e: &Evaluate<'_>, workload: &str, contexts: &Contexts) {
    let mut ns = [vec![], vec![], vec![]];
    let (mut on_off, mut official_on) = (vec![], vec![]);
    let mut i = 0;
    for round in 0..ROUNDS {
        let mut this = [0.0; 3];
        for k in 0..3 {
            let who = (round + k) % 3;
            let start = Instant::now();
            for _ in 0..BATCH {
                i = next(i, contexts.len());
                black_box(e.run(who, contexts, i));
            }
            this[who] = start.elapsed().as_nanos() as f64 / BATCH as f64;
        }
        for who in 0..3 {
            ns[who].push(this[who]);
        }
        on_off.push(this[1] / this[0]);
        official_on.push(this[2] / this[1]);
    }
    let [off, on, official] = ns.map(|mut v| median(&mut v));
    eprintln!(
        "paired {workload} ({ROUNDS} rounds of {BATCH}): ns per evaluation {} {off:.0}, {} {on:.0}, {} {official:.0}; median ratio on/off {:.3}, official/on {:.2}",
        NAMES[0],
        NAMES[1],
        NAMES[2],
        median(&mut on_off),
        median(&mut official_on)
    );
}

fn bench(c: &mut Criterion) {
    let contenders = Contenders::start();
    let e = Evaluate {
        c: &contenders,
        off: Cell::new(contenders.checked),
        on: Cell::new(contenders.checked),
        official: Cell::new(contenders.checked),
    };
    eprintln!(
        "load {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );

    // The official copies are made here, before anything is timed.
    let one = Contexts::new(vec![context(1)]);
    let pool = Contexts::new(context_pool());
    for (workload, contexts) in [("one_context", &one), ("context_pool", &pool)] {
        let mut g = c.benchmark_group(workload);
        for (who, name) in NAMES.iter().enumerate() {
            g.bench_function(*name, |b| {
                let mut i = 0;
                b.iter(|| {
                    i = next(i, contexts.len());
                    e.run(who, contexts, i)
                })
            });
        }
        g.finish();
    }
    paired(&e, "one_context", &one);
    paired(&e, "context_pool", &pool);

    let (on, official) = (e.on.get(), e.official.get());
    let received = contenders.close();
    for (agent, evaluated) in [("flagsync", on), ("RustServerClient", official)] {
        let r = received.get(agent).cloned().unwrap_or_default();
        eprintln!(
            "sink, {agent}: {} posts ({} retries), events {:?}; {} of {evaluated} evaluations of {FLAG} counted in summaries ({:.1} %)",
            r.posts,
            r.repeated,
            r.events,
            r.summarized,
            r.summarized as f64 * 100.0 / evaluated as f64
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
