//! The OpenFeature Remote Evaluation Protocol (OFREP 0.3): OpenFeature's OFREP
//! providers evaluate the server's flags over HTTP, with the same environments, SDK
//! keys and payload filters as the LaunchDarkly endpoints.
//!
//! | Request | Answer |
//! | --- | --- |
//! | `POST …/ofrep/v1/evaluate/flags/{key}` `{"context":{…}}` | `200 {key, value, reason, variant, metadata}` (reasons as `flagsync-openfeature` gives them: see [`answer`]); `404 FLAG_NOT_FOUND`; `400` `PARSE_ERROR` (a body that is not a JSON object, a malformed flag), `TARGETING_KEY_MISSING`, `INVALID_CONTEXT`; `500 GENERAL` |
//! | `POST …/ofrep/v1/evaluate/flags` `{"context":{…}}` | `200 {flags: [...], metadata: {version}, eventStreams: [...]}` with an `ETag`; `If-None-Match` naming it → `304`; `400 {errorCode, errorDetails}` for the whole request |
//! | `GET …/ofrep/v1/changes?channel=T` | the change notices of `eventStreams` ([`notices`]) |
//! | `OPTIONS` any of them | `204`, CORS preflight |
//!
//! Decisions:
//! - **Auth**: `Authorization: Bearer <SDK key>` or `X-API-Key: <SDK key>` (also a bare
//!   `Authorization: <SDK key>`, as the LaunchDarkly endpoints take it) chooses the
//!   environment as the other endpoints do (a server without an SDK key takes any or
//!   none); a key no environment has is `401`, a known key with a payload filter
//!   (`?filter=`) that is not served `403`. Keys are never logged.
//! - **Not ready**: an environment without data yet answers `503` with `Retry-After: 1`
//!   (as the LaunchDarkly endpoints do).
//! - **The context**: see [`ofrep_context`]. A body without
//!   `context` is an empty context (`TARGETING_KEY_MISSING`).
//! - **Bulk**: every live flag of the environment, by key (a server-side key sees all
//!   flags, not only client-side ones). Its `ETag` is a hash of the `flags` answered,
//!   so a re-fetch after a change that does not change this context's answers is
//!   `304`. `eventStreams` has one `sse` entry whose `endpoint.requestUri` (the path as
//!   the request came, base path included, no origin: the provider's base URL's
//!   origin applies) names the environment's notice channel.
//! - **CORS**: every answer to a request with an `Origin` allows that origin and
//!   exposes `ETag`; a preflight allows `POST`, `GET`, `OPTIONS` and the headers
//!   `Authorization`, `Content-Type`, `If-None-Match`, `X-API-Key` (and any others it
//!   asks for), for 10 minutes, and a private network when asked
//!   (`Access-Control-Allow-Private-Network`, Chrome's Private Network Access). No rate
//!   limit, so no `429`.
//! - **Analytics**: every flag evaluated (single or bulk, a `304` included) is
//!   reported as an SDK reports an evaluation ([`analytics`]).
//! - The server's scripted faults and recorded requests do not apply to these
//!   endpoints.

mod analytics;
mod answer;
mod channels;
pub(crate) mod context;
pub(crate) mod flusher;
mod handle;
pub(crate) mod notices;
pub(crate) mod shared;

use std::hash::{DefaultHasher, Hasher};
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use flagsync_core::{Kind, Snapshot};
use flagsync_eval::{Context, Options, SlotModels, evaluate_flag};
use serde_json::Value;

use crate::http::{Request, write_response};
use crate::state::{EnvRefusal, Readiness, Shared};
use crate::transport::Transport;
use analytics::{Evaluated, event_context, record, unix_ms};
use answer::{Outcome, write_evaluation, write_str};
use context::{OfrepContextError, ofrep_context};

/// Where OFREP's paths start.
const BASE: &str = "/ofrep/v1/";

/// The headers a preflight allows.
const ALLOWED_HEADERS: &str = "Authorization, Content-Type, If-None-Match, X-API-Key";

/// How long a client waits, once its notice stream is idle, before closing it.
const INACTIVITY_DELAY_SEC: u32 = 120;

/// An OFREP endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// `POST …/ofrep/v1/evaluate/flags/{key}`.
    Single,
    /// `POST …/ofrep/v1/evaluate/flags`.
    Bulk,
    /// `GET …/ofrep/v1/changes`.
    Changes,
}

