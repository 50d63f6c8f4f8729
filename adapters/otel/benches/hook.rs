//! The hook's cost per evaluation with no active span (the common case: evaluations
//! outside any traced request), against a client with a hook that does nothing (what
//! running any hook costs the client: the series context, the value as JSON) and a
//! client without hooks, on the same flags.
//!
//! Run: `cargo bench -p flagsync-otel --bench hook`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use flagsync::eval::ContextBuilder;
use flagsync::hooks::{Hook, Metadata};
use flagsync_otel::TracingHook;
use serde_json::json;

/// A hook whose stages do nothing.
struct Noop;

impl Hook for Noop {
    fn metadata(&self) -> Metadata {
        Metadata::new("noop")
    }
}

fn bench(c: &mut Criterion) {
    let server = flagsync::server::Server::builder()
        .data(
            json!({"flags": {"f": {"key": "f", "version": 1, "on": true, "salt": "s",
            "variations": [false, true], "fallthrough": {"variation": 0}, "offVariation": 0,
            "targets": [{"values": ["alice"], "variation": 1}], "rules": [],
            "prerequisites": []}}}),
        )
        .start()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let make = |hooks: Vec<Arc<dyn Hook>>| {
        let client = flagsync::Client::builder("sdk-key")
            .stream_uri(server.url())
            .polling_uri(server.url())
            .send_events(false)
            .no_proxy()
            .hooks(hooks)
            .build()
            .unwrap();
        rt.block_on(async {
            client.start().unwrap();
            assert!(client.wait_for_initialization(Duration::from_secs(5)).await);
        });
        client
    };
    let plain = make(Vec::new());
    let noop = make(vec![Arc::new(Noop)]);
    let hooked = make(vec![Arc::new(TracingHook::new())]);
    let alice = ContextBuilder::new("alice").build().unwrap();
    let mut g = c.benchmark_group("otel_hook_no_active_span");
    g.bench_function("without_hook", |b| {
        b.iter(|| black_box(plain.bool_variation(black_box("f"), &alice, false)))
    });
    g.bench_function("with_noop_hook", |b| {
        b.iter(|| black_box(noop.bool_variation(black_box("f"), &alice, false)))
    });
    g.bench_function("with_hook", |b| {
        b.iter(|| black_box(hooked.bool_variation(black_box("f"), &alice, false)))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
