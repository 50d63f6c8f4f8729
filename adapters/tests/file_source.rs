//! The file data source on every runtime feature: a client on LaunchDarkly's flag
//! files (JSON and YAML, merged) evaluates; an edit is seen by `flag_changes` and a
//! value-change listener; a malformed edit keeps the old values and reports
//! INTERRUPTED with INVALID_DATA, then a good one recovers.
#![cfg(all(feature = "eval", feature = "yaml"))]
#![cfg_attr(
    not(any(feature = "tokio", feature = "smol", feature = "async-std")),
    allow(dead_code, unused_imports)
)]

#[macro_use]
mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use flagsync::eval::ContextBuilder;
use flagsync::file_source::FileOptions;
use flagsync::{Client, ErrorKind, State};
use serde_json::json;

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    a_client_on_files_evaluates_and_follows_edits,
    a_duplicate_across_files_is_invalid_data,
);

/// A fresh folder for one test.
fn folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "flagsync-files-{}-{name}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Write `text` to `path` with a new modification time (atomically, by renaming).
fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn client(rt: &Rt, paths: &[PathBuf]) -> Client {
    Client::builder(SDK_KEY)
        .runtime(rt.clone())
        .no_proxy()
        .send_events(false)
        .close_timeout(3 * SEC)
        .file_data_source(
            paths.to_vec(),
            FileOptions::default().reload(Some(Duration::from_millis(10))),
        )
        .build()
        .unwrap()
}

async fn a_client_on_files_evaluates_and_follows_edits(rt: Rt) {
    let dir = folder("edits");
    let json_file = dir.join("flags.json");
    let yaml_file = dir.join("more.yaml");
    write(
        &json_file,
        r#"{"flagValues": {"banner": "blue"},
            "flags": {"beta": {"on": true, "variations": [false, true],
                "fallthrough": {"variation": 0}, "offVariation": 0, "salt": "",
                "rules": [{"id": "r", "variation": 1, "clauses": [{"contextKind": "user",
                    "attribute": "key", "op": "segmentMatch", "values": ["testers"], "negate": false}]}]}}}"#,
    );
    write(&yaml_file, "segments:\n  testers:\n    included: [ann]\n");
    let client = client(&rt, &[json_file.clone(), yaml_file.clone()]);
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(client.status().state, State::Valid);
    let ann = ContextBuilder::new("ann").build().unwrap();
    let bob = ContextBuilder::new("bob").build().unwrap();
    assert_eq!(client.string_variation("banner", &ann, "x"), "blue");
    assert!(
        client.bool_variation("beta", &ann, false),
        "the YAML segment"
    );
    assert!(!client.bool_variation("beta", &bob, true));

    // An edit that does not touch versions reaches subscribers.
    let changes = client.flag_changes();
    let mut values = client.flag_value_changes("banner", &ann, json!(null));
    let statuses = client.status_changes();
    write(
        &json_file,
        r#"{"flagValues": {"banner": "red", "beta": true}}"#,
    );
    let change = timeout(&rt, 5 * SEC, values.recv())
        .await
        .flatten()
        .unwrap();
    assert_eq!(
        (change.old_value, change.new_value),
        (json!("blue"), json!("red"))
    );
    let mut keys = vec![];
    while keys.len() < 2 {
        let c = timeout(&rt, 5 * SEC, changes.recv())
            .await
            .flatten()
            .unwrap();
        keys.push(c.key);
    }
    keys.sort();
    assert_eq!(keys, ["banner", "beta"]);
    assert!(client.bool_variation("beta", &bob, false));

    // A malformed edit: the old values stay, the status says why.
    write(&json_file, r#"{"flagValues": {"banner": "#);
    let interrupted = timeout(&rt, 5 * SEC, async {
        loop {
            match statuses.recv().await {
                Some(s) if s.state == State::Interrupted => return Some(s),
                Some(_) => {}
                None => return None,
            }
        }
    })
    .await
    .flatten()
    .expect("INTERRUPTED");
    let error = interrupted.error.expect("an error");
    assert_eq!(error.kind, ErrorKind::InvalidData);
    assert!(error.message.contains("flags.json"), "{}", error.message);
    assert_eq!(client.string_variation("banner", &ann, "x"), "red");

    // Fixed: VALID again, with the new value.
    write(&json_file, r#"{"flagValues": {"banner": "green"}}"#);
    let change = timeout(&rt, 5 * SEC, values.recv())
        .await
        .flatten()
        .unwrap();
    assert_eq!(change.new_value, json!("green"));
    assert!(eventually(&rt, 5 * SEC, || client.status().state == State::Valid).await);
    assert!(client.flag("beta").is_none(), "removed from the file");
    client.close().await;
    let _ = std::fs::remove_dir_all(dir);
}

async fn a_duplicate_across_files_is_invalid_data(rt: Rt) {
    let dir = folder("dup");
    let (a, b) = (dir.join("a.json"), dir.join("b.yml"));
    write(&a, r#"{"flagValues": {"f": 1}}"#);
    write(&b, "flagValues:\n  f: 2\n");
    let client = client(&rt, &[a, b.clone()]);
    client.start().unwrap();
    assert!(!client.wait_for_initialization(SEC / 5).await);
    let status = client.status();
    assert_eq!(status.state, State::Initializing);
    let error = status.error.expect("an error");
    assert_eq!(error.kind, ErrorKind::InvalidData);
    assert!(error.message.contains("\"f\""), "{}", error.message);
    write(&b, "flagValues:\n  g: 2\n");
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(client.status().state, State::Valid);
    client.close().await;
    let _ = std::fs::remove_dir_all(dir);
}
