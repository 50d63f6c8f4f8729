//! How long a `TestData::update` takes to reach a `flag_changes` subscriber: the
//! median (and 99th percentile) of 1,000 updates, on tokio. No timer sits between the
//! update and the subscriber: the update wakes the client's source task, which feeds
//! the driver, which applies it and publishes.
//!
//! `cargo run --release -p flagsync --example test_data_latency`

use std::time::{Duration, Instant};

use flagsync::Client;
use flagsync::test_data::TestData;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let td = TestData::new();
        for i in 0..20 {
            td.update(td.flag(&format!("flag-{i}")).variation_for_all(true));
        }
        let client = Client::builder("sdk-key")
            .data_source(td.clone())
            .send_events(false)
            .build()
            .expect("client");
        client.start().expect("start");
        assert!(client.wait_for_initialization(Duration::from_secs(5)).await);
        let changes = client.flag_changes();
        let mut took = Vec::with_capacity(1000);
        for i in 0..1000 {
            let start = Instant::now();
            td.update(td.flag("flag-0").variation_for_all(i % 2 == 0));
            let change = changes.recv().await.expect("a change");
            took.push(start.elapsed());
            assert_eq!(change.key, "flag-0");
        }
        took.sort();
        println!(
            "TestData update -> flag_changes subscriber, 1000 updates, 21 flags: median {:?}, p99 {:?}, max {:?}",
            took[500], took[990], took[999]
        );
        client.close().await;
    });
}
