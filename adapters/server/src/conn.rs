//! One connection of the request loop, as a state machine driven by its socket's
//! readiness and by time: a request's head, then its body, each within its deadline;
//! the answer, written as the socket takes it; then the next request (keep-alive), a
//! close, or the connection handed to the stream hub. Nothing here blocks.
//!
//! The deadlines ([`Limits`]): a whole request head must arrive within the head
//! timeout from its first byte (from the accept for a new connection, TLS handshake
//! included), a body within the body timeout; a client that is too slow gets `408` and
//! the connection closes, however steadily it trickles bytes. An idle keep-alive
//! connection closes after the idle timeout. A response that the client does not read
//! for [`WRITE_TIMEOUT`] is abandoned.

use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use mio::{Interest, Registry, Token};

use crate::client_side::path::classify;
use crate::client_side::serve::serve as serve_client;
use crate::fault::Endpoint;
use crate::http::{Framing, Request, WRITE_TIMEOUT, write_response};
use crate::reader::{ReadError, RequestReader};
use crate::recorded::RecordedRequest;
use crate::routes::{self, FALLBACK_HEADER, Routed, accepted, route};
use crate::state::Shared;
use crate::transport::Transport;
use crate::{health, ofrep};

/// How many requests [`ServerHandle::requests`](crate::ServerHandle::requests) remembers.
pub(crate) const MAX_RECORDED: usize = 1000;
/// How long a refused request's unread body is read and discarded before closing.
pub(crate) const LINGER: Duration = Duration::from_secs(2);

/// The answer to a plaintext request on a TLS port, written on the bare socket.
const PLAIN_ON_TLS: &[u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n\
Connection: close\r\nContent-Length: 67\r\n\r\n\
This port speaks HTTPS (TLS): connect with https:// instead of http\n";

/// The deadlines of a connection's requests (see the module docs).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) head: Duration,
    pub(crate) body: Duration,
    pub(crate) idle: Duration,
}

/// What the loop does with a connection after driving it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Wait for its socket (or a deadline).
    Wait,
    /// Close it.
    Close,
    /// It is the stream hub's now: forget it.
    Handed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Head,
    Body,
    /// Writing the answer, then this.
    Write(After),
    /// A hang fault holds it unanswered.
    Hung(Option<Endpoint>),
    /// Reading and discarding until the client closes (after a refusal).
    Linger,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    Next,
    Close,
    Linger,
}

/// What driving a connection needs from the loop.
pub(crate) struct Cx<'a> {
    pub(crate) shared: &'a Arc<Shared>,
    pub(crate) registry: &'a Registry,
    pub(crate) token: Token,
    pub(crate) now: Instant,
}

/// One connection.
#[derive(Debug)]
pub(crate) struct Conn {
    io: Option<Transport>,
    reader: RequestReader,
    /// A request whose body is being read.
    req: Option<Request>,
    out: Vec<u8>,
    written: usize,
    phase: Phase,
    accepted: Instant,
    head_started: Option<Instant>,
    body_started: Instant,
    idle_since: Option<Instant>,
    progress: Instant,
    linger_until: Instant,
    /// Refused (over the connection limit): only lingering before it closes.
    refused: bool,
}

impl Conn {
    pub(crate) fn new(io: Transport, max_body: usize, now: Instant) -> Self {
        Self {
            io: Some(io),
            reader: RequestReader::new(max_body),
            req: None,
            out: Vec::new(),
            written: 0,
            phase: Phase::Head,
            accepted: now,
            head_started: None,
            body_started: now,
            idle_since: None,
            progress: now,
            linger_until: now,
            refused: false,
        }
    }

    /// A connection refused at accept (its `503` already written on `io`): it reads and
    /// discards what the client sends until the client closes or [`LINGER`] passes, so
    /// that closing does not reset the connection before the client read the answer.
    pub(crate) fn refused(mut io: Transport, now: Instant) -> Self {
        io.shutdown_write();
        let mut conn = Self::new(io, 0, now);
        conn.phase = Phase::Linger;
        conn.linger_until = now + LINGER;
        conn.refused = true;
        conn
    }

    /// The socket, while the connection has it.
    pub(crate) fn io(&mut self) -> Option<&mut Transport> {
        self.io.as_mut()
    }

    /// Whether it was refused at accept (over the connection limit).
    pub(crate) fn refusing(&self) -> bool {
        self.refused
    }

