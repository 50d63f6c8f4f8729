//! The endpoints: which request goes where (FDv1 stream and poll, FDv2 stream and
//! poll, events), authorization, and the responses.

use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::{Instant, SystemTime};

use crate::http::{Request, write_response};

use crate::events::PayloadKind;
use crate::fault::Endpoint;
use crate::handle::{Shared, StreamMsg, StreamSub, sse_event};
use crate::{events, fdv2, http};

/// Directs FDv2 clients to FDv1 for good (PROTOCOL.md B §5.4, §5.5).
pub(crate) const FALLBACK_HEADER: (&str, &str) = ("X-LD-FD-Fallback", "true");

pub(crate) enum Routed {
    /// A plain response was written; `true` if the connection may be reused.
    Done(bool),
    /// A stream was served until it ended.
    Streamed,
}

pub(crate) fn authorized(shared: &Shared, req: &Request) -> bool {
    let Some(key) = &shared.sdk_key else {
        return true;
    };
    match req.header("authorization") {
        Some(v) => v == key || v.strip_prefix("api_key ") == Some(key.as_str()),
        None => false,
    }
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
}

/// Whether `req` is refused whatever its body: an unknown path, the wrong method or
/// the wrong SDK key. Checked before the body is read when the client asked
/// `Expect: 100-continue`, so that it is answered without sending the body.
pub(crate) fn refused(
    shared: &Shared,
    req: &Request,
    endpoint: Option<Endpoint>,
) -> Option<Refused> {
    let Some(endpoint) = endpoint else {
        return Some(Refused::NotFound);
    };
    let method = if endpoint.is_events() { "POST" } else { "GET" };
    if req.method != method {
        return Some(Refused::Method(method));
    }
    (!authorized(shared, req)).then_some(Refused::Unauthorized)
}

