//! The polling source: `GET <base>/sdk/latest-all` (FDv1) or `GET <base>/sdk/poll`
//! (FDv2) at a fixed rate, with ETags and gzip (PROTOCOL.md B §2, §5.5, §5.6, A.4.7).
//! As an FDv2 initializer it polls once.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::SourceOutput;
use super::event_stream::UnrecoverablePolicy;
use super::exchange::{
    ConnIds, Exchange, Progress, StatusClass, TotalDeadline, classify, redirect_target,
};
use crate::backoff::{Backoff, BackoffConfig, Regime, RetryState};
use crate::endpoint::Url;
use crate::fdv1;
use crate::fdv2::{self, ChangeSetBuilder, PayloadLimits, PollReader};
use crate::http1::{self, Method, ResponseHead};
use crate::io::{Action, CloseCause, ConnId};
use crate::status::{Cause, ErrorInfo, ErrorKind, State};
use crate::store::{ChangeSet, Selector, Snapshot};

/// Which payload a [`Poller`] asks for and how it reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PollFormat {
    /// FDv1 `{"flags":{…},"segments":{…}}` into FDv1 full data sets (PROTOCOL.md B §2).
    #[default]
    Fdv1,
    /// The same FDv1 body as an FDv2 full transfer with the empty selector: the FDv1
    /// fallback synchronizer of the FDv2 data system (PROTOCOL.md B §5.6).
    Fdv1Fallback,
    /// FDv2 `{"events":[…]}` (an FDv1-shaped body is accepted too, PROTOCOL.md E 38);
    /// the `basis` query parameter is sent and `X-LD-FD-Fallback: true` is honoured
    /// (PROTOCOL.md B §5.5).
    Fdv2,
}

/// Settings of the polling source.
#[derive(Clone)]
pub struct PollConfig {
    /// The full request URL (`…/sdk/latest-all` with any `filter`).
    pub url: Url,
    /// Request headers (identity headers; `Accept-Encoding`, `Content-Type` and
    /// `If-None-Match` are added).
    pub headers: Vec<(String, String)>,
    /// Time between poll starts; at least 30 s unless the caller lowers the minimum
    /// for tests (PROTOCOL.md B §2.3).
    pub interval: Duration,
    /// Connect timeout (default 10 s).
    pub connect_timeout: Duration,
    /// Read timeout (default 15 s): the longest silence within a response.
    pub read_timeout: Duration,
    /// The whole response (its redirects included) must arrive within this time of
    /// the poll's start, however steadily its bytes trickle in (default 60 s). A late
    /// response is a NETWORK_ERROR; the next poll follows as after any failed poll.
    pub response_timeout: Duration,
    /// Unrecoverable-status policy.
    pub unrecoverable: UnrecoverablePolicy,
    /// Extended-regime delays under the RETRY policy.
    pub backoff: BackoffConfig,
    /// Response limits; `max_body_len` bounds the decoded body.
    pub http: http1::Config,
    /// Redirects followed per poll (default 3).
    pub max_redirects: u8,
    /// The payload format.
    pub format: PollFormat,
    /// Poll once and stop (an FDv2 initializer): the outcome is reported and no further
    /// poll is scheduled.
    pub once: bool,
}

impl std::fmt::Debug for PollConfig {
    /// Header values that carry credentials are redacted.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PollConfig")
            .field("url", &self.url)
            .field("headers", &crate::http1::RedactedHeaders(&self.headers))
            .field("interval", &self.interval)
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("unrecoverable", &self.unrecoverable)
            .field("backoff", &self.backoff)
            .field("http", &self.http)
            .field("max_redirects", &self.max_redirects)
            .field("format", &self.format)
            .field("once", &self.once)
            .finish()
    }
}

#[derive(Debug)]
struct InFlight {
    ex: Exchange,
    head: Option<ResponseHead>,
    /// The decoded body so far; a `Vec` so that its growth is exact near the limit.
    body: Vec<u8>,
    /// An FDv2 success body, read as it arrives instead of into `body`.
    reader: Option<Box<PollReader>>,
    redirects: u8,
    url: Url,
}

/// The polling data source (FDv1, FDv2, or FDv1 under FDv2 rules: see [`PollFormat`]).
#[derive(Debug)]
pub struct Poller {
    config: PollConfig,
    basis: Option<String>,
    ids: ConnIds,
    backoff: Backoff,
    etag: Option<String>,
    in_flight: Option<InFlight>,
    next_poll: Option<Instant>,
    started_at: Option<Instant>,
    running: bool,
    out: VecDeque<SourceOutput>,
    payload_limits: PayloadLimits,
}