impl Route {
    /// The OFREP endpoint a request path is for, if any.
    pub(crate) fn of_path(path: &str) -> Option<Self> {
        let rest = &path[path.find(BASE)? + BASE.len()..];
        match rest {
            "evaluate/flags" => Some(Self::Bulk),
            "changes" => Some(Self::Changes),
            _ => rest
                .strip_prefix("evaluate/flags/")
                .filter(|key| !key.is_empty())
                .map(|_| Self::Single),
        }
    }

    /// Its name in the request metrics.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Single => "/ofrep/v1/evaluate/flags/{key}",
            Self::Bulk => "/ofrep/v1/evaluate/flags",
            Self::Changes => "/ofrep/v1/changes",
        }
    }

    /// Whether a request may become a stream.
    pub(crate) fn streams(self) -> bool {
        self == Self::Changes
    }

    fn method(self) -> &'static str {
        match self {
            Self::Single | Self::Bulk => "POST",
            Self::Changes => "GET",
        }
    }
}

/// How an OFREP request was answered.
pub(crate) enum Served {
    /// A response was written; `true` if the connection may be reused.
    Done(bool),
    /// The connection went to the stream hub.
    Streamed,
}

/// A response under construction: its CORS headers, then the answer.
struct Answer<'a> {
    req: &'a Request,
    out: &'a mut Vec<u8>,
    cors: Vec<(&'static str, String)>,
}

impl Answer<'_> {
    fn send(&mut self, status: u16, extra: &[(&str, &str)], body: &[u8]) -> bool {
        let mut headers: Vec<(&str, &str)> =
            self.cors.iter().map(|(n, v)| (*n, v.as_str())).collect();
        if !body.is_empty() {
            headers.push(("Content-Type", "application/json"));
        }
        headers.extend_from_slice(extra);
        write_response(self.out, status, &headers, body, self.req.close).is_ok()
    }

    /// `{"errorCode": code, "errorDetails": details}`, with `key` when there is one.
    fn error(&mut self, status: u16, key: Option<&str>, code: &str, details: &str) -> bool {
        let mut body = Vec::with_capacity(96);
        body.push(b'{');
        if let Some(key) = key {
            body.extend_from_slice(b"\"key\":");
            write_str(&mut body, key);
            body.push(b',');
        }
        body.extend_from_slice(b"\"errorCode\":");
        write_str(&mut body, code);
        body.extend_from_slice(b",\"errorDetails\":");
        write_str(&mut body, details);
        body.push(b'}');
        self.send(status, &[], &body)
    }
}

/// Serve an OFREP request on `route`.
pub(crate) fn serve(
    shared: &Arc<Shared>,
    req: &Request,
    route: Route,
    out: &mut Vec<u8>,
    io: &mut Option<Transport>,
) -> Served {
    let mut cors = Vec::new();
    if let Some(origin) = req.header("origin") {
        cors.push(("Access-Control-Allow-Origin", origin.to_owned()));
        cors.push(("Vary", "Origin".to_owned()));
        cors.push(("Access-Control-Expose-Headers", "ETag".to_owned()));
    }
    let mut answer = Answer { req, out, cors };
    if req.method == "OPTIONS" {
        return Served::Done(preflight(&mut answer));
    }
    if req.method != route.method() {
        let allow = format!("{}, OPTIONS", route.method());
        let body = b"{\"errorDetails\":\"method not allowed\"}";
        return Served::Done(answer.send(405, &[("Allow", &allow)], body));
    }
    if route == Route::Changes {
        let env = req
            .query("channel")
            .and_then(|t| shared.ofrep.channels.env_of(&t));
        let Some(env) = env else {
            let body = b"{\"errorDetails\":\"unknown change channel\"}";
            return Served::Done(answer.send(401, &[], body));
        };
        let cors: Vec<(&str, &str)> = answer.cors.iter().map(|(n, v)| (*n, v.as_str())).collect();
        return match notices::open(shared, env, req, &cors, io) {
            Ok(()) => Served::Streamed,
            Err(_) => Served::Done(false),
        };
    }
    Served::Done(evaluate(shared, req, route, &mut answer))
}