    /// Whether a hang fault holds it (for `endpoint`).
    pub(crate) fn hung(&self) -> Option<Option<Endpoint>> {
        match self.phase {
            Phase::Hung(e) => Some(e),
            _ => None,
        }
    }

    /// When it must have made progress by, if ever.
    pub(crate) fn deadline(&self, limits: &Limits) -> Option<Instant> {
        Some(match self.phase {
            Phase::Head => match (self.head_started, self.idle_since) {
                (Some(t), _) => t + limits.head,
                (None, Some(t)) => t + limits.idle,
                (None, None) => self.accepted + limits.head,
            },
            Phase::Body => self.body_started + limits.body,
            Phase::Write(_) => self.progress + WRITE_TIMEOUT,
            Phase::Hung(_) => return None,
            Phase::Linger => self.linger_until,
        })
    }

    /// Its deadline passed: `408` for a request that was arriving, else close.
    pub(crate) fn time_out(&mut self, cx: &Cx<'_>) -> Next {
        let arriving = match self.phase {
            Phase::Head => self.reader.has_partial(),
            Phase::Body => true,
            _ => false,
        };
        if !arriving {
            return Next::Close;
        }
        cx.shared.metrics.timed_out();
        cx.shared.metrics.request("other", 408);
        let body = b"{\"message\":\"the request did not arrive in time\"}";
        let headers = [("Content-Type", "application/json")];
        let _ = write_response(&mut self.out, 408, &headers, body, true);
        self.phase = Phase::Write(After::Close);
        self.progress = cx.now;
        self.drive(cx)
    }

    /// Close a connection a hang fault held.
    pub(crate) fn close(&mut self) {
        if let Some(io) = &mut self.io {
            io.close();
        }
    }

    /// Do what the socket allows now.
    pub(crate) fn drive(&mut self, cx: &Cx<'_>) -> Next {
        loop {
            let Some(io) = self.io.as_mut() else {
                return Next::Handed;
            };
            match flush(io, &self.out, &mut self.written) {
                Err(_) => return Next::Close,
                Ok(progress) => {
                    if progress {
                        self.progress = cx.now;
                    }
                }
            }
            let all_out = self.written == self.out.len() && io.write_pending().unwrap_or(false);
            match self.phase {
                Phase::Write(_) if !all_out => return Next::Wait,
                Phase::Write(after) => {
                    self.out = Vec::new();
                    self.written = 0;
                    match after {
                        After::Next => {
                            self.phase = Phase::Head;
                            self.idle_since = Some(cx.now);
                            self.reader.release();
                        }
                        After::Close => return Next::Close,
                        After::Linger => {
                            io.shutdown_write();
                            self.linger_until = cx.now + LINGER;
                            self.phase = Phase::Linger;
                        }
                    }
                }
                Phase::Head => match self.reader.read_head(io) {
                    Ok(req) => {
                        if let Some(next) = self.start(req, cx) {
                            return next;
                        }
                    }
                    Err(ReadError::Pending) => {
                        if self.reader.has_partial() && self.head_started.is_none() {
                            self.head_started = Some(cx.now);
                        }
                        return Next::Wait;
                    }
                    Err(ReadError::Bad(status)) => self.refuse_with(status, cx),
                    Err(ReadError::Eof | ReadError::Io) => return self.plain_on_tls(cx),
                },
                Phase::Body => {
                    let mut req = self.req.take().unwrap_or_default();
                    match self.reader.read_body(io, &mut req) {
                        Ok(()) => {
                            if let Some(next) = self.answer(req, false, cx) {
                                return next;
                            }
                        }
                        Err(ReadError::Pending) => {
                            self.req = Some(req);
                            return Next::Wait;
                        }
                        Err(ReadError::Bad(status)) => self.refuse_with(status, cx),
                        Err(ReadError::Eof | ReadError::Io) => return Next::Close,
                    }
                }
                Phase::Hung(_) => return Next::Wait,
                Phase::Linger => return discard(io),
            }
        }
    }