impl Poller {
    /// A stopped polling source.
    pub fn new(config: PollConfig, seed: u64, first_conn_id: u64) -> Self {
        Self {
            // Extended-regime polls wait at least the full delay: no jitter.
            backoff: Backoff::new(
                BackoffConfig {
                    jitter: 0.0,
                    ..config.backoff
                },
                seed,
            ),
            config,
            basis: None,
            ids: ConnIds::new(first_conn_id),
            etag: None,
            in_flight: None,
            next_poll: None,
            started_at: None,
            running: false,
            out: VecDeque::new(),
            payload_limits: PayloadLimits::default(),
        }
    }

    /// FDv2: hold at most `limits` of a response's payload before its
    /// `payload-transferred` (default [`PayloadLimits::default`]; the body itself is
    /// bounded by [`PollConfig::http`]). Past it the poll fails with INVALID_DATA and
    /// the next one follows at the interval. Ignored by the FDv1 formats.
    #[must_use]
    pub fn with_payload_limits(mut self, limits: PayloadLimits) -> Self {
        self.payload_limits = limits;
        self
    }

    /// FDv2: the selector the store holds; from the next poll on, a defined one is sent
    /// as `basis=<state>` (PROTOCOL.md B §5.5). Ignored by the FDv1 formats.
    pub fn set_basis(&mut self, selector: &Selector) {
        if self.config.format == PollFormat::Fdv2 {
            self.basis = selector.is_defined().then(|| selector.state.clone());
        }
    }

    /// The ETag the next poll sends as `If-None-Match`.
    pub fn etag(&self) -> Option<&str> {
        self.etag.as_deref()
    }

    /// Poll now, then every interval. After [`Poller::resume`] with a poll still due
    /// later, the first poll waits for it.
    pub fn handle_start(&mut self, now: Instant) {
        if !self.running {
            self.running = true;
            match self.next_poll.filter(|at| *at > now) {
                Some(at) => self.next_poll = Some(at),
                None => self.poll(now),
            }
        }
    }

    /// The retry timing to hand to the next instance of this poller if it stops at
    /// `now`: its backoff, and the next poll it has scheduled. A poll in flight counts
    /// as made: the next one is due an interval after it started.
    pub fn retry_state(&self, now: Instant) -> RetryState {
        let at = match (&self.in_flight, self.started_at) {
            (Some(_), Some(started)) => Some(started + self.config.interval),
            _ => self.next_poll,
        };
        RetryState::new(self.backoff.clone(), now, at.filter(|_| self.running))
    }

    /// Before the start: go on from the retry timing of an earlier instance of this
    /// poller (its backoff, and its next scheduled poll, which the first poll waits
    /// for). Ignored by an initializer, which polls once and at once.
    pub fn resume(&mut self, state: RetryState) {
        if !self.running && !self.config.once {
            self.backoff = state.backoff;
            self.next_poll = state.not_before;
        }
    }

    /// Stop for good; reports OFF.
    pub fn handle_stop(&mut self, _now: Instant) {
        self.running = false;
        self.next_poll = None;
        self.abort();
        self.out.push_back(SourceOutput::Status(State::Off, None));
    }

    /// The driver connected `conn`.
    pub fn handle_connected(&mut self, now: Instant, conn: ConnId) {
        if let Some(f) = self.in_flight.as_mut().filter(|f| f.ex.conn == conn) {
            f.ex.handle_connected(now);
        }
    }

    /// Bytes arrived on `conn`.
    pub fn handle_data(&mut self, now: Instant, conn: ConnId, bytes: &[u8]) {
        self.handle_data_against(now, conn, bytes, None);
    }

    /// Bytes arrived on `conn`; `stored` is the store's data as it is. An FDv2 body is
    /// read as it arrives, and each object it puts that the store holds already takes
    /// the stored buffer (see [`PollReader::feed`]): a repeated poll holds neither its
    /// body nor a second copy of the data.
    pub fn handle_data_against(
        &mut self,
        now: Instant,
        conn: ConnId,
        bytes: &[u8],
        stored: Option<&Snapshot>,
    ) {
        let mut progress = Vec::new();
        if let Some(f) = self.in_flight.as_mut().filter(|f| f.ex.conn == conn) {
            f.ex.handle_data(now, bytes, &mut progress);
        }
        self.apply_against(now, progress, stored);
    }

    /// `conn` closed.
    pub fn handle_closed(&mut self, now: Instant, conn: ConnId, cause: CloseCause) {
        let mut progress = Vec::new();
        if let Some(f) = self.in_flight.as_mut().filter(|f| f.ex.conn == conn) {
            f.ex.handle_closed(now, cause, &mut progress);
        }
        self.apply(now, progress);
    }