/// `OPTIONS`: the CORS preflight.
fn preflight(answer: &mut Answer<'_>) -> bool {
    let mut allowed = ALLOWED_HEADERS.to_owned();
    if let Some(asked) = answer.req.header("access-control-request-headers") {
        for h in asked.split(',').map(str::trim).filter(|h| !h.is_empty()) {
            let known = ALLOWED_HEADERS
                .split(", ")
                .any(|a| a.eq_ignore_ascii_case(h));
            if !known && h.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                allowed.push_str(", ");
                allowed.push_str(h);
            }
        }
    }
    let mut headers = vec![
        ("Access-Control-Allow-Methods", "POST, GET, OPTIONS"),
        ("Access-Control-Allow-Headers", allowed.as_str()),
        ("Access-Control-Max-Age", "600"),
        ("Allow", "POST, GET, OPTIONS"),
    ];
    // Chrome's Private Network Access: a page of a public origin may call a server on
    // the loopback or a private address only if the preflight allows it.
    let private = answer
        .req
        .header("access-control-request-private-network")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if private {
        headers.push(("Access-Control-Allow-Private-Network", "true"));
    }
    answer.send(204, &headers, b"")
}

/// The SDK key a request names: `Authorization: Bearer K`, `X-API-Key: K`, or a bare
/// `Authorization: K`.
fn sdk_key(req: &Request) -> Option<&str> {
    if let Some(auth) = req.header("authorization") {
        let auth = auth.trim();
        let bearer = auth
            .get(..7)
            .filter(|s| s.eq_ignore_ascii_case("bearer "))
            .map(|_| auth[7..].trim());
        return Some(bearer.unwrap_or(auth));
    }
    req.header("x-api-key").map(str::trim)
}

/// What an evaluating request needs from the server's state, taken under its lock.
struct Target {
    snapshot: Snapshot,
    /// The environment its analytics go to (the unfiltered one of its key), and the
    /// name they carry.
    events: Option<(usize, Option<String>)>,
    /// The environment evaluated.
    env: usize,
    /// Its data version.
    version: u64,
}

/// Evaluate one flag or all: authorize, read the context, answer.
fn evaluate(shared: &Arc<Shared>, req: &Request, route: Route, answer: &mut Answer<'_>) -> bool {
    let key = sdk_key(req);
    let filter = req.query("filter").filter(|f| !f.is_empty());
    let target = {
        let mut inner = shared.lock();
        let env = match inner.env_for(key, filter.as_deref()) {
            Ok(env) => env,
            Err(EnvRefusal::Unauthorized) => {
                drop(inner);
                let body = b"{\"errorDetails\":\"invalid SDK key\"}";
                return answer.send(401, &[], body);
            }
            Err(EnvRefusal::UnknownFilter) => {
                drop(inner);
                let body = b"{\"errorDetails\":\"this payload filter is not served here\"}";
                return answer.send(403, &[], body);
            }
        };
        if inner.envs[env].readiness(Instant::now()) != Readiness::Ready {
            drop(inner);
            let body = b"{\"errorDetails\":\"this environment has no flag data yet\"}";
            return answer.send(503, &[("Retry-After", "1")], body);
        }
        let events = inner.env_for(key, None).ok().map(|e| {
            let name =
                (e > 0 && !inner.envs[e].default_variant).then(|| inner.envs[e].name.clone());
            (e, name)
        });
        Target {
            snapshot: inner.envs[env].data.eval_snapshot(),
            events,
            env,
            version: inner.envs[env].data.version(),
        }
    };
    let flag_key = (route == Route::Single).then(|| single_key(req.path()));
    let context = match read_context(&req.body) {
        Ok(context) => context,
        Err((code, details)) => {
            return answer.error(400, flag_key.as_deref(), code, &details);
        }
    };
    let now = Instant::now();
    let mut records = Vec::new();
    let ok = match &flag_key {
        Some(key) => {
            let (outcome, body) = single(&target.snapshot, key, &context, &mut records);
            answer.send(outcome.status(), &[], &body)
        }
        None => bulk(shared, req, &target, &context, &mut records, answer),
    };
    if let Some((env, name)) = target.events {
        let payloads = shared
            .ofrep
            .analytics
            .submit(env, name.as_deref(), records, now);
        flusher::publish(shared, payloads);
        flusher::ensure_timer(shared);
    }
    ok
}

