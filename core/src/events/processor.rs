//! The event processor: records in, `POST` requests out.

use std::collections::VecDeque;
use std::io::Write as _;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Map, Value};

use super::config::EventsConfig;
use super::context::{ContextFormatter, EventContext};
use super::lru::SeenKeys;
use super::record::{Evaluation, Record};
use super::summary::Summarizer;
use crate::endpoint::Url;
use crate::http1::{self, Method};
use crate::io::{Action, CloseCause, ConnId};
use crate::source::exchange::{ConnIds, Exchange, Progress, TotalDeadline};
use crate::status::{Cause, ErrorInfo, ErrorKind};
use std::sync::Arc;

/// An input of the [`EventProcessor`].
#[derive(Debug)]
#[non_exhaustive]
pub enum Input<'a> {
    /// Something to report.
    Record(Record),
    /// Summary counts kept elsewhere (per thread or shard), merged in.
    Summary(Summarizer),
    /// Send what is queued now.
    Flush,
    /// Send what is queued, then stop: [`Event::Closed`] follows once every request has
    /// ended.
    Close,
    /// The data source's stream connected (or failed to): for diagnostic events.
    StreamInit {
        /// When the attempt started, Unix milliseconds.
        at: u64,
        /// How long it took.
        duration_ms: u64,
        /// Whether it failed.
        failed: bool,
    },
    /// A connection asked for was established and its request written.
    Connected {
        /// The connection.
        conn: ConnId,
    },
    /// Bytes arrived on a connection.
    Data {
        /// The connection.
        conn: ConnId,
        /// The bytes.
        bytes: &'a [u8],
    },
    /// A connection ended.
    Closed {
        /// The connection.
        conn: ConnId,
        /// Why.
        cause: CloseCause,
    },
    /// The deadline of the last [`Output::Wait`] passed (an early one is harmless).
    Timeout,
}

/// An output of the [`EventProcessor`].
#[derive(Debug)]
#[non_exhaustive]
pub enum Output {
    /// A connection to open or close.
    Action(Action),
    /// Something that happened.
    Event(Event),
    /// Drained: wait until this deadline (or the next input).
    Wait(Option<Instant>),
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// An analytics payload of `events` events was accepted.
    Delivered {
        /// Events in the payload (the summary counts as one).
        events: usize,
    },
    /// A diagnostic event was accepted.
    DiagnosticDelivered,
    /// A request failed; `retrying` if it will be sent once more in a second,
    /// otherwise its `events` are dropped.
    Failed {
        /// What went wrong.
        error: ErrorInfo,
        /// Events in the payload (0 for a diagnostic event).
        events: usize,
        /// Whether the same payload is sent again.
        retrying: bool,
    },
    /// The events service refused the SDK key (or answered another unrecoverable
    /// status): nothing more is sent, ever, and what was queued is dropped.
    Disabled {
        /// The HTTP status.
        status: u16,
    },
    /// Events were dropped because the queue was full (reported once per overflow).
    QueueFull {
        /// The queue's capacity.
        capacity: usize,
    },
    /// After [`Input::Close`]: every request has ended.
    Closed,
}

