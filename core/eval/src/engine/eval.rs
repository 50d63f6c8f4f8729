//! The evaluation of one flag for one context (Go's `evaluator.go` and
//! `evaluator_segment.go`): off → prerequisites → targets → rules → fallthrough.

use std::sync::Arc;

use crate::{Context, FlagValue};
use flagsync_core::bigseg::{BigSegmentLookup, BigSegmentsStatus, Membership};

use super::bucket::{Bucketed, bucket};
use super::clause::{Clause, Op, Values};
use super::compile::{ContextTarget, Flag, Segment, Serve, Target};
use super::reason::{Detail, EvalError, Reason, VariationIndex, worse};

/// Where an evaluation finds prerequisite flags and segments.
pub trait Store {
    /// The flag `key`, if the store has one that can be evaluated.
    fn flag(&self, key: &str) -> Option<Arc<Flag>>;
    /// The segment `key`, if the store has one that can be evaluated.
    fn segment(&self, key: &str) -> Option<Arc<Segment>>;
}

/// One prerequisite evaluation, as analytics events report it.
pub struct PrerequisiteEvent<'a> {
    /// The key of the flag whose prerequisite this is.
    pub target_flag_key: &'a str,
    /// The prerequisite flag.
    pub prerequisite_flag: &'a Arc<Flag>,
    /// Its evaluation.
    pub result: &'a Detail<&'a FlagValue>,
}

/// Told of the prerequisites an evaluation meets.
pub trait PrerequisiteRecorder {
    /// A prerequisite flag was evaluated (and its evaluation did not fail), in order.
    fn record(&self, event: &PrerequisiteEvent<'_>);

    /// Flag `flag_key` reached its prerequisite `prerequisite_key`: called before the
    /// prerequisite is evaluated, also when it is missing or its evaluation fails (but
    /// not for a flag that names itself). Nothing by default.
    fn reached(&self, flag_key: &str, prerequisite_key: &str) {
        let _ = (flag_key, prerequisite_key);
    }
}

/// What one evaluation may consult besides the flag and the context.
#[derive(Clone, Copy, Default)]
pub struct Options<'a> {
    /// Told of prerequisite evaluations.
    pub recorder: Option<&'a dyn PrerequisiteRecorder>,
    /// Big segment memberships; without one every big segment is NOT_CONFIGURED.
    pub big_segments: Option<&'a dyn BigSegmentLookup>,
}

/// Evaluate `flag` for `context`. Never panics; problems in the flag data are reasons
/// (`ERROR`/`MALFORMED_FLAG`), missing prerequisites and segments are handled as the
/// other SDKs do.
pub fn evaluate<'f>(
    store: &dyn Store,
    flag: &'f Flag,
    context: &Context,
    options: Options<'_>,
) -> Detail<&'f FlagValue> {
    let mut state = State {
        store,
        context,
        options,
        memberships: Vec::new(),
        status: None,
    };
    let (mut detail, _) = state.flag(flag, None);
    if let Some(status) = state.status {
        detail.reason = detail.reason.with_big_segments_status(status);
    }
    detail
}

/// Most prerequisite and segment nesting followed: beyond, the flag is malformed (no
/// LaunchDarkly data nests this deep; hostile data must not exhaust the stack).
const MAX_DEPTH: usize = 64;

/// The state of one evaluation.
struct State<'s> {
    store: &'s dyn Store,
    context: &'s Context,
    options: Options<'s>,
    /// Big segment memberships asked for, by context key.
    memberships: Vec<(Box<str>, Option<Arc<Membership>>)>,
    /// The worst big segments status seen.
    status: Option<BigSegmentsStatus>,
}

/// The flags whose prerequisites are being evaluated, or the segments being matched:
/// a list through the stack frames of the evaluation (nothing allocated).
struct Chain<'a> {
    key: &'a str,
    up: Option<&'a Self>,
    depth: usize,
}

impl<'a> Chain<'a> {
    fn push(up: Option<&'a Self>, key: &'a str) -> Self {
        Self {
            key,
            up,
            depth: up.map_or(1, |c| c.depth + 1),
        }
    }

    fn contains(mut chain: Option<&Chain<'_>>, key: &str) -> bool {
        while let Some(c) = chain {
            if c.key == key {
                return true;
            }
            chain = c.up;
        }
        false
    }
}

/// A clause or segment could not be evaluated: the flag is malformed.
struct Malformed;