/// Serve `req`. `error_headers` go on error responses (`Content-Type`, and the FDv1
/// fallback directive when it applies).
pub(crate) fn route(
    shared: &Arc<Shared>,
    id: u64,
    req: &Request,
    endpoint: Option<Endpoint>,
    error_headers: &[(&str, &str)],
    stream: &mut TcpStream,
) -> Routed {
    let (status, body, allow) = match (refused(shared, req, endpoint), endpoint) {
        (None, Some(endpoint)) => return serve(shared, id, req, endpoint, error_headers, stream),
        (Some(Refused::Method(method)), _) => (
            405,
            "{\"message\":\"method not allowed\"}".to_owned(),
            Some(method),
        ),
        (Some(Refused::Unauthorized), _) => {
            (401, "{\"message\":\"invalid SDK key\"}".to_owned(), None)
        }
        (Some(Refused::NotFound), _) | (None, None) => (
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
    Routed::Done(write_response(stream, status, &headers, body.as_bytes(), req.close).is_ok())
}

/// Serve an accepted request on `endpoint`.
fn serve(
    shared: &Arc<Shared>,
    id: u64,
    req: &Request,
    endpoint: Endpoint,
    error_headers: &[(&str, &str)],
    stream: &mut TcpStream,
) -> Routed {
    let fallback = error_headers.contains(&FALLBACK_HEADER);
    match endpoint {
        Endpoint::Fdv1Poll => Routed::Done(serve_poll(shared, req, stream).is_ok()),
        Endpoint::Fdv2Poll => Routed::Done(serve_fdv2_poll(shared, req, fallback, stream).is_ok()),
        Endpoint::Fdv1Stream | Endpoint::Fdv2Stream => {
            let _ = serve_stream(shared, id, req, endpoint, fallback, stream);
            Routed::Streamed
        }
        Endpoint::Bulk => {
            Routed::Done(serve_events(shared, PayloadKind::Bulk, req, stream).is_ok())
        }
        Endpoint::Diagnostic => {
            Routed::Done(serve_events(shared, PayloadKind::Diagnostic, req, stream).is_ok())
        }
    }
}

/// `POST …/bulk`, `POST …/diagnostic`: decode and check the body, hand it to the
/// subscriptions (never waiting for them), answer `202` with no body.
pub(crate) fn serve_events(
    shared: &Shared,
    kind: PayloadKind,
    req: &Request,
    stream: &mut TcpStream,
) -> io::Result<()> {
    match events::accept(kind, req, shared.max_body, SystemTime::now()) {
        Ok(payload) => {
            shared.lock().event_subs.publish(&payload);
            write_response(stream, 202, &[], b"", req.close)
        }
        Err(refusal) => {
            let body = format!("{{\"message\":\"{}\"}}", refusal.message);
            let headers = [("Content-Type", "application/json")];
            write_response(stream, refusal.status, &headers, body.as_bytes(), req.close)
        }
    }
}

pub(crate) fn serve_poll(shared: &Shared, req: &Request, stream: &mut TcpStream) -> io::Result<()> {
    let rendered = shared.lock().data.rendered();
    let mut headers: Vec<(&str, &str)> = vec![("ETag", &rendered.etag)];
    if let Some(env) = &shared.env_id {
        headers.push(("X-LD-EnvID", env));
    }
    if etag_matches(req, &rendered.etag) {
        return write_response(stream, 304, &headers, b"", req.close);
    }
    headers.push(("Content-Type", "application/json"));
    headers.push(("Vary", "Accept-Encoding"));
    if req.accepts_gzip() {
        headers.push(("Content-Encoding", "gzip"));
        write_response(stream, 200, &headers, rendered.gzipped(), req.close)
    } else {
        write_response(stream, 200, &headers, rendered.body.as_bytes(), req.close)
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
    req: &Request,
    fallback: bool,
    stream: &mut TcpStream,
) -> io::Result<()> {
    let basis = req.query("basis");
    let (etag, events) = {
        let mut inner = shared.lock();
        let objects = inner.data.fdv2_objects();
        let etag = format!("\"fdv2-{}\"", objects.state);
        if etag_matches(req, &etag) {
            (etag, None)
        } else {
            let error = basis.as_deref() != Some(objects.state.as_str())
                && inner.faults.take_payload_error();
            let events = fdv2::initial_payload(&objects, basis.as_deref(), error);
            (etag, Some(events))
        }
    };
    let mut headers: Vec<(&str, &str)> = vec![("ETag", &etag)];
    if let Some(env) = &shared.env_id {
        headers.push(("X-LD-EnvID", env));
    }
    if fallback {
        headers.push(FALLBACK_HEADER);
    }
    let Some(events) = events else {
        return write_response(stream, 304, &headers, b"", req.close);
    };
    let body = fdv2::to_poll_body(&events);
    headers.push(("Content-Type", "application/json"));
    headers.push(("Vary", "Accept-Encoding"));
    if req.accepts_gzip() {
        headers.push(("Content-Encoding", "gzip"));
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(body.as_bytes())?;
        write_response(stream, 200, &headers, &enc.finish()?, req.close)
    } else {
        write_response(stream, 200, &headers, body.as_bytes(), req.close)
    }
}

/// What a new stream sends first, and whether it then stays open.
pub(crate) struct Opening {
    pub(crate) text: String,
    /// Registered for later changes; `false`: close after `text` (FDv2 `goodbye`).
    pub(crate) stays_open: bool,
}

/// Register the stream and render its first events under one lock, so that no change
/// falls between them and the first change sent.
pub(crate) fn open_stream(
    shared: &Shared,
    id: u64,
    req: &Request,
    endpoint: Endpoint,
    tx: Sender<StreamMsg>,
) -> Opening {
    let mut inner = shared.lock();
    if endpoint != Endpoint::Fdv2Stream {
        inner.streams.push(StreamSub {
            id,
            fdv2: false,
            tx,
        });
        let body = inner.data.rendered();
        return Opening {
            text: sse_event("put", &format!("{{\"path\":\"/\",\"data\":{}}}", body.body)),
            stays_open: true,
        };
    }
    let basis = req.query("basis");
    let objects = inner.data.fdv2_objects();
    let error =
        basis.as_deref() != Some(objects.state.as_str()) && inner.faults.take_payload_error();
    let mut events = fdv2::initial_payload(&objects, basis.as_deref(), error);
    let goodbye = inner.faults.take_goodbye();
    if goodbye {
        events.push(fdv2::goodbye("injected fault: goodbye"));
    } else {
        inner.streams.push(StreamSub { id, fdv2: true, tx });
    }
    Opening {
        text: fdv2::to_sse(&events),
        stays_open: !goodbye,
    }
}

pub(crate) fn serve_stream(
    shared: &Arc<Shared>,
    id: u64,
    req: &Request,
    endpoint: Endpoint,
    fallback: bool,
    stream: &mut TcpStream,
) -> io::Result<()> {
    let (tx, rx) = mpsc::channel();
    let opening = open_stream(shared, id, req, endpoint, tx);
    let heartbeat: Arc<str> = if endpoint == Endpoint::Fdv2Stream {
        fdv2::to_sse(&[fdv2::heartbeat()]).into()
    } else {
        ":\n".into()
    };
    let result = (|| {
        let mut headers: Vec<(&str, &str)> = Vec::new();
        if let Some(env) = &shared.env_id {
            headers.push(("X-LD-EnvID", env));
        }
        if fallback {
            headers.push(FALLBACK_HEADER);
        }
        // Each write is one chunk (HTTP/1.0 clients get the bare events): the head and
        // the first payload go out together.
        let chunked = !req.http10;
        let end = if chunked { http::LAST_CHUNK } else { b"" };
        let mut out = http::stream_head(chunked, &headers);
        http::push_chunk(&mut out, opening.text.as_bytes(), chunked);
        if !opening.stays_open {
            out.extend_from_slice(end);
        }
        stream.write_all(&out)?;
        stream.flush()?;
        if !opening.stays_open {
            return Ok(());
        }
        let mut next_heartbeat = Instant::now() + shared.heartbeat;
        loop {
            let wait = next_heartbeat.saturating_duration_since(Instant::now());
            let text = match rx.recv_timeout(wait) {
                Ok(StreamMsg::Event(e)) => e,
                Ok(StreamMsg::Close) | Err(RecvTimeoutError::Disconnected) => {
                    // End the body cleanly; the connection closes after it.
                    stream.write_all(end)?;
                    return stream.flush();
                }
                Err(RecvTimeoutError::Timeout) => {
                    next_heartbeat = Instant::now() + shared.heartbeat;
                    heartbeat.clone()
                }
            };
            out.clear();
            http::push_chunk(&mut out, text.as_bytes(), chunked);
            stream.write_all(&out)?;
            stream.flush()?;
        }
    })();
    shared.lock().streams.retain(|s| s.id != id);
    result
}
