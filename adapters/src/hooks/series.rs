//! What the hook stages are given: [`EvaluationSeriesContext`], [`EvaluationDetail`]
//! and [`TrackSeriesContext`].
//!
//! A hook pays only for what it reads. The flag key, the context and the method are
//! borrowed; the default value as JSON, the environment id and the result's value as
//! JSON are built the first time a hook asks for them (once per evaluation, however many
//! hooks ask), so a hook that never reads them costs the evaluation nothing for them.

use std::cell::OnceCell;

use serde_json::Value;

use crate::eval::engine::VariationIndex;
use crate::eval::{Context, Detail, Reason};

/// A value given to the hooks, built on first use.
enum Lazy<'a, T> {
    /// Given up front (the public constructors).
    Ready(T),
    /// Built by `make` the first time it is read.
    Later(OnceCell<T>, &'a dyn Fn() -> T),
}

impl<'a, T> Lazy<'a, T> {
    fn later(make: &'a dyn Fn() -> T) -> Self {
        Self::Later(OnceCell::new(), make)
    }

    fn get(&self) -> &T {
        match self {
            Self::Ready(value) => value,
            Self::Later(cell, make) => cell.get_or_init(make),
        }
    }
}

impl<T: Clone> Clone for Lazy<'_, T> {
    fn clone(&self) -> Self {
        match self {
            Self::Ready(value) => Self::Ready(value.clone()),
            Self::Later(cell, make) => Self::Later(cell.clone(), *make),
        }
    }
}

/// The facts of one evaluation, given to both evaluation stages.
///
/// The flag key, the context and the method are fields; the default value and the
/// environment id are methods, computed when a hook first asks for them.
#[derive(Clone)]
#[non_exhaustive]
pub struct EvaluationSeriesContext<'a> {
    /// The flag being evaluated.
    pub flag_key: &'a str,
    /// The context it is evaluated for.
    pub context: &'a Context,
    /// The variation method called: `BoolVariation`, `BoolVariationDetail`,
    /// `StringVariation`, `FloatVariation`, `IntVariation`, `JsonVariation`,
    /// `Variation` (each also with `Detail`), or `MigrationVariation`.
    pub method: &'static str,
    default_value: Lazy<'a, Value>,
    environment_id: Lazy<'a, Option<String>>,
}

impl std::fmt::Debug for EvaluationSeriesContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvaluationSeriesContext")
            .field("flag_key", &self.flag_key)
            .field("context", &self.context.canonical_key())
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
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
            method,
            default_value: Lazy::Ready(default_value),
            environment_id: Lazy::Ready(environment_id),
        }
    }

    /// The client's series context: the default and the environment id are built when
    /// first read.
    pub(crate) fn lazy(
        flag_key: &'a str,
        context: &'a Context,
        method: &'static str,
        default_value: &'a dyn Fn() -> Value,
        environment_id: &'a dyn Fn() -> Option<String>,
    ) -> Self {
        Self {
            flag_key,
            context,
            method,
            default_value: Lazy::later(default_value),
            environment_id: Lazy::later(environment_id),
        }
    }

    /// The application's default value, as JSON (for `migration_variation`, the
    /// default stage's name). Built on the first call of this evaluation.
    pub fn default_value(&self) -> &Value {
        self.default_value.get()
    }

    /// The environment id the flag service reported (`X-LD-EnvID`), once known. Read
    /// on the first call of this evaluation.
    pub fn environment_id(&self) -> Option<&str> {
        self.environment_id.get().as_deref()
    }
}

/// The result of one evaluation, as `after_evaluation` sees it: the variation index
/// and the reason are borrowed from the evaluation; the value as JSON is built the
/// first time a hook asks for it ([`EvaluationDetail::value`]).
pub struct EvaluationDetail<'a> {
    variation_index: Option<VariationIndex>,
    reason: &'a Reason,
    value: Lazy<'a, Value>,
}

impl std::fmt::Debug for EvaluationDetail<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvaluationDetail")
            .field("variation_index", &self.variation_index)
            .field("reason", self.reason)
            .finish_non_exhaustive()
    }
}

impl<'a> EvaluationDetail<'a> {
    /// The result `detail` (the client makes these; this is for testing a hook). A
    /// missing value is `null`.
    pub fn new(detail: &'a Detail<Value>) -> Self {
        Self {
            variation_index: detail.variation_index,
            reason: &detail.reason,
            value: Lazy::Ready(detail.value.clone().unwrap_or(Value::Null)),
        }
    }

    /// The client's result: the value is made by `value` when first read.
    pub(crate) fn lazy(
        variation_index: Option<VariationIndex>,
        reason: &'a Reason,
        value: &'a dyn Fn() -> Value,
    ) -> Self {
        Self {
            variation_index,
            reason,
            value: Lazy::later(value),
        }
    }

    /// The value the caller receives, as JSON (the default when the flag gave none,
    /// `null` when there is neither). Built on the first call of this evaluation.
    pub fn value(&self) -> &Value {
        self.value.get()
    }

    /// The index of the variation served; `None` when the value is not a variation.
    pub fn variation_index(&self) -> Option<VariationIndex> {
        self.variation_index
    }

    /// Why this value.
    pub fn reason(&self) -> &Reason {
        self.reason
    }

    /// The result as an owned [`Detail`] (its value as JSON).
    pub fn to_detail(&self) -> Detail<Value> {
        Detail {
            value: Some(self.value().clone()),
            variation_index: self.variation_index,
            reason: self.reason.clone(),
        }
    }
}

/// The facts of one [`crate::Client::track`] call, given to `after_track`.
#[derive(Clone)]
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
    environment_id: Lazy<'a, Option<String>>,
}

impl std::fmt::Debug for TrackSeriesContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrackSeriesContext")
            .field("key", &self.key)
            .field("context", &self.context.canonical_key())
            .field("data", &self.data)
            .field("metric_value", &self.metric_value)
            .finish_non_exhaustive()
    }
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
            environment_id: Lazy::Ready(environment_id),
        }
    }

    /// The client's track context: the environment id is read when first asked for.
    pub(crate) fn lazy(
        key: &'a str,
        context: &'a Context,
        data: Option<&'a Value>,
        metric_value: Option<f64>,
        environment_id: &'a dyn Fn() -> Option<String>,
    ) -> Self {
        Self {
            key,
            context,
            data,
            metric_value,
            environment_id: Lazy::later(environment_id),
        }
    }

    /// The environment id the flag service reported (`X-LD-EnvID`), once known.
    pub fn environment_id(&self) -> Option<&str> {
        self.environment_id.get().as_deref()
    }
}