/// A queued event, formatted at flush time.
#[derive(Debug)]
enum Queued {
    Feature {
        eval: Evaluation,
        debug: bool,
    },
    Index {
        creation_date: u64,
        context: Arc<EventContext>,
    },
    Identify {
        creation_date: u64,
        context: Arc<EventContext>,
    },
    Custom(super::record::Custom),
    MigrationOp(super::record::MigrationOp),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PayloadKind {
    Analytics,
    Diagnostic,
}

/// One payload being sent, or waiting to be sent again.
#[derive(Debug)]
struct Send {
    kind: PayloadKind,
    body: Bytes,
    payload_id: Option<String>,
    events: usize,
    attempt: u8,
    exchange: Option<Exchange>,
    retry_at: Option<Instant>,
}

/// The analytics event processor: a deterministic state machine, shaped like
/// [`crate::DataSystem`]. Feed it [`Input`]s with `now`; drain [`Output`]s until
/// [`Output::Wait`]; perform the actions with any transport.
///
/// What it decides, as LaunchDarkly's SDKs do:
/// - every evaluation is counted in the summary (unless the flag has
///   `excludeFromSummaries`); a full `feature` event is queued when `track_events`,
///   and a `debug` event while the flag's `debugEventsUntilDate` is later than both the
///   evaluation's time and the last `Date` the events service sent;
/// - a context not seen within the last `context_keys_capacity` contexts (and the last
///   `context_keys_flush_interval`) gets an `index` event before the event that brought
///   it, except identify and migration events, which carry it whole;
/// - `samplingRatio` keeps 1 in N full, debug, custom-less and migration events;
/// - the queue holds at most `capacity` events, later ones are dropped and counted;
/// - every `flush_interval`, or on [`Input::Flush`], the queue and the summary go out
///   in one `POST {events}/bulk` (gzip if configured) with a new
///   `X-LaunchDarkly-Payload-ID`; a network error or a recoverable status (400, 408,
///   429, 5xx, 3xx) is retried once after `retry_delay` with the same payload id; any
///   other 4xx stops delivery for good ([`Event::Disabled`]);
/// - diagnostic events (`POST {events}/diagnostic`): one `diagnostic-init` at start,
///   then one `diagnostic` every `diagnostic_recording_interval`.
#[derive(Debug)]
pub struct EventProcessor {
    config: EventsConfig,
    formatter: ContextFormatter,
    rng: fastrand::Rng,
    bulk_url: Option<Url>,
    diagnostic_url: Option<Url>,
    t0: Instant,
    wall0: u64,
    outbox: Vec<Queued>,
    dropped: u64,
    queue_full: bool,
    summary: Summarizer,
    seen: SeenKeys,
    deduplicated: u64,
    events_in_last_batch: u64,
    last_known_past_time: u64,
    disabled: bool,
    closing: bool,
    closed: bool,
    next_flush: Instant,
    next_keys_reset: Instant,
    next_diagnostic: Option<Instant>,
    diagnostic_id: Value,
    data_since: u64,
    stream_inits: Vec<Value>,
    sends: Vec<Send>,
    conn_ids: ConnIds,
    outputs: VecDeque<Output>,
}

/// A random (version 4) UUID from `rng`.
pub(crate) fn uuid_v4(rng: &mut fastrand::Rng) -> String {
    let mut b = rng.u128(..).to_be_bytes();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let mut s = String::with_capacity(36);
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            s.push('-');
        }
        s.push(char::from_digit(u32::from(x >> 4), 16).unwrap_or('0'));
        s.push(char::from_digit(u32::from(x & 0xf), 16).unwrap_or('0'));
    }
    s
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// An HTTP status that the events service may answer differently next time
/// (LaunchDarkly's rule: every 4xx but 400, 408 and 429 is final).
fn recoverable(status: u16) -> bool {
    !(400..500).contains(&status) || matches!(status, 400 | 408 | 429)
}

