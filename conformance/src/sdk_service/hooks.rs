//! The harness's test hook (capabilities `evaluation-hooks`, `track-hooks`,
//! `hook-environment-id`): a [`Hook`] that POSTs every stage it runs to the harness's
//! callback URI, returns the data the configuration gives for the stage merged into
//! the data it was handed, and fails a stage the configuration lists under `errors`
//! (without posting).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use flagsync::hooks::{
    EvaluationDetail, EvaluationSeriesContext, EvaluationSeriesData, Hook, HookError, Metadata,
    TrackSeriesContext,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::service_http::post;

/// One entry of the configuration's `hooks.hooks`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HookConfig {
    /// The hook's name.
    pub name: String,
    /// Where each stage is POSTed.
    pub callback_uri: String,
    /// Per stage (`beforeEvaluation`, `afterEvaluation`): data the stage returns.
    #[serde(default)]
    pub data: HashMap<String, Map<String, Value>>,
    /// Per stage: an error message the stage fails with instead (null: no error).
    #[serde(default)]
    pub errors: HashMap<String, Option<String>>,
}

/// The configuration's `hooks`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct HooksConfig {
    /// The hooks, in registration order.
    #[serde(default)]
    pub hooks: Vec<HookConfig>,
}

impl HooksConfig {
    /// The hooks to register.
    pub fn build(&self) -> Vec<Arc<dyn Hook>> {
        self.hooks
            .iter()
            .map(|c| Arc::new(TestHook(c.clone())) as Arc<dyn Hook>)
            .collect()
    }
}

/// How long one callback POST may take.
const CALLBACK_TIMEOUT: Duration = Duration::from_secs(5);

/// A configured test hook.
#[derive(Debug)]
pub struct TestHook(HookConfig);

impl TestHook {
    /// The error configured for `stage`, if any.
    fn error(&self, stage: &str) -> Result<(), HookError> {
        match self.0.errors.get(stage) {
            Some(Some(message)) => Err(message.clone().into()),
            _ => Ok(()),
        }
    }

    fn notify(&self, payload: &Value) {
        let body = payload.to_string().into_bytes();
        if let Err(e) = post(
            &self.0.callback_uri,
            "application/json",
            &body,
            CALLBACK_TIMEOUT,
        ) {
            eprintln!(
                "sdk-contract-service: hook {} callback failed: {e}",
                self.0.name
            );
        }
    }

    /// `data` with the values configured for `stage` added.
    fn merge(&self, stage: &str, mut data: EvaluationSeriesData) -> EvaluationSeriesData {
        if let Some(extra) = self.0.data.get(stage) {
            for (k, v) in extra {
                data = data.with(k.clone(), v.clone());
            }
        }
        data
    }
}

/// The data as the harness reads it: every JSON value (this hook stores only those).
fn data_json(data: &EvaluationSeriesData) -> Value {
    let map: Map<String, Value> = data
        .keys()
        .filter_map(|k| data.get::<Value>(k).map(|v| (k.to_owned(), v.clone())))
        .collect();
    Value::Object(map)
}

fn series_json(s: &EvaluationSeriesContext<'_>) -> Value {
    let mut out = json!({
        "flagKey": s.flag_key,
        "context": s.context,
        "defaultValue": s.default_value(),
        "method": s.method,
    });
    if let Some(env) = s.environment_id() {
        out["environmentId"] = json!(env);
    }
    out
}

impl Hook for TestHook {
    fn metadata(&self) -> Metadata {
        Metadata::new(self.0.name.clone())
    }

    fn before_evaluation(
        &self,
        series: &EvaluationSeriesContext<'_>,
        data: EvaluationSeriesData,
    ) -> Result<EvaluationSeriesData, HookError> {
        const STAGE: &str = "beforeEvaluation";
        self.error(STAGE)?;
        self.notify(&json!({
            "evaluationSeriesContext": series_json(series),
            "evaluationSeriesData": data_json(&data),
            "stage": STAGE,
        }));
        Ok(self.merge(STAGE, data))
    }

    fn after_evaluation(
        &self,
        series: &EvaluationSeriesContext<'_>,
        data: EvaluationSeriesData,
        detail: &EvaluationDetail<'_>,
    ) -> Result<EvaluationSeriesData, HookError> {
        const STAGE: &str = "afterEvaluation";
        self.error(STAGE)?;
        self.notify(&json!({
            "evaluationSeriesContext": series_json(series),
            "evaluationSeriesData": data_json(&data),
            "evaluationDetail": {
                "value": detail.value(),
                "variationIndex": detail.variation_index(),
                "reason": detail.reason(),
            },
            "stage": STAGE,
        }));
        Ok(self.merge(STAGE, data))
    }

    fn after_track(&self, series: &TrackSeriesContext<'_>) -> Result<(), HookError> {
        const STAGE: &str = "afterTrack";
        self.error(STAGE)?;
        let mut context = json!({
            "key": series.key,
            "context": series.context,
        });
        if let Some(data) = series.data {
            context["data"] = data.clone();
        }
        if let Some(metric) = series.metric_value {
            context["metricValue"] = json!(metric);
        }
        if let Some(env) = series.environment_id() {
            context["environmentId"] = json!(env);
        }
        self.notify(&json!({ "trackSeriesContext": context, "stage": STAGE }));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_merges_its_configured_data_and_fails_when_told() {
        let config: HooksConfig = serde_json::from_value(json!({"hooks": [{
            "name": "h", "callbackUri": "http://127.0.0.1:1/x",
            "data": {"beforeEvaluation": {"a": 1}},
            "errors": {"afterEvaluation": "no", "afterTrack": null}
        }]}))
        .expect("config");
        let hook = TestHook(config.hooks[0].clone());
        let merged = hook.merge(
            "beforeEvaluation",
            EvaluationSeriesData::new().with("b", json!(2)),
        );
        assert_eq!(data_json(&merged), json!({"a": 1, "b": 2}));
        assert!(hook.error("afterEvaluation").is_err());
        assert!(hook.error("afterTrack").is_ok());
        assert!(hook.error("beforeEvaluation").is_ok());
    }
}
