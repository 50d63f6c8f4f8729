//! flagsync's flag evaluation engine: LaunchDarkly's evaluation rules as pure functions
//! of a flag, a context and the flags and segments it refers to.
//!
//! It is the engine of the [flagsync] SDK's `Client` (`bool_variation` and friends),
//! and it runs just as well without it: over the protocol core's
//! [`Snapshot`](flagsync_core::Snapshot) in a program that drives
//! [`flagsync_core::DataSystem`] from its own event loop, or over flags you hold
//! yourself through the [`Store`] trait. Like the core it does no I/O and reads no
//! clock, spawns no thread, takes no lock and keeps no global: the same inputs give the
//! same detail. (`core/clippy.toml` holds it to that.)
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`context`] | [`Context`] and its builders, [`Reference`], [`AttributeValue`], [`FlagValue`]: the API and JSON of the official `launchdarkly-server-sdk-evaluation` crate |
//! | [`engine`] | [`Flag`] and [`Segment`] compiled from JSON, [`evaluate`], [`Detail`] and [`Reason`] |
//! | `models` | compiled models kept beside a snapshot's items ([`Models`], [`SlotModels`]), [`evaluate_flag`] over a snapshot |
//! | `all_flags` | [`flags_state`]: every flag for one context, as client-side SDKs bootstrap from |
//! | `secure_mode` | [`SecureModeKey`]: the secure mode hash |
//!
//! ```
//! use flagsync_eval::{ContextBuilder, Detail, Flag, FlagValue, Options, Reason, Segment, Store, evaluate};
//! use std::sync::Arc;
//!
//! struct NoOthers; // a flag without prerequisites or segment rules needs no store
//! impl Store for NoOthers {
//!     fn flag(&self, _: &str) -> Option<Arc<Flag>> { None }
//!     fn segment(&self, _: &str) -> Option<Arc<Segment>> { None }
//! }
//!
//! let flag = Flag::from_json(br#"{"key":"beta","version":3,"on":true,
//!     "variations":[false,true],"offVariation":0,"fallthrough":{"variation":0},
//!     "targets":[{"values":["u1"],"variation":1}]}"#, "beta").unwrap();
//! let context = ContextBuilder::new("u1").build().unwrap();
//! let detail = evaluate(&NoOthers, &flag, &context, Options::default());
//! assert_eq!(detail.value, Some(&FlagValue::Bool(true)));
//! assert_eq!(detail.reason, Reason::target_match());
//! ```
//!
//! [flagsync]: https://docs.rs/flagsync
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(unreachable_pub, clippy::use_self, elided_lifetimes_in_paths)]

mod all_flags;
pub mod context;
pub mod engine;
mod equality;
mod models;
#[cfg(test)]
mod official;
mod secure_mode;
#[cfg(test)]
mod tests;

pub use all_flags::{AllFlagsOptions, AllFlagsState, FlagState, flags_state};
/// The context types, API-compatible with the official crate's (see [`context`]).
pub use context::{
    AttributeRef, AttributeValue, Context, ContextBuilder, FlagValue, Kind as ContextKind,
    MultiContextBuilder, Reference,
};
pub use engine::{
    BigSegmentsStatus, Detail, EvalError, Flag, MigrationSettings, Options, PrerequisiteEvent,
    PrerequisiteRecorder, Reason, Segment, Store, VariationIndex, evaluate,
};
pub use equality::same_context;
pub use models::{Models, SlotModels, SnapshotStore, evaluate_flag, evaluate_in, kept};
pub use secure_mode::SecureModeKey;

/// The README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
