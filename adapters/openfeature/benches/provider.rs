//! An OpenFeature evaluation through the provider against the same `Client` call, on one
//! initialized client (flags served by an in-process `flagsync-server`): the issue's
//! target is at most 1.15× the client's cost.
//!
//! - `client/prebuilt_context`: `bool_variation_detail` with a context built once;
//! - `client/context_per_call`: the same, building the flagsync context each call (what
//!   the provider does with OpenFeature's context);
//! - `provider/resolve_bool_value`: `FeatureProvider::resolve_bool_value`;
//! - `openfeature_client/get_bool_details`: through OpenFeature's `Client` (context
//!   merging, hooks, the provider registry's lock).
//!
//! `cargo bench -p flagsync-openfeature --bench provider`

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use flagsync::eval::ContextBuilder;
use flagsync_openfeature::FlagsyncProvider;
use futures_lite::future::block_on;
use open_feature::provider::FeatureProvider;
use open_feature::{EvaluationContext, OpenFeature};
use serde_json::json;

const KEY: &str = "sdk-bench";

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

    let mut g = c.benchmark_group("bool_evaluation");
    g.bench_function("client/prebuilt_context", |b| {
        b.iter(|| client.bool_variation_detail("flag", &context, false))
    });
    g.bench_function("client/context_per_call", |b| {
        b.iter(|| client.bool_variation_detail("flag", &build(), false))
    });
    g.bench_function("provider/resolve_bool_value", |b| {
        b.iter(|| block_on(provider.resolve_bool_value("flag", &of_context)).unwrap())
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
