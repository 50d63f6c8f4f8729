//! Store benchmarks (issue: core FDv1), in one run:
//! - `put_to_store`: bytes of an FDv1 `put` event, fed to the SSE parser in 16 KiB reads,
//!   parsed and applied to an empty store, against `serde_json` parsing the same
//!   payload into the official evaluation model (launchdarkly-server-sdk-evaluation
//!   `Flag`/`Segment`), which is most of what the official Rust SDK spends at start-up;
//! - `put_per_mb`: the same path at 100, 5,000 and 50,000 flags (time per MB should be
//!   flat), each iteration a different data set of the size from a fresh copy
//!   (`N_flags`), and one data set over and over (`N_flags_same_input`);
//! - `patches`: 10,000 `patch` events (SSE framing + JSON + store) on 100- and
//!   50,000-flag stores;
//! - the peak heap while applying the large put, printed once (counting allocator).
//!
//! Payloads come from `../shared/tools/gen_payload.py` (generated into
//! `target/payloads/` on first run). Run: `cargo bench -p flagsync-core --bench store`.

mod common;

use common::{Pipeline, apply_stream, payload, put_event};

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use flagsync_core::store::Store;

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator and only counts bytes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = CURRENT.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size > layout.size() {
                let now = CURRENT.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size
                    - layout.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                CURRENT.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Feed `bytes` in 16 KiB reads through SSE, FDv1 and the store.
#[derive(serde::Deserialize)]
#[allow(dead_code, reason = "built to be measured, never read")]
struct OfficialAllData {
    flags: HashMap<String, launchdarkly_server_sdk_evaluation::Flag>,
    segments: HashMap<String, launchdarkly_server_sdk_evaluation::Segment>,
}

fn patch_events(keys: &[String], n: usize) -> bytes::Bytes {
    let mut out = Vec::new();
    for i in 0..n {
        let key = &keys[i % keys.len()];
        out.extend_from_slice(
            format!(
                "event: patch\ndata: {{\"path\":\"/flags/{key}\",\"data\":{{\"key\":\"{key}\",\"version\":{},\"on\":true,\"variations\":[true,false],\"fallthrough\":{{\"variation\":0}},\"offVariation\":1,\"salt\":\"s\"}}}}\n\n",
                1_000_000 + i
            )
            .as_bytes(),
        );
    }
    out.into()
}

fn bench(c: &mut Criterion) {
    let large = payload(50_000);
    let put = put_event(&large);

    // Peak heap while the large put goes from bytes to a ready store.
    {
        let base = CURRENT.load(Ordering::Relaxed);
        PEAK.store(base, Ordering::Relaxed);
        // Each read a new buffer, as the HTTP layer hands them out: the store keeps
        // slices of them, so they are counted.
        let mut store = Store::new();
        let mut pipeline = Pipeline::new(true);
        let n: usize = put
            .chunks(16 * 1024)
            .map(|read| pipeline.read(&mut store, &bytes::Bytes::copy_from_slice(read)))
            .sum();
        drop(pipeline);
        let peak = PEAK.load(Ordering::Relaxed) - base;
        println!(
            "peak heap applying the {:.1} MB put ({n} items): {:.1} MB = {:.2}x the payload",
            put.len() as f64 / 1e6,
            peak as f64 / 1e6,
            peak as f64 / put.len() as f64
        );
        let held = CURRENT.load(Ordering::Relaxed) - base;
        println!("heap held by the ready store: {:.1} MB", held as f64 / 1e6);
    }

    let mut g = c.benchmark_group("put_to_store");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Bytes(put.len() as u64));
    // Freeing the result is left out on both sides (`iter_with_large_drop`).
    g.bench_function("flagsync_sse_fdv1_store", |b| {
        b.iter_with_large_drop(|| {
            let mut store = Store::new();
            apply_stream(&mut store, &put);
            store
        })
    });
    g.bench_function("serde_json_official_model", |b| {
        b.iter_with_large_drop(|| serde_json::from_slice::<OfficialAllData>(&large).unwrap())
    });
    g.finish();

    // From the last read of the put to a ready store: what is left to do once the
    // last byte has arrived, with the put read while it arrived or read at the end.
    let mut g = c.benchmark_group("put_last_read_to_store");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    let reads: Vec<bytes::Bytes> = (0..put.len())
        .step_by(16 * 1024)
        .map(|at| put.slice(at..put.len().min(at + 16 * 1024)))
        .collect();
    let (last, before) = reads.split_last().unwrap();
    for (name, read_ahead) in [("read_ahead", true), ("read_at_the_end", false)] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let (mut pipeline, mut store) = (Pipeline::new(read_ahead), Store::new());
                    for read in before {
                        pipeline.read(&mut store, read);
                    }
                    (pipeline, store)
                },
                |(mut pipeline, mut store)| {
                    pipeline.read(&mut store, last);
                    (pipeline, store)
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();

    // Time per MB across sizes. `{N}_flags` parses a different data set of that size
    // each iteration (generated with other seeds), from a fresh copy of its bytes: as a
    // client parses a `put` once, just received. `{N}_flags_same_input` parses one data
    // set over and over, from one buffer: a small one then stays in the caches and the
    // processor's branch predictors learn it, which no client sees.
    let mut g = c.benchmark_group("put_per_mb");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    for (flags, seeds) in [(100usize, 32u64), (5_000, 4), (50_000, 1)] {
        let puts: Vec<bytes::Bytes> = (0..seeds)
            .map(|seed| match seed {
                0 => put_event(&payload(flags)),
                seed => put_event(&common::payload_with_seed(flags, seed)),
            })
            .collect();
        let mean = puts.iter().map(|p| p.len() as u64).sum::<u64>() / seeds;
        g.throughput(Throughput::Bytes(mean));
        let mut next = puts.iter().cycle();
        g.bench_function(format!("{flags}_flags"), |b| {
            b.iter_batched(
                || bytes::Bytes::copy_from_slice(next.next().unwrap()),
                |put| {
                    let mut store = Store::new();
                    apply_stream(&mut store, &put);
                    (store, put)
                },
                BatchSize::PerIteration,
            )
        });
        let put = &puts[0];
        g.throughput(Throughput::Bytes(put.len() as u64));
        g.bench_function(format!("{flags}_flags_same_input"), |b| {
            b.iter_with_large_drop(|| {
                let mut store = Store::new();
                apply_stream(&mut store, put);
                store
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("patches");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(10_000));
    for flags in [100usize, 50_000] {
        let mut store = Store::new();
        apply_stream(&mut store, &put_event(&payload(flags)));
        let keys: Vec<String> = store
            .data()
            .iter(flagsync_core::Kind::Flag)
            .map(|(k, _)| k.to_owned())
            .collect();
        let events = patch_events(&keys, 10_000);
        g.bench_function(format!("10k_patches_on_{flags}_flags"), |b| {
            b.iter_batched(
                || store.clone(),
                |mut s| {
                    let n = apply_stream(&mut s, &events);
                    (n, s)
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
