//! The event processor: records in, `POST` requests out.
//!
//! This file holds the processor's types, its public calls and its timers; `queue`
//! turns records into queued events (summary, `index` dedup, sampling, capacity) and
//! formats them, `delivery` sends payloads (flush, diagnostics, exchanges, the retry).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{Map, Value};

use super::config::EventsConfig;
use super::context::{ContextFormatter, EventContext};
use super::lru::SeenKeys;
use super::record::{Evaluation, Record};
use super::summary::Summarizer;
use crate::endpoint::Url;
use crate::io::{Action, CloseCause, ConnId};
use crate::source::exchange::{ConnIds, Exchange};
use crate::status::ErrorInfo;
use std::sync::Arc;

mod delivery;
mod queue;

pub use delivery::status_is_recoverable;

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
}
