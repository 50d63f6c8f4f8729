//! `TestData` on every runtime feature: a client initializes without network,
//! evaluates, sees `td.update(...)` through `flag_changes` and a value-change
//! listener; one `TestData` serves two clients, built before and after updates.
#![cfg(feature = "eval")]
#![cfg_attr(
    not(any(feature = "tokio", feature = "smol", feature = "async-std")),
    allow(dead_code, unused_imports)
)]

#[macro_use]
mod common;

use std::time::Duration;

use common::*;
use flagsync::eval::{Context, ContextBuilder};
use flagsync::test_data::TestData;
use flagsync::{Client, DataAvailability, State};
use serde_json::json;

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    a_client_on_test_data_initializes_evaluates_and_sees_updates,
    one_test_data_updates_every_client,
);

fn user(key: &str) -> Context {
    ContextBuilder::new(key).build().unwrap()
}

fn client(rt: &Rt, td: &TestData) -> Client {
    Client::builder(SDK_KEY)
        .runtime(rt.clone())
        .no_proxy()
        // No network at all: a stream URI nobody listens on, events off.
        .stream_uri("http://127.0.0.1:1")
        .send_events(false)
        .close_timeout(3 * SEC)
        .data_source(td.clone())
        .build()
        .unwrap()
}

async fn a_client_on_test_data_initializes_evaluates_and_sees_updates(rt: Rt) {
    let td = TestData::new();
    td.update(td.flag("banner").variation_for_all(true));
    td.update(
        td.flag("color")
            .variations(["red", "green", "blue"])
            .fallthrough_variation_index(0)
            .if_match("country", ["gb"])
            .then_return_index(2),
    );
    let client = client(&rt, &td);
    let statuses = client.status_changes();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(client.status().state, State::Valid);
    assert_eq!(client.data_availability(), DataAvailability::Refreshed);
    assert!(statuses.try_recv().is_some_and(|s| s.state == State::Valid));

    let ann = user("ann");
    let gb = ContextBuilder::new("bob")
        .set_string("country", "gb")
        .build()
        .unwrap();
    assert!(client.bool_variation("banner", &ann, false));
    assert_eq!(client.string_variation("color", &ann, "x"), "red");
    assert_eq!(client.string_variation("color", &gb, "x"), "blue");
    assert!(!client.bool_variation("missing", &ann, false));

    let changes = client.flag_changes();
    let mut values = client.flag_value_changes("banner", &ann, json!(null));
    td.update(td.flag("banner").variation_for_all(false));
    let change = timeout(&rt, 5 * SEC, changes.recv()).await.flatten();
    assert_eq!(change.map(|c| c.key).as_deref(), Some("banner"));
    let value = timeout(&rt, 5 * SEC, values.recv())
        .await
        .flatten()
        .unwrap();
    assert_eq!(
        (value.old_value, value.new_value),
        (json!(true), json!(false))
    );
    assert!(!client.bool_variation("banner", &ann, true));
    assert_eq!(client.flag("banner").unwrap().version, 2);
    assert!(
        changes.try_recv().is_none(),
        "only the updated flag changed"
    );

    // Targets; and a preconfigured flag.
    td.update(td.flag("banner").variation_for_user("ann", true));
    let value = timeout(&rt, 5 * SEC, values.recv())
        .await
        .flatten()
        .unwrap();
    assert_eq!(value.new_value, json!(true));
    td.use_preconfigured_flag(json!({"key": "raw", "on": true, "variations": [7],
        "fallthrough": {"variation": 0}, "salt": ""}));
    assert!(eventually(&rt, 5 * SEC, || client.flag("raw").is_some()).await);
    assert_eq!(
        client.json_variation("raw", &ann, json!(0)).as_f64(),
        Some(7.0)
    );

    client.close().await;
    assert!(client.is_closed());
    assert_eq!(client.status().state, State::Off);
}

async fn one_test_data_updates_every_client(rt: Rt) {
    let td = TestData::new();
    let before = client(&rt, &td);
    td.update(td.flag("f").value_for_all("one"));
    before.start().unwrap();
    assert!(before.wait_for_initialization(5 * SEC).await);
    let after = client(&rt, &td);
    after.start().unwrap();
    assert!(after.wait_for_initialization(5 * SEC).await);
    let ann = user("ann");
    for c in [&before, &after] {
        assert_eq!(c.string_variation("f", &ann, "x"), "one");
    }
    let (a, b) = (before.flag_changes(), after.flag_changes());
    td.update(td.flag("f").value_for_all("two"));
    for s in [&a, &b] {
        let change = timeout(&rt, 5 * SEC, s.recv()).await.flatten();
        assert_eq!(change.map(|c| c.key).as_deref(), Some("f"));
    }
    for c in [&before, &after] {
        assert_eq!(c.string_variation("f", &ann, "x"), "two");
    }
    // A closed client is forgotten; the other still gets updates.
    before.close().await;
    td.update(td.flag("f").value_for_all("three"));
    let change = timeout(&rt, 5 * SEC, b.recv()).await.flatten();
    assert_eq!(change.map(|c| c.key).as_deref(), Some("f"));
    assert_eq!(after.string_variation("f", &ann, "x"), "three");
    after.close().await;
}
