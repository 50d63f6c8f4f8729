//! A general server-sent-events client as a state machine: connect, read events,
//! reconnect with backoff, follow redirects, time out silent streams, stop on 204
//! (PROTOCOL.md A.2, A.3). FDv1 and FDv2 streaming sources and the adapters' SSE client
//! are built on it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::exchange::{
    ConnIds, Exchange, Progress, StatusClass, TotalDeadline, classify, redirect_target,
};
use crate::backoff::{Backoff, BackoffConfig, Regime, RetryState};
use crate::endpoint::Url;
use crate::fdv1;
use crate::http1::{self, Method, ResponseHead};
use crate::io::{Action, CloseCause, ConnId};
use crate::sse;
use crate::status::{Cause, ErrorInfo, ErrorKind};

/// What to do after an unrecoverable HTTP status (401, 403, and 4xx other than
/// 400/408/429), PROTOCOL.md A.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnrecoverablePolicy {
    /// Never stop: retry in the extended regime (5 min doubling to 1 h). The default.
    #[default]
    Retry,
    /// The legacy rule: stop for good.
    Stop,
}

/// Settings of an [`EventStream`].
#[derive(Clone)]
pub struct EventStreamConfig {
    /// The stream URL.
    pub url: Url,
    /// The request method (GET unless the server wants POST or REPORT).
    pub method: Method,
    /// Request headers sent on every attempt (`Accept`, `Cache-Control` and
    /// `Last-Event-ID` are added).
    pub headers: Vec<(String, String)>,
    /// A request body, sent on every attempt.
    pub body: Option<Bytes>,
    /// The `Last-Event-ID` of the first attempt, until the stream commits an id.
    pub last_event_id: Option<String>,
    /// Connect timeout (default 10 s).
    pub connect_timeout: Duration,
    /// Silence longer than this drops the connection (default 300 s).
    pub read_timeout: Duration,
    /// The response head must arrive within this time of the attempt's start, however
    /// steadily its bytes trickle in (default 30 s); redirects count against it. A
    /// late head is a NETWORK_ERROR, retried with backoff.
    pub head_timeout: Duration,
    /// Reconnect backoff.
    pub backoff: BackoffConfig,
    /// Unrecoverable-status policy.
    pub unrecoverable: UnrecoverablePolicy,
    /// Redirects followed per attempt (default 3).
    pub max_redirects: u8,
    /// SSE parser limits.
    pub sse: sse::Config,
    /// HTTP response limits.
    pub http: http1::Config,
}

impl std::fmt::Debug for EventStreamConfig {
    /// Header values that carry credentials are redacted.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStreamConfig")
            .field("url", &self.url)
            .field("method", &self.method)
            .field("headers", &crate::http1::RedactedHeaders(&self.headers))
            .field("body", &self.body)
            .field("last_event_id", &self.last_event_id)
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("head_timeout", &self.head_timeout)
            .field("backoff", &self.backoff)
            .field("unrecoverable", &self.unrecoverable)
            .field("max_redirects", &self.max_redirects)
            .field("sse", &self.sse)
            .field("http", &self.http)
            .finish()
    }
}

impl EventStreamConfig {
    /// Defaults for `url`.
    pub fn new(url: Url) -> Self {
        Self {
            url,
            method: Method::Get,
            headers: Vec::new(),
            body: None,
            last_event_id: None,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(300),
            head_timeout: Duration::from_secs(30),
            backoff: BackoffConfig::default(),
            unrecoverable: UnrecoverablePolicy::Retry,
            max_redirects: 3,
            sse: sse::Config::default(),
            http: http1::Config::default(),
        }
    }
}

/// What an [`EventStream`] produces.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StreamOutput {
    /// Perform this I/O.
    Action(Action),
    /// A connection was accepted (2xx, `text/event-stream`); its response head.
    Opened(ResponseHead),
    /// A parsed SSE item.
    Item(sse::Item),
    /// A `put` event that was read while it arrived (FDv1 streams read large `put`s
    /// ahead): finish it with [`fdv1::parse_put_prescanned`].
    Put {
        /// The event, its data only the rest that was not read ahead.
        event: sse::Event,
        /// What was read of its data before it was complete (holding those bytes).
        prescan: fdv1::PutPrescan,
    },
    /// The server answered with an error status (or 204): the response head, for the
    /// headers an owner may act on (FDv2 reads `X-LD-FD-Fallback` here). A
    /// [`StreamOutput::Failed`] follows.
    Rejected(ResponseHead),
    /// The connection failed or ended. `retry_at` is when the next attempt starts, or
    /// `None` if the stream stopped for good.
    Failed {
        /// What went wrong.
        error: ErrorInfo,
        /// The next attempt, if any.
        retry_at: Option<Instant>,
    },
}

