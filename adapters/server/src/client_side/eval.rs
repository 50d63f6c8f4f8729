//! Flags evaluated for one context, in the JSON LaunchDarkly's client-side and mobile
//! SDKs read: the `evalx` polling body (also the streams' `put`), and the `patch` and
//! `delete` events of the streams.
//!
//! Each flag's entry is `{"value", "variation", "version", "flagVersion",
//! "trackEvents", "trackReason"?, "reason"?, "debugEventsUntilDate"?,
//! "prerequisites"?}`. `version` is the environment's payload version (it grows with
//! every change), `flagVersion` the flag's own: the SDKs (js-core's `FlagManager`)
//! drop a `patch` or `delete` whose `version` is not newer than the one they hold, and
//! a segment's change changes a flag's value without changing the flag's version, so
//! the per-flag version alone would lose it. This is what LaunchDarkly's service
//! sends; the SDKs put `flagVersion` (or `version`) in their analytics events.
//! Integral numbers are written as integers (`2`, not `2.0`), as the service does.

use std::time::{SystemTime, UNIX_EPOCH};

use flagsync_core::Snapshot;
use flagsync_eval::{
    AllFlagsOptions, Context, FlagValue, Options, PrerequisiteEvent, PrerequisiteRecorder, Reason,
    SlotModels, SnapshotStore, evaluate_flag, flags_state,
};
use serde_json::{Map, Value};

/// Which SDKs a request is from: they see different flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sdk {
    /// JavaScript (browser) SDKs: flags with `clientSideAvailability.usingEnvironmentId`.
    ClientSide,
    /// Mobile SDKs: flags with `clientSideAvailability.usingMobileKey`.
    Mobile,
}

/// What one client-side or mobile stream evaluates for: its context, its SDK's kind
/// and whether it asked for reasons.
#[derive(Debug, Clone)]
pub(crate) struct EvalStream {
    pub(crate) context: Context,
    pub(crate) sdk: Sdk,
    pub(crate) with_reasons: bool,
}

/// A change of one environment's data, for its evaluating streams: the data after it,
/// and the flags it changed (`None`: unknown, every stream gets a whole `put`).
#[derive(Debug)]
pub(crate) struct Evaluation {
    pub(crate) env: usize,
    pub(crate) snapshot: Snapshot,
    pub(crate) changed: Option<Vec<String>>,
    /// The environment's payload version after the change.
    pub(crate) version: u64,
}

/// More changed flags than this go to a stream as a whole `put`.
const MAX_PATCHES: usize = 64;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A flag value as JSON, integral numbers as integers.
pub(crate) fn value_json(value: Option<&FlagValue>) -> Value {
    match value {
        None => Value::Null,
        Some(FlagValue::Bool(b)) => Value::Bool(*b),
        Some(FlagValue::Str(s)) => Value::String(s.clone()),
        Some(FlagValue::Number(n)) => number(*n),
        Some(FlagValue::Json(v)) => v.clone(),
    }
}

fn number(n: f64) -> Value {
    // 2^53: beyond it an f64 no longer holds every integer.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if n.fract() == 0.0 && n.abs() < EXACT {
        #[allow(clippy::cast_possible_truncation)]
        return Value::from(n as i64);
    }
    serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
}

/// One flag's entry (see the module docs).
struct Entry<'a> {
    value: Option<&'a FlagValue>,
    variation: Option<isize>,
    flag_version: u64,
    track_events: bool,
    track_reason: bool,
    reason: Option<&'a Reason>,
    debug_events_until_date: Option<u64>,
    prerequisites: &'a [String],
}

impl Entry<'_> {
    fn to_json(&self, version: u64) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("value".into(), value_json(self.value));
        if let Some(v) = self.variation {
            m.insert("variation".into(), Value::from(v));
        }
        m.insert("version".into(), Value::from(version));
        m.insert("flagVersion".into(), Value::from(self.flag_version));
        m.insert("trackEvents".into(), Value::Bool(self.track_events));
        if self.track_reason {
            m.insert("trackReason".into(), Value::Bool(true));
        }
        if let Some(r) = self.reason {
            m.insert(
                "reason".into(),
                serde_json::to_value(r).unwrap_or(Value::Null),
            );
        }
        if let Some(d) = self.debug_events_until_date {
            m.insert("debugEventsUntilDate".into(), Value::from(d));
        }
        if !self.prerequisites.is_empty() {
            m.insert("prerequisites".into(), Value::from(self.prerequisites));
        }
        m
    }
}

