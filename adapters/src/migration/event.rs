//! The `migration_op` analytics event (PROTOCOL.md B §6.6).

use std::time::Duration;

use flagsync_core::events::ContextFormatter;

use crate::eval::{Context, Reason};
use serde::ser::{Serialize, SerializeMap, SerializeStruct, Serializer};

use super::{Operation, Origin, Stage};

/// A value for each origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PerOrigin<T> {
    /// The old origin's value.
    pub old: T,
    /// The new origin's value.
    pub new: T,
}

impl<T> PerOrigin<T> {
    /// The value of `origin`.
    pub fn get(&self, origin: Origin) -> &T {
        match origin {
            Origin::Old => &self.old,
            Origin::New => &self.new,
        }
    }

    pub(crate) fn get_mut(&mut self, origin: Origin) -> &mut T {
        match origin {
            Origin::Old => &mut self.old,
            Origin::New => &mut self.new,
        }
    }

    /// `(origin, value)` for both origins, old first.
    pub fn iter(&self) -> impl Iterator<Item = (Origin, &T)> + '_ {
        [(Origin::Old, &self.old), (Origin::New, &self.new)].into_iter()
    }
}

/// What one migration read or write did: made by
/// [`OpTracker::build`](super::OpTracker::build) and handed to an
/// [`EventSink`](super::EventSink).
///
/// Its JSON ([`MigrationOpEvent::to_json`], or `Serialize`) is the `migration_op`
/// event of LaunchDarkly's event API:
///
/// ```json
/// {"kind":"migration_op","creationDate":1700000000000,"operation":"read",
///  "context":{"key":"user-1","kind":"user"},
///  "evaluation":{"key":"db-migration","value":"live","version":3,"default":"off",
///                "variation":3,"reason":{"kind":"FALLTHROUGH"}},
///  "measurements":[{"key":"invoked","values":{"old":true,"new":true}},
///                  {"key":"consistent","value":true},
///                  {"key":"latency_ms","values":{"old":12.5,"new":3.25}}]}
/// ```
///
/// Sending it to a service is out of scope: the event carries the flag's
/// `samplingRatio` (in [`MigrationOpEvent::sampling_ratio`]) for the sink to apply, as
/// LaunchDarkly's event processors do.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MigrationOpEvent {
    /// When the event was built, in Unix milliseconds.
    pub creation_date: u64,
    /// Read or write.
    pub operation: Operation,
    /// The context the migration flag was evaluated for.
    pub context: Context,
    /// The migration flag's key.
    pub key: String,
    /// The stage used.
    pub value: Stage,
    /// The default stage given to the evaluation.
    pub default: Stage,
    /// The flag's version, if the flag exists.
    pub version: Option<u64>,
    /// The variation index served, if any.
    pub variation: Option<isize>,
    /// Why that stage.
    pub reason: Reason,
    /// The flag's `samplingRatio` for the event as a whole, if it has one.
    pub sampling_ratio: Option<u32>,
    /// Which origins ran.
    pub invoked: PerOrigin<bool>,
    /// The consistency check's result, if it ran.
    pub consistent: Option<bool>,
    /// The flag's `migration.checkRatio` (1 when absent).
    pub check_ratio: u32,
    /// Which origins failed (with error tracking on).
    pub errors: PerOrigin<bool>,
    /// Each origin's latency (with latency tracking on).
    pub latencies: PerOrigin<Option<Duration>>,
}

