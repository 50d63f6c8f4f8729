//! The endpoints: which request goes where (FDv1 stream and poll, FDv2 stream and
//! poll, events), authorization, and the responses.

use std::io;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use crate::http::{Request, write_response};

use crate::data::Encoded;
use crate::events::PayloadKind;
use crate::fault::Endpoint;
use crate::hub::{Frame, NewStream};
use crate::metrics::StreamKind;
use crate::state::{EnvRefusal, Readiness, Shared};
use crate::transport::Transport;
use crate::{events, fdv2, http};

/// Directs FDv2 clients to FDv1 for good (PROTOCOL.md B §5.4, §5.5).
pub(crate) const FALLBACK_HEADER: (&str, &str) = ("X-LD-FD-Fallback", "true");

pub(crate) enum Routed {
    /// A plain response was written; `true` if the connection may be reused.
    Done(bool),
    /// The connection went to the stream hub.
    Streamed,
}

/// Why a request is refused before its body matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// No such endpoint: 404.
    NotFound,
    /// The endpoint takes only this method: 405.
    Method(&'static str),
    /// A server with an SDK key got another or none: 401.
    Unauthorized,
    /// The key is served, but not with the request's payload filter: 404.
    UnknownFilter,
}

/// What `req` is for, or why it is refused whatever its body: an unknown path, the
/// wrong method or the wrong SDK key. Checked before the body is read when the client
/// asked `Expect: 100-continue`, so that it is answered without sending the body.
pub(crate) fn accepted(
    shared: &Shared,
    req: &Request,
    endpoint: Option<Endpoint>,
) -> Result<(Endpoint, usize), Refused> {
    let endpoint = endpoint.ok_or(Refused::NotFound)?;
    let method = if endpoint.is_events() { "POST" } else { "GET" };
    if req.method != method {
        return Err(Refused::Method(method));
    }
    // Events are the environment's whatever filter its SDKs use.
    let filter = (!endpoint.is_events())
        .then(|| req.query("filter"))
        .flatten()
        .filter(|f| !f.is_empty());
    let env = shared
        .lock()
        .env_for(req.header("authorization"), filter.as_deref());
    env.map(|env| (endpoint, env)).map_err(|e| match e {
        EnvRefusal::Unauthorized => Refused::Unauthorized,
        EnvRefusal::UnknownFilter => Refused::UnknownFilter,
    })
}

/// Where a request's answer goes: a response into `out`, or a stream's connection
/// (taken from `io`) to the hub.
pub(crate) struct Conn<'a> {
    /// The response's bytes.
    pub(crate) out: &'a mut Vec<u8>,
    /// The connection, taken when it becomes a stream.
    pub(crate) io: &'a mut Option<Transport>,
}

/// Serve `req`. `error_headers` go on error responses (`Content-Type`, and the FDv1
/// fallback directive when it applies).
pub(crate) fn route(
    shared: &Arc<Shared>,
    req: &Request,
    endpoint: Option<Endpoint>,
    error_headers: &[(&str, &str)],
    conn: &mut Conn<'_>,
) -> Routed {
    let (status, body, allow) = match accepted(shared, req, endpoint) {
        Ok((endpoint, env)) => return serve(shared, env, req, endpoint, error_headers, conn),
        Err(Refused::Method(method)) => (
            405,
            "{\"message\":\"method not allowed\"}".to_owned(),
            Some(method),
        ),
        Err(Refused::Unauthorized) => (401, "{\"message\":\"invalid SDK key\"}".to_owned(), None),
        Err(Refused::UnknownFilter) => {
            let filter = req.query("filter").unwrap_or_default();
            let message = format!("payload filter {filter:?} is not served here");
            (
                404,
                serde_json::json!({ "message": message }).to_string(),
                None,
            )
        }
        Err(Refused::NotFound) => (
            404,
            format!(
                "{{\"message\":\"not found: {} (this server serves GET /all, /sdk/latest-all, /sdk/stream and /sdk/poll, and POST /bulk and /diagnostic)\"}}",
                req.path().replace(['"', '\\'], "")
            ),
            None,
        ),
    };
    let mut headers: Vec<(&str, &str)> = allow.map(|m| ("Allow", m)).into_iter().collect();
    headers.extend_from_slice(error_headers);
    Routed::Done(write_response(conn.out, status, &headers, body.as_bytes(), req.close).is_ok())
}

