//! The SDK contract service: LaunchDarkly's sdk-test-harness drives `flagsync::Client`
//! through it (the harness's `docs/service_spec.md`).
//!
//! ```text
//!  GET /            status: name, version, the capabilities declared below
//!  POST /           create a client from the harness's configuration → /clients/N
//!  POST /clients/N  a command: evaluate, evaluateAll, contextBuild, contextConvert,
//!                   contextComparison, secureModeHash, migrationVariation,
//!                   migrationOperation, identifyEvent, customEvent, flushEvents,
//!                   registerFlagChangeListener, registerFlagValueChangeListener,
//!                   unregisterListener, getBigSegmentStoreStatus (anything else: 400
//!                   with the reason)
//!  DELETE /clients/N, DELETE /   close the client; stop the service
//! ```
//!
//! It uses flagsync's public API only, so whatever it needs and the API lacks is a gap in
//! the API. Requests are served by std threads ([`crate::service_http`]); the clients run
//! on the runtime chosen with `--runtime`.

pub mod bigseg;
pub mod config;
pub mod context;
pub mod hooks;
pub mod listeners;
pub mod migration;
pub mod runtime;

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use flagsync::eval::{AllFlagsOptions, Context, Detail};
use flagsync::{Client, DataAvailability};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::service_http::{After, Request, Response};
use config::CreateParams;
use listeners::Listeners;
use runtime::ServiceRuntime;

/// What this service declares (the harness's `servicedef/service_params.go`): each one
/// works.
pub const CAPABILITIES: &[&str] = &[
    "server-side",
    "server-side-polling",
    "strongly-typed",
    "all-flags-with-reasons",
    "all-flags-client-side-only",
    "all-flags-details-only-for-tracked-flags",
    "context-type",
    "context-comparison",
    "user-type",
    "secure-mode-hash",
    "service-endpoints",
    "tags",
    "filtering",
    "filtering-strict",
    "polling-gzip",
    "instance-id",
    "wrapper",
    "http-proxy",
    "tls:verify-peer",
    "tls:skip-verify-peer",
    "tls:custom-ca",
    "retry-conformance-fdv1-streaming",
    "retry-conformance-fdv1-polling",
    "persistent-data-store-redis",
    "migrations",
    "client-prereq-events",
    "event-gzip",
    "optional-event-gzip",
    "event-sampling",
    "inline-context",
    "inline-context-all",
    "anonymous-redaction",
    "omit-anonymous-contexts",
    "fdv1-fallback",
    "flag-change-listeners",
    "flag-value-change-listeners",
    "big-segments",
    "evaluation-hooks",
    "track-hooks",
    "hook-environment-id",
];

/// The service: its runtime and the clients it made.
#[derive(Debug)]
pub struct Service {
    runtime: ServiceRuntime,
    clients: Mutex<HashMap<u64, Client>>,
    listeners: Listeners,
    next_id: AtomicU64,
    /// Capabilities declared beyond [`CAPABILITIES`] (`--capability`), to run a group
    /// whose capability is not declared yet.
    extra_capabilities: Vec<String>,
}

/// A command's body: the name, and its parameters under the same name.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Command {
    command: String,
    #[serde(flatten)]
    params: serde_json::Map<String, Value>,
}

/// `evaluate`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EvaluateParams {
    flag_key: String,
    #[serde(default)]
    context: Option<Context>,
    #[serde(default)]
    user: Option<Context>,
    #[serde(default)]
    value_type: Option<String>,
    #[serde(default)]
    default_value: Value,
    #[serde(default)]
    detail: bool,
}

/// `evaluateAll`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct EvaluateAllParams {
    #[serde(default)]
    context: Option<Context>,
    #[serde(default)]
    user: Option<Context>,
    #[serde(default)]
    with_reasons: bool,
    #[serde(default)]
    client_side_only: bool,
    #[serde(default)]
    details_only_for_tracked_flags: bool,
}

/// A command that takes only a context (`secureModeHash`).
#[derive(Debug, Deserialize)]
struct ContextParams {
    #[serde(default)]
    context: Option<Context>,
    #[serde(default)]
    user: Option<Context>,
}

/// `customEvent`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CustomEventParams {
    event_key: String,
    #[serde(default)]
    context: Option<Context>,
    #[serde(default)]
    user: Option<Context>,
    #[serde(default)]
    data: Option<Value>,
    #[serde(default)]
    metric_value: Option<f64>,
}

