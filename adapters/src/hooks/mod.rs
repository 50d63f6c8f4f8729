//! Hooks: user code run around every flag evaluation and every `track`, as
//! LaunchDarkly's server SDKs define them (the SDK specification's HOOKS section).
//!
//! A [`Hook`] is registered on the builder ([`crate::ClientBuilder::hooks`]) or later
//! ([`crate::Client::add_hook`]). For each evaluation through a typed variation method
//! (`bool_variation`, `string_variation_detail`, …, and `migration_variation`), the
//! client runs
//!
//! ```text
//!  before_evaluation   hook 1, hook 2, … hook n      (registration order)
//!  the evaluation itself
//!  after_evaluation    hook n, … hook 2, hook 1      (reverse order)
//! ```
//!
//! and each hook's [`EvaluationSeriesData`] returned by its `before_evaluation` is what
//! its own `after_evaluation` receives. After each [`crate::Client::track`], every
//! hook's `after_track` runs in registration order.
//!
//! A hook can never break an evaluation or a `track`: an error it returns, or a panic,
//! is caught and logged (`tracing`, at `warn`, with the hook's name and the stage), and
//! the stage's data falls back to the data the stage was given (for
//! `before_evaluation`, empty data). With no hook registered the client does no extra
//! work: one relaxed atomic load per call, no allocation.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Instant;
//! use flagsync::eval::{Detail, Reason};
//! use flagsync::hooks::{EvaluationSeriesContext, EvaluationSeriesData, Hook, HookError, Metadata};
//!
//! /// Measures how long each evaluation takes.
//! struct Timing;
//!
//! impl Hook for Timing {
//!     fn metadata(&self) -> Metadata {
//!         Metadata::new("timing")
//!     }
//!     fn before_evaluation(
//!         &self,
//!         _: &EvaluationSeriesContext<'_>,
//!         data: EvaluationSeriesData,
//!     ) -> Result<EvaluationSeriesData, HookError> {
//!         Ok(data.with("start", Instant::now()))
//!     }
//!     fn after_evaluation(
//!         &self,
//!         series: &EvaluationSeriesContext<'_>,
//!         data: EvaluationSeriesData,
//!         _: &Detail<serde_json::Value>,
//!     ) -> Result<EvaluationSeriesData, HookError> {
//!         if let Some(start) = data.get::<Instant>("start") {
//!             println!("{} ({}) took {:?}", series.flag_key, series.method, start.elapsed());
//!         }
//!         Ok(data)
//!     }
//! }
//!
//! let client = flagsync::Client::builder("sdk-key").hooks([Arc::new(Timing) as Arc<dyn Hook>]).build()?;
//! # Ok::<(), flagsync::Error>(())
//! ```

mod client_api;
mod data;
mod runner;
#[cfg(test)]
mod tests;

use serde_json::Value;

use crate::eval::{Context, Detail};

pub use data::EvaluationSeriesData;
pub(crate) use runner::{HookRunner, json_detail};

/// What a hook stage may fail with: any error (logged with the hook's name, never
/// returned to the caller of the evaluation or `track`).
pub type HookError = Box<dyn std::error::Error + Send + Sync>;

/// A hook's description.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Metadata {
    /// The hook's name, used in logs.
    pub name: String,
}

impl Metadata {
    /// Metadata naming the hook `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into() }
    }
}

/// The facts of one evaluation, given to both evaluation stages.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EvaluationSeriesContext<'a> {
    /// The flag being evaluated.
    pub flag_key: &'a str,
    /// The context it is evaluated for.
    pub context: &'a Context,
    /// The application's default value, as JSON (for `migration_variation`, the
    /// default stage's name).
    pub default_value: Value,
    /// The variation method called: `BoolVariation`, `BoolVariationDetail`,
    /// `StringVariation`, `FloatVariation`, `IntVariation`, `JsonVariation`,
    /// `Variation` (each also with `Detail`), or `MigrationVariation`.
    pub method: &'static str,
    /// The environment id the flag service reported (`X-LD-EnvID`), once known.
    pub environment_id: Option<String>,
}

