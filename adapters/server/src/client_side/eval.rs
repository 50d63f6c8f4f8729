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

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use flagsync_core::{Kind, Snapshot};
use flagsync_eval::{
    Context, Detail, Flag, FlagValue, Models, Options, PrerequisiteEvent, PrerequisiteRecorder,
    Reason, SlotModels, SnapshotStore, evaluate, evaluate_flag,
};

use crate::client_side::json::{write_json, write_str, write_value};

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

/// Up to this many changed flags always go to a stream as `patch`es; more go as
/// `patch`es while they are fewer than half the environment's flags, else as a whole
/// `put`. A patch evaluates one flag for the stream's context, a put every flag: for a
/// change of a hundred flags among thousands, patches cost the hub (which evaluates for
/// every open stream) a fraction of a put.
const MAX_PATCHES: usize = 64;

/// A flag value's JSON, integral numbers as integers.
fn write_flag_value(out: &mut Vec<u8>, value: Option<&FlagValue>) {
    match value {
        None => out.extend_from_slice(b"null"),
        Some(FlagValue::Bool(true)) => out.extend_from_slice(b"true"),
        Some(FlagValue::Bool(false)) => out.extend_from_slice(b"false"),
        Some(FlagValue::Str(s)) => write_str(out, s),
        Some(FlagValue::Number(n)) => write_number(out, *n),
        Some(FlagValue::Json(v)) => write_value(out, v),
    }
}

fn write_number(out: &mut Vec<u8>, n: f64) {
    // 2^53: beyond it an f64 no longer holds every integer.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    if n.fract() == 0.0 && n.abs() < EXACT {
        #[allow(clippy::cast_possible_truncation)]
        return write_json(out, &(n as i64));
    }
    // Not finite: `null`.
    write_json(out, &n);
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

impl<'a> Entry<'a> {
    /// The entry of `flag` evaluated as `detail`, which reached its own prerequisites
    /// `prerequisites`.
    fn new(
        flag: &Flag,
        detail: &'a Detail<&'a FlagValue>,
        with_reasons: bool,
        prerequisites: &'a [String],
    ) -> Self {
        let failed = detail.reason.is_error();
        // As the analytics events do: an experiment needs the full event and reason.
        let experiment = flag.is_experimentation_enabled(&detail.reason);
        Entry {
            value: detail.value.filter(|_| !failed),
            variation: detail.variation_index.filter(|_| !failed),
            flag_version: flag.version,
            track_events: flag.track_events || experiment,
            track_reason: experiment,
            reason: (with_reasons || experiment).then_some(&detail.reason),
            debug_events_until_date: flag.debug_events_until_date,
            prerequisites,
        }
    }

    /// The entry's JSON object (with `key`, for a `patch`), written straight to `out`,
    /// its keys in order.
    fn write(&self, out: &mut Vec<u8>, version: u64, key: Option<&str>) {
        out.push(b'{');
        if let Some(d) = self.debug_events_until_date {
            out.extend_from_slice(b"\"debugEventsUntilDate\":");
            write_json(out, &d);
            out.push(b',');
        }
        out.extend_from_slice(b"\"flagVersion\":");
        write_json(out, &self.flag_version);
        if let Some(key) = key {
            out.extend_from_slice(b",\"key\":");
            write_str(out, key);
        }
        if !self.prerequisites.is_empty() {
            out.extend_from_slice(b",\"prerequisites\":[");
            for (i, p) in self.prerequisites.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, p);
            }
            out.push(b']');
        }
        if let Some(r) = self.reason {
            out.extend_from_slice(b",\"reason\":");
            write_json(out, r);
        }
        out.extend_from_slice(if self.track_events {
            b",\"trackEvents\":true"
        } else {
            b",\"trackEvents\":false"
        });
        if self.track_reason {
            out.extend_from_slice(b",\"trackReason\":true");
        }
        out.extend_from_slice(b",\"value\":");
        write_flag_value(out, self.value);
        if let Some(v) = self.variation {
            out.extend_from_slice(b",\"variation\":");
            write_json(out, &v);
        }
        out.extend_from_slice(b",\"version\":");
        write_json(out, &version);
        out.push(b'}');
    }
}

/// Whether `flag` is available to `sdk`.
fn available(flag: &Flag, sdk: Sdk) -> bool {
    match sdk {
        Sdk::ClientSide => flag.using_environment_id(),
        Sdk::Mobile => flag.using_mobile_key(),
    }
}

