//! Flags and segments compiled for evaluation, once per version: key lists as hash sets,
//! attribute references parsed, clause values parsed for their operator, regexes
//! compiled, and each rollout's SHA-1 bucketing prefix (`key.salt.` or `seed.`) hashed
//! ahead.

use std::sync::Arc;

use crate::{ContextKind as Kind, FlagValue, Reference};
use rustc_hash::FxHashSet;

use super::bucket::{BucketBy, Prefix};
use super::clause::{Attr, Clause, Op, Values};
use super::model::{
    RawClause, RawFlag, RawRollout, RawSegment, RawSegmentRule, RawServe, RawTarget,
};
use super::reason::VariationIndex;

/// A flag compiled for evaluation. Made with [`Flag::from_json`]; read by
/// [`evaluate`](super::evaluate), by analytics events and by `all_flags_state`.
#[derive(Debug)]
pub struct Flag {
    /// The flag key.
    pub key: Arc<str>,
    /// The flag version.
    pub version: u64,
    pub(crate) on: bool,
    pub(crate) variations: Vec<FlagValue>,
    pub(crate) off_variation: Option<VariationIndex>,
    pub(crate) fallthrough: Serve,
    pub(crate) targets: Vec<Target>,
    pub(crate) context_targets: Vec<ContextTarget>,
    pub(crate) rules: Vec<FlagRule>,
    pub(crate) prerequisites: Vec<Prerequisite>,
    /// Full analytics events for every evaluation (`trackEvents`).
    pub track_events: bool,
    /// Full analytics events for fallthrough evaluations (`trackEventsFallthrough`).
    pub track_events_fallthrough: bool,
    /// Debug events until this Unix time in milliseconds (`debugEventsUntilDate`).
    pub debug_events_until_date: Option<u64>,
    /// Leave this flag out of summary events (`excludeFromSummaries`).
    pub exclude_from_summaries: bool,
    /// Send one in this many of the flag's events (`samplingRatio`; none: every one).
    pub sampling_ratio: Option<u32>,
    /// The flag's migration settings (`migration`).
    pub migration_settings: Option<MigrationSettings>,
    using_environment_id: bool,
    using_mobile_key: bool,
    /// Unique to this compiled flag in the process: the events count by it.
    pub(crate) id: u64,
    /// The JSON's `key` is the key the flag is stored under (or absent): the flag is
    /// known by one key wherever it is evaluated, so the events may count it by `id`.
    pub(crate) one_key: bool,
    /// Known by one key, and no evaluation of it can need more than a summary count:
    /// no `trackEvents` (flag, rule or fallthrough), no experiment, no debugging, not
    /// excluded from summaries. The events count its repeats without a record.
    pub(crate) summary_only: bool,
}

impl Flag {
    /// Unique to this compiled flag in the process: an event recorder may count the
    /// flag's evaluations by it (when [`Flag::known_by_one_key`]).
    #[inline]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The JSON's `key` is the key the flag is stored under (or absent): the flag is
    /// known by one key wherever it is evaluated.
    #[inline]
    pub fn known_by_one_key(&self) -> bool {
        self.one_key
    }

    /// Known by one key, and no evaluation of it can need more than a summary count:
    /// no `trackEvents` (flag, rule or fallthrough), no experiment, no debugging, not
    /// excluded from summaries.
    #[inline]
    pub fn summary_only(&self) -> bool {
        self.summary_only
    }
}

/// A new id for a compiled flag (see [`Flag::id`]).
fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A migration flag's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigrationSettings {
    /// A consistency check runs for one operation in this many (`checkRatio`).
    pub check_ratio: Option<u32>,
}

/// `targets` entry: context keys of one kind served one variation.
#[derive(Debug)]
pub(crate) struct Target {
    /// `None`: a kind no context can have.
    pub kind: Option<Kind>,
    pub values: FxHashSet<Box<str>>,
    pub variation: VariationIndex,
}

/// `contextTargets` entry.
#[derive(Debug)]
pub(crate) enum ContextTarget {
    /// A target of its own.
    Own(Target),
    /// A `user` entry without values: the first of `targets` with the same variation
    /// (its index), if any.
    User(Option<usize>),
}

