//! Test support: the SDK's own (`adapters/tests/common`: the runtime harness, a scripted
//! HTTP/1.1 server, TLS certificates) and a redis-server started per test.
#![allow(dead_code, unreachable_pub)]

pub mod redis_server;
#[path = "../../../tests/common/mod.rs"]
mod sdk;
pub mod topology;

#[allow(unused_imports)] // not every test binary uses every helper
pub use sdk::*;

/// The flags `server` serves now: key → JSON.
pub fn served_flags(
    server: &flagsync_server::ServerHandle,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    let data: serde_json::Value = serde_json::from_str(&server.data_json()).unwrap();
    data["flags"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// redis-cli's `HGETALL` output (field and value lines in turn) of a hash of JSON items:
/// field → JSON (`null` for what is not JSON).
pub fn json_hash(out: &str) -> std::collections::BTreeMap<String, serde_json::Value> {
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
    lines
        .chunks(2)
        .filter(|pair| pair.len() == 2)
        .map(|pair| {
            (
                pair[0].to_owned(),
                serde_json::from_str(pair[1]).unwrap_or(serde_json::Value::Null),
            )
        })
        .collect()
}