    /// A request whose head was read: read its body first, or answer it now.
    fn start(&mut self, mut req: Request, cx: &Cx<'_>) -> Option<Next> {
        self.head_started = None;
        self.idle_since = None;
        if req.framing == Framing::None {
            return self.answer(req, false, cx);
        }
        // A client that waits for `100 Continue` is answered without its body when the
        // request is refused anyway (RFC 9110 §10.1.1); the unread body then ends the
        // connection.
        let endpoint = Endpoint::of_path(req.path());
        let client = classify(req.path()).is_some();
        let ofrep = ofrep::Route::of_path(req.path()).is_some();
        if req.expects_continue && !client && !ofrep && accepted(cx.shared, &req, endpoint).is_err()
        {
            req.close = true;
            return self.answer(req, true, cx);
        }
        if req.expects_continue {
            self.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
        }
        self.req = Some(req);
        self.phase = Phase::Body;
        self.body_started = cx.now;
        None
    }

    /// Answer a whole request (or one whose body will not be read). `None`: go on
    /// driving.
    fn answer(&mut self, req: Request, unread_body: bool, cx: &Cx<'_>) -> Option<Next> {
        let shared = cx.shared;
        if shared.is_shutting_down() {
            return Some(Next::Close);
        }
        let start = self.out.len();
        // Client-side and mobile paths first: `/mobile/events/bulk` ends like `/bulk`.
        let client = classify(req.path());
        let endpoint = if client.is_some() {
            None
        } else {
            Endpoint::of_path(req.path())
        };
        let (route_name, keep) = if let Some(operator) = operator_route(req.path()) {
            (operator, self.operator(&req, operator, cx))
        } else if let Some(route) = ofrep::Route::of_path(req.path()) {
            match self.ofrep(&req, route, cx) {
                Some(keep) => (route.name(), keep),
                None => return Some(Next::Handed),
            }
        } else {
            let (fault, fallback) = {
                let mut inner = shared.lock();
                inner.request_count += 1;
                if inner.requests.len() >= MAX_RECORDED {
                    inner.requests.pop_front();
                }
                inner.requests.push_back(RecordedRequest {
                    method: req.method.clone(),
                    target: req.target.clone(),
                    headers: req.headers.clone(),
                });
                if inner.faults.hangs(endpoint) {
                    // Held unanswered until the fault is lifted (then closed).
                    self.phase = Phase::Hung(endpoint);
                    return Some(Next::Wait);
                }
                let fallback =
                    inner.faults.fdv1_fallback && endpoint.is_some_and(Endpoint::is_fdv2);
                (inner.faults.take_failure(endpoint), fallback)
            };
            let mut headers = vec![("Content-Type", "application/json")];
            if fallback {
                headers.push(FALLBACK_HEADER);
            }
            let name =
                client.map_or_else(|| endpoint.map_or("other", Endpoint::path), |r| r.metric());
            let keep = match fault {
                Some(status) => {
                    let body = format!("{{\"message\":\"injected fault: HTTP {status}\"}}");
                    write_response(&mut self.out, status, &headers, body.as_bytes(), req.close)
                        .is_ok()
                }
                None => {
                    let streams =
                        matches!(endpoint, Some(Endpoint::Fdv1Stream | Endpoint::Fdv2Stream))
                            || client.is_some_and(|r| r.streams() && req.method == r.method());
                    if streams && let Some(io) = &mut self.io {
                        // The hub registers it with its own loop if it takes it.
                        let _ = cx.registry.deregister(io.socket());
                    }
                    let mut conn = routes::Conn {
                        out: &mut self.out,
                        io: &mut self.io,
                    };
                    let routed = match client {
                        Some(r) => serve_client(shared, &req, r, &mut conn),
                        None => route(shared, &req, endpoint, &headers, &mut conn),
                    };
                    if let Routed::Streamed = routed {
                        shared.metrics.request(name, 200);
                        return Some(Next::Handed);
                    }
                    if streams && let Some(io) = &mut self.io {
                        let interest = Interest::READABLE | Interest::WRITABLE;
                        if cx
                            .registry
                            .register(io.socket(), cx.token, interest)
                            .is_err()
                        {
                            return Some(Next::Close);
                        }
                    }
                    matches!(routed, Routed::Done(true))
                }
            };
            (name, keep)
        };
        shared
            .metrics
            .request(route_name, status_of(&self.out[start..]));
        let keep = keep && !req.close;
        self.phase = Phase::Write(match (unread_body, keep) {
            (true, _) => After::Linger,
            (false, true) => After::Next,
            (false, false) => After::Close,
        });
        self.progress = cx.now;
        None
    }

