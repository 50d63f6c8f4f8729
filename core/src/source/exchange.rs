//! One HTTP request and its response over one connection, with the connect and read
//! timeouts (PROTOCOL.md A.5). Shared by every source.

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::endpoint::Url;
use crate::http1::{self, RequestHead, ResponseEvent, ResponseHead, ResponseReader};
use crate::io::{Action, CloseCause, ConnId};
use crate::status::{Cause, ErrorInfo, ErrorKind, RedirectRefusal};

/// What happened on an exchange.
#[derive(Debug)]
pub(crate) enum Progress {
    /// The response head arrived.
    Head(ResponseHead),
    /// Decoded body bytes.
    Body(Bytes),
    /// The body is complete, or the server closed a stream.
    End,
    /// The exchange failed; the connection must be closed.
    Failed(ErrorInfo),
}

/// A deadline for the whole of something, however steadily bytes arrive (PROTOCOL.md
/// A.5): the read timeout alone restarts with every byte, so a server sending one byte
/// every few seconds would hold the exchange forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TotalDeadline {
    /// The whole response (head and body) by then: a poll.
    Response(Instant),
    /// The response head by then; the body is bounded by the read timeout only: a
    /// stream.
    Head(Instant),
}

/// An HTTP exchange in flight.
#[derive(Debug)]
pub(crate) struct Exchange {
    pub(crate) conn: ConnId,
    reader: ResponseReader,
    connected: bool,
    ended: bool,
    /// The head arrived.
    headed: bool,
    deadline: Instant,
    read_timeout: Duration,
    total: TotalDeadline,
}

impl Exchange {
    /// Start a request to `url`; returns the exchange and the `Connect` action.
    #[allow(
        clippy::too_many_arguments,
        reason = "one call site per source, all fields needed"
    )]
    pub(crate) fn start(
        now: Instant,
        conn: ConnId,
        url: &Url,
        method: http1::Method,
        headers: Vec<(String, String)>,
        body: Option<&[u8]>,
        connect_timeout: Duration,
        read_timeout: Duration,
        total: TotalDeadline,
        http: http1::Config,
    ) -> (Self, Action) {
        let head = RequestHead {
            method,
            target: url.target(),
            host: url.endpoint.host_header(),
            headers,
        };
        let mut request = Vec::with_capacity(256);
        head.write_to(body, &mut request);
        let action = Action::Connect {
            conn,
            endpoint: url.endpoint.clone(),
            request: Bytes::from(request),
        };
        let ex = Self {
            conn,
            reader: ResponseReader::new(http),
            connected: false,
            ended: false,
            headed: false,
            deadline: now + connect_timeout,
            read_timeout,
            total,
        };
        (ex, action)
    }

    /// When this exchange times out: the connect or read timeout, or the total
    /// deadline while it applies.
    pub(crate) fn deadline(&self) -> Instant {
        match self.total_deadline() {
            Some(total) => self.deadline.min(total),
            None => self.deadline,
        }
    }

    /// The total deadline, while it applies (a head deadline ends with the head).
    fn total_deadline(&self) -> Option<Instant> {
        match self.total {
            TotalDeadline::Response(at) => Some(at),
            TotalDeadline::Head(at) => (!self.headed).then_some(at),
        }
    }

    pub(crate) fn handle_connected(&mut self, now: Instant) {
        self.connected = true;
        self.deadline = now + self.read_timeout;
    }

    /// Feed received bytes; every byte resets the read timeout.
    pub(crate) fn handle_data(&mut self, now: Instant, bytes: &[u8], out: &mut Vec<Progress>) {
        self.connected = true;
        self.deadline = now + self.read_timeout;
        self.reader.handle_bytes(bytes);
        self.drain(now, out);
    }

    pub(crate) fn handle_closed(
        &mut self,
        now: Instant,
        cause: CloseCause,
        out: &mut Vec<Progress>,
    ) {
        match cause {
            CloseCause::Io(io) => out.push(Progress::Failed(ErrorInfo::new(
                now,
                ErrorKind::NetworkError,
                Cause::Io(io),
            ))),
            CloseCause::Eof => {
                self.reader.handle_eof();
                self.drain(now, out);
                if !self.ended && !out.iter().any(|p| matches!(p, Progress::Failed(_))) {
                    out.push(Progress::Failed(ErrorInfo::new(
                        now,
                        ErrorKind::NetworkError,
                        Cause::StreamClosed,
                    )));
                }
            }
        }
    }

    /// Report a timeout if the deadline has passed.
    pub(crate) fn handle_timeout(&mut self, now: Instant, out: &mut Vec<Progress>) {
        if self.ended {
            return;
        }
        if self.total_deadline().is_some_and(|at| now >= at) {
            out.push(Progress::Failed(ErrorInfo::new(
                now,
                ErrorKind::NetworkError,
                Cause::ResponseTimeout,
            )));
        } else if now >= self.deadline {
            let cause = if self.connected {
                Cause::ReadTimeout
            } else {
                Cause::ConnectTimeout
            };
            out.push(Progress::Failed(ErrorInfo::new(
                now,
                ErrorKind::NetworkError,
                cause,
            )));
        }
    }

    fn drain(&mut self, now: Instant, out: &mut Vec<Progress>) {
        while let Some(ev) = self.reader.poll_event() {
            match ev {
                Ok(ResponseEvent::Head(h)) => {
                    self.headed = true;
                    out.push(Progress::Head(h));
                }
                Ok(ResponseEvent::Body(b)) => out.push(Progress::Body(b)),
                Ok(ResponseEvent::End) => {
                    self.ended = true;
                    out.push(Progress::End);
                }
                Err(http1::Error::UnexpectedEof) => out.push(Progress::Failed(ErrorInfo::new(
                    now,
                    ErrorKind::NetworkError,
                    Cause::StreamClosed,
                ))),
                Err(e) => {
                    out.push(Progress::Failed(ErrorInfo::new(
                        now,
                        ErrorKind::Unknown,
                        Cause::Http(e),
                    )));
                }
            }
        }
    }
}

