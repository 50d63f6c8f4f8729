//! An OpenFeature evaluation through the provider against the same `Client` call, on one
//! initialized client (flags served by an in-process `flagsync-server`; issue 41's
//! targets: a repeated context ≤ 1.3× `client/prebuilt_context`, a fresh context each
//! call ≤ 1.2× `client/fresh_context_per_call`).
//!
//! - `client/prebuilt_context`: `bool_variation_detail` with a context built once;
//! - `client/context_per_call`: the same, building the flagsync context each call;
//! - `client/fresh_context_per_call`: the same, each call another user (key from a pool);
//! - `provider/resolve_bool_value`: `FeatureProvider::resolve_bool_value`, the same
//!   OpenFeature context each call (found in the provider's context cache);
//! - `provider/resolve_bool_value_fresh_context`: each call another OpenFeature context
//!   (65,536 prebuilt, so none is seen twice within the cache's memory: every call a
//!   miss that converts);
//! - `provider/resolve_bool_value_each_context_twice`: each context twice in a row, then
//!   never again: a miss, then a miss that stores the context (the cost of storing);
//! - `provider/resolve_bool_value_no_cache`: the cache turned off, the same context (a
//!   conversion each call, as before the cache);
//! - `floor/boxed_resolution`: what open-feature 0.3's API costs with no context work at
//!   all: the direct call with the prebuilt context, in a boxed future (as
//!   `async_trait` makes the provider's) and made into a `ResolutionDetails` (its
//!   owned variant and reason strings);
//! - `openfeature_client/get_bool_details`: through OpenFeature's `Client` (context
//!   merging, hooks, the provider registry's lock).
//!
//! `cargo bench -p flagsync-openfeature --bench provider`

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use flagsync::eval::ContextBuilder;
use flagsync_openfeature::{FlagsyncProvider, resolve};
use futures_lite::future::block_on;
use open_feature::provider::{FeatureProvider, ResolutionDetails};
use open_feature::{EvaluationContext, EvaluationResult, OpenFeature};
use serde_json::json;

const KEY: &str = "sdk-bench";

/// The provider's work with a flagsync context at hand: the floor of any provider on
/// open-feature 0.3 (see the module's documentation).
fn boxed_resolution<'a>(
    client: &'a flagsync::Client,
    context: &'a flagsync::eval::Context,
) -> Pin<Box<dyn Future<Output = EvaluationResult<ResolutionDetails<bool>>> + Send + 'a>> {
    Box::pin(async move {
        resolve::resolution(client.bool_variation_detail("flag", context, false), false)
    })
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let flag = json!({"key": "flag", "version": 1, "on": true, "salt": "s", "targets": [],
        "contextTargets": [], "prerequisites": [], "offVariation": 1, "variations": [true, false],
        "fallthrough": {"variation": 0}, "trackEvents": false,
        "rules": [{"id": "r", "variation": 1, "trackEvents": false, "clauses": [
            {"attribute": "email", "op": "endsWith", "values": ["@example.org"], "negate": false}]}]});
    let server = flagsync_server::Server::builder()
        .sdk_key(Some(KEY.to_owned()))
        .data(json!({"flags": {"flag": flag}, "segments": {}}))
        .start()
        .unwrap();
    let client = rt.block_on(async {
        let client = Arc::new(
            flagsync::Client::builder(KEY)
                .stream_uri(server.url())
                .no_proxy()
                .send_events(false)
                .build()
                .unwrap(),
        );
        client.start().unwrap();
        assert!(
            client
                .wait_for_initialization(Duration::from_secs(10))
                .await
        );
        client
    });
    let provider = FlagsyncProvider::new(client.clone());
    let of_context = EvaluationContext::default()
        .with_targeting_key("user-123")
        .with_custom_field("email", "ada@example.com")
        .with_custom_field("age", 36_i64);
    let build = || {
        ContextBuilder::new("user-123")
            .set_string("email", "ada@example.com")
            .set_float("age", 36.0)
            .build()
            .unwrap()
    };
    let context = build();

    const POOL: usize = 1 << 16;
    let keys: Vec<String> = (0..POOL).map(|i| format!("user-{i}")).collect();
    let of_pool: Vec<EvaluationContext> = keys
        .iter()
        .map(|k| {
            EvaluationContext::default()
                .with_targeting_key(k.as_str())
                .with_custom_field("email", "ada@example.com")
                .with_custom_field("age", 36_i64)
        })
        .collect();
    let uncached = FlagsyncProvider::new(client.clone()).with_context_cache(0, 0);

    let mut g = c.benchmark_group("bool_evaluation");
    g.bench_function("client/prebuilt_context", |b| {
        b.iter(|| client.bool_variation_detail("flag", &context, false))
    });
    g.bench_function("client/context_per_call", |b| {
        b.iter(|| client.bool_variation_detail("flag", &build(), false))
    });
    let mut i = 0;
    g.bench_function("client/fresh_context_per_call", |b| {
        b.iter(|| {
            i = (i + 1) % POOL;
            let context = ContextBuilder::new(keys[i].as_str())
                .set_string("email", "ada@example.com")
                .set_float("age", 36.0)
                .build()
                .unwrap();
            client.bool_variation_detail("flag", &context, false)
        })
    });
    g.bench_function("floor/boxed_resolution", |b| {
        b.iter(|| block_on(boxed_resolution(&client, &context)).unwrap())
    });
    g.bench_function("provider/resolve_bool_value", |b| {
        b.iter(|| block_on(provider.resolve_bool_value("flag", &of_context)).unwrap())
    });
    let mut i = 0;
    g.bench_function("provider/resolve_bool_value_fresh_context", |b| {
        b.iter(|| {
            i = (i + 1) % POOL;
            block_on(provider.resolve_bool_value("flag", &of_pool[i])).unwrap()
        })
    });
    let mut i = 0;
    g.bench_function("provider/resolve_bool_value_each_context_twice", |b| {
        b.iter(|| {
            i = (i + 1) % (2 * POOL);
            block_on(provider.resolve_bool_value("flag", &of_pool[i / 2])).unwrap()
        })
    });
    g.bench_function("provider/resolve_bool_value_no_cache", |b| {
        b.iter(|| block_on(uncached.resolve_bool_value("flag", &of_context)).unwrap())
    });
    let (api_client, _api) = rt.block_on(async {
        let mut api = OpenFeature::default();
        api.set_provider(provider.clone()).await;
        (api.create_client(), api)
    });
    g.bench_function("openfeature_client/get_bool_details", |b| {
        b.iter(|| block_on(api_client.get_bool_details("flag", Some(&of_context), None)).unwrap())
    });
    g.finish();
    drop(server);
}

criterion_group!(benches, bench);
criterion_main!(benches);
