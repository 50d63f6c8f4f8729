//! Redis stores for [flagsync], in the key layout of every LaunchDarkly SDK
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
//! Both stores have the same three builders: one server (`builder`, a URL), a master
//! that Redis Sentinel watches (`builder_sentinel`), or a Redis Cluster
//! (`builder_cluster`); the setters of [`RedisStoreBuilder`] and
//! [`RedisBigSegmentStoreBuilder`] are the same too (the first adds `pool_size`).
//!
//! ## Behind Redis Sentinel
//! ```no_run
//! # fn demo() -> Result<(), flagsync::persist::StoreError> {
//! let store = flagsync_redis::RedisStore::builder_sentinel(
//!     "mymaster",
//!     ["10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"],
//! )
//! .master_credentials(Some("flagsync"), "s3cret")
//! .build()?;
//! # Ok(()) }
//! ```
//!
//! The sentinels' own credentials go in their URLs (`requirepass`, or an ACL user, in
//! their configuration); when they speak TLS (`rediss://…`) the master is reached over
//! TLS too, with the same `tls_ca_pem` and `tls_client_cert`. The master's own
//! credentials and database are `master_credentials` and `database`.
//!
//! Each new connection asks the sentinels, in order (the one that led to the master
//! last time first), for the master's address (`SENTINEL get-master-addr-by-name`),
//! bounded by the store's timeouts, and checks with `ROLE` that the server there is a
//! master (else it asks the next sentinel). The store asks the sentinels itself rather
//! than through the redis crate's `sentinel` feature so that every step keeps to those
//! timeouts and the blocking reads find the master the same way.
//!
//! On a failover, connections to the old master fail (or answer `READONLY`): each
//! operation meanwhile fails as during any Redis outage (the client's data source
//! status says STORE_ERROR, memory keeps serving), every pooled connection is dropped,
//! and the next one goes to the master the sentinels name then. A writer then writes
//! its whole data set to the new master (the rewrite that follows every store outage),
//! so no change made during the failover, nor one the old master had not passed on to
//! its replica, is lost; daemon-mode readers read from the new master.
//!
//! ## On Redis Cluster
//! ```no_run
//! # fn demo() -> Result<(), flagsync::persist::StoreError> {
//! let store = flagsync_redis::RedisStore::builder_cluster(["10.0.0.1:7000", "10.0.0.2:7000"])
//!     .prefix("{launchdarkly}")
//!     .build()?;
//! # Ok(()) }
//! ```
//!
//! The prefix must hold a non-empty hash tag, as in `{launchdarkly}`; `build` refuses
//! any other with [`StoreError::Config`](flagsync::persist::StoreError::Config). Why:
//! a full write replaces `<prefix>:features`, `<prefix>:segments` and
//! `<prefix>:$inited` in one `MULTI`/`EXEC` transaction, which Redis Cluster runs only
//! when every key hashes to one slot. LaunchDarkly's Node SDK sends the same
//! transaction and fails on a cluster with `CROSSSLOT` when the prefix has no hash
//! tag; its Go SDK (go-redis) splits the full write per node, so a reader can find
//! `$inited` beside half a data set. flagsync keeps the write atomic and refuses,
//! before anything is written, a prefix that cannot work. Every SDK and Relay Proxy
//! sharing the data must use the same prefix, braces included. (The big-segment store
//! needs it as well, so that a context's include and exclude sets are read from one
//! node in one round trip.)
//!
//! Commands go to the node that holds the prefix's slot; a moved slot is followed
//! (`MOVED`, `ASK`), and a failover of that node is an outage of the store until the
//! cluster promotes a replica, healed as after any outage.
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
mod builder;
mod cluster;
mod endpoint;
mod errors;
mod pool;
mod sentinel;
mod store;
mod tls;

pub use big_segments::{RedisBigSegmentStore, RedisBigSegmentStoreBuilder};
pub use store::{RedisStore, RedisStoreBuilder};
#[cfg(feature = "tls")]
pub use tls::crypto_provider_name;

/// The default key prefix of every LaunchDarkly SDK.
pub const DEFAULT_PREFIX: &str = "launchdarkly";

/// The README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
