//! Running the hooks: order, data passing, and containment of errors and panics.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use serde_json::Value;

use super::list::{HookList, Hooks};
use super::{
    EvaluationDetail, EvaluationSeriesContext, EvaluationSeriesData, Hook, HookError,
    TrackSeriesContext,
};
use crate::eval::Detail;

/// The hooks of one client. Reading them costs one atomic load, with hooks or without.
pub(crate) struct HookRunner {
    hooks: HookList,
}

impl Default for HookRunner {
    fn default() -> Self {
        Self::new(Vec::new())
    }
}

impl std::fmt::Debug for HookRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self
            .current()
            .into_iter()
            .flat_map(Hooks::iter)
            .map(|h| h.metadata().name)
            .collect();
        f.debug_tuple("HookRunner").field(&names).finish()
    }
}

impl HookRunner {
    /// A runner with `hooks`, in registration order.
    pub(crate) fn new(hooks: Vec<Arc<dyn Hook>>) -> Self {
        Self {
            hooks: HookList::new(hooks),
        }
    }

    /// Register `hook` after the others.
    pub(crate) fn add(&self, hook: Arc<dyn Hook>) {
        self.hooks.push(hook);
    }

    /// The registered hooks, or `None` when there are none (one atomic load either way).
    pub(crate) fn current(&self) -> Option<Hooks<'_>> {
        self.hooks.snapshot()
    }
}

/// Run one stage of `hook`; on an error or a panic, log it and return `fallback`.
fn contain<T>(
    hook: &dyn Hook,
    stage: &'static str,
    fallback: impl FnOnce() -> T,
    run: impl FnOnce() -> Result<T, HookError>,
) -> T {
    match catch_unwind(AssertUnwindSafe(run)) {
        Ok(Ok(value)) => value,
        Ok(Err(error)) => {
            let name = hook_name(hook);
            tracing::warn!(hook = %name, stage, %error, "a hook stage failed; its data is ignored");
            fallback()
        }
        Err(panic) => {
            let name = hook_name(hook);
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            tracing::warn!(hook = %name, stage, panic = %message, "a hook stage panicked; its data is ignored");
            fallback()
        }
    }
}

/// The hook's name, even if its `metadata` panics.
fn hook_name(hook: &dyn Hook) -> String {
    catch_unwind(AssertUnwindSafe(|| hook.metadata().name)).unwrap_or_else(|_| "?".to_owned())
}

/// Each hook's data is kept on the stack for up to this many hooks.
const INLINE_HOOKS: usize = 4;

/// Run `before_evaluation` of every hook in order, then `evaluate`, then
/// `after_evaluation` in reverse order; each hook gets its own data back. The hooks see
/// the result through `view` (the typed detail) and `to_json` (its value as JSON, built
/// only if a hook asks for it).
pub(crate) fn run_evaluation<R, T>(
    hooks: Hooks<'_>,
    series: &EvaluationSeriesContext<'_>,
    evaluate: impl FnOnce() -> R,
    view: impl FnOnce(&R) -> &Detail<T>,
    to_json: &dyn Fn(&T) -> Value,
) -> R {
    if hooks.len() == 1
        && let Some(hook) = hooks.get(0)
    {
        return run_one(hook, series, evaluate, view, to_json);
    }
    if hooks.len() <= INLINE_HOOKS {
        let mut data: [EvaluationSeriesData; INLINE_HOOKS] = Default::default();
        run_with(hooks, &mut data, series, evaluate, view, to_json)
    } else {
        let mut data = vec![EvaluationSeriesData::new(); hooks.len()];
        run_with(hooks, &mut data, series, evaluate, view, to_json)
    }
}

/// [`run_evaluation`] for one hook (the common case): straight-line, its data in a
/// local, no slots to set up, walk or drop.
fn run_one<R, T>(
    hook: &dyn Hook,
    series: &EvaluationSeriesContext<'_>,
    evaluate: impl FnOnce() -> R,
    view: impl FnOnce(&R) -> &Detail<T>,
    to_json: &dyn Fn(&T) -> Value,
) -> R {
    let data = contain(hook, "beforeEvaluation", EvaluationSeriesData::new, || {
        hook.before_evaluation(series, EvaluationSeriesData::new())
    });
    let result = evaluate();
    {
        let typed = view(&result);
        let value = || typed.value.as_ref().map_or(Value::Null, to_json);
        let detail = EvaluationDetail::lazy(typed.variation_index, &typed.reason, &value);
        contain(hook, "afterEvaluation", EvaluationSeriesData::new, || {
            hook.after_evaluation(series, data, &detail)
        });
    }
    result
}

/// [`run_evaluation`] with a slot of data per hook (at least as many as hooks).
fn run_with<R, T>(
    hooks: Hooks<'_>,
    data: &mut [EvaluationSeriesData],
    series: &EvaluationSeriesContext<'_>,
    evaluate: impl FnOnce() -> R,
    view: impl FnOnce(&R) -> &Detail<T>,
    to_json: &dyn Fn(&T) -> Value,
) -> R {
    for (hook, slot) in hooks.iter().zip(data.iter_mut()) {
        *slot = contain(hook, "beforeEvaluation", EvaluationSeriesData::new, || {
            hook.before_evaluation(series, EvaluationSeriesData::new())
        });
    }
    let result = evaluate();
    {
        let typed = view(&result);
        let value = || typed.value.as_ref().map_or(Value::Null, to_json);
        let detail = EvaluationDetail::lazy(typed.variation_index, &typed.reason, &value);
        for i in (0..hooks.len().min(data.len())).rev() {
            let Some(hook) = hooks.get(i) else { continue };
            let data = std::mem::take(&mut data[i]);
            // What `after_evaluation` returns ends the series: nothing reads it.
            contain(hook, "afterEvaluation", EvaluationSeriesData::new, || {
                hook.after_evaluation(series, data, &detail)
            });
        }
    }
    result
}

/// Run `after_track` of every hook in registration order.
pub(crate) fn run_track(hooks: Hooks<'_>, series: &TrackSeriesContext<'_>) {
    for hook in hooks.iter() {
        contain(hook, "afterTrack", || (), || hook.after_track(series));
    }
}
