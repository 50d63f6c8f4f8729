//! Instruction counts per evaluation for the events bench (`benches/events.rs`), which
//! do not depend on machine load: the same contenders and flag, then `N` evaluations
//! per contender inside `#[inline(never)]` functions named `measured_*`, so that
//! callgrind counts only those (on the evaluating thread: work the SDKs hand to
//! background threads is not in these counts).
//!
//! ```sh
//! cargo build --profile bench --manifest-path peers/Cargo.toml --example count_events
//! valgrind --tool=callgrind --toggle-collect='*measured_*' \
//!     peers/target/release/examples/count_events one    # or: pool
//! callgrind_annotate --inclusive=yes callgrind.out.<pid> | grep measured_
//! ```
//!
//! `one`: the same user every time; `pool`: a different user each time from 10,000.
//! Each contender first evaluates [`WARM_UP`] times uncounted (a whole pass over the
//! pool), then [`N`] times counted.

use std::hint::black_box;

use flagsync::eval::Context;
use flagsync_peers::{Contenders, Contexts, FLAG, POOL, context, context_pool};

/// Counted evaluations per contender.
const N: usize = 20_000;

/// Uncounted evaluations before them.
const WARM_UP: usize = POOL;

/// The context of evaluation `i`.
fn pick<C>(contexts: &[C], i: usize) -> &C {
    &contexts[i % contexts.len()]
}

/// Evaluate `N` times, cycling through `contexts` (no division on the measured path).
#[inline(always)]
fn cycle<C>(contexts: &[C], mut evaluate: impl FnMut(&C) -> bool) -> usize {
    let mut i = 0;
    let mut yes = 0;
    for _ in 0..N {
        yes += usize::from(evaluate(black_box(&contexts[i])));
        i = if i + 1 == contexts.len() { 0 } else { i + 1 };
    }
    yes
}

#[inline(never)]
fn measured_flagsync_events_off(client: &flagsync::Client, contexts: &[Context]) -> usize {
    // The `black_box` of a constant of its own keeps the compiler from merging the two
    // flagsync functions, which otherwise have the same body.
    black_box(0) + cycle(contexts, |c| client.bool_variation(FLAG, c, false))
}

#[inline(never)]
fn measured_flagsync_events_on(client: &flagsync::Client, contexts: &[Context]) -> usize {
    black_box(1) - 1 + cycle(contexts, |c| client.bool_variation(FLAG, c, false))
}

#[inline(never)]
fn measured_official(
    client: &launchdarkly_server_sdk::Client,
    contexts: &[launchdarkly_server_sdk::Context],
) -> usize {
    cycle(contexts, |c| client.bool_variation(c, FLAG, false))
}

fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "one".into());
    let Contexts { ours, official } = Contexts::new(match which.as_str() {
        "pool" => context_pool(),
        "one" => vec![context(1)],
        other => panic!("unknown workload {other}: one or pool"),
    });
    // The official SDK reads its own copies, made above, before counting.
    let contexts = ours;
    let c = Contenders::start();
    let warm = |f: &dyn Fn(usize) -> bool| (0..WARM_UP).filter(|&i| f(i)).count();
    warm(&|i| c.events_off.bool_variation(FLAG, pick(&contexts, i), false));
    let off = measured_flagsync_events_off(&c.events_off, &contexts);
    warm(&|i| c.events_on.bool_variation(FLAG, pick(&contexts, i), false));
    let on = measured_flagsync_events_on(&c.events_on, &contexts);
    warm(&|i| c.official.bool_variation(pick(&official, i), FLAG, false));
    let theirs = measured_official(&c.official, &official);
    assert_eq!((off, on), (theirs, theirs));
    println!("{which}: {off} of {N} true for each contender");
    for (agent, r) in c.close() {
        println!(
            "sink, {agent}: {} posts ({} retries), events {:?}, {} evaluations of {FLAG} summarized",
            r.posts, r.repeated, r.events, r.summarized
        );
    }
}
