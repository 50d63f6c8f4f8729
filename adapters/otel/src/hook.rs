//! The [`TracingHook`] and its builder.

use std::borrow::Cow;
use std::sync::Mutex;

use flagsync::hooks::{
    EvaluationDetail, EvaluationSeriesContext, EvaluationSeriesData, Hook, HookError, Metadata,
};
use opentelemetry::global::{self, BoxedSpan, BoxedTracer};
use opentelemetry::trace::{Span, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};

/// The event's name in the current semantic conventions.
const EVENT: &str = "feature_flag.evaluation";
/// The event's name in LaunchDarkly's hooks before the semantic conventions named it.
const LEGACY_EVENT: &str = "feature_flag";
/// The provider name LaunchDarkly's hooks write.
const PROVIDER: &str = "LaunchDarkly";
/// The key of the span in the evaluation series data.
const SPAN_DATA: &str = "flagsync-otel-span";

/// A hook adding flag evaluations to OpenTelemetry traces (see the [crate docs](crate)).
#[derive(Debug)]
pub struct TracingHook {
    include_value: bool,
    legacy_event_name: bool,
    environment_id: Option<String>,
    /// Present when the hook makes a span per evaluation.
    tracer: Option<BoxedTracer>,
}

/// Settings for a [`TracingHook`]; made by [`TracingHook::builder`]. Everything is off by
/// default, as LaunchDarkly's hooks have it.
#[derive(Debug, Default)]
#[must_use]
pub struct TracingHookBuilder {
    include_value: bool,
    spans: bool,
    legacy_event_name: bool,
    environment_id: Option<String>,
    tracer: Option<BoxedTracer>,
}

impl TracingHookBuilder {
    /// Add the evaluated value to the event (`feature_flag.result.value`, as JSON text).
    /// Off by default: values may be personal data.
    pub fn include_value(mut self, on: bool) -> Self {
        self.include_value = on;
        self
    }

    /// Run each evaluation in a span of its own. Off by default.
    pub fn spans(mut self, on: bool) -> Self {
        self.spans = on;
        self
    }

    /// Name the event `feature_flag` (LaunchDarkly's hooks before the semantic conventions)
    /// instead of `feature_flag.evaluation`.
    pub fn legacy_event_name(mut self, on: bool) -> Self {
        self.legacy_event_name = on;
        self
    }

    /// The environment id for `feature_flag.set.id`, instead of the one the flag service
    /// reports. An empty id is refused (logged) and the reported one is used.
    pub fn environment_id(mut self, id: impl Into<String>) -> Self {
        let id = id.into();
        if id.is_empty() {
            tracing::warn!("flagsync-otel: an empty environment id is ignored");
            self.environment_id = None;
        } else {
            self.environment_id = Some(id);
        }
        self
    }

    /// The tracer the evaluation spans come from (default: the global provider's, scope
    /// `flagsync`). Implies nothing by itself: spans are made only with
    /// [`TracingHookBuilder::spans`].
    pub fn tracer(mut self, tracer: BoxedTracer) -> Self {
        self.tracer = Some(tracer);
        self
    }

    /// The hook.
    pub fn build(self) -> TracingHook {
        let tracer = self
            .spans
            .then(|| self.tracer.unwrap_or_else(|| global::tracer("flagsync")));
        TracingHook {
            include_value: self.include_value,
            legacy_event_name: self.legacy_event_name,
            environment_id: self.environment_id,
            tracer,
        }
    }
}

impl TracingHook {
    /// Settings for a hook.
    pub fn builder() -> TracingHookBuilder {
        TracingHookBuilder::default()
    }

