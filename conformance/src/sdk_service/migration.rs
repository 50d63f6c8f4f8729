//! The migration commands: `migrationVariation` and `migrationOperation`, with a
//! [`Migrator`] whose origins are the harness's HTTP endpoints.

use std::time::Duration;

use flagsync::Client;
use flagsync::eval::Context;
use flagsync::migration::{ExecutionOrder, Migrator, Stage};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::service_http::post;

/// How long an origin call may take.
const ORIGIN_TIMEOUT: Duration = Duration::from_secs(20);

/// `migrationVariation`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VariationParams {
    /// The migration flag.
    pub key: String,
    /// The context.
    pub context: Context,
    /// The stage when the flag cannot say.
    pub default_stage: String,
}

/// `migrationOperation`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationParams {
    /// The migration flag.
    pub key: String,
    /// The context.
    pub context: Context,
    /// The stage when the flag cannot say.
    pub default_stage: String,
    /// `serial`, `concurrent` or `random`.
    pub read_execution_order: String,
    /// `read` or `write`.
    pub operation: String,
    /// The old origin: POST the payload, the answer's body is the result.
    pub old_endpoint: String,
    /// The new origin.
    pub new_endpoint: String,
    /// The payload.
    #[serde(default)]
    pub payload: Option<String>,
    /// Measure latencies.
    #[serde(default)]
    pub track_latency: bool,
    /// Record errors.
    #[serde(default)]
    pub track_errors: bool,
    /// Compare the two reads (as strings).
    #[serde(default)]
    pub track_consistency: bool,
}

fn stage(name: &str) -> Result<Stage, String> {
    name.parse()
        .map_err(|_| format!("unknown migration stage {name:?}"))
}

fn execution_order(name: &str) -> Result<ExecutionOrder, String> {
    match name {
        "serial" => Ok(ExecutionOrder::Serial),
        "concurrent" | "parallel" => Ok(ExecutionOrder::Parallel),
        "random" => Ok(ExecutionOrder::Random),
        other => Err(format!("unknown read execution order {other:?}")),
    }
}

/// `migrationVariation`: `{"result": stage}`.
pub fn variation(client: &Client, p: &VariationParams) -> Result<Value, String> {
    let (stage, _tracker) =
        client.migration_variation(&p.key, &p.context, stage(&p.default_stage)?);
    Ok(json!({ "result": stage.to_string() }))
}

/// One origin call: POST the payload to `endpoint` on a blocking thread; a 200 answer's
/// body is the value, anything else an error.
async fn call(endpoint: String, payload: Option<String>) -> Result<String, String> {
    smol::unblock(move || {
        let body = payload.unwrap_or_default();
        match post(&endpoint, "text/plain", body.as_bytes(), ORIGIN_TIMEOUT) {
            Ok(reply) if reply.status == 200 => {
                Ok(String::from_utf8_lossy(&reply.body).into_owned())
            }
            Ok(reply) => Err(format!("Request failed with status code {}", reply.status)),
            Err(e) => Err(format!("Request failed: {e}")),
        }
    })
    .await
}

/// `migrationOperation`: `{"result": value or error}`.
pub async fn operation(client: &Client, p: OperationParams) -> Result<Value, String> {
    let default_stage = stage(&p.default_stage)?;
    let order = execution_order(&p.read_execution_order)?;
    let (old, new) = (p.old_endpoint.clone(), p.new_endpoint.clone());
    let (old_w, new_w) = (old.clone(), new.clone());
    let builder = Migrator::<Option<String>, String, String>::builder(client.clone())
        .read_execution_order(order)
        .track_latency(p.track_latency)
        .track_errors(p.track_errors)
        .write(
            move |payload| call(old_w.clone(), payload),
            move |payload| call(new_w.clone(), payload),
        );
    let old_read = move |payload| call(old.clone(), payload);
    let new_read = move |payload| call(new.clone(), payload);
    let builder = if p.track_consistency {
        builder.read_with_comparison(old_read, new_read, |a: &String, b: &String| a == b)
    } else {
        builder.read(old_read, new_read)
    };
    let migrator = builder.build().map_err(|e| e.to_string())?;
    let result = match p.operation.as_str() {
        "read" => {
            migrator
                .read(&p.key, &p.context, default_stage, p.payload)
                .await
                .result
        }
        "write" => {
            migrator
                .write(&p.key, &p.context, default_stage, p.payload)
                .await
                .authoritative
                .result
        }
        other => return Err(format!("unknown migration operation {other:?}")),
    };
    Ok(json!({ "result": result.unwrap_or_else(|e| e) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_read_as_the_harness_sends_them() {
        assert_eq!(execution_order("concurrent"), Ok(ExecutionOrder::Parallel));
        assert_eq!(execution_order("serial"), Ok(ExecutionOrder::Serial));
        assert!(execution_order("sideways").is_err());
        assert_eq!(stage("dualwrite"), Ok(Stage::DualWrite));
        assert!(stage("nope").is_err());
    }
}
