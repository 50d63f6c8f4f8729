//! Summary counters: how often each flag gave each variation, per flag version, with the
//! context kinds that asked and the time span covered.
//!
//! A [`Summarizer`] is a plain value: callers may keep several (one per thread or shard,
//! so that recording an evaluation takes no shared lock) and [`Summarizer::merge`] them
//! into the event processor's before a flush. Recording an evaluation of a flag and
//! variation already counted allocates nothing: the flag key is looked up borrowed, and
//! the value and default are built (by the closures given) only for a new counter.

use rustc_hash::FxHashMap;
use serde_json::{Map, Value};

/// One counter: a (variation, version) pair of one flag.
#[derive(Debug, Clone, PartialEq)]
struct Counter {
    variation: Option<usize>,
    /// `None` for an unknown flag (`"unknown": true`).
    version: Option<u64>,
    value: Value,
    count: u64,
}

#[derive(Debug, Clone, PartialEq)]
struct FlagSummary {
    default: Value,
    kinds: Vec<Box<str>>,
    counters: Vec<Counter>,
}

/// Summary counters of the evaluations since the last flush.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summarizer {
    start: u64,
    end: u64,
    flags: FxHashMap<Box<str>, FlagSummary>,
}

impl Summarizer {
    /// No evaluation counted.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.flags.is_empty()
    }

    /// Count one evaluation of flag `key` at `at` (Unix milliseconds) by a context of
    /// `kinds`. `version` is `None` for a flag that was not found. `value` and
    /// `default` are called only when this flag or counter is new.
    #[allow(
        clippy::too_many_arguments,
        reason = "the fields of one summary counter"
    )]
    pub fn record<'a>(
        &mut self,
        at: u64,
        key: &str,
        kinds: impl IntoIterator<Item = &'a str>,
        variation: Option<usize>,
        version: Option<u64>,
        value: impl FnOnce() -> Value,
        default: impl FnOnce() -> Value,
    ) {
        if self.start == 0 || at < self.start {
            self.start = at;
        }
        if at > self.end {
            self.end = at;
        }
        let flag = match self.flags.get_mut(key) {
            Some(flag) => flag,
            None => self.flags.entry(key.into()).or_insert_with(|| FlagSummary {
                default: default(),
                kinds: Vec::new(),
                counters: Vec::new(),
            }),
        };
        for kind in kinds {
            if !flag.kinds.iter().any(|k| &**k == kind) {
                flag.kinds.push(kind.into());
            }
        }
        match flag
            .counters
            .iter_mut()
            .find(|c| c.variation == variation && c.version == version)
        {
            Some(counter) => counter.count += 1,
            None => flag.counters.push(Counter {
                variation,
                version,
                value: value(),
                count: 1,
            }),
        }
    }

    /// Add `other`'s counts to these (the first default seen for a flag stays).
    pub fn merge(&mut self, other: Self) {
        if other.flags.is_empty() {
            return;
        }
        if self.start == 0 || (other.start != 0 && other.start < self.start) {
            self.start = other.start;
        }
        self.end = self.end.max(other.end);
        for (key, theirs) in other.flags {
            let Some(ours) = self.flags.get_mut(&key) else {
                self.flags.insert(key, theirs);
                continue;
            };
            for kind in theirs.kinds {
                if !ours.kinds.contains(&kind) {
                    ours.kinds.push(kind);
                }
            }
            for counter in theirs.counters {
                match ours
                    .counters
                    .iter_mut()
                    .find(|c| c.variation == counter.variation && c.version == counter.version)
                {
                    Some(c) => c.count += counter.count,
                    None => ours.counters.push(counter),
                }
            }
        }
    }

    /// The total of every counter (for tests and diagnostics).
    pub fn total(&self) -> u64 {
        self.flags
            .values()
            .flat_map(|f| f.counters.iter())
            .map(|c| c.count)
            .sum()
    }

    /// The `summary` event, or `None` if nothing was counted.
    pub fn to_event(&self) -> Option<Value> {
        if self.flags.is_empty() {
            return None;
        }
        let mut features = Map::new();
        for (key, flag) in &self.flags {
            let counters = flag
                .counters
                .iter()
                .map(|c| {
                    let mut out = Map::new();
                    if let Some(v) = c.variation {
                        out.insert("variation".into(), v.into());
                    }
                    match c.version {
                        Some(v) => out.insert("version".into(), v.into()),
                        None => out.insert("unknown".into(), true.into()),
                    };
                    out.insert("value".into(), c.value.clone());
                    out.insert("count".into(), c.count.into());
                    Value::Object(out)
                })
                .collect();
            let mut out = Map::new();
            out.insert("default".into(), flag.default.clone());
            out.insert(
                "contextKinds".into(),
                Value::Array(
                    flag.kinds
                        .iter()
                        .map(|k| Value::String(k.to_string()))
                        .collect(),
                ),
            );
            out.insert("counters".into(), Value::Array(counters));
            features.insert(key.to_string(), Value::Object(out));
        }
        let mut out = Map::new();
        out.insert("kind".into(), "summary".into());
        out.insert("startDate".into(), self.start.into());
        out.insert("endDate".into(), self.end.into());
        out.insert("features".into(), Value::Object(features));
        Some(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_per_variation_and_version_with_kinds_and_dates() {
        let mut s = Summarizer::new();
        s.record(
            20,
            "f",
            ["user"],
            Some(1),
            Some(3),
            || json!("b"),
            || json!("d"),
        );
        s.record(
            10,
            "f",
            ["org"],
            Some(1),
            Some(3),
            || unreachable!(),
            || unreachable!(),
        );
        s.record(
            30,
            "f",
            ["user"],
            Some(0),
            Some(3),
            || json!("a"),
            || unreachable!(),
        );
        s.record(
            15,
            "missing",
            ["user"],
            None,
            None,
            || json!("d2"),
            || json!("d2"),
        );
        let e = s.to_event().unwrap();
        assert_eq!(e["startDate"], 10);
        assert_eq!(e["endDate"], 30);
        assert_eq!(e["features"]["f"]["default"], "d");
        assert_eq!(e["features"]["f"]["contextKinds"], json!(["user", "org"]));
        assert_eq!(
            e["features"]["f"]["counters"],
            json!([{"variation":1,"version":3,"value":"b","count":2},{"variation":0,"version":3,"value":"a","count":1}])
        );
        assert_eq!(
            e["features"]["missing"]["counters"],
            json!([{"unknown":true,"value":"d2","count":1}])
        );
        assert_eq!(s.total(), 4);
    }

    #[test]
    fn merging_adds_counts() {
        let mut a = Summarizer::new();
        let mut b = Summarizer::new();
        a.record(5, "f", ["user"], Some(0), Some(1), || json!(1), || json!(0));
        b.record(3, "f", ["org"], Some(0), Some(1), || json!(1), || json!(0));
        b.record(9, "g", ["user"], None, Some(2), || json!(0), || json!(0));
        a.merge(b);
        assert_eq!(a.total(), 3);
        let e = a.to_event().unwrap();
        assert_eq!(e["startDate"], 3);
        assert_eq!(e["endDate"], 9);
        assert_eq!(e["features"]["f"]["counters"][0]["count"], 2);
        assert!(Summarizer::new().to_event().is_none());
    }
}