impl State<'_> {
    /// Evaluate `flag`; the `bool` is Go's "ok": false when an error must make a flag
    /// that has this one as a prerequisite malformed too.
    fn flag<'f>(
        &mut self,
        flag: &'f Flag,
        chain: Option<&Chain<'_>>,
    ) -> (Detail<&'f FlagValue>, bool) {
        if !flag.on {
            return (off(flag, Reason::Off), true);
        }
        if !flag.prerequisites.is_empty() {
            match self.prerequisites(flag, chain) {
                Ok(None) => {}
                Ok(Some(failed)) => return (off(flag, failed), true),
                Err(Malformed) => return (Detail::err(EvalError::MalformedFlag), false),
            }
        }
        if let Some(v) = target_match(flag, self.context) {
            return (variation(flag, v, Reason::target_match()), true);
        }
        for (i, rule) in flag.rules.iter().enumerate() {
            match self.all_match(&rule.clauses, None) {
                Err(Malformed) => return (Detail::err(EvalError::MalformedFlag), false),
                Ok(false) => {}
                Ok(true) => {
                    let reason = Reason::RuleMatch {
                        rule_index: i,
                        rule_id: rule.id.clone(),
                        in_experiment: false,
                        big_segments_status: None,
                    };
                    return (self.serve(flag, &rule.serve, reason), true);
                }
            }
        }
        (
            self.serve(flag, &flag.fallthrough, Reason::fallthrough()),
            true,
        )
    }

    /// `Ok(None)`: every prerequisite is met; `Ok(Some(reason))`: one failed.
    fn prerequisites(
        &mut self,
        flag: &Flag,
        chain: Option<&Chain<'_>>,
    ) -> Result<Option<Reason>, Malformed> {
        let chain = Chain::push(chain, &flag.key);
        if chain.depth > MAX_DEPTH {
            return Err(Malformed);
        }
        for p in &flag.prerequisites {
            if let Some(recorder) = self.options.recorder
                && *p.key != *flag.key
            {
                recorder.reached(&flag.key, &p.key);
            }
            let Some(prerequisite) = self.store.flag(&p.key) else {
                return Ok(Some(Reason::prerequisite_failed(&*p.key)));
            };
            if Chain::contains(Some(&chain), &prerequisite.key) {
                tracing::warn!(
                    flag = &*flag.key,
                    prerequisite = &*p.key,
                    "prerequisites form a cycle"
                );
                return Err(Malformed);
            }
            let (detail, ok) = self.flag(&prerequisite, Some(&chain));
            if !ok {
                return Err(Malformed);
            }
            let met = prerequisite.on
                && detail
                    .variation_index
                    .is_some_and(|i| i as i64 == p.variation);
            if let Some(recorder) = self.options.recorder {
                recorder.record(&PrerequisiteEvent {
                    target_flag_key: &flag.key,
                    prerequisite_flag: &prerequisite,
                    result: &detail,
                });
            }
            if !met {
                return Ok(Some(Reason::prerequisite_failed(&*p.key)));
            }
        }
        Ok(None)
    }

    /// Every clause matches (a rule without clauses matches everyone); `segments`:
    /// the segments being matched.
    fn all_match(
        &mut self,
        clauses: &[Clause],
        segments: Option<&Chain<'_>>,
    ) -> Result<bool, Malformed> {
        for c in clauses {
            if !self.clause(c, segments)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    fn clause(&mut self, c: &Clause, segments: Option<&Chain<'_>>) -> Result<bool, Malformed> {
        if c.op != Op::SegmentMatch {
            // Attributes are read borrowed from the context: nothing to cache.
            return c.matches_context(self.context).map_err(|()| Malformed);
        }
        let Values::Segments(keys) = &c.values else {
            return Ok(c.negate);
        };
        for key in keys {
            if let Some(segment) = self.store.segment(key)
                && self.segment(&segment, segments)?
            {
                return Ok(!c.negate);
            }
        }
        Ok(c.negate)
    }

    fn segment(&mut self, s: &Segment, chain: Option<&Chain<'_>>) -> Result<bool, Malformed> {
        if Chain::contains(chain, &s.key) || chain.is_some_and(|c| c.depth >= MAX_DEPTH) {
            tracing::warn!(segment = &*s.key, "segment rules form a cycle");
            return Err(Malformed);
        }
        let chain = Chain::push(chain, &s.key);
        if let Some(unbounded) = &s.unbounded {
            let Some(segment_ref) = &unbounded.segment_ref else {
                self.status = Some(worse(self.status, BigSegmentsStatus::NotConfigured));
                return Ok(false);
            };
            let Some(key) = unbounded
                .kind
                .as_ref()
                .and_then(|k| self.context.as_kind(k))
                .map(Context::key)
            else {
                return Ok(false);
            };
            if let Some(included) = self.membership(key).and_then(|m| m.check(segment_ref)) {
                return Ok(included);
            }
        } else {
            let context = self.context;
            if is_in(context, &s.included, &s.included_contexts) {
                return Ok(true);
            }
            if is_in(context, &s.excluded, &s.excluded_contexts) {
                return Ok(false);
            }
        }
        for rule in &s.rules {
            if !self.all_match(&rule.clauses, Some(&chain))? {
                continue;
            }
            let Some(weight) = rule.weight else {
                return Ok(true);
            };
            match bucket(self.context, rule.kind.as_ref(), &rule.by, &rule.prefix) {
                Err(()) => return Err(Malformed),
                Ok(Bucketed::MissingKind) => {}
                Ok(Bucketed::Value(b)) => {
                    if b < weight as f32 / 100_000.0 {
                        return Ok(true);
                    }
                }
            }
        }
        Ok(false)
    }

    /// The big segment membership of context key `key`: asked once per evaluation.
    fn membership(&mut self, key: &str) -> Option<Arc<Membership>> {
        if let Some((_, m)) = self.memberships.iter().find(|(k, _)| **k == *key) {
            return m.clone();
        }
        let Some(lookup) = self.options.big_segments else {
            self.status = Some(worse(self.status, BigSegmentsStatus::NotConfigured));
            return None;
        };
        let result = lookup.membership(key);
        self.status = Some(worse(self.status, result.status));
        self.memberships
            .push((key.into(), result.membership.clone()));
        result.membership
    }

    /// The value a rule or the fallthrough serves.
    fn serve<'f>(&self, flag: &'f Flag, serve: &Serve, reason: Reason) -> Detail<&'f FlagValue> {
        match serve {
            Serve::Variation(v) => variation(flag, *v, reason),
            Serve::Nothing => Detail::err(EvalError::MalformedFlag),
            Serve::Rollout(r) => {
                let Ok(b) = bucket(self.context, r.kind.as_ref(), &r.by, &r.prefix) else {
                    return Detail::err(EvalError::MalformedFlag);
                };
                let value = b.value();
                let mut sum = 0f32;
                let mut chosen = None;
                for bucket in &r.buckets {
                    sum += bucket.weight as f32 / 100_000.0;
                    if value < sum {
                        let missing = matches!(b, Bucketed::MissingKind);
                        chosen = Some((bucket, r.experiment && !bucket.untracked && !missing));
                        break;
                    }
                }
                // Rounding, or weights that do not add up: the last bucket.
                let Some((bucket, in_experiment)) = chosen.or_else(|| {
                    r.buckets
                        .last()
                        .map(|last| (last, r.experiment && !last.untracked))
                }) else {
                    return Detail::err(EvalError::MalformedFlag);
                };
                let reason = match reason {
                    Reason::RuleMatch {
                        rule_index,
                        rule_id,
                        big_segments_status,
                        ..
                    } => Reason::RuleMatch {
                        rule_index,
                        rule_id,
                        in_experiment,
                        big_segments_status,
                    },
                    Reason::Fallthrough {
                        big_segments_status,
                        ..
                    } => Reason::Fallthrough {
                        in_experiment,
                        big_segments_status,
                    },
                    other => other,
                };
                variation(flag, bucket.variation, reason)
            }
        }
    }
}

