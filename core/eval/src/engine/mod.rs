//! flagsync's flag evaluation engine.
//!
//! It replaces the engine of the official `launchdarkly-server-sdk-evaluation` crate
//! (its `evaluate`, `Flag` and `Segment`), which flagsync used until issue 16. Since
//! then the context types are flagsync's own too ([`super::context`]: the official
//! API and JSON, attributes read borrowed with
//! [`Context::attribute`](super::Context::attribute), so an evaluation copies and
//! caches no attribute values). Nothing in flagsync calls the official crate any more;
//! it remains a dev-dependency, the reference of the differential test and the
//! benchmarks, which hand it a JSON copy of each context.
//!
//! ```text
//!  raw JSON ──model.rs──► lenient serde model (missing/null fields: the SDKs' zero values)
//!           ──compile.rs─► Flag / Segment: key lists as hash sets, attribute references
//!                          parsed, clause values parsed per operator (numbers, RFC 3339
//!                          and epoch-millis timestamps, semvers, compiled regexes),
//!                          rollout prefixes (`key.salt.` / `seed.`) hashed ahead
//!  evaluate(store, flag, context, options) ──► Detail<&FlagValue> { value, variation_index, reason }
//!     off → prerequisites (cycles: MALFORMED_FLAG) → contextTargets/targets → rules
//!     (clause.rs; segmentMatch: segments with rules, weights, nested segments,
//!     big segments through a BigSegmentLookup) → fallthrough (bucket.rs)
//! ```
//!
//! Compilation happens once per flag or segment version (the client's model cache
//! keeps the result). The behaviour is LaunchDarkly's Go evaluator's
//! (go-server-sdk-evaluation `evaluator*.go`), which the sdk-test-harness checks; where
//! the official Rust crate differs from Go (a prerequisite whose evaluation gave an
//! out-of-range variation is a failed prerequisite, not a malformed flag; big
//! segments), this engine follows Go. The engine is pure: no I/O, no clock.

mod bucket;
mod clause;
mod compile;
#[cfg(test)]
mod differential;
mod eval;
mod model;
mod reason;
#[cfg(test)]
mod tests;
mod values;

pub use compile::{Flag, MigrationSettings, Segment};
pub use eval::{Options, PrerequisiteEvent, PrerequisiteRecorder, Store, evaluate};
pub use flagsync_core::bigseg::BigSegmentsStatus;
pub use reason::{Detail, EvalError, Reason, VariationIndex};
