//! Evaluations reported to the analytics events (see [`crate::events`]).

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use serde_json::Value;

use super::engine::{Flag, PrerequisiteEvent, PrerequisiteRecorder};
use super::variation::typed;
use super::{Context, Detail, FlagValue, Reason};
use crate::Client;
use crate::events::EvalRecord;

/// One prerequisite evaluation, kept until the evaluation that needed it is recorded.
struct Prerequisite {
    /// The flag that has this prerequisite.
    of: Arc<str>,
    flag: Arc<Flag>,
    result: Detail<FlagValue>,
}

/// Collects the prerequisite evaluations of one evaluation.
#[derive(Default)]
pub(crate) struct Prerequisites(RefCell<Vec<Prerequisite>>);

impl PrerequisiteRecorder for Prerequisites {
    fn record(&self, event: &PrerequisiteEvent<'_>) {
        let result = event.result;
        self.0.borrow_mut().push(Prerequisite {
            of: event.target_flag_key.into(),
            flag: event.prerequisite_flag.clone(),
            result: Detail {
                value: result.value.cloned(),
                variation_index: result.variation_index,
                reason: result.reason.clone(),
            },
        });
    }
}

/// The variation index as events write it.
fn index(i: Option<isize>) -> Option<usize> {
    i.and_then(|i| usize::try_from(i).ok())
}

impl Client {
    /// Evaluate flag `key`, convert its value with `convert` (`default` when missing or
    /// of another type), and report the evaluation — and its prerequisites' — to the
    /// events. `with_reason`: a `*_detail` call, whose events carry the reason.
    ///
    /// The evaluation runs inside the evaluation hooks, if any (see [`crate::hooks`]).
    pub(crate) fn evaluate_typed<T: Clone + 'static>(
        &self,
        key: &str,
        context: &Context,
        default: T,
        with_reason: bool,
        convert: impl FnOnce(&FlagValue) -> Option<T>,
        to_json: impl Fn(&T) -> Value,
    ) -> Detail<T> {
        self.evaluation_series(
            key,
            context,
            crate::hooks::method_name::<T>(with_reason),
            default,
            &to_json,
            |default| {
                self.evaluate_typed_unhooked(key, context, default, with_reason, convert, &to_json)
            },
            |detail| detail,
            &to_json,
        )
    }

    /// [`Client::evaluate_typed`] without the hooks. `default` is owned when no hook
    /// runs, and lent (copied only if it is served) when hooks may still read it.
    fn evaluate_typed_unhooked<T: Clone>(
        &self,
        key: &str,
        context: &Context,
        default: Cow<'_, T>,
        with_reason: bool,
        convert: impl FnOnce(&FlagValue) -> Option<T>,
        to_json: impl Fn(&T) -> Value,
    ) -> Detail<T> {
        if self.events().is_none() {
            return self.evaluate_with(key, context, None, |_, d| {
                typed(d, || default.into_owned(), convert)
            });
        }
        let prerequisites = Prerequisites::default();
        // Recorded while the flag model is still lent to us (no reference count).
        self.evaluate_with(key, context, Some(&prerequisites), |flag, d| {
            let detail = typed(d, || T::clone(&default), convert);
            self.record_evaluation(
                key,
                context,
                flag,
                detail.variation_index,
                &detail.reason,
                &|| detail.value.as_ref().map_or(Value::Null, &to_json),
                &|| to_json(&default),
                with_reason,
                &prerequisites,
            );
            detail
        })
    }

    /// Report one evaluation (after its prerequisites) to the events, if they are on.
    ///
    /// The common case — a repeat that only adds to a count, with no prerequisite
    /// evaluated — is decided here, inlined into the evaluation; the rest is
    /// [`Client::record_evaluation_in_full`].
    #[allow(clippy::too_many_arguments, reason = "the facts of one evaluation")]
    #[inline]
    pub(crate) fn record_evaluation(
        &self,
        key: &str,
        context: &Context,
        flag: Option<&Arc<Flag>>,
        variation: Option<isize>,
        reason: &Reason,
        value: &dyn Fn() -> Value,
        default: &dyn Fn() -> Value,
        with_reason: bool,
        prerequisites: &Prerequisites,
    ) {
        let Some(events) = self.events() else {
            return;
        };
        if prerequisites.0.borrow().is_empty()
            && events
                .recorder
                .count_repeat(flag.map(|f| &**f), index(variation), context)
        {
            return;
        }
        self.record_evaluation_in_full(
            key,
            context,
            flag,
            variation,
            reason,
            value,
            default,
            with_reason,
            prerequisites,
        );
    }

    /// [`Client::record_evaluation`] past its common case: the prerequisites' records,
    /// then the evaluation's.
    #[allow(clippy::too_many_arguments, reason = "the facts of one evaluation")]
    #[inline(never)]
    fn record_evaluation_in_full(
        &self,
        key: &str,
        context: &Context,
        flag: Option<&Arc<Flag>>,
        variation: Option<isize>,
        reason: &Reason,
        value: &dyn Fn() -> Value,
        default: &dyn Fn() -> Value,
        with_reason: bool,
        prerequisites: &Prerequisites,
    ) {
        let Some(events) = self.events() else {
            return;
        };
        let prerequisites = prerequisites.0.take();
        // Without prerequisites, `record_evaluation` tried the repeat already.
        let try_repeat = !prerequisites.is_empty();
        for p in prerequisites {
            let result = &p.result;
            events.recorder.evaluation(&EvalRecord {
                key: &p.flag.key,
                context,
                flag: Some(&p.flag),
                variation: index(result.variation_index),
                value: &|| {
                    result
                        .value
                        .as_ref()
                        .and_then(FlagValue::as_json)
                        .unwrap_or(Value::Null)
                },
                default: &|| Value::Null,
                reason: &result.reason,
                with_reason,
                prereq_of: Some(&p.of),
            });
        }
        let (flag, variation) = (flag.map(|f| &**f), index(variation));
        // The common case first, before the record is even put together.
        if try_repeat && events.recorder.count_repeat(flag, variation, context) {
            return;
        }
        events.recorder.count_through_shard(&EvalRecord {
            key,
            context,
            flag,
            variation,
            value,
            default,
            reason,
            with_reason,
            prereq_of: None,
        });
    }
}