/// Every flag available to `stream.sdk`, evaluated for `stream.context`: the `evalx`
/// body and the streams' `put` data.
pub(crate) fn all_flags(snapshot: &Snapshot, stream: &EvalStream, version: u64) -> String {
    let options = AllFlagsOptions::new()
        .client_side_only(stream.sdk == Sdk::ClientSide)
        .mobile_only(stream.sdk == Sdk::Mobile)
        .with_reasons(stream.with_reasons);
    let store = SnapshotStore::new(snapshot, &SlotModels);
    let state = flags_state(
        snapshot,
        &SlotModels,
        &store,
        None,
        &stream.context,
        options,
        now_ms(),
    );
    let mut out = Map::new();
    for (key, s) in state.iter() {
        let entry = Entry {
            value: s.value.as_ref(),
            variation: s.variation,
            flag_version: s.version.unwrap_or_default(),
            track_events: s.track_events,
            track_reason: s.track_reason,
            reason: s.reason.as_ref(),
            debug_events_until_date: s.debug_events_until_date,
            prerequisites: &s.prerequisites,
        };
        out.insert(key.to_owned(), Value::Object(entry.to_json(version)));
    }
    Value::Object(out).to_string()
}

/// The keys of one flag's own prerequisites its evaluation reached.
struct Reached<'a> {
    flag: &'a str,
    keys: std::cell::RefCell<Vec<String>>,
}

impl PrerequisiteRecorder for Reached<'_> {
    fn record(&self, _: &PrerequisiteEvent<'_>) {}

    fn reached(&self, flag_key: &str, prerequisite_key: &str) {
        if flag_key == self.flag {
            self.keys.borrow_mut().push(prerequisite_key.to_owned());
        }
    }
}

/// Flag `key` for `stream`: its `patch` data, or `None` when the flag is gone or not
/// available to the stream's SDK (a `delete` then).
fn patch(snapshot: &Snapshot, stream: &EvalStream, key: &str, version: u64) -> Option<String> {
    let reached = Reached {
        flag: key,
        keys: std::cell::RefCell::new(Vec::new()),
    };
    let options = Options {
        recorder: Some(&reached),
        big_segments: None,
    };
    evaluate_flag(
        snapshot,
        &SlotModels,
        key,
        &stream.context,
        options,
        |flag, detail| {
            let flag = flag?;
            let available = match stream.sdk {
                Sdk::ClientSide => flag.using_environment_id(),
                Sdk::Mobile => flag.using_mobile_key(),
            };
            if !available {
                return None;
            }
            let failed = detail.reason.is_error();
            let experiment = flag.is_experimentation_enabled(&detail.reason);
            let prerequisites = reached.keys.borrow().clone();
            let entry = Entry {
                value: detail.value.filter(|_| !failed),
                variation: detail.variation_index.filter(|_| !failed),
                flag_version: flag.version,
                track_events: flag.track_events || experiment,
                track_reason: experiment,
                reason: (stream.with_reasons || experiment).then_some(&detail.reason),
                debug_events_until_date: flag.debug_events_until_date,
                prerequisites: &prerequisites,
            };
            let mut m = entry.to_json(version);
            m.insert("key".into(), Value::String(key.to_owned()));
            Some(Value::Object(m).to_string())
        },
    )
}

/// An SSE event's text.
pub(crate) fn sse(name: &str, data: &str) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The events `change` sends `stream`: a `patch` per changed flag it may see, a
/// `delete` per changed flag gone or no longer available to it; a whole `put` when the
/// changed flags are unknown or many.
pub(crate) fn change_events(stream: &EvalStream, change: &Evaluation) -> String {
    let snapshot = &change.snapshot;
    let keys = match &change.changed {
        Some(keys) if keys.len() <= MAX_PATCHES => keys,
        _ => return sse("put", &all_flags(snapshot, stream, change.version)),
    };
    let mut out = String::new();
    for key in keys {
        match patch(snapshot, stream, key, change.version) {
            Some(data) => out.push_str(&sse("patch", &data)),
            None => {
                let data = serde_json::json!({ "key": key, "version": change.version });
                out.push_str(&sse("delete", &data.to_string()));
            }
        }
    }
    out
}

/// A new evaluating stream: what it evaluates for, and the data its `put` is made
/// from (taken under the server's lock when it opened, evaluated by the hub).
#[derive(Debug)]
pub(crate) struct EvalStart {
    pub(crate) stream: EvalStream,
    pub(crate) snapshot: Snapshot,
    pub(crate) version: u64,
}

impl EvalStart {
    /// The stream's first event: a `put` of every flag it may see.
    pub(crate) fn put_event(&self) -> String {
        sse(
            "put",
            &all_flags(&self.snapshot, &self.stream, self.version),
        )
    }
}