impl StreamOutput {
    /// Event data, which an owner's failure discards.
    fn is_data(&self) -> bool {
        matches!(self, Self::Item(_) | Self::Put { .. })
    }
}

#[derive(Debug)]
enum Phase {
    Idle,
    Active { ex: Box<Exchange>, opened: bool },
    Waiting { at: Instant },
    Stopped,
}

/// An SSE client as a sans-I/O state machine.
///
/// Feed it `handle_*` inputs; drain [`EventStream::poll_output`]; sleep until
/// [`EventStream::poll_timeout`] and then call [`EventStream::handle_timeout`].
#[derive(Debug)]
pub struct EventStream {
    config: EventStreamConfig,
    backoff: Backoff,
    parser: sse::Parser,
    ids: ConnIds,
    phase: Phase,
    url: Url,
    redirects: u8,
    /// When the current attempt's response head is due (its redirects included).
    head_due: Option<Instant>,
    out: VecDeque<StreamOutput>,
    progress: Vec<Progress>,
    /// Read large `put` events while they arrive (FDv1).
    read_ahead: bool,
    /// The `put` being read ahead: the pending event's first `data` line so far.
    prescan: Option<fdv1::PutPrescan>,
    /// The first attempt waits until then (see [`EventStream::resume`]).
    not_before: Option<Instant>,
}

/// A `data` line this long is read while it arrives (when reading ahead): past the
/// processor's first-level caches, where reading it at the end would fetch it again.
/// Tests and fuzzing read every line ahead, so that small inputs take this path too.
const READ_AHEAD_FROM: usize = if cfg!(any(test, fuzzing)) {
    1
} else {
    64 * 1024
};

impl EventStream {
    /// A stopped stream; `seed` seeds the backoff jitter, `first_conn_id` the ids it
    /// hands out (ids are `first_conn_id + 1`, `+ 2`, …).
    pub fn new(config: EventStreamConfig, seed: u64, first_conn_id: u64) -> Self {
        Self {
            backoff: Backoff::new(config.backoff, seed),
            parser: sse::Parser::new(config.sse),
            ids: ConnIds::new(first_conn_id),
            phase: Phase::Idle,
            url: config.url.clone(),
            redirects: 0,
            head_due: None,
            out: VecDeque::new(),
            progress: Vec::new(),
            read_ahead: false,
            prescan: None,
            not_before: None,
            config,
        }
    }

    /// Read large `put` events while they arrive, and hand them out as
    /// [`StreamOutput::Put`] (FDv1 streams).
    pub(crate) fn read_puts_ahead(mut self) -> Self {
        self.read_ahead = true;
        self
    }

    /// The settings.
    pub fn config(&self) -> &EventStreamConfig {
        &self.config
    }

    /// Change the URL used from the next attempt on (FDv2 updates its `basis`).
    pub fn set_url(&mut self, url: Url) {
        self.config.url = url;
    }

    /// True unless stopped or never started.
    pub fn is_running(&self) -> bool {
        matches!(self.phase, Phase::Active { .. } | Phase::Waiting { .. })
    }

    /// The id of the open connection, if any.
    pub fn conn(&self) -> Option<ConnId> {
        match &self.phase {
            Phase::Active { ex, .. } => Some(ex.conn),
            _ => None,
        }
    }

    /// The last event id that a reconnect sends.
    ///
    /// The configured first id until the stream commits one; from then on the stream's
    /// last committed id, `None` once an empty `id` cleared it. A block holding only an
    /// `id` commits it too (PROTOCOL.md A.2).
    pub fn last_event_id(&self) -> Option<&str> {
        if self.parser.has_committed_id() {
            let id = self.parser.last_event_id();
            (!id.is_empty()).then_some(id)
        } else {
            self.config
                .last_event_id
                .as_deref()
                .filter(|s| !s.is_empty())
        }
    }