impl MigrationOpEvent {
    /// The event as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Serialize for MigrationOpEvent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let sampled = self.sampling_ratio.filter(|&r| r != 1);
        let measurements = Measurements(self);
        let mut s = serializer.serialize_struct("MigrationOpEvent", 7)?;
        s.serialize_field("kind", "migration_op")?;
        s.serialize_field("creationDate", &self.creation_date)?;
        s.serialize_field("operation", self.operation.as_str())?;
        // Event contexts hide the attributes of anonymous contexts (B §6.6).
        let context = crate::events::event_context(&self.context)
            .map(|c| ContextFormatter::default().format(&c, true));
        s.serialize_field("context", &context)?;
        s.serialize_field("evaluation", &Evaluation(self))?;
        if let Some(ratio) = sampled {
            s.serialize_field("samplingRatio", &ratio)?;
        } else {
            s.skip_field("samplingRatio")?;
        }
        if measurements.is_empty() {
            s.skip_field("measurements")?;
        } else {
            s.serialize_field("measurements", &measurements)?;
        }
        s.end()
    }
}

struct Evaluation<'a>(&'a MigrationOpEvent);

impl Serialize for Evaluation<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let e = self.0;
        let mut m = serializer.serialize_map(None)?;
        m.serialize_entry("key", &e.key)?;
        m.serialize_entry("value", e.value.as_str())?;
        if let Some(v) = e.version {
            m.serialize_entry("version", &v)?;
        }
        m.serialize_entry("default", e.default.as_str())?;
        if let Some(v) = e.variation {
            m.serialize_entry("variation", &v)?;
        }
        m.serialize_entry("reason", &e.reason)?;
        m.end()
    }
}

/// The `measurements` array, in the order of PROTOCOL.md B §6.6 (invoked, consistent,
/// latency_ms, error): each entry only when it has data.
struct Measurements<'a>(&'a MigrationOpEvent);

impl Measurements<'_> {
    fn is_empty(&self) -> bool {
        let e = self.0;
        !(e.invoked.old || e.invoked.new)
            && e.consistent.is_none()
            && !(e.errors.old || e.errors.new)
            && e.latencies.old.is_none()
            && e.latencies.new.is_none()
    }
}

impl Serialize for Measurements<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let e = self.0;
        let mut seq = serializer.serialize_seq(None)?;
        if e.invoked.old || e.invoked.new {
            seq.serialize_element(&Flags("invoked", &e.invoked))?;
        }
        if let Some(value) = e.consistent {
            seq.serialize_element(&Consistent(value, e.check_ratio))?;
        }
        if e.latencies.old.is_some() || e.latencies.new.is_some() {
            seq.serialize_element(&Latencies(&e.latencies))?;
        }
        if e.errors.old || e.errors.new {
            seq.serialize_element(&Flags("error", &e.errors))?;
        }
        seq.end()
    }
}

/// `{"key": …, "values": {"old": true, …}}` for the origins that are set.
struct Flags<'a>(&'static str, &'a PerOrigin<bool>);

impl Serialize for Flags<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Measurement", 2)?;
        s.serialize_field("key", self.0)?;
        s.serialize_field("values", &Values(self.1, |set: &bool| set.then_some(true)))?;
        s.end()
    }
}

struct Latencies<'a>(&'a PerOrigin<Option<Duration>>);

impl Serialize for Latencies<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Measurement", 2)?;
        s.serialize_field("key", "latency_ms")?;
        let ms = |d: &Option<Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
        s.serialize_field("values", &Values(self.0, ms))?;
        s.end()
    }
}

/// `{"old": v, "new": v}` with the origins that map to `Some`.
struct Values<'a, T, V, F: Fn(&T) -> Option<V>>(&'a PerOrigin<T>, F);

impl<T, V: Serialize, F: Fn(&T) -> Option<V>> Serialize for Values<'_, T, V, F> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut m = serializer.serialize_map(None)?;
        for (origin, value) in self.0.iter() {
            if let Some(v) = (self.1)(value) {
                m.serialize_entry(origin.as_str(), &v)?;
            }
        }
        m.end()
    }
}

struct Consistent(bool, u32);

impl Serialize for Consistent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Measurement", 3)?;
        s.serialize_field("key", "consistent")?;
        s.serialize_field("value", &self.0)?;
        if self.1 != 1 {
            s.serialize_field("samplingRatio", &self.1)?;
        } else {
            s.skip_field("samplingRatio")?;
        }
        s.end()
    }
}