/// Where a redirect from `from` leads: its `Location` resolved against `from`, if the
/// request may follow it with the same headers (PROTOCOL.md A.3).
///
/// A redirect is followed on the same origin only (scheme, host and port), since the
/// request carries the SDK key in `Authorization`. One from `https` to `http` is
/// refused as a downgrade; one to another origin is refused too, not followed without
/// the key (no LaunchDarkly endpoint answers a request without it, and the refusal says
/// what happened where a 401 from elsewhere would not). Both errors carry the
/// redirect's status code. A redirect without a usable `Location` is [`Cause::Redirect`].
pub(crate) fn redirect_target(
    now: Instant,
    from: &Url,
    head: &ResponseHead,
) -> Result<Url, ErrorInfo> {
    let Some(to) = head
        .header("location")
        .and_then(|l| from.join(l.trim()).ok())
    else {
        return Err(ErrorInfo::new(now, ErrorKind::Unknown, Cause::Redirect));
    };
    if from.same_origin(&to) {
        return Ok(to);
    }
    let refusal = if from.endpoint.tls && !to.endpoint.tls {
        RedirectRefusal::Downgrade
    } else {
        RedirectRefusal::CrossOrigin
    };
    tracing::warn!(from = %from.origin(), to = %to.origin(), ?refusal, "redirect refused");
    let mut error = ErrorInfo::new(
        now,
        ErrorKind::ErrorResponse,
        Cause::RedirectRefused {
            refusal,
            to: to.origin(),
        },
    );
    error.status_code = head.status;
    Err(error)
}

/// How an HTTP status is handled (PROTOCOL.md B §1.8, A.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatusClass {
    /// 2xx other than 204.
    Success,
    /// A redirect to follow.
    Redirect,
    /// 204 on a stream: stop.
    NoContent,
    /// Retry in the normal regime: 400, 408, 429, 5xx and anything else.
    Recoverable,
    /// 401, 403 and every other 4xx: stop, or the extended regime under RETRY.
    Unrecoverable,
}

pub(crate) fn classify(status: u16) -> StatusClass {
    match status {
        204 => StatusClass::NoContent,
        200..=299 => StatusClass::Success,
        301 | 302 | 303 | 307 | 308 => StatusClass::Redirect,
        400 | 408 | 429 => StatusClass::Recoverable,
        401..=499 => StatusClass::Unrecoverable,
        _ => StatusClass::Recoverable,
    }
}

/// Hands out connection ids, never reusing one.
#[derive(Debug, Clone)]
pub(crate) struct ConnIds(u64);

impl ConnIds {
    pub(crate) fn new(first: u64) -> Self {
        Self(first)
    }

    pub(crate) fn next_id(&mut self) -> ConnId {
        self.0 += 1;
        ConnId(self.0)
    }
}
