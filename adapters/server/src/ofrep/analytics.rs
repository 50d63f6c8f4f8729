//! Analytics events for what the server evaluates over OFREP, as an SDK would report
//! them: each evaluation is a [`Record::Evaluation`] for the core's
//! [`EventProcessor`] (one per environment, made on its first OFREP evaluation), which
//! counts the summary, sends `index` events for contexts it has not seen lately, and
//! `feature` and `debug` events for the flags that ask for them (`trackEvents`,
//! experiments, `debugEventsUntilDate`).
//!
//! The processor's "delivery" is in process: the request it asks to send is taken
//! apart here (its payload id and body) into an [`EventPayload`], exactly what a
//! `POST /bulk` to the server becomes, and answered `202` at once. The caller
//! publishes the payloads to the server's event subscriptions, so `flagsync serve
//! --events` prints them and a relay forwards them upstream with the environment's SDK
//! key. The processor's own requests carry no key (a placeholder stands in for it).
//!
//! Bounded: the processor queues at most [`EventsConfig::capacity`] events (later ones
//! are dropped and counted); the summary is counters. Flushed every
//! [`EventsConfig::flush_interval`] (5 s) by the server's OFREP timer thread, and on
//! shutdown. Diagnostic events are not made (the server is no SDK instance).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use flagsync_core::Action;
use flagsync_core::events::{
    Evaluation, EventContext, EventProcessor, EventsConfig, Input, Output, Record,
};
use flagsync_eval::{Context, Detail, Flag, FlagValue, Reason};
use serde_json::Value;

use crate::events::{EventPayload, PayloadKind};

/// The events service's answer the processor is given for every payload.
const ACCEPTED: &[u8] = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n";

/// Stands for the SDK key in the processor's requests (which never leave the process).
const NO_KEY: &str = "flagsync-server-ofrep";

/// One OFREP evaluation to report.
pub(crate) struct Evaluated<'a> {
    /// The flag key asked for.
    pub(crate) key: &'a str,
    /// The flag's model, if it was found and readable.
    pub(crate) flag: Option<&'a Arc<Flag>>,
    /// What it gave.
    pub(crate) detail: &'a Detail<&'a FlagValue>,
}

/// Every environment's event processor.
#[derive(Debug, Default)]
pub(crate) struct Analytics {
    envs: Mutex<HashMap<usize, EnvEvents>>,
}

#[derive(Debug)]
struct EnvEvents {
    processor: EventProcessor,
    /// The environment's name on its payloads (`None`: the default environment).
    name: Option<String>,
    /// When the processor wants [`Input::Timeout`].
    deadline: Option<Instant>,
}

