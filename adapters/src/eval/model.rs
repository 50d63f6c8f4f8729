//! Flag and segment JSON into the engine's models, with the zero values LaunchDarkly's
//! own SDKs give the fields an item leaves out.
//!
//! The engine's serde model (launchdarkly-server-sdk-evaluation 2.2.1) requires fields
//! that the data model treats as optional: LaunchDarkly's Go reader
//! (go-server-sdk-evaluation `ldmodel/model_unmarshal.go`) and Python's
//! (`ldclient/impl/model/*.py`, its `opt_bool`/`opt_str`/`opt_dict_list` readers) read a
//! missing field as its zero value, and a `null` list as an empty one. Without help, a flag without `salt`,
//! or a rule without `trackEvents`, would be `MALFORMED_FLAG` here and evaluate
//! everywhere else.
//!
//! Well-formed items take the fast path: the raw JSON straight into the engine's model,
//! as before. Only when that fails is the item read as a `serde_json::Value`, the
//! missing fields the engine requires filled in, and the result parsed again; if
//! nothing was missing, or the second parse fails too (a field of the wrong type, say),
//! the item stays malformed with the first error. The engine requires, by its source:
//!
//! | object | required fields, and the zero value given |
//! | --- | --- |
//! | flag (`flag.rs` `Flag`) | `key` (the store's key), `on` false, `salt` `""`, `variations`, `targets`, `rules`, `prerequisites` `[]`, `fallthrough` `{}` (serves no variation: an error when reached, as in Go) |
//! | `clientSideAvailability` (`ClientSideAvailability`) | `usingMobileKey`, `usingEnvironmentId` false (`null`: as if absent) |
//! | target, context target (`flag.rs` `Target`) | `values` `[]`, `variation` 0 |
//! | prerequisite (`Prereq`) | `key` `""`, `variation` 0 |
//! | flag rule (`rule.rs` `FlagRule`) | `clauses` `[]`, `trackEvents` false |
//! | clause (`rule.rs` `Clause`) | `attribute` `""` (also for `null`), `op` `""` (an unknown operator: never matches), `values` `[]` |
//! | rollout (`variation.rs` `Rollout`) | `variations` `[]`; each bucket's `variation`, `weight` 0 |
//! | segment (`segment.rs` `Segment`) | `key` (the store's key), `version` 0, `salt` `""`, `included`, `excluded`, `rules` `[]` |
//! | segment target (`SegmentTarget`) | `values` `[]`, `contextKind` `"user"` (Go's empty kind means the default kind) |
//! | segment rule (`SegmentRule`) | `clauses` `[]` |
//!
//! Lists Go reads with `ArrayOrNull` (every one above but a rollout's `variations`) may
//! also be `null`, which is read as `[]`. Fields the engine already defaults (`version`
//! of a flag, `contextTargets`, `trackEvents…`, `clientSide`, `negate`, a rule's `id`,
//! `includedContexts`, …) are only touched for that `null` case of lists.

use launchdarkly_server_sdk_evaluation::Flag;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::segment::SegmentModel;

type Object = Map<String, Value>;

/// Parse flag `key`'s JSON: directly, or with the zero values of missing fields.
pub(super) fn flag(raw: &[u8], key: &str) -> Result<Flag, serde_json::Error> {
    let filled = || {
        let filled = fill(raw, |flag| fill_flag(flag, key))?;
        tracing::debug!(
            flag = key,
            "flag JSON without optional fields: zero values used"
        );
        Some(serde_json::from_slice::<Flag>(&filled))
    };
    match serde_json::from_slice::<Flag>(raw) {
        // The engine reads a rule's or the fallthrough's rollout that lacks a field as
        // "malformed" instead of failing; such a flag takes the slow path too.
        Ok(flag) if rollout_lacks_fields(raw) => Ok(filled().and_then(Result::ok).unwrap_or(flag)),
        Ok(flag) => Ok(flag),
        Err(strict) => filled().unwrap_or(Err(strict)),
    }
}

/// Parse segment `key`'s JSON: directly, or with the zero values of missing fields.
pub(super) fn segment(raw: &[u8], key: &str) -> Result<SegmentModel, serde_json::Error> {
    SegmentModel::parse(raw).or_else(|strict| {
        let filled = fill(raw, |segment| fill_segment(segment, key)).ok_or(strict)?;
        tracing::debug!(
            segment = key,
            "segment JSON without optional fields: zero values used"
        );
        SegmentModel::parse(&filled)
    })
}

/// True if a rollout of the flag's rules or fallthrough lacks `variations`, or one of
/// its buckets lacks `variation` or `weight`. Only flags that mention `"rollout"` are
/// read for this, and only those members.
fn rollout_lacks_fields(raw: &[u8]) -> bool {
    use serde::de::IgnoredAny;

    #[derive(Deserialize)]
    struct Probe {
        rules: Option<Vec<Served>>,
        fallthrough: Option<Served>,
    }
    #[derive(Deserialize)]
    struct Served {
        rollout: Option<Rollout>,
    }
    #[derive(Deserialize)]
    struct Rollout {
        variations: Option<Vec<Bucket>>,
    }
    #[derive(Deserialize)]
    struct Bucket {
        variation: Option<IgnoredAny>,
        weight: Option<IgnoredAny>,
    }

    if !raw.windows(9).any(|w| w == b"\"rollout\"") {
        return false;
    }
    let Ok(probe) = serde_json::from_slice::<Probe>(raw) else {
        return false;
    };
    let lacks = |served: &Served| {
        served
            .rollout
            .as_ref()
            .is_some_and(|r| match &r.variations {
                None => true,
                Some(buckets) => buckets
                    .iter()
                    .any(|b| b.variation.is_none() || b.weight.is_none()),
            })
    };
    probe.rules.iter().flatten().any(lacks) || probe.fallthrough.as_ref().is_some_and(lacks)
}

