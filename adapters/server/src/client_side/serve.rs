//! Answering a client-side or mobile request: CORS, the environment (by client-side ID
//! or mobile key), secure mode, then the evaluated flags (polled, or a stream handed
//! to the hub), goals or events.
//!
//! Statuses, as LaunchDarkly's Relay Proxy answers them (`relay/relay_endpoints.go`,
//! `internal/middleware`): `404` for an unknown client-side ID, `401` for an unknown
//! mobile key, `400` with a JSON message for a missing or wrong secure mode hash and
//! for a context that is not base64, not JSON or not a valid context, `415` for a
//! `REPORT` whose body is not `application/json`, `405` for another method, `503`
//! while the environment has no data (as the server-side endpoints). Browser events answer `202`; the image
//! endpoint a 1×1 transparent GIF.

use std::io;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use flagsync_eval::{Context, SecureModeKey};

use crate::client_side::cors;
use crate::client_side::eval::{EvalStart, EvalStream, Sdk, all_flags};
use crate::client_side::path::{self, Auth, Ctx, Route, What};
use crate::events::{self, EventOrigin, PayloadKind};
use crate::http::{self, Request, write_response};
use crate::hub::NewStream;
use crate::metrics::StreamKind;
use crate::routes::{Conn, Routed};
use crate::state::{Inner, Readiness, Shared};

/// A 1×1 transparent GIF, the answer to `GET /a/{envId}.gif`.
const GIF: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
    0xff, 0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00,
    0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];

/// The environments client-side and mobile requests may reach: not a payload
/// filter's.
fn candidates(inner: &Inner) -> impl Iterator<Item = (usize, &crate::state::Env)> {
    inner
        .envs
        .iter()
        .enumerate()
        .filter(|(_, e)| e.filter.is_none())
}

/// The environment when none names itself: the default one, unless it serves nobody
/// (added environments, no SDK key of its own), then the first added one.
fn fallback(inner: &Inner) -> usize {
    let added = inner.envs[1..].iter().position(|e| !e.default_variant);
    match added {
        Some(i) if inner.envs[0].sdk_key.is_none() => i + 1,
        _ => 0,
    }
}

/// The environment of client-side ID `id` (see the module docs of
/// [`crate::client_side`]).
fn env_by_id(inner: &Inner, id: &str) -> Option<usize> {
    let mut any = false;
    for (i, e) in candidates(inner) {
        match &e.client.client_side_id {
            Some(own) if own == id => return Some(i),
            Some(_) => any = true,
            None => {}
        }
    }
    (!any).then(|| fallback(inner))
}

/// The environment of the mobile key in `authorization`.
fn env_by_mobile_key(inner: &Inner, authorization: Option<&str>) -> Option<usize> {
    let key = authorization.map(|v| v.strip_prefix("api_key ").unwrap_or(v).trim());
    let mut any = false;
    for (i, e) in candidates(inner) {
        match &e.client.mobile_key {
            Some(own) if Some(own.as_str()) == key => return Some(i),
            Some(_) => any = true,
            None => {}
        }
    }
    (!any).then(|| fallback(inner))
}

/// A JSON error body.
fn message(text: &str) -> String {
    serde_json::json!({ "message": text }).to_string()
}

