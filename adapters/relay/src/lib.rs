//! A LaunchDarkly-compatible relay to embed: the environments of a [`RelayConfig`], each
//! kept in sync with its upstream flag service by a [flagsync] client and served to
//! downstream SDKs by a [`flagsync_server`] server, as `flagsync serve --relay` runs
//! them.
//!
//! - Each environment's client uses FDv2 (the default data system: a poll, then the
//!   stream with polling as its fallback) or FDv1 streaming, as
//!   [`RelayConfig::protocol`] says.
//! - What the client holds is diffed into the server's environment of the same name:
//!   the first full data set, then each change as a patch (a flag or segment set or
//!   deleted), and a whole replacement when keys vanished or many changed at once.
//! - With [`RelayBuilder::redis`], each environment is also written to Redis as it
//!   goes (write-through, LaunchDarkly's key layout), under its
//!   [`redis_prefix`](RelayEnvironment::redis_prefix) or the store builder's prefix.
//! - The analytics events SDKs post to the relay are forwarded, unchanged, to the
//!   environment's events service ([`RelayEnvironment::events_uri`]): server-side,
//!   client-side (browser) and mobile payloads each to their own endpoint.
//! - Client-side (JavaScript) and mobile SDKs are served from the same data, each
//!   environment chosen by its client-side ID ([`RelayEnvironment::env_id`]) or mobile
//!   key ([`RelayEnvironment::mobile_key`]); its goals are fetched from
//!   [`RelayEnvironment::client_side_uri`] and served.
//!
//! The relay runs its clients and sync loops on a tokio runtime of its own, so
//! [`RelayBuilder::start`] works from a plain `fn main` and from inside any async
//! runtime alike. See [`Relay::builder`] for an example.
//!
//! Logs go through [`tracing`] (target `flagsync_relay`): never an SDK key, an
//! `Authorization` header, a password or the credentials of a URL.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod builder;
mod error;
mod forward;
mod goals;
mod handle;
mod redact;
mod served;
mod status;
mod sync;
mod upstream;

pub use builder::{Relay, RelayBuilder};
pub use error::RelayError;
pub use flagsync_server::{RelayConfig, RelayEnvironment, UpstreamProtocol};
pub use forward::ForwardReport;
pub use handle::RelayHandle;
pub use redact::redact_userinfo;

/// The README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