    /// An OFREP request (`crate::ofrep`); `None` when the connection became a stream.
    fn ofrep(&mut self, req: &Request, route: ofrep::Route, cx: &Cx<'_>) -> Option<bool> {
        let streams = route.streams();
        if streams && let Some(io) = &mut self.io {
            // The hub registers it with its own loop if it takes it.
            let _ = cx.registry.deregister(io.socket());
        }
        match ofrep::serve(cx.shared, req, route, &mut self.out, &mut self.io) {
            ofrep::Served::Streamed => {
                cx.shared.metrics.request(route.name(), 200);
                None
            }
            ofrep::Served::Done(keep) => {
                if streams && let Some(io) = &mut self.io {
                    let interest = Interest::READABLE | Interest::WRITABLE;
                    if cx
                        .registry
                        .register(io.socket(), cx.token, interest)
                        .is_err()
                    {
                        return Some(false);
                    }
                }
                Some(keep)
            }
        }
    }

    /// `GET /status` and `GET /metrics`: no SDK key asked, none shown.
    fn operator(&mut self, req: &Request, route: &str, cx: &Cx<'_>) -> bool {
        if req.method != "GET" {
            let body = b"{\"message\":\"method not allowed\"}";
            let headers = [("Content-Type", "application/json"), ("Allow", "GET")];
            return write_response(&mut self.out, 405, &headers, body, req.close).is_ok();
        }
        let now = SystemTime::now();
        let shared = cx.shared;
        let (content_type, body) = {
            let inner = shared.lock();
            let envs = inner.reachable_envs();
            if route == "/status" {
                let status = health::status(&envs, now, shared.disconnected_grace);
                ("application/json", status.to_string())
            } else {
                let dropped = inner.event_subs.dropped_total;
                let text = shared.metrics.render(&envs, dropped, now);
                ("text/plain; version=0.0.4; charset=utf-8", text)
            }
        };
        let headers = [
            ("Content-Type", content_type),
            ("Cache-Control", "no-store"),
        ];
        write_response(&mut self.out, 200, &headers, body.as_bytes(), req.close).is_ok()
    }

    /// A request that cannot be read: answer `status`, then drain what the client
    /// still sends for a while, so that closing does not reset the connection before
    /// the client has read the answer.
    fn refuse_with(&mut self, status: u16, cx: &Cx<'_>) {
        cx.shared.metrics.request("other", status);
        let _ = write_response(&mut self.out, status, &[], b"", true);
        self.phase = Phase::Write(After::Linger);
        self.progress = cx.now;
    }

    /// The read failed: if it was a plaintext request on a TLS port, answer it in
    /// plaintext on the bare socket; else close.
    fn plain_on_tls(&mut self, cx: &Cx<'_>) -> Next {
        let Some(io) = self.io.take() else {
            return Next::Close;
        };
        match io.into_plain_if_refused() {
            Ok(plain) => {
                cx.shared.metrics.request("other", 400);
                self.io = Some(plain);
                self.out = PLAIN_ON_TLS.to_vec();
                self.written = 0;
                self.phase = Phase::Write(After::Linger);
                self.progress = cx.now;
                self.drive(cx)
            }
            Err(io) => {
                self.io = Some(io);
                Next::Close
            }
        }
    }
}

/// The operator's routes, by exact path.
fn operator_route(path: &str) -> Option<&'static str> {
    match path {
        "/status" => Some("/status"),
        "/metrics" => Some("/metrics"),
        _ => None,
    }
}

/// The status of the last response in `out` (after any `100 Continue`).
fn status_of(out: &[u8]) -> u16 {
    let text = &out[..out.len().min(64)];
    let skip = if text.starts_with(b"HTTP/1.1 100") {
        out.windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map_or(0, |i| i + 4)
    } else {
        0
    };
    out.get(skip + 9..skip + 12)
        .and_then(|s| std::str::from_utf8(s).ok())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Write what the socket takes of `out[written..]`; `Ok(true)` if anything went.
fn flush(io: &mut Transport, out: &[u8], written: &mut usize) -> io::Result<bool> {
    let mut progress = false;
    while *written < out.len() {
        match io.write(&out[*written..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                *written += n;
                progress = true;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(progress)
}

/// Read and discard until the client closes (`Close`) or has nothing more now.
fn discard(io: &mut Transport) -> Next {
    let mut sink = [0u8; 4096];
    loop {
        match io.read(&mut sink) {
            Ok(0) => return Next::Close,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Next::Close,
        }
    }
}
