//! Shared set-up of the adapters' benches: a realistic 50,000-flag payload from
//! `../shared/tools/gen_payload.py` (generated into `target/payloads/` on first run),
//! made heavier where the benches need it, served by the local flag server to a real
//! client on tokio.
#![allow(dead_code, reason = "each bench uses part of it")]

use std::time::Duration;

use flagsync::Client;
use flagsync::server::{Server, ServerHandle};
use serde_json::{Value, json};

/// The payload generator the core's benches use.
#[path = "../../../core/benches/common/mod.rs"]
mod core_benches;

pub use core_benches::payload;

/// The first flag (by key) that is on, serves booleans, has no prerequisites, and has
/// at least two rules of which a later one is a single `segmentMatch` clause: its key
/// and the first segment that clause names.
pub fn realistic_flag(data: &Value) -> (String, String) {
    let flags = data["flags"].as_object().unwrap();
    let mut keys: Vec<&String> = flags.keys().collect();
    keys.sort();
    for key in keys {
        let f = &flags[key];
        let rules = f["rules"].as_array().unwrap();
        if f["on"] != json!(true)
            || f["variations"] != json!([true, false])
            || !f["prerequisites"].as_array().unwrap().is_empty()
            || rules.len() < 2
        {
            continue;
        }
        for rule in &rules[1..] {
            let clause = &rule["clauses"][0];
            if clause["op"] == "segmentMatch" && rule["clauses"].as_array().unwrap().len() == 1 {
                let segment = clause["values"][0].as_str().unwrap().to_owned();
                if data["segments"].get(&segment).is_some() {
                    return (key.clone(), segment);
                }
            }
        }
    }
    panic!("no flag fits");
}

/// 10,000 user keys in the generator's format.
pub fn segment_keys() -> Vec<String> {
    (0..10_000u64)
        .map(|i| format!("user-{:08}", i * 7_919 % 100_000_000))
        .collect()
}

/// A migration flag that serves `stage` to everyone.
pub fn migration_flag(key: &str, stage: usize) -> Value {
    json!({"key": key, "version": 1, "on": true, "salt": "m", "targets": [], "rules": [],
        "prerequisites": [], "fallthrough": {"variation": stage}, "offVariation": 0,
        "variations": ["off", "dualwrite", "shadow", "live", "rampdown", "complete"],
        "trackEvents": false})
}

/// A started client with `data`, and what keeps it alive.
pub struct Live {
    pub client: Client,
    pub server: ServerHandle,
    pub runtime: tokio::runtime::Runtime,
}

/// Serve `data` locally and wait for a client to load it.
pub fn live(data: Value) -> Live {
    let server = Server::builder().data(data).start().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let client = runtime.block_on(async {
        let client = Client::builder("sdk-bench")
            .stream_uri(server.url())
            .polling_uri(server.url())
            .no_proxy()
            .build()
            .unwrap();
        client.start().unwrap();
        assert!(
            client
                .wait_for_initialization(Duration::from_secs(120))
                .await
        );
        client
    });
    Live {
        client,
        server,
        runtime,
    }
}