/// `key` (of the `user` context) in `users`, or a context's key in its kind's target.
fn is_in(context: &Context, users: &rustc_hash::FxHashSet<Box<str>>, targets: &[Target]) -> bool {
    if !users.is_empty()
        && let Some(user) = context.as_kind(&crate::ContextKind::user())
        && users.contains(user.key())
    {
        return true;
    }
    targets.iter().any(|t| target_has(context, t))
}

fn target_has(context: &Context, t: &Target) -> bool {
    !t.values.is_empty()
        && t.kind
            .as_ref()
            .and_then(|k| context.as_kind(k))
            .is_some_and(|c| t.values.contains(c.key()))
}

/// The variation of the first target listing the context (`contextTargets` first when
/// the flag has them).
fn target_match(flag: &Flag, context: &Context) -> Option<VariationIndex> {
    if flag.context_targets.is_empty() {
        return flag
            .targets
            .iter()
            .find(|t| target_has(context, t))
            .map(|t| t.variation);
    }
    for t in &flag.context_targets {
        let t = match t {
            ContextTarget::Own(t) => t,
            ContextTarget::User(Some(i)) => match flag.targets.get(*i) {
                Some(t) => t,
                None => continue,
            },
            ContextTarget::User(None) => continue,
        };
        if target_has(context, t) {
            return Some(t.variation);
        }
    }
    None
}

/// Variation `index` of `flag` with `reason`; `MALFORMED_FLAG` if there is none.
fn variation(flag: &Flag, index: VariationIndex, reason: Reason) -> Detail<&FlagValue> {
    match usize::try_from(index)
        .ok()
        .and_then(|i| flag.variations.get(i))
    {
        Some(value) => Detail {
            value: Some(value),
            variation_index: Some(index),
            reason,
        },
        None => {
            tracing::warn!(
                flag = &*flag.key,
                index,
                "a variation the flag does not have"
            );
            Detail::err(EvalError::MalformedFlag)
        }
    }
}

/// The off variation with `reason` (no value when the flag has none).
fn off(flag: &Flag, reason: Reason) -> Detail<&FlagValue> {
    match flag.off_variation {
        Some(i) => variation(flag, i, reason),
        None => Detail::empty(reason),
    }
}
