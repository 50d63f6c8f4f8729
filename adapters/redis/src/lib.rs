//! Redis stores for [flagsync](flagsync), in the key layout of every LaunchDarkly SDK
//! and the Relay Proxy, so flagsync processes share one store with them:
//!
//! - [`RedisStore`]: a [`PersistentStore`](flagsync::persist::PersistentStore) for
//!   [`ClientBuilder::persistent_store`](flagsync::ClientBuilder::persistent_store): one
//!   writer keeps the flags fresh, a restarted service serves the last known flags at
//!   once, and daemon-mode readers serve what another process wrote.
//! - [`RedisBigSegmentStore`]: a [`BigSegmentStore`](flagsync::bigseg::BigSegmentStore)
//!   for [`ClientBuilder::big_segments`](flagsync::ClientBuilder::big_segments), reading
//!   what the Relay Proxy writes.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use flagsync::persist::{CacheConfig, StoreMode};
//! use flagsync_redis::RedisStore;
//!
//! let store = RedisStore::builder("redis://127.0.0.1:6379/0").prefix("launchdarkly").build()?;
//! let client = flagsync::Client::builder("sdk-key")
//!     .persistent_store(Arc::new(store), StoreMode::ReadWrite, CacheConfig::default())
//!     .build()?;
//! client.start()?;
//! # Ok(())
//! # }
//! ```
//!
//! # Where Redis is
//! One server ([`RedisStore::builder`], a URL), a master that Redis Sentinel watches
//! ([`RedisStore::builder_sentinel`]: failovers are followed), or a Redis Cluster
//! ([`RedisStore::builder_cluster`]: the prefix needs a hash tag such as
//! `{launchdarkly}`); the big-segment store has the same three builders.
//!
//! # Runtimes
//! The redis crate runs on tokio inside a tokio runtime and on async-io (smol,
//! async-std) elsewhere: enable the feature of the runtime the client runs on
//! (`tokio`, the default; `smol`; `async-std`). Nothing of either appears in this API.
//!
//! Passwords in a URL never reach a log, a status or an error.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(unreachable_pub, clippy::use_self, elided_lifetimes_in_paths)]

#[cfg(not(any(feature = "tokio", feature = "smol", feature = "async-std")))]
compile_error!(
    "flagsync-redis needs a runtime feature: `tokio` (the default), `smol` or `async-std`"
);

mod big_segments;
mod cluster;
mod endpoint;
mod errors;
mod pool;
mod sentinel;
mod store;
mod tls;

pub use big_segments::{RedisBigSegmentStore, RedisBigSegmentStoreBuilder};
pub use store::{RedisStore, RedisStoreBuilder};

/// The default key prefix of every LaunchDarkly SDK.
pub const DEFAULT_PREFIX: &str = "launchdarkly";