impl EventProcessor {
    /// A processor started at `now`, when the wall clock read `unix_ms` (Unix
    /// milliseconds): event times the processor makes itself (diagnostics) are
    /// `unix_ms` plus the time elapsed since `now`. `seed` drives payload ids and
    /// sampling.
    pub fn new(config: EventsConfig, seed: u64, now: Instant, unix_ms: u64) -> Self {
        let base = Url::parse(config.events_uri.trim_end_matches('/')).ok();
        if base.is_none() {
            tracing::warn!("the events URI is not a valid http(s) URL: no events will be sent");
        }
        let bulk_url = base.as_ref().map(|b| b.with_path("/bulk", &[]));
        let diagnostic_url = base.as_ref().map(|b| b.with_path("/diagnostic", &[]));
        let mut rng = fastrand::Rng::with_seed(seed);
        let diagnostic_id = {
            let mut id = Map::new();
            id.insert("diagnosticId".into(), uuid_v4(&mut rng).into());
            let key = &config.identity.sdk_key;
            let suffix: String = key
                .char_indices()
                .rev()
                .nth(5)
                .map_or(key.as_str(), |(i, _)| &key[i..])
                .to_owned();
            id.insert("sdkKeySuffix".into(), suffix.into());
            Value::Object(id)
        };
        let formatter =
            ContextFormatter::new(config.all_attributes_private, &config.private_attributes);
        let diagnostics = config.diagnostics.is_some();
        let diagnostic_interval = config
            .diagnostic_recording_interval
            .max(Duration::from_secs(60));
        let mut this = Self {
            formatter,
            rng,
            bulk_url,
            diagnostic_url,
            t0: now,
            wall0: unix_ms,
            outbox: Vec::new(),
            dropped: 0,
            queue_full: false,
            summary: Summarizer::new(),
            seen: SeenKeys::new(config.context_keys_capacity),
            deduplicated: 0,
            events_in_last_batch: 0,
            last_known_past_time: 0,
            disabled: false,
            closing: false,
            closed: false,
            next_flush: now + config.flush_interval.max(Duration::from_millis(1)),
            next_keys_reset: now
                + config
                    .context_keys_flush_interval
                    .max(Duration::from_secs(1)),
            next_diagnostic: diagnostics.then(|| now + diagnostic_interval),
            diagnostic_id,
            data_since: unix_ms,
            stream_inits: Vec::new(),
            sends: Vec::new(),
            conn_ids: ConnIds::new(0),
            outputs: VecDeque::new(),
            config,
        };
        if let Some(init) = this.diagnostic_init(unix_ms) {
            this.send_diagnostic(now, &init);
        }
        this
    }

    /// The wall clock at `now`, Unix milliseconds.
    fn wall(&self, now: Instant) -> u64 {
        self.wall0
            .saturating_add(millis(now.saturating_duration_since(self.t0)))
    }

    /// Whether delivery stopped for good (an unrecoverable status).
    pub fn is_disabled(&self) -> bool {
        self.disabled
    }

    /// Events queued now (not counting the summary).
    pub fn queued(&self) -> usize {
        self.outbox.len()
    }

    /// The summary counts not yet sent.
    pub fn summary(&self) -> &Summarizer {
        &self.summary
    }

    /// Events dropped since the last diagnostic event because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Requests in flight or waiting to be sent again.
    pub fn in_flight(&self) -> usize {
        self.sends.len()
    }

    /// Feed one input.
    pub fn handle_input(&mut self, now: Instant, input: Input<'_>) {
        match input {
            Input::Record(record) => self.record(record),
            Input::Summary(s) => {
                if !self.disabled && !self.closed {
                    self.summary.merge(s);
                }
            }
            Input::Flush => self.flush(now),
            Input::Close => {
                // What cannot go out now (every sender busy) goes when one is free.
                self.closing = true;
                self.flush(now);
            }
            Input::StreamInit {
                at,
                duration_ms,
                failed,
            } => {
                if self.config.diagnostics.is_some() && self.stream_inits.len() < 1_000 {
                    let mut init = Map::new();
                    init.insert("timestamp".into(), at.into());
                    init.insert("durationMillis".into(), duration_ms.into());
                    init.insert("failed".into(), failed.into());
                    self.stream_inits.push(Value::Object(init));
                }
            }
            Input::Connected { conn } => {
                if let Some(ex) = self.exchange_mut(conn) {
                    ex.handle_connected(now);
                }
            }
            Input::Data { conn, bytes } => {
                let mut progress = Vec::new();
                if let Some(ex) = self.exchange_mut(conn) {
                    ex.handle_data(now, bytes, &mut progress);
                }
                self.progress(now, conn, progress);
            }
            Input::Closed { conn, cause } => {
                let mut progress = Vec::new();
                if let Some(ex) = self.exchange_mut(conn) {
                    ex.handle_closed(now, cause, &mut progress);
                }
                self.progress(now, conn, progress);
            }
            Input::Timeout => self.timeout(now),
        }
        self.check_closed(now);
    }

    /// The next output; [`Output::Wait`] once drained.
    pub fn poll_output(&mut self) -> Output {
        if let Some(o) = self.outputs.pop_front() {
            return o;
        }
        Output::Wait(self.deadline())
    }

