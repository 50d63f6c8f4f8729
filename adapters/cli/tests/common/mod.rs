//! Test support shared with the SDK's tests (`adapters/tests/common`: a scripted
//! HTTP/1.1 server, TLS certificates) and the Redis crate's (a redis-server started per
//! test; Sentinel and Cluster topologies of them).
#![allow(dead_code, unreachable_pub)]

#[path = "../../../redis/tests/common/redis_server.rs"]
pub mod redis_server;
pub mod serve;
#[path = "../../../tests/common/server.rs"]
pub mod server;
#[path = "../../../tests/common/tls.rs"]
pub mod tls;
#[path = "../../../redis/tests/common/topology.rs"]
pub mod topology;

#[allow(unused_imports)] // not every test binary uses it
pub use server::Server;

/// The head of a 200 event-stream response.
pub const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-LD-EnvID: env-123\r\n\r\n";
