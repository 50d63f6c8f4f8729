//! Instructions per resolution, for callgrind: the provider against the direct client
//! call, each case in a function of its own (`run_*`), 10,000 calls each.
//!
//! ```sh
//! cargo build --profile bench -p flagsync-openfeature --example count_resolve
//! valgrind --tool=callgrind --toggle-collect='count_resolve::run_*' \
//!   target/release/examples/count_resolve
//! callgrind_annotate --inclusive=yes callgrind.out.<pid> | grep run_
//! ```

use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use flagsync::Client;
use flagsync::eval::{Context, ContextBuilder};
use flagsync_openfeature::{FlagsyncProvider, resolve};
use futures_lite::future::block_on;
use open_feature::provider::{FeatureProvider, ResolutionDetails};
use open_feature::{EvaluationContext, EvaluationResult};
use serde_json::json;

const N: usize = 10_000;
const KEY: &str = "sdk-count";

#[inline(never)]
fn run_client_prebuilt(client: &Client, context: &Context) {
    for _ in 0..N {
        black_box(client.bool_variation_detail("flag", black_box(context), false));
    }
}

#[inline(never)]
fn run_client_fresh(client: &Client, keys: &[String]) {
    for key in keys {
        let context = ContextBuilder::new(key.as_str())
            .set_string("email", "ada@example.com")
            .set_float("age", 36.0)
            .build()
            .unwrap();
        black_box(client.bool_variation_detail("flag", &context, false));
    }
}

/// The provider's work with a flagsync context at hand (see the bench's `floor`).
fn boxed_resolution<'a>(
    client: &'a Client,
    context: &'a Context,
) -> Pin<Box<dyn Future<Output = EvaluationResult<ResolutionDetails<bool>>> + Send + 'a>> {
    Box::pin(async move {
        resolve::resolution(client.bool_variation_detail("flag", context, false), false)
    })
}

#[inline(never)]
fn run_floor(client: &Client, context: &Context) {
    for _ in 0..N {
        black_box(block_on(boxed_resolution(client, black_box(context))).unwrap());
    }
}

#[inline(never)]
fn run_provider_repeated(provider: &FlagsyncProvider, context: &EvaluationContext) {
    for _ in 0..N {
        black_box(block_on(provider.resolve_bool_value("flag", black_box(context))).unwrap());
    }
}

#[inline(never)]
fn run_provider_fresh(provider: &FlagsyncProvider, contexts: &[EvaluationContext]) {
    for context in contexts {
        black_box(block_on(provider.resolve_bool_value("flag", context)).unwrap());
    }
}

#[inline(never)]
fn run_provider_twice(provider: &FlagsyncProvider, contexts: &[EvaluationContext]) {
    for context in contexts {
        black_box(block_on(provider.resolve_bool_value("flag", context)).unwrap());
        black_box(block_on(provider.resolve_bool_value("flag", context)).unwrap());
    }
}

fn main() {
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
            Client::builder(KEY)
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
    let keys: Vec<String> = (0..N).map(|i| format!("user-{i}")).collect();
    let of = |key: &str| {
        EvaluationContext::default()
            .with_targeting_key(key)
            .with_custom_field("email", "ada@example.com")
            .with_custom_field("age", 36_i64)
    };
    let contexts: Vec<EvaluationContext> = keys.iter().map(|k| of(k)).collect();
    let twice: Vec<EvaluationContext> = keys.iter().map(|k| of(&format!("{k}-2"))).collect();
    let context = ContextBuilder::new("user-123")
        .set_string("email", "ada@example.com")
        .set_float("age", 36.0)
        .build()
        .unwrap();
    let repeated = of("user-123");
    // Warm: the flag's model compiled, the repeated context cached.
    for _ in 0..3 {
        block_on(provider.resolve_bool_value("flag", &repeated)).unwrap();
    }
    run_client_prebuilt(&client, &context);
    run_floor(&client, &context);
    run_client_fresh(&client, &keys);
    run_provider_repeated(&provider, &repeated);
    run_provider_fresh(&provider, &contexts);
    run_provider_twice(&provider, &twice);
}