    fn deadline(&self) -> Option<Instant> {
        let sends = self.sends.iter().map(|s| match &s.exchange {
            Some(ex) => ex.deadline(),
            None => s.retry_at.unwrap_or(self.next_flush),
        });
        if self.closing {
            return sends.min();
        }
        let timers = [
            Some(self.next_flush),
            Some(self.next_keys_reset),
            self.next_diagnostic,
        ];
        sends.chain(timers.into_iter().flatten()).min()
    }

    fn exchange_mut(&mut self, conn: ConnId) -> Option<&mut Exchange> {
        self.sends
            .iter_mut()
            .filter_map(|s| s.exchange.as_mut())
            .find(|ex| ex.conn == conn)
    }

    fn check_closed(&mut self, now: Instant) {
        if !self.closing || self.closed {
            return;
        }
        if !self.outbox.is_empty() || !self.summary.is_empty() {
            self.flush(now);
        }
        if self.sends.is_empty() && self.outbox.is_empty() && self.summary.is_empty() {
            self.closed = true;
            self.outputs.push_back(Output::Event(Event::Closed));
        }
    }

    fn record(&mut self, record: Record) {
        if self.disabled || self.closed {
            return;
        }
        let creation_date = record.creation_date();
        let context = record.context().clone();
        let mut full: Option<Queued> = None;
        let mut debug: Option<Queued> = None;
        let mut sampling_ratio = None;
        let mut inline = false;
        match record {
            Record::Evaluation(eval) => {
                sampling_ratio = eval.sampling_ratio;
                if !eval.exclude_from_summaries && !eval.summarized {
                    let ctx = &eval.context;
                    self.summary.record(
                        eval.creation_date,
                        eval.key.as_str(),
                        ctx.kinds(),
                        eval.variation,
                        eval.version,
                        || eval.value.clone(),
                        || eval.default.clone(),
                    );
                }
                let debugging = eval.debug_events_until_date.is_some_and(|until| {
                    until > self.last_known_past_time && until > eval.creation_date
                });
                if debugging {
                    debug = Some(Queued::Feature {
                        eval: eval.clone(),
                        debug: true,
                    });
                }
                if eval.track_events {
                    full = Some(Queued::Feature { eval, debug: false });
                }
            }
            Record::Identify(identify) => {
                inline = true;
                let context = if self.config.omit_anonymous_contexts {
                    match identify.context.without_anonymous() {
                        Some(c) => Arc::new(c),
                        None => return,
                    }
                } else {
                    identify.context
                };
                full = Some(Queued::Identify {
                    creation_date: identify.creation_date,
                    context,
                });
            }
            Record::Custom(custom) => full = Some(Queued::Custom(custom)),
            Record::MigrationOp(op) => {
                inline = true;
                sampling_ratio = op.sampling_ratio;
                full = Some(Queued::MigrationOp(op));
            }
        }
        // The index event comes before the event that brought the context.
        let indexable = if self.config.omit_anonymous_contexts {
            context.without_anonymous().map(Arc::new)
        } else {
            Some(context)
        };
        if let Some(indexable) = indexable {
            if self.seen.add(indexable.fully_qualified_key()) {
                self.deduplicated += 1;
            } else if !inline {
                self.enqueue(Queued::Index {
                    creation_date,
                    context: indexable,
                });
            }
        }
        let ratio = sampling_ratio.unwrap_or(1);
        if let Some(full) = full
            && self.sample(ratio)
        {
            self.enqueue(full);
        }
        if let Some(debug) = debug
            && self.sample(ratio)
        {
            self.enqueue(debug);
        }
    }

    fn sample(&mut self, ratio: u64) -> bool {
        match ratio {
            0 => false,
            1 => true,
            n => self.rng.u64(..n) == 0,
        }
    }

    fn enqueue(&mut self, event: Queued) {
        if self.outbox.len() >= self.config.capacity {
            self.dropped += 1;
            if !self.queue_full {
                self.queue_full = true;
                tracing::warn!(
                    capacity = self.config.capacity,
                    "the analytics event queue is full: events are dropped until the next flush"
                );
                self.outputs.push_back(Output::Event(Event::QueueFull {
                    capacity: self.config.capacity,
                }));
            }
            return;
        }
        self.queue_full = false;
        self.outbox.push(event);
    }