    /// Time passed: time out the poll in flight, or start the next one.
    pub fn handle_timeout(&mut self, now: Instant) {
        let mut progress = Vec::new();
        if let Some(f) = self.in_flight.as_mut() {
            f.ex.handle_timeout(now, &mut progress);
            self.apply(now, progress);
        } else if self.running && self.next_poll.is_some_and(|t| now >= t) {
            self.poll(now);
        }
    }

    /// The next output.
    pub fn poll_output(&mut self) -> Option<SourceOutput> {
        self.out.pop_front()
    }

    /// When to call [`Poller::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        match &self.in_flight {
            Some(f) => Some(f.ex.deadline()),
            None if self.running => self.next_poll,
            None => None,
        }
    }

    fn poll(&mut self, now: Instant) {
        self.started_at = Some(now);
        self.next_poll = None;
        let url = match &self.basis {
            Some(basis) => self.config.url.with_path("", &[("basis", basis)]),
            None => self.config.url.clone(),
        };
        self.request(now, url, 0);
    }

    fn request(&mut self, now: Instant, url: Url, redirects: u8) {
        let due = self.started_at.unwrap_or(now) + self.config.response_timeout;
        let mut headers = self.config.headers.clone();
        headers.push(("Content-Type".into(), "application/json".into()));
        headers.push(("Accept-Encoding".into(), "gzip".into()));
        if let Some(etag) = &self.etag {
            headers.push(("If-None-Match".into(), etag.clone()));
        }
        let conn = self.ids.next_id();
        let (ex, action) = Exchange::start(
            now,
            conn,
            &url,
            Method::Get,
            headers,
            None,
            self.config.connect_timeout,
            self.config.read_timeout,
            TotalDeadline::Response(due),
            self.config.http,
        );
        self.out.push_back(SourceOutput::Action(action));
        self.in_flight = Some(InFlight {
            ex,
            head: None,
            body: Vec::new(),
            reader: None,
            redirects,
            url,
        });
    }

    fn abort(&mut self) {
        if let Some(f) = self.in_flight.take() {
            self.out
                .push_back(SourceOutput::Action(Action::Close { conn: f.ex.conn }));
        }
    }

    fn apply(&mut self, now: Instant, progress: Vec<Progress>) {
        self.apply_against(now, progress, None);
    }

    fn apply_against(&mut self, now: Instant, progress: Vec<Progress>, stored: Option<&Snapshot>) {
        for p in progress {
            let Some(f) = self.in_flight.as_mut() else {
                return;
            };
            match p {
                Progress::Head(h) => {
                    // A body of a known length (not gzip) gets its buffer at once, up to
                    // the limit: growing by doubling copies it and leaves the smaller
                    // buffers behind, up to as much again as the body.
                    let limit = self.config.http.max_body_len.unwrap_or(usize::MAX);
                    let len = h
                        .header("content-length")
                        .and_then(|l| l.trim().parse::<usize>().ok())
                        .filter(|_| h.header("content-encoding").is_none())
                        .map(|len| len.min(limit));
                    if self.config.format == PollFormat::Fdv2
                        && classify(h.status) == StatusClass::Success
                    {
                        f.reader = Some(Box::new(
                            PollReader::new(self.payload_limits).with_expected_len(len),
                        ));
                    } else if let Some(len) = len {
                        f.body.reserve_exact(len);
                    }
                    f.head = Some(h);
                }
                Progress::Body(b) if f.reader.is_some() => {
                    if let Some(reader) = f.reader.as_mut() {
                        reader.feed(&b, stored);
                    }
                }
                Progress::Body(b) => {
                    // Grow by doubling, but never past the body limit: what is kept is
                    // bounded by the limit, not by twice it.
                    let need = f.body.len() + b.len();
                    if need > f.body.capacity() {
                        let limit = self.config.http.max_body_len.unwrap_or(usize::MAX);
                        let target = need.max(f.body.capacity() * 2).min(limit.max(need));
                        f.body.reserve_exact(target - f.body.len());
                    }
                    f.body.extend_from_slice(&b);
                }
                Progress::End => {
                    let Some(f) = self.in_flight.take() else {
                        return;
                    };
                    self.out
                        .push_back(SourceOutput::Action(Action::Close { conn: f.ex.conn }));
                    self.on_response(now, f);
                }
                Progress::Failed(e) => {
                    self.abort();
                    self.finish(now, State::Interrupted, Some(e), Regime::Normal);
                }
            }
        }
    }

    fn on_response(&mut self, now: Instant, f: InFlight) {
        let Some(head) = f.head else { return };
        let err = |kind, cause| Some(ErrorInfo::new(now, kind, cause));
        // PROTOCOL.md B §5.5: an exact comparison with `true`, on errors and successes.
        let fallback = self.config.format == PollFormat::Fdv2
            && head.header("x-ld-fd-fallback") == Some("true");
        if fallback {
            self.out.push_back(SourceOutput::FallbackToFdv1);
            // The data system moves to FDv1 for good: no further FDv2 poll.
            self.running = false;
        }
        match (head.status, classify(head.status)) {
            // A 304 answers a conditional request. Without an ETag no `If-None-Match`
            // was sent, so there is no data it could confirm: an invalid response, like
            // the reference's empty body that fails to parse (PROTOCOL.md B §2.2,
            // INTERRUPTED with UNKNOWN, INITIALIZING before the first success), retried
            // at the interval. Never VALID: nothing was received.
            (304, _) if self.etag.is_none() => self.finish(
                now,
                State::Interrupted,
                err(ErrorKind::Unknown, Cause::UnexpectedNotModified),
                Regime::Normal,
            ),
            (304, _) => {
                if self.config.format == PollFormat::Fdv2 {
                    self.out
                        .push_back(SourceOutput::Apply(ChangeSetBuilder::no_changes()));
                }
                self.finish(now, State::Valid, None, Regime::Normal)
            }
            (_, StatusClass::Success) => {
                let parsed = match f.reader {
                    Some(reader) => reader.finish().map_err(|e| (e.kind(), Cause::Fdv2(e))),
                    None => self.parse(&Bytes::from(f.body)),
                };
                match parsed {
                    Ok(change_set) => {
                        // A 200 without an ETag drops the cached one (PROTOCOL.md A.4.7).
                        self.etag = head.header("etag").map(str::to_owned);
                        if let Some(env) = head.header("x-ld-envid").filter(|e| !e.is_empty()) {
                            self.out
                                .push_back(SourceOutput::EnvironmentId(env.to_owned()));
                        }
                        self.out.push_back(SourceOutput::Apply(change_set));
                        self.finish(now, State::Valid, None, Regime::Normal);
                    }
                    Err((kind, cause)) => {
                        self.finish(now, State::Interrupted, err(kind, cause), Regime::Normal)
                    }
                }
            }
            (_, StatusClass::Redirect) if f.redirects < self.config.max_redirects && !fallback => {
                match redirect_target(now, &f.url, &head) {
                    Ok(url) => self.request(now, url, f.redirects + 1),
                    Err(e) => self.finish(now, State::Interrupted, Some(e), Regime::Normal),
                }
            }
            (_, StatusClass::Redirect) => self.finish(
                now,
                State::Interrupted,
                err(ErrorKind::Unknown, Cause::Redirect),
                Regime::Normal,
            ),
            (status, StatusClass::Unrecoverable) => {
                let e = err(ErrorKind::ErrorResponse, Cause::Status(status));
                match self.config.unrecoverable {
                    UnrecoverablePolicy::Stop => {
                        self.running = false;
                        self.finish(now, State::Off, e, Regime::Normal);
                    }
                    UnrecoverablePolicy::Retry => {
                        self.finish(now, State::Interrupted, e, Regime::Extended)
                    }
                }
            }
            (status, _) => self.finish(
                now,
                State::Interrupted,
                err(ErrorKind::ErrorResponse, Cause::Status(status)),
                Regime::Normal,
            ),
        }
    }

    fn parse(&self, body: &Bytes) -> Result<ChangeSet, (ErrorKind, Cause)> {
        match self.config.format {
            PollFormat::Fdv1 => fdv1::parse_poll(body)
                .map(ChangeSet::fdv1_full)
                .map_err(|e| (e.kind(), Cause::Fdv1(e))),
            PollFormat::Fdv1Fallback => {
                fdv2::parse_fdv1_fallback_poll(body).map_err(|e| (e.kind(), Cause::Fdv2(e)))
            }
            PollFormat::Fdv2 => fdv2::parse_poll_or_fdv1_with(body, self.payload_limits)
                .map_err(|e| (e.kind(), Cause::Fdv2(e))),
        }
    }

    /// Report the outcome of a poll and schedule the next one at a fixed rate from the
    /// previous start (at once if the poll overran), or after the extended delay.
    fn finish(&mut self, now: Instant, state: State, error: Option<ErrorInfo>, regime: Regime) {
        if state == State::Valid {
            self.backoff.on_connected(now);
        }
        self.out.push_back(SourceOutput::Status(state, error));
        if self.config.once {
            self.running = false;
        }
        if !self.running {
            return;
        }
        let start = self.started_at.unwrap_or(now);
        let mut next = start + self.config.interval;
        if regime == Regime::Extended {
            next = next.max(now + self.backoff.next_delay(now, Regime::Extended));
        }
        if next <= now {
            // The poll overran its interval: the next one starts at once, not at a
            // deadline that has already passed (which would make the driver spin).
            self.poll(now);
        } else {
            self.next_poll = Some(next);
        }
    }
}
