//! The "after" program of `MIGRATING.md`: what a small program written for
//! LaunchDarkly's official Rust server SDK (`launchdarkly-server-sdk` 3.x) looks like
//! with flagsync. Build the client, start it, wait for the flags, evaluate, track,
//! close.
//!
//! ```sh
//! LAUNCHDARKLY_SDK_KEY=sdk-... cargo run -p flagsync --example migrating
//! ```
//!
//! Without a reachable flag service the wait times out and every evaluation returns
//! its default value (reason `ERROR`/`CLIENT_NOT_READY`).

use std::time::Duration;

use flagsync::Client;
use flagsync::eval::ContextBuilder;
use flagsync::events::EventsOptions;
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sdk_key = std::env::var("LAUNCHDARKLY_SDK_KEY").unwrap_or_else(|_| "sdk-key".into());

    // ConfigBuilder + ApplicationInfo + EventProcessorBuilder → one ClientBuilder.
    let mut events = EventsOptions::default();
    events.flush_interval = Duration::from_secs(10);
    events.private_attributes = vec!["email".into()];
    let client = Client::builder(sdk_key)
        .application("my-service", "1.2.3")
        .events(events)
        .build()?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        // start_with_default_executor() → start(), inside the tokio runtime.
        client.start()?;
        // Option<bool> → bool: false on a timeout and on a permanent failure alike.
        if !client.wait_for_initialization(Duration::from_secs(5)).await {
            eprintln!("no flags within 5 s: evaluations return their defaults");
        }

        let context = ContextBuilder::new("user-123")
            .name("Sandy")
            .set_string("email", "sandy@example.com")
            .build()?;

        // The flag key comes first, then the context; a string default is a &str.
        let enabled = client.bool_variation("new-checkout", &context, false);
        let banner = client.string_variation("banner-text", &context, "Welcome");
        let limit = client.int_variation_detail("max-items", &context, 10);
        println!(
            "new-checkout={enabled} banner-text={banner:?} max-items={:?} ({:?})",
            limit.value, limit.reason
        );

        // track_metric(context, key, value, data) → track(key, &context, data, metric).
        client.track(
            "checkout-completed",
            &context,
            Some(json!({ "items": 3 })),
            Some(59.9),
        );
        client.identify(&context);
        client.flush();

        // close() is async here: it sends the queued events and waits (at most the
        // close timeout, 5 s by default) for every connection to end.
        client.close().await;
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}