    fn timeout(&mut self, now: Instant) {
        // Exchanges that timed out.
        let conns: Vec<ConnId> = self
            .sends
            .iter()
            .filter_map(|s| s.exchange.as_ref())
            .filter(|ex| now >= ex.deadline())
            .map(|ex| ex.conn)
            .collect();
        for conn in conns {
            let mut progress = Vec::new();
            if let Some(ex) = self.exchange_mut(conn) {
                ex.handle_timeout(now, &mut progress);
            }
            self.progress(now, conn, progress);
        }
        // Retries that are due.
        let due: Vec<usize> = self
            .sends
            .iter()
            .enumerate()
            .filter(|(_, s)| s.exchange.is_none() && s.retry_at.is_some_and(|at| now >= at))
            .map(|(i, _)| i)
            .collect();
        for i in due {
            self.start_send(now, i);
        }
        if self.closing {
            return;
        }
        if now >= self.next_keys_reset {
            self.seen.clear();
            self.next_keys_reset = now
                + self
                    .config
                    .context_keys_flush_interval
                    .max(Duration::from_secs(1));
        }
        if now >= self.next_flush {
            self.flush(now);
            self.next_flush = now + self.config.flush_interval.max(Duration::from_millis(1));
        }
        if let Some(at) = self.next_diagnostic
            && now >= at
        {
            let interval = self
                .config
                .diagnostic_recording_interval
                .max(Duration::from_secs(60));
            self.next_diagnostic = Some(now + interval);
            let event = self.diagnostic_periodic(now);
            self.send_diagnostic(now, &event);
        }
    }

    /// Format what is queued and send it.
    fn flush(&mut self, now: Instant) {
        if self.disabled || self.closed {
            return;
        }
        let mut count = self.outbox.len();
        if !self.summary.is_empty() {
            count += 1;
        }
        if count == 0 {
            self.events_in_last_batch = 0;
            return;
        }
        let in_flight = self
            .sends
            .iter()
            .filter(|s| s.kind == PayloadKind::Analytics)
            .count();
        if in_flight >= self.config.max_concurrent_posts.max(1) {
            // Kept for the next flush, as LaunchDarkly's SDKs do when every sender is busy.
            return;
        }
        let Some(_) = self.bulk_url else {
            self.outbox.clear();
            self.summary = Summarizer::new();
            return;
        };
        let mut events: Vec<Value> = self
            .outbox
            .drain(..)
            .map(|q| format_event(&self.formatter, q))
            .collect();
        if let Some(summary) = std::mem::take(&mut self.summary).to_event() {
            events.push(summary);
        }
        self.queue_full = false;
        self.events_in_last_batch = count as u64;
        let body = serde_json::to_vec(&Value::Array(events)).unwrap_or_default();
        let payload_id = uuid_v4(&mut self.rng);
        self.sends.push(Send {
            kind: PayloadKind::Analytics,
            body: self.encode(body),
            payload_id: Some(payload_id),
            events: count,
            attempt: 0,
            exchange: None,
            retry_at: None,
        });
        let i = self.sends.len() - 1;
        self.start_send(now, i);
    }

    fn encode(&self, body: Vec<u8>) -> Bytes {
        if !self.config.gzip {
            return Bytes::from(body);
        }
        let mut gz = flate2::write::GzEncoder::new(
            Vec::with_capacity(body.len() / 4 + 64),
            flate2::Compression::fast(),
        );
        match gz.write_all(&body).and_then(|()| gz.finish()) {
            Ok(zipped) => Bytes::from(zipped),
            // Writing into a Vec cannot fail.
            Err(_) => Bytes::new(),
        }
    }

    fn send_diagnostic(&mut self, now: Instant, event: &Value) {
        if self.disabled || self.diagnostic_url.is_none() {
            return;
        }
        let body = serde_json::to_vec(event).unwrap_or_default();
        self.sends.push(Send {
            kind: PayloadKind::Diagnostic,
            body: Bytes::from(body),
            payload_id: None,
            events: 0,
            attempt: 0,
            exchange: None,
            retry_at: None,
        });
        let i = self.sends.len() - 1;
        self.start_send(now, i);
    }

