//! The [`Client`]'s hook methods: registering a hook, and running the evaluation and
//! track series around an evaluation or a `track`.

use std::sync::Arc;

use serde_json::Value;

use super::runner::{run_evaluation, run_track};
use super::{EvaluationSeriesContext, Hook, TrackSeriesContext};
use crate::Client;
use crate::eval::{Context, Detail};

impl Client {
    /// Register `hook` after the hooks already registered: it runs around every later
    /// evaluation and `track` (see [`crate::hooks`]).
    pub fn add_hook(&self, hook: Arc<dyn Hook>) {
        self.inner.hooks.add(hook);
    }

    /// Run `evaluate` (given `default`) inside the evaluation hooks, if any: the
    /// default's JSON and `detail` (the result as hooks see it) are computed only when
    /// a hook is registered.
    #[allow(
        clippy::too_many_arguments,
        reason = "the facts of one evaluation series"
    )]
    pub(crate) fn evaluation_series<D, R>(
        &self,
        key: &str,
        context: &Context,
        method: &'static str,
        default: D,
        default_json: impl FnOnce(&D) -> Value,
        evaluate: impl FnOnce(D) -> R,
        detail: impl FnOnce(&R) -> Detail<Value>,
    ) -> R {
        let Some(hooks) = self.inner.hooks.current() else {
            return evaluate(default);
        };
        let series = EvaluationSeriesContext::new(
            key,
            context,
            default_json(&default),
            method,
            self.environment_id(),
        );
        run_evaluation(&hooks, &series, || evaluate(default), detail)
    }

    /// Hand `data` to `record` (the custom event), then run the track hooks, if any.
    pub(crate) fn track_series(
        &self,
        key: &str,
        context: &Context,
        data: Option<Value>,
        metric_value: Option<f64>,
        record: impl FnOnce(Option<Value>),
    ) {
        let Some(hooks) = self.inner.hooks.current() else {
            return record(data);
        };
        record(data.clone());
        let series = TrackSeriesContext::new(
            key,
            context,
            data.as_ref(),
            metric_value,
            self.environment_id(),
        );
        run_track(&hooks, &series);
    }
}