impl Analytics {
    fn lock(&self) -> MutexGuard<'_, HashMap<usize, EnvEvents>> {
        self.envs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Report `records` (made by [`record`]) in environment `env` (named `name` on its
    /// payloads); the payloads this made (none, unless the queue asked for a flush).
    pub(crate) fn submit(
        &self,
        env: usize,
        name: Option<&str>,
        records: Vec<Evaluation>,
        now: Instant,
    ) -> Vec<EventPayload> {
        if records.is_empty() {
            return Vec::new();
        }
        let mut envs = self.lock();
        let events = envs.entry(env).or_insert_with(|| EnvEvents {
            processor: EventProcessor::new(config(), fastrand::u64(..), now, unix_ms()),
            name: name.map(str::to_owned),
            deadline: None,
        });
        for record in records {
            events
                .processor
                .handle_input(now, Input::Record(Record::Evaluation(record)));
        }
        events.drain(now)
    }

    /// Give every processor whose deadline has passed its timeout (a periodic flush);
    /// the payloads, and the earliest deadline left.
    pub(crate) fn due(&self, now: Instant) -> (Vec<EventPayload>, Option<Instant>) {
        let mut out = Vec::new();
        let mut next: Option<Instant> = None;
        for events in self.lock().values_mut() {
            if events.deadline.is_some_and(|d| d <= now) {
                events.processor.handle_input(now, Input::Timeout);
                out.extend(events.drain(now));
            }
            if let Some(d) = events.deadline {
                next = Some(next.map_or(d, |n| n.min(d)));
            }
        }
        (out, next)
    }

    /// Flush every processor now (shutdown, or a caller's flush).
    pub(crate) fn flush(&self, now: Instant) -> Vec<EventPayload> {
        let mut out = Vec::new();
        for events in self.lock().values_mut() {
            events.processor.handle_input(now, Input::Flush);
            out.extend(events.drain(now));
        }
        out
    }
}

impl EnvEvents {
    /// Run the processor until it waits: each request it sends becomes a payload, and
    /// is answered `202`.
    fn drain(&mut self, now: Instant) -> Vec<EventPayload> {
        let mut payloads = Vec::new();
        loop {
            match self.processor.poll_output() {
                Output::Action(Action::Connect { conn, request, .. }) => {
                    if let Some(mut payload) = payload_of(&request) {
                        payload.environment.clone_from(&self.name);
                        payloads.push(payload);
                    }
                    self.processor.handle_input(now, Input::Connected { conn });
                    let bytes = ACCEPTED;
                    self.processor
                        .handle_input(now, Input::Data { conn, bytes });
                }
                Output::Wait(deadline) => {
                    self.deadline = deadline;
                    return payloads;
                }
                _ => {}
            }
        }
    }
}

fn config() -> EventsConfig {
    let mut config = EventsConfig::new(NO_KEY);
    config.events_uri = "http://ofrep.invalid".into();
    config.gzip = false;
    config.diagnostics = None;
    config
}

/// The context as events carry it (made once per request); `None` if it cannot be
/// reported.
pub(crate) fn event_context(context: &Context) -> Option<Arc<EventContext>> {
    context.to_event_context().ok().map(Arc::new)
}

/// Now, in Unix milliseconds.
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The record an SDK makes of an evaluation (its recorder's rules: a full event for
/// `trackEvents` or an experiment, with the reason for an experiment).
pub(crate) fn record(e: &Evaluated<'_>, context: &Arc<EventContext>, unix_ms: u64) -> Evaluation {
    let flag = e.flag.map(|f| &**f);
    let experiment = flag.is_some_and(|f| f.is_experimentation_enabled(&e.detail.reason));
    let reason = experiment
        .then(|| serde_json::to_value(&e.detail.reason).ok())
        .flatten();
    let found = !matches!(
        e.detail.reason,
        Reason::Error {
            error: flagsync_eval::EvalError::FlagNotFound,
            ..
        }
    );
    Evaluation {
        creation_date: unix_ms,
        context: context.clone(),
        key: e.key.to_owned(),
        version: flag.filter(|_| found).map(|f| f.version),
        variation: e
            .detail
            .variation_index
            .and_then(|i| usize::try_from(i).ok()),
        value: e.detail.value.map_or(Value::Null, super::answer::to_json),
        // OFREP sends no default: the code default is the provider's.
        default: Value::Null,
        reason,
        prereq_of: None,
        track_events: experiment || flag.is_some_and(|f| f.track_events),
        debug_events_until_date: flag.and_then(|f| f.debug_events_until_date),
        sampling_ratio: flag.and_then(|f| f.sampling_ratio).map(u64::from),
        exclude_from_summaries: flag.is_some_and(|f| f.exclude_from_summaries),
        summarized: false,
    }
}

/// The payload a processor's `POST /bulk` request carries (its head's LaunchDarkly
/// headers and its JSON body), as the events endpoint would have received it.
fn payload_of(request: &[u8]) -> Option<EventPayload> {
    let split = request.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&request[..split]).ok()?;
    let body = &request[split + 4..];
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    };
    if !head.starts_with("POST /bulk ") {
        return None;
    }
    let parsed: Value = serde_json::from_slice(body).ok()?;
    Some(EventPayload {
        kind: PayloadKind::Bulk,
        path: "/bulk".to_owned(),
        schema: header("X-LaunchDarkly-Event-Schema"),
        payload_id: header("X-LaunchDarkly-Payload-ID"),
        user_agent: header("User-Agent"),
        wrapper: None,
        tags: None,
        instance_id: None,
        gzip: false,
        received: SystemTime::now(),
        body: parsed,
        raw: Arc::from(body),
        environment: None,
        origin: crate::events::EventOrigin::ServerSide,
    })
}