    /// Start (or restart) the request of `self.sends[i]`.
    fn start_send(&mut self, now: Instant, i: usize) {
        let conn = self.conn_ids.next_id();
        let Some(send) = self.sends.get_mut(i) else {
            return;
        };
        let url = match send.kind {
            PayloadKind::Analytics => self.bulk_url.as_ref(),
            PayloadKind::Diagnostic => self.diagnostic_url.as_ref(),
        };
        let Some(url) = url else { return };
        let mut headers = self.config.identity.headers();
        headers.push(("Content-Type".into(), "application/json".into()));
        if let Some(id) = &send.payload_id {
            headers.push(("X-LaunchDarkly-Event-Schema".into(), "4".into()));
            headers.push(("X-LaunchDarkly-Payload-ID".into(), id.clone()));
            if self.config.gzip {
                headers.push(("Content-Encoding".into(), "gzip".into()));
            }
        }
        let http = http1::Config {
            // The events service answers with an empty body; anything long is not it.
            max_body_len: Some(64 * 1024),
            ..http1::Config::default()
        };
        let (exchange, action) = Exchange::start(
            now,
            conn,
            url,
            Method::Post,
            headers,
            Some(&send.body),
            self.config.connect_timeout,
            self.config.read_timeout,
            // However slowly the answer trickles in, a post ends within both timeouts.
            TotalDeadline::Response(now + self.config.connect_timeout + self.config.read_timeout),
            http,
        );
        send.attempt += 1;
        send.exchange = Some(exchange);
        send.retry_at = None;
        self.outputs.push_back(Output::Action(action));
    }

    fn progress(&mut self, now: Instant, conn: ConnId, progress: Vec<Progress>) {
        for p in progress {
            let Some(i) = self
                .sends
                .iter()
                .position(|s| s.exchange.as_ref().is_some_and(|ex| ex.conn == conn))
            else {
                return;
            };
            match p {
                Progress::Head(head) => {
                    self.outputs
                        .push_back(Output::Action(Action::Close { conn }));
                    if let Some(date) = head.header("date").and_then(parse_http_date) {
                        self.last_known_past_time = date;
                    }
                    let send = self.sends.remove(i);
                    let status = head.status;
                    if (200..300).contains(&status) {
                        self.outputs.push_back(Output::Event(match send.kind {
                            PayloadKind::Analytics => Event::Delivered {
                                events: send.events,
                            },
                            PayloadKind::Diagnostic => Event::DiagnosticDelivered,
                        }));
                    } else if recoverable(status) {
                        let error =
                            ErrorInfo::new(now, ErrorKind::ErrorResponse, Cause::Status(status));
                        self.retry_or_drop(now, send, error);
                    } else {
                        tracing::error!(
                            status,
                            "the events service refused the SDK key: no more analytics events will be sent"
                        );
                        self.disable(status);
                    }
                }
                Progress::Failed(error) => {
                    self.outputs
                        .push_back(Output::Action(Action::Close { conn }));
                    let send = self.sends.remove(i);
                    self.retry_or_drop(now, send, error);
                }
                Progress::Body(_) | Progress::End => {}
            }
        }
    }

    fn retry_or_drop(&mut self, now: Instant, mut send: Send, error: ErrorInfo) {
        let retrying = send.attempt < 2 && !self.disabled;
        tracing::warn!(
            error = %error.cause,
            retrying,
            "posting analytics events failed"
        );
        self.outputs.push_back(Output::Event(Event::Failed {
            error,
            events: send.events,
            retrying,
        }));
        if retrying {
            send.exchange = None;
            send.retry_at = Some(now + self.config.retry_delay);
            self.sends.push(send);
        }
    }

    fn disable(&mut self, status: u16) {
        self.disabled = true;
        self.outbox.clear();
        self.summary = Summarizer::new();
        self.next_diagnostic = None;
        for send in self.sends.drain(..) {
            if let Some(ex) = send.exchange {
                self.outputs
                    .push_back(Output::Action(Action::Close { conn: ex.conn }));
            }
        }
        self.outputs
            .push_back(Output::Event(Event::Disabled { status }));
    }