/// A prerequisite.
#[derive(Debug)]
pub(crate) struct Prerequisite {
    pub key: Box<str>,
    pub variation: i64,
}

/// A flag rule.
#[derive(Debug)]
pub(crate) struct FlagRule {
    pub id: String,
    pub clauses: Vec<Clause>,
    pub serve: Serve,
    pub track_events: bool,
}

/// What a rule or the fallthrough serves.
#[derive(Debug)]
pub(crate) enum Serve {
    Variation(VariationIndex),
    Rollout(Rollout),
    /// Neither a variation nor a rollout with buckets: `MALFORMED_FLAG`.
    Nothing,
}

/// A percentage rollout or an experiment.
#[derive(Debug)]
pub(crate) struct Rollout {
    pub experiment: bool,
    pub kind: Option<Kind>,
    pub by: BucketBy,
    /// The bucketing prefix (`key.salt.` or `seed.`), hashed ahead.
    pub prefix: Prefix,
    pub buckets: Vec<Bucket>,
}

/// One bucket of a rollout.
#[derive(Debug)]
pub(crate) struct Bucket {
    pub variation: VariationIndex,
    pub weight: i64,
    pub untracked: bool,
}

/// A segment compiled for evaluation.
#[derive(Debug)]
pub struct Segment {
    /// The segment key.
    pub key: Arc<str>,
    /// The segment version.
    pub version: u64,
    pub(crate) included: FxHashSet<Box<str>>,
    pub(crate) excluded: FxHashSet<Box<str>>,
    pub(crate) included_contexts: Vec<Target>,
    pub(crate) excluded_contexts: Vec<Target>,
    pub(crate) rules: Vec<SegmentRule>,
    /// Big segment: `Some` if `unbounded`.
    pub(crate) unbounded: Option<Unbounded>,
}

/// An unbounded (big) segment's membership source.
#[derive(Debug)]
pub(crate) struct Unbounded {
    /// `None`: a kind no context has.
    pub kind: Option<Kind>,
    /// `{key}.g{generation}`; `None` without a `generation` (NOT_CONFIGURED).
    pub segment_ref: Option<String>,
}

/// A segment rule.
#[derive(Debug)]
pub(crate) struct SegmentRule {
    pub clauses: Vec<Clause>,
    /// `Some`: only this share (of 100,000) of the matching contexts.
    pub weight: Option<i64>,
    pub kind: Option<Kind>,
    pub by: BucketBy,
    pub prefix: Prefix,
}

/// A context kind as flag data names it: missing or `""` is `user`; a name no context
/// can have is `None`.
fn kind(name: Option<&str>) -> Option<Kind> {
    match name {
        None | Some("" | "user") => Some(Kind::user()),
        Some(name) => Kind::try_from(name).ok(),
    }
}

/// A reference to an attribute: a path when the item names a context kind, a plain
/// attribute name (a leading `/` is part of the name) otherwise (Go's `setAttrNameOrRef`).
fn reference(value: &str, has_kind: bool) -> Reference {
    if has_kind || !value.starts_with('/') {
        Reference::new(value)
    } else {
        Reference::new(format!("/{}", value.replace('~', "~0").replace('/', "~1")))
    }
}

fn index(i: i64) -> VariationIndex {
    VariationIndex::try_from(i).unwrap_or(VariationIndex::MIN)
}

fn bucket_by(by: Option<&str>, has_kind: bool) -> BucketBy {
    match by {
        None | Some("") => BucketBy::Key,
        Some(by) => {
            let r = reference(by, has_kind);
            if r.is_valid() {
                BucketBy::Attr(r)
            } else {
                BucketBy::Invalid
            }
        }
    }
}

impl Flag {
    /// Parse and compile flag JSON; `key` is the store's key (used when the JSON has
    /// none). Missing fields take LaunchDarkly's zero values (see the module docs of
    /// `model`); a field of the wrong type is an error.
    pub fn from_json(raw: &[u8], key: &str) -> Result<Self, serde_json::Error> {
        let raw: RawFlag = serde_json::from_slice(raw)?;
        Ok(Self::compile(raw, key))
    }