    /// Connect now (the first attempt has no delay, unless [`EventStream::resume`] gave
    /// it a later one). A no-op while running.
    pub fn handle_start(&mut self, now: Instant) {
        if !self.is_running() {
            match self.not_before.take() {
                Some(at) if at > now => self.phase = Phase::Waiting { at },
                _ => self.connect(now),
            }
        }
    }

    /// The retry timing to hand to the next instance of this stream if it stops at
    /// `now`: the backoff streak, and the reconnect it is waiting for, if any.
    pub fn retry_state(&self, now: Instant) -> RetryState {
        let at = match self.phase {
            Phase::Waiting { at } => Some(at),
            _ => None,
        };
        RetryState::new(self.backoff.clone(), now, at)
    }

    /// Before the start: go on from the retry timing of an earlier instance of this
    /// stream (its streak, and its pending reconnect, which the first attempt waits for).
    /// A server `retry:` the earlier instance saw is kept with the streak.
    pub fn resume(&mut self, state: RetryState) {
        if !self.is_running() {
            self.backoff = state.backoff;
            self.not_before = state.not_before;
        }
    }

    /// Drop the current connection, if any, and connect again at once.
    pub fn handle_restart(&mut self, now: Instant) {
        self.close_current();
        self.connect(now);
    }

    /// Stop for good: close the connection and make no more attempts.
    pub fn handle_stop(&mut self) {
        self.close_current();
        self.phase = Phase::Stopped;
    }

    /// The driver connected `conn`.
    pub fn handle_connected(&mut self, now: Instant, conn: ConnId) {
        if let Phase::Active { ex, .. } = &mut self.phase
            && ex.conn == conn
        {
            ex.handle_connected(now);
        }
    }

    /// Bytes arrived on `conn`.
    pub fn handle_data(&mut self, now: Instant, conn: ConnId, bytes: &[u8]) {
        let mut progress = std::mem::take(&mut self.progress);
        if let Phase::Active { ex, .. } = &mut self.phase
            && ex.conn == conn
        {
            ex.handle_data(now, bytes, &mut progress);
        }
        self.apply(now, &mut progress);
        self.progress = progress;
    }

    /// `conn` closed.
    pub fn handle_closed(&mut self, now: Instant, conn: ConnId, cause: CloseCause) {
        let mut progress = std::mem::take(&mut self.progress);
        if let Phase::Active { ex, .. } = &mut self.phase
            && ex.conn == conn
        {
            ex.handle_closed(now, cause, &mut progress);
        }
        self.apply(now, &mut progress);
        self.progress = progress;
    }

    /// Time passed: fire due timeouts and reconnects. Early calls are no-ops.
    pub fn handle_timeout(&mut self, now: Instant) {
        match &mut self.phase {
            Phase::Waiting { at } if now >= *at => self.connect(now),
            Phase::Active { ex, .. } => {
                let mut progress = std::mem::take(&mut self.progress);
                ex.handle_timeout(now, &mut progress);
                self.apply(now, &mut progress);
                self.progress = progress;
            }
            _ => {}
        }
    }

    /// The owner found the stream's data unusable: drop the connection, discard every
    /// item not yet drained, and retry with backoff.
    ///
    /// The connection may already have ended in the same input, after the item the
    /// owner judged (the body ended in the same read): then its failure, not yet
    /// drained, is reported with the owner's error instead, and the reconnect it
    /// scheduled (the same backoff delay from the same `now`) stands. So the outcome
    /// does not depend on whether the end arrives with the item or as a later input.
    pub fn fail(&mut self, now: Instant, error: ErrorInfo) {
        self.out.retain(|o| !o.is_data());
        if matches!(self.phase, Phase::Waiting { .. }) {
            if let Some(StreamOutput::Failed { error: queued, .. }) =
                self.out.iter_mut().rev().find(|o| {
                    matches!(
                        o,
                        StreamOutput::Failed {
                            retry_at: Some(_),
                            ..
                        }
                    )
                })
            {
                *queued = error;
            }
            return;
        }
        self.failed(now, error, Regime::Normal);
    }

