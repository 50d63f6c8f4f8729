//! Summary counters: how often each flag gave each variation, per flag version, with the
//! context kinds that asked and the time span covered.
//!
//! A [`Summarizer`] is a plain value: callers may keep several (one per thread or shard,
//! so that recording an evaluation takes no shared lock) and [`Summarizer::merge`] them
//! into the event processor's before a flush. Recording an evaluation of a flag and
//! variation already counted allocates nothing: the flag key is looked up borrowed, and
//! the value and default are built (by the closures given) only for a new counter.
//!
//! A caller that holds compiled flags may name each with an id of its own
//! ([`FlagRef::id`]): a repeat then finds the flag's counters by that integer instead
//! of hashing and comparing the key, which is most of the cost of counting.

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

/// The flag an evaluation was of.
#[derive(Debug, Clone, Copy)]
pub struct FlagRef<'a> {
    /// The flag's key.
    pub key: &'a str,
    /// An id the caller gives to this flag (for example, to one compiled version of it):
    /// the same id must always come with the same key. Counting by id skips the key's
    /// hashing; `None` counts by key.
    pub id: Option<u64>,
}

impl<'a> From<&'a str> for FlagRef<'a> {
    fn from(key: &'a str) -> Self {
        Self { key, id: None }
    }
}

/// Summary counters of the evaluations since the last flush.
#[derive(Debug, Clone, Default)]
pub struct Summarizer {
    start: u64,
    end: u64,
    /// The flags' summaries, in the order first counted.
    flags: Vec<(Box<str>, FlagSummary)>,
    /// Index into `flags` by key.
    by_key: FxHashMap<Box<str>, usize>,
    /// Index into `flags` by the callers' ids.
    by_id: FxHashMap<u64, usize>,
}

impl PartialEq for Summarizer {
    /// The same dates and counts per flag, whatever the order or the ids they came with.
    fn eq(&self, other: &Self) -> bool {
        self.start == other.start
            && self.end == other.end
            && self.flags.len() == other.flags.len()
            && self.flags.iter().all(|(key, ours)| {
                other
                    .by_key
                    .get(key)
                    .is_some_and(|&i| other.flags[i].1 == *ours)
            })
    }
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

    /// The index in `flags` of `flag`, added (with the default `default` gives) if new.
    fn flag_index(&mut self, flag: FlagRef<'_>, default: impl FnOnce() -> Value) -> usize {
        if let Some(id) = flag.id
            && let Some(&i) = self.by_id.get(&id)
        {
            return i;
        }
        let i = match self.by_key.get(flag.key) {
            Some(&i) => i,
            None => {
                let i = self.flags.len();
                self.flags.push((
                    flag.key.into(),
                    FlagSummary {
                        default: default(),
                        kinds: Vec::new(),
                        counters: Vec::new(),
                    },
                ));
                self.by_key.insert(flag.key.into(), i);
                i
            }
        };
        if let Some(id) = flag.id {
            self.by_id.insert(id, i);
        }
        i
    }

    /// Count one evaluation of `flag` (a key, or a [`FlagRef`]) at `at` (Unix
    /// milliseconds) by a context of `kinds`. `version` is `None` for a flag that was
    /// not found. `value` and `default` are called only when this flag or counter is
    /// new.
    #[allow(
        clippy::too_many_arguments,
        reason = "the fields of one summary counter"
    )]
    pub fn record<'a, 'k>(
        &mut self,
        at: u64,
        flag: impl Into<FlagRef<'k>>,
        kinds: impl IntoIterator<Item = &'a str>,
        variation: Option<usize>,
        version: Option<u64>,
        value: impl FnOnce() -> Value,
        default: impl FnOnce() -> Value,
    ) {
        self.record_many(at, flag, kinds, variation, version, 1, value, default);
    }

    /// Count `count` evaluations as [`Summarizer::record`] counts one, all at `at` (for
    /// counts kept elsewhere and added at once). Nothing changes if `count` is 0.
    #[allow(
        clippy::too_many_arguments,
        reason = "the fields of one summary counter"
    )]
    pub fn record_many<'a, 'k>(
        &mut self,
        at: u64,
        flag: impl Into<FlagRef<'k>>,
        kinds: impl IntoIterator<Item = &'a str>,
        variation: Option<usize>,
        version: Option<u64>,
        count: u64,
        value: impl FnOnce() -> Value,
        default: impl FnOnce() -> Value,
    ) {
        if count == 0 {
            return;
        }
        if self.start == 0 || at < self.start {
            self.start = at;
        }
        if at > self.end {
            self.end = at;
        }
        let i = self.flag_index(flag.into(), default);
        let flag = &mut self.flags[i].1;
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
            Some(counter) => counter.count = counter.count.saturating_add(count),
            None => flag.counters.push(Counter {
                variation,
                version,
                value: value(),
                count,
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
            let Some(&i) = self.by_key.get(&key) else {
                self.by_key.insert(key.clone(), self.flags.len());
                self.flags.push((key, theirs));
                continue;
            };
            let ours = &mut self.flags[i].1;
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
            .iter()
            .flat_map(|(_, f)| f.counters.iter())
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
    fn many_at_once_count_as_as_many_and_none_changes_nothing() {
        let mut s = Summarizer::new();
        let (v, d) = (|| json!(true), || json!(false));
        s.record_many(30, "f", ["user"], Some(0), Some(1), 0, v, d);
        assert!(s.is_empty());
        s.record_many(30, "f", ["user"], Some(0), Some(1), 5, v, d);
        s.record(20, "f", ["user"], Some(0), Some(1), v, d);
        let mut one_by_one = Summarizer::new();
        for at in [30, 30, 30, 30, 30, 20] {
            one_by_one.record(at, "f", ["user"], Some(0), Some(1), v, d);
        }
        assert_eq!(s, one_by_one);
        assert_eq!(s.total(), 6);
    }

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
    fn counting_by_id_is_counting_by_key() {
        let by_id = |id| FlagRef {
            key: "f",
            id: Some(id),
        };
        let mut a = Summarizer::new();
        let mut b = Summarizer::new();
        // Two compiled versions of one flag (ids 7 and 8), counted by id, by key, and
        // mixed: one summary for the key, counters per version.
        a.record(
            1,
            by_id(7),
            ["user"],
            Some(0),
            Some(1),
            || json!(1),
            || json!(0),
        );
        a.record(2, "f", ["user"], Some(0), Some(1), || json!(1), || json!(0));
        a.record(
            3,
            by_id(8),
            ["org"],
            Some(0),
            Some(2),
            || json!(1),
            || json!(0),
        );
        a.record(
            4,
            by_id(7),
            ["user"],
            Some(0),
            Some(1),
            || unreachable!(),
            || unreachable!(),
        );
        b.record(1, "f", ["user"], Some(0), Some(1), || json!(1), || json!(0));
        b.record(2, "f", ["user"], Some(0), Some(1), || json!(1), || json!(0));
        b.record(3, "f", ["org"], Some(0), Some(2), || json!(1), || json!(0));
        b.record(4, "f", ["user"], Some(0), Some(1), || json!(1), || json!(0));
        assert_eq!(a, b);
        assert_eq!(a.to_event(), b.to_event());
        assert_eq!(a.total(), 4);
        let e = a.to_event().unwrap();
        assert_eq!(e["features"]["f"]["counters"][0]["count"], 3);
        assert_eq!(e["features"]["f"]["contextKinds"], json!(["user", "org"]));
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