/// A response's headers: CORS ones (client-side requests) and others.
struct Headers(Vec<(&'static str, String)>);

impl Headers {
    fn with<'a>(&'a self, more: &[(&'static str, &'a str)]) -> Vec<(&'a str, &'a str)> {
        let mut all: Vec<(&str, &str)> = self.0.iter().map(|(n, v)| (*n, v.as_str())).collect();
        all.extend_from_slice(more);
        all
    }
}

/// Serve a request `route` classified as client-side or mobile.
pub(crate) fn serve(
    shared: &Arc<Shared>,
    req: &Request,
    route: Route<'_>,
    conn: &mut Conn<'_>,
) -> Routed {
    let found = {
        let inner = shared.lock();
        let env = match route.auth {
            Auth::EnvId(id) => env_by_id(&inner, id),
            Auth::Mobile => env_by_mobile_key(&inner, req.header("authorization")),
        };
        env.map(|i| (i, inner.envs[i].client.allowed_origins.clone()))
    };
    let cors = match route.auth {
        Auth::EnvId(_) => {
            let allowed = found.as_ref().map(|(_, a)| a.as_slice()).unwrap_or(&[]);
            cors::headers(req.header("origin"), allowed)
        }
        Auth::Mobile => Vec::new(),
    };
    let headers = Headers(cors);
    let json = [("Content-Type", "application/json")];
    let out = &mut *conn.out;
    let answer = |out: &mut Vec<u8>, status: u16, more: &[(&'static str, &str)], body: &[u8]| {
        Routed::Done(write_response(out, status, &headers.with(more), body, req.close).is_ok())
    };
    if req.method == "OPTIONS" {
        return answer(out, 200, &[("Allow", cors::ALLOWED_METHODS)], b"");
    }
    let method = route.method();
    if req.method != method {
        let body = message("method not allowed");
        return answer(out, 405, &[json[0], ("Allow", method)], body.as_bytes());
    }
    let Some((env, _)) = found else {
        return match route.auth {
            Auth::EnvId(_) => answer(
                out,
                404,
                &json,
                message("unknown environment ID").as_bytes(),
            ),
            Auth::Mobile => answer(out, 401, &json, message("invalid mobile key").as_bytes()),
        };
    };
    let sdk = match route.auth {
        Auth::EnvId(_) => Sdk::ClientSide,
        Auth::Mobile => Sdk::Mobile,
    };
    match route.what {
        What::Goals => {
            let goals = shared.lock().envs[env].client.goals.clone();
            let body = goals.as_deref().unwrap_or(b"[]").to_vec();
            answer(out, 200, &json, &body)
        }
        What::Events(diagnostic) => {
            let kind = if diagnostic {
                PayloadKind::Diagnostic
            } else {
                PayloadKind::Bulk
            };
            match publish(shared, env, route, kind, req) {
                Ok(()) => answer(out, 202, &[], b""),
                Err((status, text)) => answer(out, status, &json, message(&text).as_bytes()),
            }
        }
        What::Gif => {
            let Some(d) = req.query("d") else {
                return answer(out, 400, &json, message("no events (`d`) given").as_bytes());
            };
            let Some(body) = path::base64_decode(&d) else {
                return answer(out, 400, &json, message("`d` is not base64").as_bytes());
            };
            let mut posted = req.clone();
            posted.body = body;
            posted
                .headers
                .retain(|(n, _)| !n.eq_ignore_ascii_case("content-encoding"));
            match publish(shared, env, route, PayloadKind::Bulk, &posted) {
                Ok(()) => answer(out, 200, &[("Content-Type", "image/gif")], GIF),
                Err((status, text)) => answer(out, status, &json, message(&text).as_bytes()),
            }
        }
        What::Poll(ctx) | What::Stream(ctx) => {
            let readiness = shared.lock().envs[env].readiness(Instant::now());
            if readiness != Readiness::Ready {
                let body = message("this environment has no flag data yet");
                return answer(out, 503, &[json[0], ("Retry-After", "1")], body.as_bytes());
            }
            let json_body = req
                .header("content-type")
                .is_some_and(|t| t.trim_start().starts_with("application/json"));
            if ctx == Ctx::Body && !json_body {
                let body = message("Content-Type must be application/json.");
                return answer(out, 415, &json, body.as_bytes());
            }
            let context = match path::context(ctx, &req.body) {
                Ok(c) => c,
                Err(text) => return answer(out, 400, &json, message(&text).as_bytes()),
            };
            if sdk == Sdk::ClientSide && !secure_mode_ok(shared, env, req, &context) {
                let body =
                    message("Environment is in secure mode, and context hash does not match.");
                return answer(out, 400, &json, body.as_bytes());
            }
            let stream = EvalStream {
                context,
                sdk,
                with_reasons: req.query("withReasons").as_deref() == Some("true"),
            };
            if route.streams() {
                match open_stream(shared, env, req, stream, &headers, conn.io) {
                    Ok(()) => Routed::Streamed,
                    Err(_) => Routed::Done(false),
                }
            } else {
                let (snapshot, version, env_id) = {
                    let mut inner = shared.lock();
                    let e = &mut inner.envs[env];
                    (e.data.eval_snapshot(), e.data.version(), e.env_id.clone())
                };
                let body = all_flags(&snapshot, &stream, version);
                let mut more = vec![json[0]];
                if let Some(id) = &env_id {
                    more.push(("X-LD-EnvID", id));
                }
                answer(out, 200, &more, &body)
            }
        }
    }
}

/// Whether the request satisfies the environment's secure mode: none required, or `h`
/// is the context's hash with the environment's SDK key.
fn secure_mode_ok(shared: &Shared, env: usize, req: &Request, context: &Context) -> bool {
    let key = {
        let inner = shared.lock();
        let e = &inner.envs[env];
        if !e.client.secure_mode {
            return true;
        }
        SecureModeKey::new(e.sdk_key.as_deref().unwrap_or_default())
    };
    req.query("h")
        .is_some_and(|h| h.eq_ignore_ascii_case(&key.context_hash(context)))
}

/// Decode a browser's or mobile SDK's events and hand them to the event subscriptions,
/// marked with their origin. `Err`: a status and message.
fn publish(
    shared: &Shared,
    env: usize,
    route: Route<'_>,
    kind: PayloadKind,
    req: &Request,
) -> Result<(), (u16, String)> {
    let mut payload = events::accept(kind, req, shared.max_body, SystemTime::now())
        .map_err(|r| (r.status, r.message.to_owned()))?;
    payload.origin = match route.auth {
        Auth::EnvId(id) => EventOrigin::ClientSide {
            env_id: id.to_owned(),
        },
        Auth::Mobile => EventOrigin::Mobile,
    };
    shared.publish_received(env, payload);
    Ok(())
}

/// Hand the connection to the hub as an evaluating stream: its data taken under the
/// lock (so that no change falls between it and the next), evaluated by the hub.
fn open_stream(
    shared: &Shared,
    env: usize,
    req: &Request,
    stream: EvalStream,
    headers: &Headers,
    io: &mut Option<crate::transport::Transport>,
) -> io::Result<()> {
    let socket = io.take().ok_or(io::ErrorKind::NotConnected)?;
    let chunked = !req.http10;
    let mut inner = shared.lock();
    let e = &mut inner.envs[env];
    let env_id = e.env_id.clone();
    let mut more: Vec<(&'static str, &str)> = Vec::new();
    if let Some(id) = &env_id {
        more.push(("X-LD-EnvID", id));
    }
    let head = http::stream_head(chunked, &headers.with(&more));
    let start = EvalStart {
        stream,
        snapshot: e.data.eval_snapshot(),
        version: e.data.version(),
    };
    shared.hub.add(NewStream {
        socket,
        env,
        kind: StreamKind::Client,
        chunked,
        head,
        first: None,
        close_after: false,
        evaluated: Some(Box::new(start)),
    });
    drop(inner);
    Ok(())
}