    /// The owner ends the connection without counting it as a failure (the FDv2
    /// `goodbye`, PROTOCOL.md A.3): close it, discard every item not yet drained, and
    /// connect again after the backoff delay. Nothing is reported.
    ///
    /// The connection may already have ended in the same input, after the item the
    /// owner is acting on (the body ended in the same read): then its failure, not yet
    /// drained, is discarded too, and the reconnect it scheduled (the same backoff
    /// delay from the same `now`) stands. So the outcome does not depend on whether the
    /// end arrives with the item or as a later input, which is ignored because the
    /// connection is closed.
    pub fn reconnect_later(&mut self, now: Instant) {
        if matches!(self.phase, Phase::Waiting { .. }) {
            self.out.retain(|o| {
                !o.is_data()
                    && !matches!(
                        o,
                        StreamOutput::Failed {
                            retry_at: Some(_),
                            ..
                        }
                    )
            });
            return;
        }
        if !matches!(self.phase, Phase::Active { .. }) {
            return;
        }
        self.out.retain(|o| !o.is_data());
        self.close_current();
        let at = now + self.backoff.next_delay(now, Regime::Normal);
        tracing::debug!(retry_in = ?at - now, "stream closed by the owner");
        self.phase = Phase::Waiting { at };
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<StreamOutput> {
        self.out.pop_front()
    }

    /// When [`EventStream::handle_timeout`] must be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Active { ex, .. } => Some(ex.deadline()),
            Phase::Waiting { at } => Some(*at),
            _ => None,
        }
    }

    fn connect(&mut self, now: Instant) {
        self.close_current();
        self.parser.reset();
        self.redirects = 0;
        self.url = self.config.url.clone();
        self.head_due = Some(now + self.config.head_timeout);
        self.open(now);
    }

    fn open(&mut self, now: Instant) {
        let mut headers = self.config.headers.clone();
        headers.push(("Accept".into(), "text/event-stream".into()));
        headers.push(("Cache-Control".into(), "no-cache".into()));
        if let Some(id) = self.last_event_id() {
            headers.push(("Last-Event-ID".into(), id.to_owned()));
        }
        let conn = self.ids.next_id();
        let (ex, action) = Exchange::start(
            now,
            conn,
            &self.url,
            self.config.method,
            headers,
            self.config.body.as_deref(),
            self.config.connect_timeout,
            self.config.read_timeout,
            TotalDeadline::Head(self.head_due.unwrap_or(now + self.config.head_timeout)),
            self.config.http,
        );
        tracing::debug!(%conn, url = %self.url, "stream connecting");
        self.out.push_back(StreamOutput::Action(action));
        self.phase = Phase::Active {
            ex: Box::new(ex),
            opened: false,
        };
    }

    fn close_current(&mut self) {
        self.prescan = None;
        if let Phase::Active { ex, .. } = &self.phase {
            self.out
                .push_back(StreamOutput::Action(Action::Close { conn: ex.conn }));
            self.phase = Phase::Idle;
        }
    }

    fn apply(&mut self, now: Instant, progress: &mut Vec<Progress>) {
        let conn = self.conn();
        for p in progress.drain(..) {
            // Stop at a failure, a stop or a redirect: the rest belongs to a closed
            // connection.
            if conn.is_none() || self.conn() != conn {
                break;
            }
            match p {
                Progress::Head(head) => self.on_head(now, head),
                Progress::Body(bytes) => {
                    self.parser.handle_chunk(&bytes);
                    self.drain_parser(now);
                    if self.read_ahead {
                        self.read_ahead();
                    }
                }
                Progress::End => {
                    self.prescan = None;
                    self.parser.handle_eof();
                    self.drain_parser(now);
                    let e = ErrorInfo::new(now, ErrorKind::NetworkError, Cause::StreamClosed);
                    self.failed(now, e, Regime::Normal);
                }
                Progress::Failed(e) => {
                    self.prescan = None;
                    self.parser.handle_eof();
                    self.drain_parser(now);
                    self.failed(now, e, Regime::Normal);
                }
            }
        }
    }

    fn drain_parser(&mut self, now: Instant) {
        while let Some(item) = self.parser.poll_item() {
            match item {
                Ok(item) => {
                    if let sse::Item::Retry(ms) = &item {
                        self.backoff.set_initial(Duration::from_millis(*ms));
                    }
                    // A prescan read the first data line of this event, the one
                    // dispatched next.
                    let output = match item {
                        sse::Item::Event(event) if self.prescan.is_some() => {
                            match self.prescan.take() {
                                Some(prescan) if event.event_type == "put" => {
                                    StreamOutput::Put { event, prescan }
                                }
                                // Not a `put` after all: its data in one piece again.
                                Some(prescan) => {
                                    let data = prescan.data(&event.data);
                                    StreamOutput::Item(sse::Item::Event(sse::Event {
                                        data,
                                        ..event
                                    }))
                                }
                                None => StreamOutput::Item(sse::Item::Event(event)),
                            }
                        }
                        item => StreamOutput::Item(item),
                    };
                    self.out.push_back(output);
                }
                Err(e) => {
                    let e = ErrorInfo::new(now, ErrorKind::InvalidData, Cause::Sse(e));
                    self.failed(now, e, Regime::Normal);
                    return;
                }
            }
        }
    }

    /// Read what has arrived of a large first `data` line.
    fn read_ahead(&mut self) {
        if let Some(data) = self.parser.pending_data()
            && (self.prescan.is_some() || data.len() >= READ_AHEAD_FROM)
            && let Some(piece) = self.parser.take_pending_data()
        {
            self.prescan
                .get_or_insert_with(fdv1::PutPrescan::new)
                .advance(&piece);
        }
    }

    fn on_head(&mut self, now: Instant, head: ResponseHead) {
        let class = classify(head.status);
        if matches!(
            class,
            StatusClass::NoContent | StatusClass::Recoverable | StatusClass::Unrecoverable
        ) {
            self.out.push_back(StreamOutput::Rejected(head.clone()));
        }
        match class {
            StatusClass::Success => {
                let ct = head.header("content-type").unwrap_or("");
                if !ct
                    .trim_start()
                    .to_ascii_lowercase()
                    .starts_with("text/event-stream")
                {
                    let e =
                        ErrorInfo::new(now, ErrorKind::Unknown, Cause::ContentType(ct.to_owned()));
                    return self.failed(now, e, Regime::Normal);
                }
                self.backoff.on_connected(now);
                if let Phase::Active { opened, .. } = &mut self.phase {
                    *opened = true;
                }
                self.out.push_back(StreamOutput::Opened(head));
            }
            StatusClass::Redirect => {
                if self.redirects >= self.config.max_redirects {
                    let e = ErrorInfo::new(now, ErrorKind::Unknown, Cause::Redirect);
                    return self.failed(now, e, Regime::Normal);
                }
                match redirect_target(now, &self.url, &head) {
                    Ok(url) => {
                        self.redirects += 1;
                        self.close_current();
                        self.url = url;
                        self.open(now);
                    }
                    Err(e) => self.failed(now, e, Regime::Normal),
                }
            }
            StatusClass::NoContent => {
                self.handle_stop();
                let e = ErrorInfo::new(now, ErrorKind::ErrorResponse, Cause::Status(204));
                self.out.push_back(StreamOutput::Failed {
                    error: e,
                    retry_at: None,
                });
            }
            StatusClass::Recoverable => {
                let e = ErrorInfo::new(now, ErrorKind::ErrorResponse, Cause::Status(head.status));
                self.failed(now, e, Regime::Normal);
            }
            StatusClass::Unrecoverable => {
                let e = ErrorInfo::new(now, ErrorKind::ErrorResponse, Cause::Status(head.status));
                match self.config.unrecoverable {
                    UnrecoverablePolicy::Retry => self.failed(now, e, Regime::Extended),
                    UnrecoverablePolicy::Stop => {
                        self.handle_stop();
                        self.out.push_back(StreamOutput::Failed {
                            error: e,
                            retry_at: None,
                        });
                    }
                }
            }
        }
    }

    fn failed(&mut self, now: Instant, error: ErrorInfo, regime: Regime) {
        if !matches!(self.phase, Phase::Active { .. }) {
            return;
        }
        self.close_current();
        let at = now + self.backoff.next_delay(now, regime);
        tracing::debug!(error = %error.cause, retry_in = ?at - now, "stream failed");
        self.phase = Phase::Waiting { at };
        self.out.push_back(StreamOutput::Failed {
            error,
            retry_at: Some(at),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run one connection of `stream` that answers `body` and closes, then reconnect;
    /// return the `Last-Event-ID` header of the reconnect's request.
    fn reconnect_after(stream: &mut EventStream, now: Instant, body: &str) -> Option<String> {
        let conn = stream.conn().expect("connecting");
        stream.handle_connected(now, conn);
        let response = format!("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n{body}");
        stream.handle_data(now, conn, response.as_bytes());
        stream.handle_closed(now, conn, CloseCause::Eof);
        let retry = stream.poll_timeout().expect("a reconnect is scheduled");
        while stream.poll_output().is_some() {}
        stream.handle_timeout(retry);
        let request = std::iter::from_fn(|| stream.poll_output())
            .find_map(|o| match o {
                StreamOutput::Action(Action::Connect { request, .. }) => Some(request),
                _ => None,
            })
            .expect("a reconnect request");
        let head = String::from_utf8_lossy(&request).into_owned();
        head.lines()
            .find_map(|l| l.strip_prefix("Last-Event-ID: "))
            .map(str::to_owned)
    }

    fn started(last_event_id: Option<&str>) -> (EventStream, Instant) {
        let mut config = EventStreamConfig::new(Url::parse("http://sse.test/s").unwrap());
        config.last_event_id = last_event_id.map(str::to_owned);
        let mut stream = EventStream::new(config, 1, 0);
        let now = crate::testing::origin() + Duration::from_secs(1);
        stream.handle_start(now);
        (stream, now)
    }

    /// A resumed stream waits for the retry its earlier instance had scheduled, and
    /// its next failure waits the next delay of the same streak.
    #[test]
    fn resumed_stream_goes_on_from_the_earlier_retry_timing() {
        let refused = || {
            CloseCause::Io(crate::io::IoCause {
                kind: std::io::ErrorKind::ConnectionRefused,
                message: "refused".into(),
            })
        };
        let t0 = crate::testing::origin();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut config = EventStreamConfig::new(Url::parse("http://sse.test/s").unwrap());
        config.backoff.jitter = 0.0;
        let mut first = EventStream::new(config.clone(), 1, 0);
        first.handle_start(at(0));
        // Attempts at 0, 1, 3 and 7 s, each refused: the next retry is due at 15 s.
        for (now, due) in [(0, 1), (1, 3), (3, 7), (7, 15)] {
            let conn = first.conn().expect("connecting");
            first.handle_closed(at(now), conn, refused());
            assert_eq!(first.poll_timeout(), Some(at(due)));
            first.handle_timeout(at(due).min(at(7)));
        }
        let state = first.retry_state(at(10));
        first.handle_stop();
        let mut second = EventStream::new(config, 2, 100);
        second.resume(state);
        second.handle_start(at(10));
        assert_eq!(second.conn(), None, "no attempt before the pending retry");
        assert_eq!(second.poll_timeout(), Some(at(15)));
        second.handle_timeout(at(15));
        let conn = second.conn().expect("connecting at 15 s");
        second.handle_closed(at(15), conn, refused());
        assert_eq!(second.poll_timeout(), Some(at(31)));
    }

    #[test]
    fn id_only_block_is_sent_on_the_reconnect() {
        let (mut stream, now) = started(None);
        assert_eq!(
            reconnect_after(&mut stream, now, "id: 7\n\n"),
            Some("7".into())
        );
    }

    #[test]
    fn id_only_block_replaces_the_configured_first_id() {
        let (mut stream, now) = started(Some("start"));
        assert_eq!(
            reconnect_after(&mut stream, now, "id: 7\n\n"),
            Some("7".into())
        );
    }

    #[test]
    fn empty_id_clears_the_configured_first_id() {
        let (mut stream, now) = started(Some("start"));
        assert_eq!(reconnect_after(&mut stream, now, "id:\ndata: x\n\n"), None);
        let (mut stream, now) = started(Some("start"));
        assert_eq!(reconnect_after(&mut stream, now, "id\n\n"), None);
    }

    #[test]
    fn configured_first_id_stays_until_an_id_is_committed() {
        let (mut stream, now) = started(Some("start"));
        let body = "data: x\n\nid: 9\ndata: unfinished";
        assert_eq!(
            reconnect_after(&mut stream, now, body),
            Some("start".into())
        );
    }
}
