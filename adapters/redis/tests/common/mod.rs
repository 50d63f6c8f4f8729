//! Test support: the SDK's own (`adapters/tests/common`: the runtime harness, a scripted
//! HTTP/1.1 server, TLS certificates) and a redis-server started per test.
#![allow(dead_code, unreachable_pub)]

pub mod redis_server;
#[path = "../../../tests/common/mod.rs"]
mod sdk;
pub mod topology;

#[allow(unused_imports)] // not every test binary uses every helper
pub use sdk::*;