    /// A hook with every option off: the event only, without the value.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// The event's attributes for one evaluation.
    fn attributes(
        &self,
        series: &EvaluationSeriesContext<'_>,
        detail: &EvaluationDetail<'_>,
    ) -> Vec<KeyValue> {
        let mut attributes = Vec::with_capacity(8);
        attributes.push(KeyValue::new(
            "feature_flag.key",
            series.flag_key.to_owned(),
        ));
        attributes.push(KeyValue::new("feature_flag.provider.name", PROVIDER));
        attributes.push(KeyValue::new(
            "feature_flag.context.id",
            series.context.canonical_key().to_owned(),
        ));
        if let Some(index) = detail.variation_index() {
            attributes.push(KeyValue::new(
                "feature_flag.result.variant",
                index.to_string(),
            ));
            attributes.push(KeyValue::new(
                "feature_flag.result.variationIndex",
                i64::try_from(index).unwrap_or(i64::MAX),
            ));
        }
        if detail.reason().is_in_experiment() {
            attributes.push(KeyValue::new(
                "feature_flag.result.reason.inExperiment",
                true,
            ));
        }
        if self.include_value {
            attributes.push(KeyValue::new(
                "feature_flag.result.value",
                detail.value().to_string(),
            ));
        }
        if let Some(id) = self
            .environment_id
            .as_deref()
            .or_else(|| series.environment_id())
        {
            attributes.push(KeyValue::new("feature_flag.set.id", id.to_owned()));
        }
        attributes
    }
}

impl Default for TracingHook {
    fn default() -> Self {
        Self::new()
    }
}

/// LaunchDarkly's span name for a variation method: `BoolVariationDetail` →
/// `LDClient.boolVariationDetail`.
fn span_name(method: &str) -> String {
    let mut name = String::with_capacity(9 + method.len());
    name.push_str("LDClient.");
    let mut chars = method.chars();
    if let Some(first) = chars.next() {
        name.extend(first.to_lowercase());
        name.extend(chars);
    }
    name
}

impl Hook for TracingHook {
    fn metadata(&self) -> Metadata {
        Metadata::new("LaunchDarkly Tracing Hook")
    }

    fn before_evaluation(
        &self,
        series: &EvaluationSeriesContext<'_>,
        data: EvaluationSeriesData,
    ) -> Result<EvaluationSeriesData, HookError> {
        let Some(tracer) = &self.tracer else {
            return Ok(data);
        };
        let parent = Context::current();
        let span = tracer
            .span_builder(span_name(series.method))
            .with_attributes([
                KeyValue::new("feature_flag.key", series.flag_key.to_owned()),
                KeyValue::new(
                    "feature_flag.context.key",
                    series.context.canonical_key().to_owned(),
                ),
            ])
            .start_with_context(tracer, &parent);
        Ok(data.with(SPAN_DATA, Mutex::new(Some(span))))
    }

    fn after_evaluation(
        &self,
        series: &EvaluationSeriesContext<'_>,
        data: EvaluationSeriesData,
        detail: &EvaluationDetail<'_>,
    ) -> Result<EvaluationSeriesData, HookError> {
        // The evaluation's own span ends first, so the event lands on the caller's span.
        if let Some(slot) = data.get::<Mutex<Option<BoxedSpan>>>(SPAN_DATA)
            && let Some(mut span) = slot.lock().unwrap_or_else(|e| e.into_inner()).take()
        {
            span.end();
        }
        let context = Context::current();
        if !context.has_active_span() {
            return Ok(data);
        }
        let name = if self.legacy_event_name {
            LEGACY_EVENT
        } else {
            EVENT
        };
        let attributes = self.attributes(series, detail);
        context.span().add_event(Cow::Borrowed(name), attributes);
        Ok(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_names_are_launchdarkly_s() {
        assert_eq!(span_name("BoolVariation"), "LDClient.boolVariation");
        assert_eq!(
            span_name("StringVariationDetail"),
            "LDClient.stringVariationDetail"
        );
        assert_eq!(
            span_name("MigrationVariation"),
            "LDClient.migrationVariation"
        );
    }

    #[test]
    fn an_empty_environment_id_is_ignored() {
        let hook = TracingHook::builder().environment_id("").build();
        assert_eq!(hook.environment_id, None);
        let hook = TracingHook::builder().environment_id("env-1").build();
        assert_eq!(hook.environment_id.as_deref(), Some("env-1"));
    }
}
