//! The README's example: code written against OpenFeature, tested with flags from
//! flagsync's `TestData` behind the provider (no server), and an update seen.

use std::sync::Arc;

use flagsync::test_data::TestData;
use flagsync_openfeature::FlagsyncProvider;
use open_feature::{EvaluationContext, OpenFeature};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openfeature_code_under_test_reads_test_data() {
    let td = TestData::new();
    td.update(td.flag("dark-mode").variation_for_all(true));
    let client = Arc::new(
        flagsync::Client::builder("sdk-key")
            .data_source(td.clone())
            .send_events(false)
            .build()
            .unwrap(),
    );
    let mut api = OpenFeature::singleton_mut().await;
    api.set_provider(FlagsyncProvider::new(client.clone()))
        .await; // starts it, waits
    let features = api.create_client();
    drop(api);
    let context = EvaluationContext::default().with_targeting_key("user-123");
    assert!(
        features
            .get_bool_value("dark-mode", Some(&context), None)
            .await
            .unwrap()
    );
    let details = features
        .get_bool_details("dark-mode", Some(&context), None)
        .await
        .unwrap();
    assert_eq!(details.variant.as_deref(), Some("0"));

    // The update reaches the client through its driver: within a moment, not at once.
    td.update(td.flag("dark-mode").variation_for_user("user-123", false));
    let mut off = false;
    for _ in 0..200 {
        off = !features
            .get_bool_value("dark-mode", Some(&context), None)
            .await
            .unwrap();
        if off {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(off, "the update reached the provider");
    let other = EvaluationContext::default().with_targeting_key("user-456");
    assert!(
        features
            .get_bool_value("dark-mode", Some(&other), None)
            .await
            .unwrap()
    );
    client.close().await;
}
