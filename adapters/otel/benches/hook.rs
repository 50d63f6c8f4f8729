//! The hook's cost per evaluation with no active span (the common case: evaluations
//! outside any traced request), against a client with a hook that does nothing (what
//! running any hook costs the client: the hook machinery alone, issue 41's target
//! ≤ 15 ns over no hook), a client whose hook reads everything it is offered (the
//! default and the result as JSON, the environment id: what reading them costs) and a
//! client without hooks, on the same flags. `floor` is the least a hook can cost in
//! this design: the no-op hook's two stages called by hand through `&dyn Hook`, each in
//! `catch_unwind`, around `bool_variation_detail` (against `floor_baseline`, that call
//! alone); see `examples/count_hook.rs`.
//!
//! Run: `cargo bench -p flagsync-otel --bench hook`.

use std::hint::black_box;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use flagsync::eval::{ContextBuilder, Detail};
use flagsync::hooks::{
    EvaluationDetail, EvaluationSeriesContext, EvaluationSeriesData, Hook, HookError, Metadata,
};
use flagsync_otel::TracingHook;
use serde_json::{Value, json};

/// A hook whose stages do nothing.
struct Noop;

impl Hook for Noop {
    fn metadata(&self) -> Metadata {
        Metadata::new("noop")
    }
}

/// A hook reading everything the series offers, and doing nothing with it.
struct Reader;

impl Hook for Reader {
    fn metadata(&self) -> Metadata {
        Metadata::new("reader")
    }

    fn after_evaluation(
        &self,
        series: &EvaluationSeriesContext<'_>,
        data: EvaluationSeriesData,
        detail: &EvaluationDetail<'_>,
    ) -> Result<EvaluationSeriesData, HookError> {
        black_box((
            series.default_value(),
            series.environment_id(),
            detail.value(),
        ));
        Ok(data)
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
    let reader = make(vec![Arc::new(Reader)]);
    let hooked = make(vec![Arc::new(TracingHook::new())]);
    let alice = ContextBuilder::new("alice").build().unwrap();
    let mut g = c.benchmark_group("otel_hook_no_active_span");
    g.bench_function("without_hook", |b| {
        b.iter(|| black_box(plain.bool_variation(black_box("f"), &alice, false)))
    });
    g.bench_function("with_noop_hook", |b| {
        b.iter(|| black_box(noop.bool_variation(black_box("f"), &alice, false)))
    });
    g.bench_function("with_reading_hook", |b| {
        b.iter(|| black_box(reader.bool_variation(black_box("f"), &alice, false)))
    });
    g.bench_function("with_hook", |b| {
        b.iter(|| black_box(hooked.bool_variation(black_box("f"), &alice, false)))
    });
    let noop_hook: &dyn Hook = &Noop;
    g.bench_function("floor", |b| {
        b.iter(|| {
            let key = black_box("f");
            let series = EvaluationSeriesContext::new(
                key,
                &alice,
                Value::Bool(false),
                "bool_variation",
                None,
            );
            let data = catch_unwind(AssertUnwindSafe(|| {
                noop_hook.before_evaluation(&series, EvaluationSeriesData::new())
            }))
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
            let detail = plain.bool_variation_detail(key, &alice, false);
            let as_json = Detail {
                value: detail.value.map(Value::Bool),
                variation_index: detail.variation_index,
                reason: detail.reason,
            };
            let _ = catch_unwind(AssertUnwindSafe(|| {
                noop_hook.after_evaluation(&series, data, &EvaluationDetail::new(&as_json))
            }));
            as_json.value
        });
    });
    g.bench_function("floor_baseline", |b| {
        b.iter(|| plain.bool_variation_detail(black_box("f"), &alice, false));
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