impl<'a> EvaluationSeriesContext<'a> {
    /// A series context (the client makes these; this is for testing a hook).
    pub fn new(
        flag_key: &'a str,
        context: &'a Context,
        default_value: Value,
        method: &'static str,
        environment_id: Option<String>,
    ) -> Self {
        Self {
            flag_key,
            context,
            default_value,
            method,
            environment_id,
        }
    }
}

/// The facts of one [`crate::Client::track`] call, given to `after_track`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TrackSeriesContext<'a> {
    /// The event key.
    pub key: &'a str,
    /// The context the event is for.
    pub context: &'a Context,
    /// The event's data, if any.
    pub data: Option<&'a Value>,
    /// The event's metric value, if any.
    pub metric_value: Option<f64>,
    /// The environment id the flag service reported (`X-LD-EnvID`), once known.
    pub environment_id: Option<String>,
}

impl<'a> TrackSeriesContext<'a> {
    /// A track series context (the client makes these; this is for testing a hook).
    pub fn new(
        key: &'a str,
        context: &'a Context,
        data: Option<&'a Value>,
        metric_value: Option<f64>,
        environment_id: Option<String>,
    ) -> Self {
        Self {
            key,
            context,
            data,
            metric_value,
            environment_id,
        }
    }
}

/// User code run around evaluations and `track` (see the [module docs](self)). Every
/// stage has a default that does nothing, so a hook implements only what it needs.
///
/// Stages run on the thread that evaluates: keep them quick, and never call back into
/// the client's variation methods from a stage (that would run the hooks again).
pub trait Hook: Send + Sync {
    /// The hook's name and description.
    fn metadata(&self) -> Metadata;

    /// Run before the evaluation; the data returned is this hook's data for its
    /// `after_evaluation`. `data` is empty.
    fn before_evaluation(
        &self,
        series: &EvaluationSeriesContext<'_>,
        data: EvaluationSeriesData,
    ) -> Result<EvaluationSeriesData, HookError> {
        let _ = series;
        Ok(data)
    }

    /// Run after the evaluation, with the data this hook's `before_evaluation`
    /// returned and the evaluation's result (its value as JSON).
    fn after_evaluation(
        &self,
        series: &EvaluationSeriesContext<'_>,
        data: EvaluationSeriesData,
        detail: &Detail<Value>,
    ) -> Result<EvaluationSeriesData, HookError> {
        let _ = (series, detail);
        Ok(data)
    }

    /// Run after a custom event was recorded by [`crate::Client::track`].
    fn after_track(&self, series: &TrackSeriesContext<'_>) -> Result<(), HookError> {
        let _ = series;
        Ok(())
    }
}

/// The method name hooks see for a typed variation returning `T` (see
/// [`EvaluationSeriesContext::method`]).
pub(crate) fn method_name<T: 'static>(with_detail: bool) -> &'static str {
    use std::any::TypeId;
    let t = TypeId::of::<T>();
    let (plain, detail) = if t == TypeId::of::<bool>() {
        ("BoolVariation", "BoolVariationDetail")
    } else if t == TypeId::of::<String>() {
        ("StringVariation", "StringVariationDetail")
    } else if t == TypeId::of::<f64>() {
        ("FloatVariation", "FloatVariationDetail")
    } else if t == TypeId::of::<i64>() {
        ("IntVariation", "IntVariationDetail")
    } else if t == TypeId::of::<Value>() {
        ("JsonVariation", "JsonVariationDetail")
    } else {
        ("Variation", "VariationDetail")
    };
    if with_detail { detail } else { plain }
}

impl std::fmt::Debug for dyn Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hook")
            .field("name", &self.metadata().name)
            .finish()
    }
}
