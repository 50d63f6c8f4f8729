//! Instructions per evaluation, for callgrind: the same bool evaluation on clients
//! without hooks, with a hook whose stages do nothing, with a hook reading everything
//! the series offers, and with `TracingHook` (no active span); each case in a function
//! of its own (`run_*`; their loops differ so that the linker cannot merge them),
//! 10,000 evaluations each (plus 0, 1, 2, 3). `run_floor` is the least a hook can
//! cost in this design (its two stages through `dyn Hook`, each in `catch_unwind`),
//! against `run_floor_baseline`, the same evaluation with no hook.
//!
//! ```sh
//! cargo build --profile bench -p flagsync-otel --example count_hook
//! valgrind --tool=callgrind --toggle-collect='count_hook::run_*' target/release/examples/count_hook
//! callgrind_annotate --inclusive=yes callgrind.out.<pid> | grep run_
//! ```

use std::hint::black_box;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use flagsync::Client;
use flagsync::eval::{Context, ContextBuilder, Detail};
use flagsync::hooks::{
    EvaluationDetail, EvaluationSeriesContext, EvaluationSeriesData, Hook, HookError, Metadata,
};
use flagsync_otel::TracingHook;
use serde_json::{Value, json};

const N: usize = 10_000;

/// A hook whose stages do nothing.
struct Noop;

impl Hook for Noop {
    fn metadata(&self) -> Metadata {
        Metadata::new("noop")
    }
}

/// A hook reading everything the series offers.
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

#[inline(never)]
fn run_without_hook(client: &Client, context: &Context) {
    for _ in 0..N {
        black_box(client.bool_variation(black_box("f"), context, false));
    }
}

#[inline(never)]
fn run_noop_hook(client: &Client, context: &Context) {
    for _ in 0..N + 1 {
        black_box(client.bool_variation(black_box("f"), context, false));
    }
}

#[inline(never)]
fn run_reading_hook(client: &Client, context: &Context) {
    for _ in 0..N + 2 {
        black_box(client.bool_variation(black_box("f"), context, false));
    }
}

#[inline(never)]
fn run_tracing_hook(client: &Client, context: &Context) {
    for _ in 0..N + 3 {
        black_box(client.bool_variation(black_box("f"), context, false));
    }
}

/// The floor of the design: the least a hook can cost while it keeps the public hook API
/// and containment (a hook's panic never reaches the caller) — the two stages called
/// through `&dyn Hook`, each inside `catch_unwind`, around the evaluation, with a
/// series context and a result built by hand (a `Value::Bool` default, no environment
/// id), and nothing else: no hook list, no data slots, no laziness.
#[inline(never)]
fn run_floor(client: &Client, context: &Context, hook: &dyn Hook) {
    for _ in 0..N + 4 {
        let key = black_box("f");
        let series =
            EvaluationSeriesContext::new(key, context, Value::Bool(false), "bool_variation", None);
        let data = catch_unwind(AssertUnwindSafe(|| {
            hook.before_evaluation(&series, EvaluationSeriesData::new())
        }))
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
        let detail = client.bool_variation_detail(key, context, false);
        let as_json = Detail {
            value: detail.value.map(Value::Bool),
            variation_index: detail.variation_index,
            reason: detail.reason,
        };
        let _ = catch_unwind(AssertUnwindSafe(|| {
            hook.after_evaluation(&series, data, &EvaluationDetail::new(&as_json))
        }));
        black_box(as_json.value);
    }
}

/// The floor's evaluation alone (`bool_variation_detail`, no hook), its baseline.
#[inline(never)]
fn run_floor_baseline(client: &Client, context: &Context) {
    for _ in 0..N + 5 {
        black_box(client.bool_variation_detail(black_box("f"), context, false));
    }
}

fn main() {
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
        let client = Client::builder("sdk-key")
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
    let tracing = make(vec![Arc::new(TracingHook::new())]);
    let alice = ContextBuilder::new("alice").build().unwrap();
    for client in [&plain, &noop, &reader, &tracing] {
        assert!(client.bool_variation("f", &alice, false));
    }
    run_without_hook(&plain, &alice);
    run_noop_hook(&noop, &alice);
    run_reading_hook(&reader, &alice);
    run_tracing_hook(&tracing, &alice);
    run_floor(&plain, &alice, &Noop);
    run_floor_baseline(&plain, &alice);
}