/// `raw` with `fill` applied, if it is a JSON object and `fill` changed something.
fn fill(raw: &[u8], fill: impl FnOnce(&mut Filler<'_>)) -> Option<Vec<u8>> {
    let mut value: Value = serde_json::from_slice(raw).ok()?;
    let mut changed = false;
    fill(&mut Filler {
        object: value.as_object_mut()?,
        changed: &mut changed,
    });
    if !changed {
        return None;
    }
    serde_json::to_vec(&value).ok()
}

/// One JSON object being filled in; `changed` is shared by the whole item.
struct Filler<'a> {
    object: &'a mut Object,
    changed: &'a mut bool,
}

impl Filler<'_> {
    /// Give `name` the value `zero` if it is missing.
    fn zero(&mut self, name: &str, zero: impl FnOnce() -> Value) {
        if !self.object.contains_key(name) {
            self.object.insert(name.to_owned(), zero());
            *self.changed = true;
        }
    }

    /// Give `name` the value `zero` if it is missing or `null`.
    fn zero_or_null(&mut self, name: &str, zero: impl FnOnce() -> Value) {
        match self.object.get_mut(name) {
            Some(Value::Null) => {}
            Some(_) => return,
            None => {}
        }
        self.object.insert(name.to_owned(), zero());
        *self.changed = true;
    }

    fn bool(&mut self, name: &str) {
        self.zero(name, || Value::Bool(false));
    }

    fn string(&mut self, name: &str) {
        self.zero(name, || Value::String(String::new()));
    }

    fn int(&mut self, name: &str) {
        self.zero(name, || Value::from(0));
    }

    /// A list: `[]` if missing or `null`.
    fn list(&mut self, name: &str) {
        self.zero_or_null(name, || Value::Array(Vec::new()));
    }

    /// A list (`[]` if missing or `null`) whose object elements get `each`.
    fn objects(&mut self, name: &str, mut each: impl FnMut(&mut Filler<'_>)) {
        self.list(name);
        if let Some(Value::Array(items)) = self.object.get_mut(name) {
            for item in items.iter_mut().filter_map(Value::as_object_mut) {
                each(&mut Filler {
                    object: item,
                    changed: self.changed,
                });
            }
        }
    }

    /// The member `name`, if it is an object, gets `each`.
    fn object(&mut self, name: &str, each: impl FnOnce(&mut Filler<'_>)) {
        if let Some(Value::Object(object)) = self.object.get_mut(name) {
            each(&mut Filler {
                object,
                changed: self.changed,
            });
        }
    }

    /// Drop member `name` if it is `null`.
    fn drop_null(&mut self, name: &str) {
        if self.object.get(name) == Some(&Value::Null) {
            self.object.remove(name);
            *self.changed = true;
        }
    }
}

fn fill_flag(flag: &mut Filler<'_>, key: &str) {
    flag.zero("key", || Value::String(key.to_owned()));
    flag.bool("on");
    flag.string("salt");
    flag.list("variations");
    flag.objects("targets", fill_target);
    flag.objects("contextTargets", fill_target);
    flag.objects("prerequisites", |p| {
        p.string("key");
        p.int("variation");
    });
    flag.objects("rules", |rule| {
        rule.bool("trackEvents");
        rule.objects("clauses", fill_clause);
        rule.object("rollout", fill_rollout);
    });
    flag.zero("fallthrough", || Value::Object(Object::new()));
    flag.object("fallthrough", |fallthrough| {
        fallthrough.object("rollout", fill_rollout);
    });
    flag.drop_null("clientSideAvailability");
    flag.object("clientSideAvailability", |a| {
        a.bool("usingMobileKey");
        a.bool("usingEnvironmentId");
    });
}

fn fill_target(target: &mut Filler<'_>) {
    target.list("values");
    target.int("variation");
}

fn fill_clause(clause: &mut Filler<'_>) {
    clause.zero_or_null("attribute", || Value::String(String::new()));
    clause.string("op");
    clause.list("values");
}

fn fill_rollout(rollout: &mut Filler<'_>) {
    // Go reads a rollout's buckets with `Array`, not `ArrayOrNull`: `null` stays an error.
    rollout.zero("variations", || Value::Array(Vec::new()));
    if let Some(Value::Array(buckets)) = rollout.object.get_mut("variations") {
        for bucket in buckets.iter_mut().filter_map(Value::as_object_mut) {
            let mut bucket = Filler {
                object: bucket,
                changed: rollout.changed,
            };
            bucket.int("variation");
            bucket.int("weight");
        }
    }
}

fn fill_segment(segment: &mut Filler<'_>, key: &str) {
    segment.zero("key", || Value::String(key.to_owned()));
    segment.int("version");
    segment.string("salt");
    segment.list("included");
    segment.list("excluded");
    segment.objects("includedContexts", fill_segment_target);
    segment.objects("excludedContexts", fill_segment_target);
    segment.objects("rules", |rule| rule.objects("clauses", fill_clause));
}

fn fill_segment_target(target: &mut Filler<'_>) {
    target.list("values");
    target.zero("contextKind", || Value::String("user".to_owned()));
}