/// Every flag available to `stream.sdk`, evaluated for `stream.context`: the `evalx`
/// body and the streams' `put` data, an object by flag key (keys in order).
///
/// Each flag's entry is written to `out` as it is evaluated, from the flag's compiled
/// model (kept in its item's slot) and the detail the engine answers, which borrows its
/// value from the model: nothing is copied but the JSON itself, and a flag allocates
/// only for the keys of prerequisites it reached and for a rule match's reason. A flag
/// the engine cannot read is left out (it cannot say which SDKs may see it).
pub(crate) fn write_all_flags(
    out: &mut Vec<u8>,
    snapshot: &Snapshot,
    stream: &EvalStream,
    version: u64,
) {
    // In key order: sorted by each key's first 16 bytes as a number, then by the whole
    // key (for 5,001 keys, 2.3 M instructions against 3.3 M comparing the keys alone).
    let mut flags: Vec<(u128, &str, Arc<Flag>)> = snapshot
        .iter_with_derived(Kind::Flag)
        .filter_map(|(key, item, derived)| {
            let flag = SlotModels.flag(snapshot, key, item, derived)?;
            available(&flag, stream.sdk).then(|| (key_prefix(key), key, flag))
        })
        .collect();
    flags.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)));
    let store = SnapshotStore::new(snapshot, &SlotModels);
    let reached = Reached {
        flag: Cell::new(""),
        keys: RefCell::new(Vec::new()),
    };
    // About the size of an entry (more with reasons).
    let entry_size = if stream.with_reasons { 176 } else { 128 };
    out.reserve(flags.len() * entry_size + 2);
    out.push(b'{');
    for (i, (_, key, flag)) in flags.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, key);
        out.push(b':');
        reached.flag.set(key);
        reached.keys.borrow_mut().clear();
        let options = Options {
            recorder: Some(&reached),
            big_segments: None,
        };
        let detail = evaluate(&store, flag, &stream.context, options);
        let prerequisites = reached.keys.borrow();
        Entry::new(flag, &detail, stream.with_reasons, &prerequisites).write(out, version, None);
    }
    out.push(b'}');
}

/// The first 16 bytes of `key` as a big-endian number (zeros after a shorter key): in
/// the order of the keys, ties broken by the whole key.
fn key_prefix(key: &str) -> u128 {
    let mut head = [0; 16];
    let n = key.len().min(16);
    head[..n].copy_from_slice(&key.as_bytes()[..n]);
    u128::from_be_bytes(head)
}

/// [`write_all_flags`] as a new body.
pub(crate) fn all_flags(snapshot: &Snapshot, stream: &EvalStream, version: u64) -> Vec<u8> {
    let mut out = Vec::new();
    write_all_flags(&mut out, snapshot, stream, version);
    out
}

/// Bytes written from JSON and ASCII only: UTF-8.
fn into_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The keys of one flag's own prerequisites its evaluation reached.
struct Reached<'a> {
    flag: Cell<&'a str>,
    keys: RefCell<Vec<String>>,
}

impl PrerequisiteRecorder for Reached<'_> {
    fn record(&self, _: &PrerequisiteEvent<'_>) {}

    fn reached(&self, flag_key: &str, prerequisite_key: &str) {
        if flag_key == self.flag.get() {
            self.keys.borrow_mut().push(prerequisite_key.to_owned());
        }
    }
}

/// Flag `key` for `stream`: its `patch` data, or `None` when the flag is gone or not
/// available to the stream's SDK (a `delete` then).
fn patch(snapshot: &Snapshot, stream: &EvalStream, key: &str, version: u64) -> Option<String> {
    let reached = Reached {
        flag: Cell::new(key),
        keys: RefCell::new(Vec::new()),
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
            if !available(flag, stream.sdk) {
                return None;
            }
            let prerequisites = reached.keys.borrow();
            let mut out = Vec::with_capacity(160);
            Entry::new(flag, &detail, stream.with_reasons, &prerequisites).write(
                &mut out,
                version,
                Some(key),
            );
            Some(into_string(out))
        },
    )
}

/// An SSE event's text.
pub(crate) fn sse(name: &str, data: &str) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A `put` event of every flag `stream` may see, written in place.
fn put(snapshot: &Snapshot, stream: &EvalStream, version: u64) -> String {
    let mut out = b"event: put\ndata: ".to_vec();
    write_all_flags(&mut out, snapshot, stream, version);
    out.extend_from_slice(b"\n\n");
    into_string(out)
}

/// The events `change` sends `stream`: a `patch` per changed flag it may see, a
/// `delete` per changed flag gone or no longer available to it; a whole `put` when the
/// changed flags are unknown or many.
pub(crate) fn change_events(stream: &EvalStream, change: &Evaluation) -> String {
    let snapshot = &change.snapshot;
    let keys = match &change.changed {
        Some(keys)
            if keys.len() <= MAX_PATCHES
                || keys.len() * 2 < snapshot.len(flagsync_core::Kind::Flag) =>
        {
            keys
        }
        _ => return put(snapshot, stream, change.version),
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
        put(&self.snapshot, &self.stream, self.version)
    }
}
