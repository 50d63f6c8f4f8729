//! Keep a feature-flag store in sync with a LaunchDarkly-compatible flag delivery
//! service, on tokio, smol or async-std.
//!
//! The protocol lives in [`flagsync_core`], a sans-I/O state machine. This crate is the
//! thin shell around it: one driver loop written against a small [`runtime::Runtime`]
//! trait, connection tasks that pump bytes (through a proxy and TLS when needed), and
//! the published snapshot, status and change streams.
//!
//! ```no_run
//! # async fn demo() -> Result<(), flagsync::Error> {
//! use std::time::Duration;
//!
//! let client = flagsync::Client::builder("sdk-key").build()?;
//! client.start()?;
//! if client.wait_for_initialization(Duration::from_secs(5)).await {
//!     if let Some(flag) = client.flag("my-flag") {
//!         println!("{} is on: {}", flag.key, flag.on);
//!     }
//! }
//! client.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Data systems
//! By default the client speaks FDv1: one stream (`/all`), or polling
//! ([`ClientBuilder::polling`]). [`ClientBuilder::fdv2`] chooses the FDv2 data system
//! (`/sdk/stream`, `/sdk/poll`): initializers, then synchronizers with fallback and
//! recovery, and the server-directed FDv1 fallback. [`Client::data_availability`] and
//! [`Client::active_source`] show where the data comes from.
//!
//! # Persistent stores
//! [`ClientBuilder::persistent_store`] also keeps the flags in a database shared by
//! many processes ([`persist`]): one writer keeps it fresh, a restarted service serves
//! the last known flags at once (warm start), and [`ClientBuilder::daemon`] serves
//! what another process wrote without connecting anywhere. [`Client::store_status`]
//! shows outages; after one, the store is given the whole in-memory data again.
//!
//! # Features
//! - `tokio` (default): run on tokio. `start()` must then be called inside a tokio
//!   runtime with its I/O and time drivers enabled.
//! - `smol`: run on smol. `async-std`: run on async-std, which is discontinued upstream
//!   in favour of smol; it is kept working through the async-io path it shares with smol.
//! - `rustls` (default): `https` with rustls and the webpki roots; `native-roots` also
//!   trusts the platform's certificates.
//! - `server`: `flagsync::server`, the local LaunchDarkly-compatible flag server of the
//!   `flagsync-server` crate, for offline development and tests (std threads only, any
//!   runtime).
//! - `eval` (default): flag evaluation (the `eval` module, `Client::bool_variation` and
//!   friends) with flagsync's own engine and context types (crate `flagsync-eval`,
//!   re-exported as `eval::engine` and `eval::context`, the official crate's API), the
//!   `migration` module, evaluation and track hooks (the `hooks` module), and big
//!   segments (the `bigseg` module).
//!
//! Elsewhere: Redis stores in LaunchDarkly's layout are the `flagsync-redis` crate
//! (`RedisStore`, `RedisBigSegmentStore`); the `flagsync` command-line tool (`serve`,
//! `demo`, `watch`, `snapshot`) is `flagsync-cli`.
//!
//! Nothing is logged above `debug`, and the SDK key is never logged.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(unreachable_pub, clippy::use_self, elided_lifetimes_in_paths)]

#[cfg(feature = "eval")]
pub mod bigseg;
mod builder;
mod client;
mod conn;
mod driver;
mod error;
#[cfg(feature = "eval")]
pub mod eval;
#[cfg(feature = "eval")]
pub mod events;
mod external;
pub mod file_source;
mod flag;
#[cfg(feature = "eval")]
pub mod hooks;
mod inbox;
#[cfg(feature = "eval")]
mod listeners;
#[cfg(feature = "eval")]
pub mod migration;
pub mod persist;
mod proxy;
mod publish;
pub mod runtime;
/// The local flag server of crate `flagsync-server` (feature `server`), for tests.
#[cfg(feature = "server")]
pub use flagsync_server as server;
pub mod sse_client;
pub mod test_data;
#[cfg(feature = "tls")]
mod tls;
#[cfg(feature = "tls")]
pub use crypto::crypto_provider_name;
#[cfg(feature = "tls")]
mod crypto;
mod transport;

/// This crate's version, as the `User-Agent` names it (the official SDK's
/// `version_string`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub use builder::ClientBuilder;
pub use client::Client;
pub use error::Error;
pub use external::DataSource;
pub use flag::{Flag, Segment};
pub use flagsync_core::config::{CoordinatorTiming, Fdv2Config, SourceSpec};
pub use flagsync_core::fdv2::PayloadLimits;
pub use flagsync_core::source::UnrecoverablePolicy;
pub use flagsync_core::{DataAvailability, ErrorKind, Kind, Mode, Selector, Snapshot, State};
#[cfg(feature = "eval")]
pub use listeners::{FlagValueChange, FlagValueChanges};
pub use proxy::ProxyError;
pub use publish::{
    DEFAULT_SUBSCRIPTION_CAPACITY, DataSourceError, DataSourceStatus, FlagChange, Subscription,
};

/// The README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// The repository README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct RepositoryReadmeDoctests;
