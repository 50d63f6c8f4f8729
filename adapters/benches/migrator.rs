//! The migrator's overhead per read (issue 8): `Migrator::read` against awaiting the
//! same origin functions directly, with origins that are ready at once (so only the
//! migrator's own work is measured), on a 50,001-flag store served by the local flag
//! server. The stage comes from a live migration flag: `off` reads one origin,
//! `shadow` reads both and compares them. `migration_variation` alone shows how much of
//! the overhead is the flag evaluation.
//!
//! Run: `cargo bench -p flagsync --features server --bench migrator`.

mod common;

use std::future::{Ready, ready};
use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use flagsync::eval::ContextBuilder;
use flagsync::migration::{Migrator, Origin, Stage};
use futures_lite::future::block_on;
use serde_json::Value;

fn old(p: u64) -> Ready<Result<u64, ()>> {
    ready(Ok(black_box(p) + 1))
}

fn new(p: u64) -> Ready<Result<u64, ()>> {
    ready(Ok(black_box(p) + 1))
}

fn bench(c: &mut Criterion) {
    let mut data: Value = serde_json::from_slice(&common::payload(50_000)).unwrap();
    data["flags"]["bench-migration-off"] = common::migration_flag("bench-migration-off", 0);
    data["flags"]["bench-migration-shadow"] = common::migration_flag("bench-migration-shadow", 2);
    eprintln!(
        "load {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    let live = common::live(data);
    let client = live.client.clone();
    let migrator = Migrator::builder(client.clone())
        .read_with_comparison(old, new, |a: &u64, b: &u64| a == b)
        .write(old, new)
        .rng(fastrand::Rng::with_seed(1))
        .build()
        .unwrap();
    let ctx = ContextBuilder::new("user-00000001").build().unwrap();
    let off = block_on(migrator.read("bench-migration-off", &ctx, Stage::Live, 1));
    assert_eq!(off.origin, Origin::Old);
    let (stage, _) = client.migration_variation("bench-migration-shadow", &ctx, Stage::Off);
    assert_eq!(stage, Stage::Shadow);

    let mut g = c.benchmark_group("migrator");
    g.sample_size(50)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(5));
    g.bench_function("direct/one_origin", |b| {
        b.iter(|| block_on(async { old(black_box(1)).await }))
    });
    g.bench_function("migrator/off", |b| {
        b.iter(|| block_on(migrator.read("bench-migration-off", &ctx, Stage::Live, black_box(1))))
    });
    g.bench_function("direct/two_origins_compared", |b| {
        b.iter(|| {
            block_on(async {
                let (a, o) = (old(black_box(1)).await, new(black_box(1)).await);
                matches!((a, o), (Ok(a), Ok(o)) if a == o)
            })
        })
    });
    g.bench_function("migrator/shadow", |b| {
        b.iter(|| block_on(migrator.read("bench-migration-shadow", &ctx, Stage::Off, black_box(1))))
    });
    g.bench_function("migration_variation", |b| {
        b.iter(|| client.migration_variation("bench-migration-shadow", &ctx, Stage::Off))
    });
    g.finish();
    live.runtime.block_on(client.close());
}

criterion_group!(benches, bench);
criterion_main!(benches);