/// Serve an accepted request on `endpoint` for environment `env`.
fn serve(
    shared: &Arc<Shared>,
    env: usize,
    req: &Request,
    endpoint: Endpoint,
    error_headers: &[(&str, &str)],
    conn: &mut Conn<'_>,
) -> Routed {
    let fallback = error_headers.contains(&FALLBACK_HEADER);
    if !endpoint.is_events() {
        let readiness = shared.lock().envs[env].readiness(Instant::now());
        let stream_waits = readiness == Readiness::Waiting
            && matches!(endpoint, Endpoint::Fdv1Stream | Endpoint::Fdv2Stream);
        if readiness != Readiness::Ready && !stream_waits {
            // As LaunchDarkly's Relay Proxy answers before it has the environment's data.
            let body = b"{\"message\":\"this environment has no flag data yet\"}";
            let mut headers = vec![("Retry-After", "1")];
            headers.extend_from_slice(error_headers);
            return Routed::Done(write_response(conn.out, 503, &headers, body, req.close).is_ok());
        }
    }
    match endpoint {
        Endpoint::Fdv1Poll => Routed::Done(serve_poll(shared, env, req, conn.out).is_ok()),
        Endpoint::Fdv2Poll => {
            Routed::Done(serve_fdv2_poll(shared, env, req, fallback, conn.out).is_ok())
        }
        Endpoint::Fdv1Stream | Endpoint::Fdv2Stream => {
            match serve_stream(shared, env, req, endpoint, fallback, conn.io) {
                Ok(()) => Routed::Streamed,
                Err(_) => Routed::Done(false),
            }
        }
        Endpoint::Bulk => {
            Routed::Done(serve_events(shared, env, PayloadKind::Bulk, req, conn.out).is_ok())
        }
        Endpoint::Diagnostic => {
            Routed::Done(serve_events(shared, env, PayloadKind::Diagnostic, req, conn.out).is_ok())
        }
    }
}

/// `POST …/bulk`, `POST …/diagnostic`: decode and check the body, hand it to the
/// subscriptions (never waiting for them), answer `202` with no body.
pub(crate) fn serve_events(
    shared: &Shared,
    env: usize,
    kind: PayloadKind,
    req: &Request,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    match events::accept(kind, req, shared.max_body, SystemTime::now()) {
        Ok(payload) => {
            shared.publish_received(env, payload);
            write_response(out, 202, &[], b"", req.close)
        }
        Err(refusal) => {
            let body = format!("{{\"message\":\"{}\"}}", refusal.message);
            let headers = [("Content-Type", "application/json")];
            write_response(out, refusal.status, &headers, body.as_bytes(), req.close)
        }
    }
}

pub(crate) fn serve_poll(
    shared: &Shared,
    env: usize,
    req: &Request,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    let (rendered, env_id) = {
        let mut inner = shared.lock();
        let e = &mut inner.envs[env];
        (e.data.rendered(), e.env_id.clone())
    };
    let mut headers: Vec<(&str, &str)> = vec![("ETag", &rendered.etag)];
    if let Some(env) = &env_id {
        headers.push(("X-LD-EnvID", env));
    }
    if etag_matches(req, &rendered.etag) {
        return write_response(out, 304, &headers, b"", req.close);
    }
    headers.push(("Content-Type", "application/json"));
    headers.push(("Vary", "Accept-Encoding"));
    if req.accepts_gzip() {
        headers.push(("Content-Encoding", "gzip"));
        write_response(out, 200, &headers, rendered.body.gzipped(), req.close)
    } else {
        write_response(out, 200, &headers, &rendered.body.bytes, req.close)
    }
}

/// Whether an `If-None-Match` header names `etag` (or is `*`).
pub(crate) fn etag_matches(req: &Request, etag: &str) -> bool {
    req.header("if-none-match")
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"))
}