/// `context`, else the old-style `user` (the same JSON reader takes both).
fn either(context: Option<Context>, user: Option<Context>) -> Result<Context, String> {
    context
        .or(user)
        .ok_or_else(|| "neither context nor user given".to_owned())
}

/// A 400 for a request the service cannot take.
fn bad(message: impl AsRef<str>) -> Response {
    Response::text(400, message.as_ref())
}

/// The parameters of `command`, from the property of the same name.
fn params<T: DeserializeOwned>(cmd: &Command) -> Result<T, Response> {
    let value = cmd
        .params
        .get(&cmd.command)
        .cloned()
        .ok_or_else(|| bad(format!("{}: no parameters", cmd.command)))?;
    serde_json::from_value(value).map_err(|e| bad(format!("{}: {e}", cmd.command)))
}

/// A detail as the harness reads it: the value, then with `detail` the variation index
/// and the reason.
fn detail_json<T: serde::Serialize>(d: Detail<T>, with_detail: bool) -> Value {
    let mut out = json!({ "value": d.value });
    if with_detail {
        out["variationIndex"] = json!(d.variation_index);
        out["reason"] = serde_json::to_value(&d.reason).unwrap_or(Value::Null);
    }
    out
}

impl Service {
    /// A service whose clients run on `runtime`.
    pub fn new(runtime: ServiceRuntime) -> Self {
        Self {
            runtime,
            clients: Mutex::new(HashMap::new()),
            listeners: Listeners::default(),
            next_id: AtomicU64::new(1),
            extra_capabilities: Vec::new(),
        }
    }

    /// Also declare `capabilities` (for trying a harness group before it passes).
    #[must_use]
    pub fn with_extra_capabilities(mut self, capabilities: Vec<String>) -> Self {
        self.extra_capabilities = capabilities;
        self
    }