    fn compile(raw: RawFlag, key: &str) -> Self {
        let one_key = raw.key.as_deref().is_none_or(|k| k == key);
        let key: Arc<str> = raw.key.as_deref().unwrap_or(key).into();
        let salt = raw.salt;
        let serve = |s: RawServe| serve(s.variation, s.rollout, &key, &salt);
        let targets: Vec<Target> = raw.targets.into_iter().map(target).collect();
        let context_targets = raw
            .context_targets
            .into_iter()
            .map(|t| {
                if kind(Some(&t.context_kind)).is_some_and(|k| k.is_user()) && t.values.is_empty() {
                    let v = index(t.variation);
                    ContextTarget::User(targets.iter().position(|t| t.variation == v))
                } else {
                    ContextTarget::Own(target(t))
                }
            })
            .collect();
        let rules = raw
            .rules
            .into_iter()
            .map(|r| FlagRule {
                id: r.id,
                clauses: r.clauses.into_iter().map(clause).collect(),
                serve: serve(RawServe {
                    variation: r.variation,
                    rollout: r.rollout,
                }),
                track_events: r.track_events,
            })
            .collect();
        let availability = raw.client_side_availability;
        let mut flag = Self {
            version: u64::try_from(raw.version).unwrap_or(0),
            on: raw.on,
            variations: raw.variations.into_iter().map(FlagValue::from).collect(),
            off_variation: raw.off_variation.map(index),
            fallthrough: serve(raw.fallthrough),
            targets,
            context_targets,
            rules,
            prerequisites: raw
                .prerequisites
                .into_iter()
                .map(|p| Prerequisite {
                    key: p.key.into(),
                    variation: p.variation,
                })
                .collect(),
            track_events: raw.track_events,
            track_events_fallthrough: raw.track_events_fallthrough,
            debug_events_until_date: raw
                .debug_events_until_date
                .and_then(|d| u64::try_from(d).ok()),
            exclude_from_summaries: raw.exclude_from_summaries,
            sampling_ratio: raw.sampling_ratio.and_then(|r| u32::try_from(r).ok()),
            migration_settings: raw.migration.map(|m| MigrationSettings {
                check_ratio: m.check_ratio.and_then(|r| u32::try_from(r).ok()),
            }),
            using_environment_id: availability
                .as_ref()
                .map_or(raw.client_side, |a| a.using_environment_id),
            using_mobile_key: availability.as_ref().is_none_or(|a| a.using_mobile_key),
            key,
            id: next_id(),
            one_key,
            summary_only: false,
        };
        let experiment = |s: &Serve| matches!(s, Serve::Rollout(r) if r.experiment);
        flag.summary_only = flag.one_key
            && !flag.track_events
            && !flag.track_events_fallthrough
            && flag.debug_events_until_date.is_none()
            && !flag.exclude_from_summaries
            && !experiment(&flag.fallthrough)
            && flag
                .rules
                .iter()
                .all(|r| !r.track_events && !experiment(&r.serve));
        flag
    }

    /// Available to client-side SDKs using the environment id
    /// (`clientSideAvailability.usingEnvironmentId`, or the older `clientSide`).
    pub fn using_environment_id(&self) -> bool {
        self.using_environment_id
    }

    /// Available to mobile SDKs (`clientSideAvailability.usingMobileKey`; true when
    /// the flag has no `clientSideAvailability`).
    pub fn using_mobile_key(&self) -> bool {
        self.using_mobile_key
    }

    /// True if an evaluation with `reason` needs full events with the reason: an
    /// experiment's bucket, or `trackEvents` of the matched rule or `trackEventsFallthrough`.
    pub fn is_experimentation_enabled(&self, reason: &super::Reason) -> bool {
        use super::Reason;
        if reason.is_in_experiment() {
            return true;
        }
        match reason {
            Reason::Fallthrough { .. } => self.track_events_fallthrough,
            Reason::RuleMatch { rule_index, .. } => {
                self.rules.get(*rule_index).is_some_and(|r| r.track_events)
            }
            _ => false,
        }
    }

