//! `all_flags_state` over the 5,000-flag payload (`gen_payload.py --size medium`) for
//! one context: flagsync's `Client::all_flags_state` against the official Rust SDK's
//! `all_flags_detail` (3.2.0), both clients loaded from flagsync's local flag server,
//! in one criterion run. With reasons, as a server bootstrapping a browser SDK asks.
//!
//! Run: `cd peers && cargo bench --bench all_flags`.

use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use flagsync::eval::{AllFlagsOptions, ContextBuilder};
use flagsync::server::Server;
use flagsync_peers::{Sink, official, official_context};
use launchdarkly_server_sdk::FlagDetailConfig;
use serde_json::Value;

/// The medium payload, generated on first use into `../target/payloads/`.
fn payload() -> Value {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/payloads");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("flags-5000.json");
    if !path.exists() {
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/tools/gen_payload.py");
        let status = std::process::Command::new("python3")
            .arg(script)
            .args(["--flags", "5000", "-o"])
            .arg(&path)
            .status()
            .expect("python3 runs gen_payload.py");
        assert!(status.success());
    }
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn bench(c: &mut Criterion) {
    let data = payload();
    let flags = data["flags"].as_object().unwrap().len();
    let server = Server::builder().data(data).start().unwrap();
    let sink = Sink::start();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (ours, theirs) = runtime.block_on(async {
        let ours = flagsync::Client::builder("sdk-bench")
            .stream_uri(server.url())
            .polling_uri(server.url())
            .send_events(false)
            .no_proxy()
            .build()
            .unwrap();
        ours.start().unwrap();
        let theirs = official(&server.url(), sink.url());
        theirs.start_with_default_executor();
        let wait = Duration::from_secs(120);
        assert!(ours.wait_for_initialization(wait).await);
        assert_eq!(theirs.wait_for_initialization(wait).await, Some(true));
        (ours, theirs)
    });
    let mut b = ContextBuilder::new("user-00012345");
    b.set_string("country", "DE")
        .set_string("email", "someone@example.com");
    let ctx = b.build().unwrap();
    // The official SDK's copy of the context, made before timing.
    let official_ctx = official_context(&ctx);
    let options = AllFlagsOptions::new().with_reasons(true);
    let mut config = FlagDetailConfig::new();
    config.with_reasons();

    // Both evaluate every flag, with the same values.
    let state = ours.all_flags_state(&ctx, options);
    let detail = theirs.all_flags_detail(&official_ctx, config);
    let ours_json: Value = serde_json::from_str(&state.to_json()).unwrap();
    let theirs_json = serde_json::to_value(&detail).unwrap();
    assert_eq!(state.len(), flags);
    let mut differ = 0;
    for (key, value) in ours_json.as_object().unwrap() {
        if !key.starts_with('$') && theirs_json.get(key) != Some(value) {
            differ += 1;
        }
    }
    eprintln!("{flags} flags; values that differ: {differ}");
    assert_eq!(differ, 0);

    let mut g = c.benchmark_group("all_flags");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(3))
        .measurement_time(Duration::from_secs(8));
    g.bench_function("flagsync/all_flags_state", |b| {
        b.iter(|| ours.all_flags_state(&ctx, options))
    });
    g.bench_function("official/all_flags_detail", |b| {
        b.iter(|| theirs.all_flags_detail(&official_ctx, config))
    });
    g.finish();
    theirs.close();
    runtime.block_on(ours.close());
}

criterion_group!(benches, bench);
criterion_main!(benches);