    fn diagnostic_init(&self, unix_ms: u64) -> Option<Value> {
        let d = self.config.diagnostics.as_ref()?;
        let mut out = Map::new();
        out.insert("kind".into(), "diagnostic-init".into());
        out.insert("creationDate".into(), unix_ms.into());
        out.insert("id".into(), self.diagnostic_id.clone());
        out.insert("configuration".into(), d.configuration.clone());
        out.insert("sdk".into(), d.sdk.clone());
        out.insert("platform".into(), d.platform.clone());
        Some(Value::Object(out))
    }

    fn diagnostic_periodic(&mut self, now: Instant) -> Value {
        let wall = self.wall(now);
        let mut out = Map::new();
        out.insert("kind".into(), "diagnostic".into());
        out.insert("creationDate".into(), wall.into());
        out.insert("id".into(), self.diagnostic_id.clone());
        out.insert("dataSinceDate".into(), self.data_since.into());
        out.insert("droppedEvents".into(), self.dropped.into());
        out.insert("deduplicatedUsers".into(), self.deduplicated.into());
        out.insert("eventsInLastBatch".into(), self.events_in_last_batch.into());
        out.insert(
            "streamInits".into(),
            Value::Array(std::mem::take(&mut self.stream_inits)),
        );
        self.data_since = wall;
        self.dropped = 0;
        self.deduplicated = 0;
        self.events_in_last_batch = 0;
        Value::Object(out)
    }
}

/// An HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT` and the obsolete forms) in Unix
/// milliseconds.
fn parse_http_date(text: &str) -> Option<u64> {
    let t = httpdate::parse_http_date(text).ok()?;
    t.duration_since(std::time::UNIX_EPOCH).ok().map(millis)
}

fn insert_sampling_ratio(out: &mut Map<String, Value>, ratio: Option<u64>) {
    if let Some(r) = ratio
        && r != 1
    {
        out.insert("samplingRatio".into(), r.into());
    }
}

fn format_event(formatter: &ContextFormatter, q: Queued) -> Value {
    let mut out = Map::new();
    match q {
        Queued::Feature { eval, debug } => {
            out.insert(
                "kind".into(),
                if debug { "debug" } else { "feature" }.into(),
            );
            out.insert("creationDate".into(), eval.creation_date.into());
            out.insert("key".into(), eval.key.into());
            if let Some(v) = eval.version {
                out.insert("version".into(), v.into());
            }
            // Debug events show the context as identify events do; feature events
            // redact an anonymous context.
            out.insert("context".into(), formatter.format(&eval.context, !debug));
            if let Some(v) = eval.variation {
                out.insert("variation".into(), v.into());
            }
            out.insert("value".into(), eval.value);
            out.insert("default".into(), eval.default);
            if let Some(r) = eval.reason {
                out.insert("reason".into(), r);
            }
            if let Some(p) = eval.prereq_of {
                out.insert("prereqOf".into(), p.into());
            }
            insert_sampling_ratio(&mut out, eval.sampling_ratio);
        }
        Queued::Index {
            creation_date,
            context,
        } => {
            out.insert("kind".into(), "index".into());
            out.insert("creationDate".into(), creation_date.into());
            out.insert("context".into(), formatter.format(&context, false));
        }
        Queued::Identify {
            creation_date,
            context,
        } => {
            out.insert("kind".into(), "identify".into());
            out.insert("creationDate".into(), creation_date.into());
            out.insert("context".into(), formatter.format(&context, false));
        }
        Queued::Custom(c) => {
            out.insert("kind".into(), "custom".into());
            out.insert("creationDate".into(), c.creation_date.into());
            out.insert("key".into(), c.key.into());
            out.insert("context".into(), formatter.format(&c.context, true));
            if let Some(d) = c.data
                && !d.is_null()
            {
                out.insert("data".into(), d);
            }
            if let Some(m) = c.metric_value {
                out.insert("metricValue".into(), m.into());
            }
        }
        Queued::MigrationOp(op) => {
            out.insert("kind".into(), "migration_op".into());
            out.insert("creationDate".into(), op.creation_date.into());
            out.insert("context".into(), formatter.format(&op.context, true));
            insert_sampling_ratio(&mut out, op.sampling_ratio);
            for (k, v) in op.body {
                out.entry(k).or_insert(v);
            }
        }
    }
    Value::Object(out)
}
