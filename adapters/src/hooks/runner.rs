//! Running the hooks: order, data passing, and containment of errors and panics.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use serde_json::Value;

use super::{EvaluationSeriesContext, EvaluationSeriesData, Hook, HookError, TrackSeriesContext};
use crate::eval::Detail;

/// The hooks of one client. Reading them when none is registered costs one atomic load.
#[derive(Default)]
pub(crate) struct HookRunner {
    /// True once a hook is registered: the fast path checks only this.
    any: AtomicBool,
    hooks: RwLock<Arc<[Arc<dyn Hook>]>>,
}

impl std::fmt::Debug for HookRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.list().iter().map(|h| h.metadata().name).collect();
        f.debug_tuple("HookRunner").field(&names).finish()
    }
}

impl HookRunner {
    /// A runner with `hooks`, in registration order.
    pub(crate) fn new(hooks: Vec<Arc<dyn Hook>>) -> Self {
        Self {
            any: AtomicBool::new(!hooks.is_empty()),
            hooks: RwLock::new(hooks.into()),
        }
    }

    /// Register `hook` after the others.
    pub(crate) fn add(&self, hook: Arc<dyn Hook>) {
        let mut hooks = self.hooks.write().unwrap_or_else(|e| e.into_inner());
        let mut list = hooks.to_vec();
        list.push(hook);
        *hooks = list.into();
        self.any.store(true, Ordering::Release);
    }

    fn list(&self) -> Arc<[Arc<dyn Hook>]> {
        self.hooks.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The registered hooks, or `None` (without taking the lock) when there are none.
    pub(crate) fn current(&self) -> Option<Arc<[Arc<dyn Hook>]>> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        Some(self.list())
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

/// Run `before_evaluation` of every hook in order, then `evaluate`, then
/// `after_evaluation` in reverse order; each hook gets its own data back.
pub(crate) fn run_evaluation<R>(
    hooks: &[Arc<dyn Hook>],
    series: &EvaluationSeriesContext<'_>,
    evaluate: impl FnOnce() -> R,
    detail: impl FnOnce(&R) -> Detail<Value>,
) -> R {
    let data: Vec<EvaluationSeriesData> = hooks
        .iter()
        .map(|hook| {
            contain(
                &**hook,
                "beforeEvaluation",
                EvaluationSeriesData::new,
                || hook.before_evaluation(series, EvaluationSeriesData::new()),
            )
        })
        .collect();
    let result = evaluate();
    let detail = detail(&result);
    for (hook, data) in hooks.iter().zip(data).rev() {
        let fallback = data.clone();
        contain(
            &**hook,
            "afterEvaluation",
            || fallback,
            || hook.after_evaluation(series, data, &detail),
        );
    }
    result
}

/// Run `after_track` of every hook in registration order.
pub(crate) fn run_track(hooks: &[Arc<dyn Hook>], series: &TrackSeriesContext<'_>) {
    for hook in hooks {
        contain(&**hook, "afterTrack", || (), || hook.after_track(series));
    }
}

/// A detail's value as JSON, for the hooks (`None` stays `null`).
pub(crate) fn json_detail<T>(
    detail: &Detail<T>,
    to_json: impl FnOnce(&T) -> Value,
) -> Detail<Value> {
    Detail {
        value: Some(detail.value.as_ref().map_or(Value::Null, to_json)),
        variation_index: detail.variation_index,
        reason: detail.reason.clone(),
    }
}