    /// The keys of the flag's prerequisites, in order.
    pub fn prerequisite_keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.prerequisites.iter().map(|p| &*p.key)
    }
}

fn target(t: RawTarget) -> Target {
    Target {
        kind: kind(Some(&t.context_kind)),
        values: t.values.into_iter().map(String::into_boxed_str).collect(),
        variation: index(t.variation),
    }
}

fn serve(variation: Option<i64>, rollout: Option<RawRollout>, key: &str, salt: &str) -> Serve {
    if let Some(v) = variation {
        return Serve::Variation(index(v));
    }
    let Some(r) = rollout.filter(|r| !r.variations.is_empty()) else {
        return Serve::Nothing;
    };
    let has_kind = r.context_kind.is_some();
    let seed;
    let prefix = match r.seed {
        Some(s) => {
            seed = s.to_string();
            Prefix::new(&[&seed])
        }
        None => Prefix::new(&[key, salt]),
    };
    let experiment = r.kind == "experiment";
    Serve::Rollout(Rollout {
        experiment,
        kind: kind(r.context_kind.as_deref()),
        // An experiment always buckets by key.
        by: if experiment {
            BucketBy::Key
        } else {
            bucket_by(r.bucket_by.as_deref(), has_kind)
        },
        prefix,
        buckets: r
            .variations
            .into_iter()
            .map(|b| Bucket {
                variation: index(b.variation),
                weight: b.weight,
                untracked: b.untracked,
            })
            .collect(),
    })
}

pub(super) fn clause(c: RawClause) -> Clause {
    let op = Op::parse(&c.op);
    let has_kind = c.context_kind.is_some();
    let attr = if c.attribute.is_empty() {
        Attr::Invalid
    } else {
        let r = reference(&c.attribute, has_kind);
        if !r.is_valid() {
            Attr::Invalid
        } else if r.depth() == 1 && r.component(0) == Some("kind") {
            Attr::Kind
        } else if r.depth() == 1 && r.component(0) == Some("key") {
            Attr::Key
        } else if r.depth() == 1
            && let Some(name) = r.component(0)
            && !matches!(name, "name" | "anonymous")
        {
            Attr::Custom(name.into())
        } else {
            Attr::Ref(r)
        }
    };
    Clause {
        kind: kind(c.context_kind.as_deref()),
        values: Values::parse(op, c.values),
        attr,
        op,
        negate: c.negate,
    }
}

impl Segment {
    /// Parse and compile segment JSON; `key` is the store's key (used when the JSON
    /// has none).
    pub fn from_json(raw: &[u8], key: &str) -> Result<Self, serde_json::Error> {
        let raw: RawSegment = serde_json::from_slice(raw)?;
        Ok(Self::compile(raw, key))
    }

    fn compile(raw: RawSegment, key: &str) -> Self {
        let key: Arc<str> = raw.key.as_deref().unwrap_or(key).into();
        let set = |v: Vec<String>| v.into_iter().map(String::into_boxed_str).collect();
        let salt = raw.salt;
        let rule = |r: RawSegmentRule| {
            let has_kind = r.rollout_context_kind.is_some();
            SegmentRule {
                clauses: r.clauses.into_iter().map(clause).collect(),
                weight: r.weight,
                kind: kind(r.rollout_context_kind.as_deref()),
                by: bucket_by(r.bucket_by.as_deref(), has_kind),
                prefix: Prefix::new(&[&key, &salt]),
            }
        };
        let rules = raw.rules.into_iter().map(rule).collect();
        Self {
            version: u64::try_from(raw.version).unwrap_or(0),
            included: set(raw.included),
            excluded: set(raw.excluded),
            included_contexts: raw.included_contexts.into_iter().map(target).collect(),
            excluded_contexts: raw.excluded_contexts.into_iter().map(target).collect(),
            rules,
            unbounded: raw.unbounded.then(|| Unbounded {
                kind: kind(Some(&raw.unbounded_context_kind)),
                segment_ref: raw
                    .generation
                    .map(|g| flagsync_core::bigseg::segment_ref(&key, g)),
            }),
            key,
        }
    }
}
