//! A parsed segment, shaped so that an evaluation never copies its key lists.
//!
//! The engine decides segment membership in this order (`Segment::contains` in
//! launchdarkly-server-sdk-evaluation 2.2.1): the context is in the segment if its key
//! for some `includedContexts` kind is listed there, or its `user` key is in `included`;
//! otherwise it is out if the same holds for `excludedContexts`/`excluded`; otherwise the
//! segment's rules decide. The key lists can hold tens of thousands of keys, and the
//! engine's `Store` trait hands segments over by value.
//!
//! So the lists are parsed once into hash sets kept here, and the engine gets, per
//! evaluation, a segment that gives the same answer for this context:
//! - listed as included: a stub with one rule without clauses (always matches);
//! - listed as excluded: a stub with no rules (never matches);
//! - neither: the segment with its rules and empty lists, so the engine evaluates the
//!   rules (and any nested segments) exactly as it would have.
//!
//! Every stub keeps the segment's key, so the engine's detection of circular segment
//! references is unchanged. Parsing accepts exactly the JSON the engine accepts: the
//! lists are read with the engine's own types and everything else is parsed by the
//! engine's `Segment` deserializer.

use std::borrow::Cow;
use std::collections::BTreeMap;

use launchdarkly_server_sdk_evaluation::{Context, Kind, Segment};
use rustc_hash::FxHashSet;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

/// The four key lists, by their JSON names.
const INCLUDED: &str = "included";
const EXCLUDED: &str = "excluded";
const INCLUDED_CONTEXTS: &str = "includedContexts";
const EXCLUDED_CONTEXTS: &str = "excludedContexts";

/// A segment parsed for evaluation.
pub(crate) struct SegmentModel {
    included: Keys,
    excluded: Keys,
    /// The segment with empty key lists, when it has rules.
    rules: Option<Segment>,
    /// Always matches; same key and version.
    member: Segment,
    /// Never matches; same key and version.
    non_member: Segment,
}

/// User keys (`included`/`excluded`) and per-kind keys (`…Contexts`).
#[derive(Default)]
struct Keys {
    users: FxHashSet<Box<str>>,
    contexts: Vec<(Kind, FxHashSet<Box<str>>)>,
}

impl Keys {
    /// The engine's `is_contained_in`, on hash sets (`user` is the context's `user`
    /// key, if it has that kind).
    fn contain(&self, context: &Context, user: Option<&str>) -> bool {
        for (kind, keys) in &self.contexts {
            if let Some(c) = context.as_kind(kind)
                && keys.contains(c.key())
            {
                return true;
            }
        }
        user.is_some_and(|key| self.users.contains(key))
    }
}

/// An element of `includedContexts`/`excludedContexts`, as the engine reads it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Target {
    context_kind: Kind,
    values: Vec<String>,
}

impl SegmentModel {
    /// Parse a segment's JSON.
    pub(crate) fn parse(raw: &[u8]) -> Result<Self, serde_json::Error> {
        // One scan splits the object into its members, borrowing their JSON.
        let members: BTreeMap<Cow<'_, str>, &RawValue> = serde_json::from_slice(raw)?;
        let list = |name: &'static str| -> Result<Vec<String>, serde_json::Error> {
            let json = members
                .get(name)
                .ok_or_else(|| serde::de::Error::missing_field(name))?;
            serde_json::from_str(json.get())
        };
        let targets = |name: &str| -> Result<Vec<Target>, serde_json::Error> {
            match members.get(name) {
                Some(json) => serde_json::from_str(json.get()),
                None => Ok(Vec::new()),
            }
        };
        let included = Keys::new(list(INCLUDED)?, targets(INCLUDED_CONTEXTS)?);
        let excluded = Keys::new(list(EXCLUDED)?, targets(EXCLUDED_CONTEXTS)?);

        // Everything else, with empty lists, through the engine's own deserializer.
        let mut rest = String::with_capacity(raw.len().min(4096));
        rest.push_str("{\"included\":[],\"excluded\":[]");
        for (name, json) in &members {
            if [INCLUDED, EXCLUDED, INCLUDED_CONTEXTS, EXCLUDED_CONTEXTS].contains(&name.as_ref()) {
                continue;
            }
            rest.push(',');
            rest.push_str(&serde_json::to_string(name.as_ref())?);
            rest.push(':');
            rest.push_str(json.get());
        }
        rest.push('}');
        let segment: Segment = serde_json::from_str(&rest)?;

        let stub = |rules: &str| -> Result<Segment, serde_json::Error> {
            let mut s: Segment = serde_json::from_str(&format!(
                "{{\"key\":\"\",\"version\":0,\"included\":[],\"excluded\":[],\"salt\":\"\",\"rules\":{rules}}}"
            ))?;
            s.key.clone_from(&segment.key);
            s.version = segment.version;
            Ok(s)
        };
        let member = stub("[{\"clauses\":[]}]")?;
        let non_member = stub("[]")?;
        // The engine accepted `rules` as an array, so it is there.
        let has_rules = match members.get("rules") {
            Some(rules) => !serde_json::from_str::<Vec<IgnoredAny>>(rules.get())?.is_empty(),
            None => false,
        };
        Ok(Self {
            included,
            excluded,
            rules: has_rules.then_some(segment),
            member,
            non_member,
        })
    }

    /// The segment as the engine should see it when evaluating `context`.
    pub(crate) fn for_context(&self, context: &Context) -> Segment {
        let user = context.as_kind(&Kind::user()).map(Context::key);
        if self.included.contain(context, user) {
            self.member.clone()
        } else if self.excluded.contain(context, user) {
            self.non_member.clone()
        } else {
            self.rules.as_ref().unwrap_or(&self.non_member).clone()
        }
    }
}

impl Keys {
    fn new(users: Vec<String>, targets: Vec<Target>) -> Self {
        Self {
            users: users.into_iter().map(String::into_boxed_str).collect(),
            contexts: targets
                .into_iter()
                .map(|t| {
                    let keys = t.values.into_iter().map(String::into_boxed_str).collect();
                    (t.context_kind, keys)
                })
                .collect(),
        }
    }
}