/// The request's `context`, as a LaunchDarkly context.
fn read_context(body: &[u8]) -> Result<Context, (&'static str, String)> {
    let parsed: Value = serde_json::from_slice(body).map_err(|e| {
        (
            answer::PARSE_ERROR,
            format!("the request body is not JSON: {e}"),
        )
    })?;
    let Value::Object(mut fields) = parsed else {
        return Err((
            answer::PARSE_ERROR,
            "the request body must be a JSON object".to_owned(),
        ));
    };
    let context = fields
        .remove("context")
        .unwrap_or_else(|| Value::Object(Default::default()));
    ofrep_context(&context).map_err(|OfrepContextError { code, message, .. }| (code, message))
}

/// The flag key of a single evaluation's path, percent-decoded.
fn single_key(path: &str) -> String {
    let start = path.find(BASE).map_or(0, |i| i + BASE.len()) + "evaluate/flags/".len();
    percent_decode(path.get(start..).unwrap_or_default())
}

/// `%XX` escapes decoded (a malformed one is kept as it is; `+` is a `+` in a path).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(h), Some(l)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            #[allow(clippy::cast_possible_truncation, reason = "two hex digits")]
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Evaluate flag `key` of `snapshot` for `context` into `out`, adding its analytics
/// record to `records`.
fn evaluate_into(
    snapshot: &Snapshot,
    key: &str,
    context: &Context,
    events_context: Option<&Arc<flagsync_core::events::EventContext>>,
    out: &mut Vec<u8>,
    records: &mut Vec<flagsync_core::events::Evaluation>,
    unix_ms: u64,
) -> Outcome {
    evaluate_flag(
        snapshot,
        &SlotModels,
        key,
        context,
        Options::default(),
        |flag, detail| {
            let outcome = write_evaluation(out, key, &detail);
            if let Some(ec) = events_context {
                let evaluated = Evaluated {
                    key,
                    flag,
                    detail: &detail,
                };
                records.push(record(&evaluated, ec, unix_ms));
            }
            outcome
        },
    )
}

/// One flag: its outcome and body.
fn single(
    snapshot: &Snapshot,
    key: &str,
    context: &Context,
    records: &mut Vec<flagsync_core::events::Evaluation>,
) -> (Outcome, Vec<u8>) {
    let mut body = Vec::with_capacity(192);
    let ec = event_context(context);
    let outcome = evaluate_into(
        snapshot,
        key,
        context,
        ec.as_ref(),
        &mut body,
        records,
        unix_ms(),
    );
    (outcome, body)
}

/// Every flag, with an `ETag`, `304` when `If-None-Match` names it.
fn bulk(
    shared: &Shared,
    req: &Request,
    target: &Target,
    context: &Context,
    records: &mut Vec<flagsync_core::events::Evaluation>,
    answer: &mut Answer<'_>,
) -> bool {
    let ec = event_context(context);
    let now_ms = unix_ms();
    let mut flags = Vec::with_capacity(4096);
    flags.extend_from_slice(b"{\"flags\":[");
    for (i, (key, _)) in target.snapshot.sorted(Kind::Flag).into_iter().enumerate() {
        if i > 0 {
            flags.push(b',');
        }
        evaluate_into(
            &target.snapshot,
            key,
            context,
            ec.as_ref(),
            &mut flags,
            records,
            now_ms,
        );
    }
    flags.push(b']');
    let mut hasher = DefaultHasher::new();
    hasher.write(&flags);
    let etag = format!("\"ofrep-{:016x}\"", hasher.finish());
    let matches = req
        .header("if-none-match")
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    if matches {
        return answer.send(304, &[("ETag", &etag)], b"");
    }
    let version = target.version;
    let token = shared.ofrep.channels.token(target.env);
    let prefix = &req.path()[..req.path().find(BASE).unwrap_or(0)];
    let uri = format!("{prefix}{BASE}changes?channel={token}");
    let _ = write!(flags, ",\"metadata\":{{\"version\":{version}}}");
    flags.extend_from_slice(b",\"eventStreams\":[{\"type\":\"sse\",\"endpoint\":{\"requestUri\":");
    write_str(&mut flags, &uri);
    let _ = write!(
        flags,
        "}},\"inactivityDelaySec\":{INACTIVITY_DELAY_SEC}}}]}}"
    );
    answer.send(200, &[("ETag", &etag)], &flags)
}