    fn clients(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Client>> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answer one request.
    pub fn handle(&self, req: &Request) -> (Response, After) {
        let path = req.path.split('?').next().unwrap_or("");
        let resp = match (req.method.as_str(), path) {
            ("GET", "/") => Response::json(&json!({
                "name": "flagsync",
                "clientVersion": env!("CARGO_PKG_VERSION"),
                "capabilities": CAPABILITIES
                    .iter()
                    .copied()
                    .chain(self.extra_capabilities.iter().map(String::as_str))
                    .collect::<Vec<_>>(),
            })),
            ("DELETE", "/") => return (Response::empty(204), After::Exit),
            ("POST", "/") => self.create(&req.body),
            (method, p) => match p.strip_prefix("/clients/").and_then(|id| id.parse().ok()) {
                None => Response::text(404, "not found"),
                Some(id) => match method {
                    "POST" => self.command(id, &req.body),
                    "DELETE" => self.close(id),
                    _ => Response::text(405, "method not allowed"),
                },
            },
        };
        (resp, After::Continue)
    }

    /// `POST /`: build, start and wait for a client.
    fn create(&self, body: &[u8]) -> Response {
        let params: CreateParams = match serde_json::from_slice(body) {
            Ok(p) => p,
            Err(e) => return bad(format!("invalid configuration: {e}")),
        };
        let tag = params.tag.as_deref().unwrap_or("");
        let config = &params.configuration;
        let builder = match config.builder(&self.runtime) {
            Ok(b) => b,
            Err(refusal) => return Response::text(refusal.status, &refusal.message),
        };
        let client = match builder.build() {
            Ok(c) => c,
            Err(e) => return Response::text(500, &format!("cannot build the client: {e}")),
        };
        if let Err(e) = client.start() {
            return Response::text(500, &format!("cannot start the client: {e}"));
        }
        // Ready as the reference SDKs' `is_initialized()` reads it: a full data set, or
        // data a persistent store vouches for (daemon mode).
        let ready = self
            .runtime
            .block_on(client.wait_for_initialization(config.start_wait()))
            || client
                .data_availability()
                .at_least(DataAvailability::Cached);
        // A client that did not initialize is still usable, and is answered 201 even
        // without `initCanFail`: the harness's own tests create clients that must fail
        // to connect (an invalid certificate) without setting it. The service log says
        // what happened.
        if !ready {
            let status = client.status();
            eprintln!(
                "sdk-contract-service: [{tag}] not initialized after {:?} (initCanFail: {}): {:?}",
                config.start_wait(),
                config.init_can_fail == Some(true),
                status
            );
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.clients().insert(id, client);
        Response::empty(201).with_header("Location", &format!("/clients/{id}"))
    }

    /// `DELETE /clients/N`.
    fn close(&self, id: u64) -> Response {
        let client = self.clients().remove(&id);
        self.listeners.remove_client(id);
        match client {
            Some(client) => {
                self.runtime.block_on(client.close());
                Response::empty(204)
            }
            None => Response::text(404, "unknown client"),
        }
    }

    /// `POST /clients/N`.
    fn command(&self, id: u64, body: &[u8]) -> Response {
        let Some(client) = self.clients().get(&id).cloned() else {
            return Response::text(404, "unknown client");
        };
        let cmd: Command = match serde_json::from_slice(body) {
            Ok(c) => c,
            Err(e) => return bad(format!("invalid command: {e}")),
        };
        match self.run(id, &client, &cmd) {
            Ok(Value::Null) => Response::empty(204),
            Ok(value) => Response::json(&value),
            Err(resp) => resp,
        }
    }

    fn run(&self, id: u64, client: &Client, cmd: &Command) -> Result<Value, Response> {
        match cmd.command.as_str() {
            "evaluate" => evaluate(client, params(cmd)?).map_err(bad),
            "evaluateAll" => {
                let p: EvaluateAllParams = params(cmd)?;
                let context = either(p.context, p.user).map_err(bad)?;
                let options = AllFlagsOptions::new()
                    .with_reasons(p.with_reasons)
                    .client_side_only(p.client_side_only)
                    .details_only_for_tracked_flags(p.details_only_for_tracked_flags);
                let state = client.all_flags_state(&context, options);
                Ok(json!({ "state": state }))
            }
            "contextBuild" => Ok(context::build(&params(cmd)?)),
            "contextConvert" => Ok(context::convert(&params(cmd)?)),
            "contextComparison" => context::compare(&params(cmd)?).map_err(bad),
            "secureModeHash" => {
                let p: ContextParams = params(cmd)?;
                let context = either(p.context, p.user).map_err(bad)?;
                Ok(json!({ "result": client.secure_mode_hash(&context) }))
            }
            "migrationVariation" => migration::variation(client, &params(cmd)?).map_err(bad),
            "migrationOperation" => {
                let p = params(cmd)?;
                self.runtime
                    .block_on(migration::operation(client, p))
                    .map_err(bad)
            }
            "identifyEvent" => {
                let p: ContextParams = params(cmd)?;
                client.identify(&either(p.context, p.user).map_err(bad)?);
                Ok(Value::Null)
            }
            "customEvent" => {
                let p: CustomEventParams = params(cmd)?;
                let context = either(p.context, p.user).map_err(bad)?;
                // `data` absent or null is no data (the track variants of the spec
                // differ only in which arguments they pass).
                let data = p.data.filter(|d| !d.is_null());
                client.track(&p.event_key, &context, data, p.metric_value);
                Ok(Value::Null)
            }
            "flushEvents" => {
                client.flush();
                Ok(Value::Null)
            }
            "registerFlagChangeListener" => {
                self.listeners.flag_changes(id, client, params(cmd)?);
                Ok(Value::Null)
            }
            "registerFlagValueChangeListener" => {
                self.listeners.value_changes(id, client, params(cmd)?);
                Ok(Value::Null)
            }
            "unregisterListener" => {
                let p: listeners::UnregisterParams = params(cmd)?;
                if self.listeners.remove(id, &p.listener_id) {
                    Ok(Value::Null)
                } else {
                    Err(bad(format!("no listener {:?}", p.listener_id)))
                }
            }
            "getBigSegmentStoreStatus" => {
                let status = client.big_segment_store_status();
                Ok(json!({
                    "available": status.is_some_and(|s| s.available),
                    "stale": status.is_some_and(|s| s.stale),
                }))
            }
            other => Err(bad(format!("unknown command {other:?}"))),
        }
    }
}

/// `evaluate` with the typed method `valueType` names: the `*_detail` method when
/// `detail` is asked for, the plain one otherwise (events carry reasons only for the
/// first).
fn evaluate(client: &Client, p: EvaluateParams) -> Result<Value, String> {
    let context = either(p.context, p.user)?;
    let key = p.flag_key.as_str();
    let d = &p.default_value;
    let wrong = |t: &str| format!("defaultValue {d} is not of valueType {t}");
    let c = &context;
    Ok(match p.value_type.as_deref().unwrap_or("any") {
        "bool" => {
            let default = d.as_bool().ok_or_else(|| wrong("bool"))?;
            if p.detail {
                detail_json(client.bool_variation_detail(key, c, default), true)
            } else {
                json!({ "value": client.bool_variation(key, c, default) })
            }
        }
        "int" => {
            let default = d
                .as_i64()
                .or_else(|| d.as_f64().map(|f| f as i64))
                .ok_or_else(|| wrong("int"))?;
            if p.detail {
                detail_json(client.int_variation_detail(key, c, default), true)
            } else {
                json!({ "value": client.int_variation(key, c, default) })
            }
        }
        "double" => {
            let default = d.as_f64().ok_or_else(|| wrong("double"))?;
            if p.detail {
                detail_json(client.float_variation_detail(key, c, default), true)
            } else {
                json!({ "value": client.float_variation(key, c, default) })
            }
        }
        "string" => {
            let default = d.as_str().ok_or_else(|| wrong("string"))?;
            if p.detail {
                detail_json(client.string_variation_detail(key, c, default), true)
            } else {
                json!({ "value": client.string_variation(key, c, default) })
            }
        }
        "any" => {
            if p.detail {
                detail_json(client.json_variation_detail(key, c, d.clone()), true)
            } else {
                json!({ "value": client.json_variation(key, c, d.clone()) })
            }
        }
        other => return Err(format!("unknown valueType {other:?}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, path: &str, body: Value) -> Request {
        Request {
            method: method.into(),
            path: path.into(),
            body: body.to_string().into_bytes(),
        }
    }

    #[test]
    fn the_status_lists_the_capabilities() {
        let service = Service::new(ServiceRuntime::Smol);
        let (resp, after) = service.handle(&request("GET", "/", Value::Null));
        assert_eq!((resp.status, after), (200, After::Continue));
        let body: Value = serde_json::from_slice(&resp.body).expect("json");
        assert_eq!(
            body["capabilities"].as_array().map(Vec::len),
            Some(CAPABILITIES.len())
        );
        assert!(
            body["capabilities"]
                .as_array()
                .expect("list")
                .contains(&json!("server-side"))
        );
    }

    #[test]
    fn bad_requests_are_400_never_a_panic() {
        let service = Service::new(ServiceRuntime::Smol);
        let create = service
            .handle(&request("POST", "/", json!({"configuration": 3})))
            .0;
        assert_eq!(create.status, 400);
        let unknown = service
            .handle(&request("POST", "/clients/9", json!({"command": "x"})))
            .0;
        assert_eq!(unknown.status, 404);
    }

    #[test]
    fn commands_without_a_capability_are_400_with_a_reason() {
        let service = Service::new(ServiceRuntime::Smol);
        // A client that never connects: no data source can be reached on port 1.
        let created = service
            .handle(&request(
                "POST",
                "/",
                json!({"tag": "t", "configuration": {"credential": "k", "startWaitTimeMs": 1,
                    "initCanFail": true, "streaming": {"baseUri": "http://127.0.0.1:1"}}}),
            ))
            .0;
        assert_eq!(created.status, 201);
        let location = created
            .headers
            .iter()
            .find(|(n, _)| n == "Location")
            .map(|(_, v)| v.clone())
            .expect("a Location");
        let flushed = service
            .handle(&request(
                "POST",
                &location,
                json!({"command": "flushEvents"}),
            ))
            .0;
        assert_eq!(flushed.status, 204, "a flush needs no events configured");
        for command in ["identifyEvent", "customEvent", "nonsense"] {
            let resp = service
                .handle(&request("POST", &location, json!({"command": command})))
                .0;
            assert_eq!(resp.status, 400, "{command}");
            assert!(!resp.body.is_empty(), "{command}: a reason");
        }
        let missing = service
            .handle(&request("POST", &location, json!({"command": "evaluate"})))
            .0;
        assert_eq!(missing.status, 400);
        // Before data, every evaluation is the default with CLIENT_NOT_READY.
        let eval = service
            .handle(&request(
                "POST",
                &location,
                json!({"command": "evaluate", "evaluate": {"flagKey": "f",
                    "context": {"kind": "user", "key": "u"}, "valueType": "int",
                    "defaultValue": 7, "detail": true}}),
            ))
            .0;
        let body: Value = serde_json::from_slice(&eval.body).expect("json");
        assert_eq!(body["value"], json!(7));
        assert_eq!(
            body["reason"],
            json!({"kind": "ERROR", "errorKind": "CLIENT_NOT_READY"})
        );
        let closed = service.handle(&request("DELETE", &location, Value::Null)).0;
        assert_eq!(closed.status, 204);
    }
}
