//! Contexts: the entities flags are evaluated for, with the API of the official
//! `launchdarkly-server-sdk-evaluation` crate (2.2.1), so code written for the official
//! SDK builds, reads and serializes contexts the same way.
//!
//! | type | what it holds |
//! | --- | --- |
//! | [`Context`] (`context.rs`) | one entity of a [`Kind`], or several of different kinds |
//! | [`ContextBuilder`] (`builder.rs`) | builds and checks a single-kind context |
//! | [`MultiContextBuilder`] (`multi.rs`) | combines single-kind contexts |
//! | [`Kind`] (`kind.rs`, re-exported as `ContextKind`) | `user`, `org`, … |
//! | [`Reference`] (`reference.rs`) | an attribute name or `/a/b` path, parsed once |
//! | [`AttributeValue`], [`AttributeRef`] | an attribute's JSON value, owned or borrowed |
//! | [`FlagValue`] (`flag_value.rs`) | a variation's value |
//!
//! The JSON forms (single-kind, multi-kind, the old user format) are in `serde.rs`.
//!
//! ## Why not the official types
//!
//! The official `Context` keeps its attributes in a `HashMap` (SipHash) and
//! [`Context::get_value`] returns an owned copy of a value: a string attribute costs a
//! hash, a lookup, an allocation and a free per read, and flagsync's engine cached the
//! values per evaluation to read each once. This `Context` keeps the built-in
//! attributes (`kind`, `key`, `name`, `anonymous`) as fields and the others in a slice
//! sorted by name: contexts rarely have more than a few attributes, so a lookup scans
//! them (and bisects beyond eight). [`Context::attribute`] hands out an
//! [`AttributeRef`] borrowed from the context, which is what the engine reads; nothing
//! is copied or cached during an evaluation. [`Context::get_value`] keeps the official
//! signature for users.
//!
//! Behaviour follows the official crate: the same validation rules and error messages
//! in [`ContextBuilder::build`] and [`MultiContextBuilder::build`], the same canonical
//! keys, the same reference syntax, and the same JSON, checked against the official
//! crate in `tests.rs`. What is left out: `AttributeValue::to_datetime` and
//! `AttributeValue::as_semver` (they return `chrono` and `semver` types; flagsync's
//! engine parses timestamps and versions itself), and `ContextAttributes` (events
//! redact contexts with `flagsync_core::events::ContextFormatter`).

mod attribute_value;
mod builder;
#[allow(clippy::module_inception)] // The module of the `Context` type itself.
mod context;
mod event_form;
mod flag_value;
mod kind;
mod multi;
mod reference;
mod serde;
#[cfg(test)]
mod tests;

pub use attribute_value::AttributeValue;
pub use builder::ContextBuilder;
pub use context::{AttributeRef, Context};
pub use flag_value::FlagValue;
pub use kind::Kind;
pub use multi::MultiContextBuilder;
pub use reference::Reference;