/// `/sdk/poll`: the first payload for the request's `basis` as one JSON body, with an
/// `ETag` naming the selector state it brings the client to: `If-None-Match` with the
/// current one gets `304` (the client already holds this state).
pub(crate) fn serve_fdv2_poll(
    shared: &Shared,
    env: usize,
    req: &Request,
    fallback: bool,
    out: &mut Vec<u8>,
) -> io::Result<()> {
    let basis = req.query("basis");
    let (etag, body, env_id) = {
        let mut inner = shared.lock();
        let env_id = inner.envs[env].env_id.clone();
        let objects = inner.envs[env].data.fdv2_objects();
        let etag = format!("\"fdv2-{}\"", objects.state);
        let current = basis.as_deref() == Some(objects.state.as_str());
        let body = if etag_matches(req, &etag) {
            None
        } else if !current && !inner.faults.take_payload_error() {
            // A full transfer: encoded once per data version.
            Some(fdv2::full_poll_body(&objects, basis.is_some()))
        } else {
            let error = !current;
            let events = fdv2::initial_payload(&objects, basis.as_deref(), error);
            Some(Arc::new(Encoded::new(
                fdv2::to_poll_body(&events).into_bytes(),
            )))
        };
        (etag, body, env_id)
    };
    let mut headers: Vec<(&str, &str)> = vec![("ETag", &etag)];
    if let Some(env) = &env_id {
        headers.push(("X-LD-EnvID", env));
    }
    if fallback {
        headers.push(FALLBACK_HEADER);
    }
    let Some(body) = body else {
        return write_response(out, 304, &headers, b"", req.close);
    };
    headers.push(("Content-Type", "application/json"));
    headers.push(("Vary", "Accept-Encoding"));
    if req.accepts_gzip() {
        headers.push(("Content-Encoding", "gzip"));
        write_response(out, 200, &headers, body.gzipped(), req.close)
    } else {
        write_response(out, 200, &headers, &body.bytes, req.close)
    }
}

/// Open a stream: render its first payload and hand the connection to the hub under
/// one lock, so that no change falls between them and the first change sent. The
/// first payload is shared with every stream opened on the same data (a full
/// transfer is encoded once per data version).
pub(crate) fn serve_stream(
    shared: &Arc<Shared>,
    env: usize,
    req: &Request,
    endpoint: Endpoint,
    fallback: bool,
    io: &mut Option<Transport>,
) -> io::Result<()> {
    let socket = io.take().ok_or(io::ErrorKind::NotConnected)?;
    let fdv2 = endpoint == Endpoint::Fdv2Stream;
    let chunked = !req.http10;
    let mut inner = shared.lock();
    let e = &mut inner.envs[env];
    let mut headers: Vec<(&str, &str)> = Vec::new();
    if let Some(id) = &e.env_id {
        headers.push(("X-LD-EnvID", id));
    }
    if fallback {
        headers.push(FALLBACK_HEADER);
    }
    let head = http::stream_head(chunked, &headers);
    let ready = e.starting_until.is_none();
    let (first, close_after) = if !ready {
        // Waiting for data: the whole data set follows when it arrives.
        (None, false)
    } else if !fdv2 {
        (Some(e.data.rendered().put_event()), false)
    } else {
        let basis = req.query("basis");
        let objects = e.data.fdv2_objects();
        let current = basis.as_deref() == Some(objects.state.as_str());
        let error = !current && inner.faults.take_payload_error();
        let goodbye = inner.faults.take_goodbye();
        let first = if !current && !error && !goodbye {
            fdv2::initial_frame(&objects, basis.is_some())
        } else {
            let mut events = fdv2::initial_payload(&objects, basis.as_deref(), error);
            if goodbye {
                events.push(fdv2::goodbye("injected fault: goodbye"));
            }
            Frame::new(fdv2::to_sse(&events).into_bytes())
        };
        (Some(first), goodbye)
    };
    shared.hub.add(NewStream {
        socket,
        env,
        kind: if fdv2 {
            StreamKind::Fdv2
        } else {
            StreamKind::Fdv1
        },
        chunked,
        head,
        first,
        close_after,
        evaluated: None,
    });
    drop(inner);
    Ok(())
}
