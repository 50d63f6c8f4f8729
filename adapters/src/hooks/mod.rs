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
//! work: one atomic load per call, no allocation.
//!
//! # What a hook costs
//!
//! A hook pays only for what it reads. [`EvaluationSeriesContext`] lends the flag key,
//! the context and the method name; its default value as JSON
//! ([`EvaluationSeriesContext::default_value`]) and the environment id
//! ([`EvaluationSeriesContext::environment_id`]) are built the first time a hook asks
//! for them. [`EvaluationDetail`] lends the reason and the variation index; the value as
//! JSON ([`EvaluationDetail::value`]) is built on first use too. Each hook's
//! [`EvaluationSeriesData`] lives on the stack for up to four hooks, and empty data
//! allocates nothing; the registered hooks are read with one atomic load (no lock, no
//! reference count). So a hook whose stages return at once costs an evaluation its two
//! stage calls and little else (no allocation; BENCHMARKS.md, "Hooks"), and one that
//! reads everything pays for the JSON it reads, once per evaluation whatever the number
//! of hooks reading it.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Instant;
//! use flagsync::hooks::{
//!     EvaluationDetail, EvaluationSeriesContext, EvaluationSeriesData, Hook, HookError, Metadata,
//! };
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
//!         detail: &EvaluationDetail<'_>,
//!     ) -> Result<EvaluationSeriesData, HookError> {
//!         if let Some(start) = data.get::<Instant>("start") {
//!             // `detail.value()` is the result as JSON, built here because it is read.
//!             println!(
//!                 "{} ({}) = {} took {:?}",
//!                 series.flag_key,
//!                 series.method,
//!                 detail.value(),
//!                 start.elapsed()
//!             );
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
mod list;
mod runner;
mod series;
#[cfg(test)]
mod tests;

pub use data::EvaluationSeriesData;
pub(crate) use runner::HookRunner;
pub use series::{EvaluationDetail, EvaluationSeriesContext, TrackSeriesContext};

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
    /// returned and the evaluation's result ([`EvaluationDetail::value`] is the value as
    /// JSON, built only if a hook reads it).
    fn after_evaluation(
        &self,
        series: &EvaluationSeriesContext<'_>,
        data: EvaluationSeriesData,
        detail: &EvaluationDetail<'_>,
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
    } else if t == TypeId::of::<serde_json::Value>() {
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
