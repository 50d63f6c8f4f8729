//! The [`Client`]'s hook methods: registering a hook, and running the evaluation and
//! track series around an evaluation or a `track`.

use std::borrow::Cow;
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

    /// Run `evaluate` (given `default`: owned without hooks, lent to it with hooks, as
    /// the hooks may read the default after it ran) inside the evaluation hooks, if any.
    /// What the hooks may read is built only when one reads it: the default as JSON
    /// (`default_json`), the environment id, and the result's value as JSON (`to_json`
    /// of the detail `view` finds in the result).
    #[allow(
        clippy::too_many_arguments,
        reason = "the facts of one evaluation series"
    )]
    pub(crate) fn evaluation_series<D: Clone, R, T>(
        &self,
        key: &str,
        context: &Context,
        method: &'static str,
        default: D,
        default_json: impl Fn(&D) -> Value,
        evaluate: impl FnOnce(Cow<'_, D>) -> R,
        view: impl FnOnce(&R) -> &Detail<T>,
        to_json: &dyn Fn(&T) -> Value,
    ) -> R {
        let Some(hooks) = self.inner.hooks.current() else {
            return evaluate(Cow::Owned(default));
        };
        let default_value = || default_json(&default);
        let environment_id = || self.environment_id();
        let series =
            EvaluationSeriesContext::lazy(key, context, method, &default_value, &environment_id);
        run_evaluation(
            hooks,
            &series,
            || evaluate(Cow::Borrowed(&default)),
            view,
            to_json,
        )
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
        let environment_id = || self.environment_id();
        let series =
            TrackSeriesContext::lazy(key, context, data.as_ref(), metric_value, &environment_id);
        run_track(hooks, &series);
    }
}
