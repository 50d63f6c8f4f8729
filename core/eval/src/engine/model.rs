//! The flag and segment JSON as LaunchDarkly's SDKs read it: every field optional, with
//! the zero value Go's reader (go-server-sdk-evaluation `ldmodel/model_unmarshal.go`) and
//! Python's (`ldclient/impl/model/*.py`) give a field that is missing — or `null`.
//!
//! | object | fields and the zero value of a missing one |
//! | --- | --- |
//! | flag | `key` (the store's key when missing), `version` 0, `on` false, `salt` `""`, `variations`, `targets`, `contextTargets`, `rules`, `prerequisites` `[]`, `offVariation` none, `fallthrough` `{}` (serves nothing: `MALFORMED_FLAG` when reached, as in Go), `trackEvents`, `trackEventsFallthrough`, `clientSide`, `excludeFromSummaries` false, `clientSideAvailability` none |
//! | target | `values` `[]`, `variation` 0, `contextKind` `"user"` |
//! | prerequisite | `key` `""`, `variation` 0 |
//! | rule | `id` `""`, `clauses` `[]`, `trackEvents` false, variation/rollout none |
//! | clause | `attribute` `""`, `op` `""` (never matches), `values` `[]`, `negate` false, `contextKind` none (then `attribute` is a plain name, not a path) |
//! | rollout | `kind` `""` (a rollout), `variations` `[]`, each bucket's `variation`, `weight` 0 and `untracked` false |
//! | segment | `key` (the store's key), `version` 0, `salt` `""`, `included`, `excluded`, `includedContexts`, `excludedContexts`, `rules` `[]`, `unbounded` false, `generation` none |
//!
//! A `null` list reads as `[]`, a `null` object or optional number as absent, and a
//! `null` clause `attribute` as `""`; as in Go's reader, `null` for another string, a
//! boolean or a required number is a wrong type. A field of the wrong type (a string
//! where a number belongs) is an error: the item is malformed, as in the other SDKs.
//! Numbers that name indexes, weights or versions may be written as floats
//! (`1.0`): they are truncated, as Go's reader does.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A missing or `null` field: the type's default.
fn nd<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A number read as an integer (floats truncated, saturating); `null` is none.
fn int<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    Ok(Option::<serde_json::Number>::deserialize(d)?.map(|n| number(&n)))
}

/// A number read as an integer (0 when missing; `null` is a wrong type).
fn int0<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let n = serde_json::Number::deserialize(d)?;
    Ok(number(&n))
}

fn number(n: &serde_json::Number) -> i64 {
    n.as_i64()
        .or_else(|| n.as_u64().map(|u| i64::try_from(u).unwrap_or(i64::MAX)))
        .unwrap_or_else(|| n.as_f64().map_or(0, |f| f as i64))
}

/// A flag's JSON.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RawFlag {
    #[serde(deserialize_with = "nd")]
    pub key: Option<String>,
    #[serde(deserialize_with = "int0")]
    pub version: i64,
    pub on: bool,
    #[serde(deserialize_with = "nd")]
    pub variations: Vec<Value>,
    #[serde(deserialize_with = "int")]
    pub off_variation: Option<i64>,
    #[serde(deserialize_with = "nd")]
    pub fallthrough: RawServe,
    #[serde(deserialize_with = "nd")]
    pub targets: Vec<RawTarget>,
    #[serde(deserialize_with = "nd")]
    pub context_targets: Vec<RawTarget>,
    #[serde(deserialize_with = "nd")]
    pub rules: Vec<RawRule>,
    #[serde(deserialize_with = "nd")]
    pub prerequisites: Vec<RawPrerequisite>,
    pub salt: String,
    pub track_events: bool,
    pub track_events_fallthrough: bool,
    #[serde(deserialize_with = "int")]
    pub debug_events_until_date: Option<i64>,
    pub client_side: bool,
    #[serde(deserialize_with = "nd")]
    pub client_side_availability: Option<RawAvailability>,
    pub exclude_from_summaries: bool,
    #[serde(deserialize_with = "int")]
    pub sampling_ratio: Option<i64>,
    #[serde(deserialize_with = "nd")]
    pub migration: Option<RawMigration>,
}

/// `clientSideAvailability`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RawAvailability {
    pub using_mobile_key: bool,
    pub using_environment_id: bool,
}

/// `migration`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RawMigration {
    #[serde(deserialize_with = "int")]
    pub check_ratio: Option<i64>,
}

/// A target or context target.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RawTarget {
    pub context_kind: String,
    #[serde(deserialize_with = "nd")]
    pub values: Vec<String>,
    #[serde(deserialize_with = "int0")]
    pub variation: i64,
}

/// A prerequisite.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RawPrerequisite {
    pub key: String,
    #[serde(deserialize_with = "int0")]
    pub variation: i64,
}

/// A variation or a rollout (a rule's, or the fallthrough).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RawServe {
    #[serde(deserialize_with = "int")]
    pub variation: Option<i64>,
    #[serde(deserialize_with = "nd")]
    pub rollout: Option<RawRollout>,
}

/// A rule of a flag.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RawRule {
    pub id: String,
    #[serde(deserialize_with = "nd")]
    pub clauses: Vec<RawClause>,
    pub track_events: bool,
    #[serde(deserialize_with = "int")]
    pub variation: Option<i64>,
    #[serde(deserialize_with = "nd")]
    pub rollout: Option<RawRollout>,
}

/// A clause.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RawClause {
    #[serde(deserialize_with = "nd")]
    pub context_kind: Option<String>,
    #[serde(deserialize_with = "nd")]
    pub attribute: String,
    pub op: String,
    #[serde(deserialize_with = "nd")]
    pub values: Vec<Value>,
    pub negate: bool,
}

/// A percentage rollout or experiment.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RawRollout {
    pub kind: String,
    #[serde(deserialize_with = "nd")]
    pub context_kind: Option<String>,
    #[serde(deserialize_with = "nd")]
    pub bucket_by: Option<String>,
    #[serde(deserialize_with = "int")]
    pub seed: Option<i64>,
    #[serde(deserialize_with = "nd")]
    pub variations: Vec<RawBucket>,
}

/// One bucket of a rollout.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RawBucket {
    #[serde(deserialize_with = "int0")]
    pub variation: i64,
    #[serde(deserialize_with = "int0")]
    pub weight: i64,
    pub untracked: bool,
}

/// A segment's JSON.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RawSegment {
    #[serde(deserialize_with = "nd")]
    pub key: Option<String>,
    #[serde(deserialize_with = "int0")]
    pub version: i64,
    #[serde(deserialize_with = "nd")]
    pub included: Vec<String>,
    #[serde(deserialize_with = "nd")]
    pub excluded: Vec<String>,
    #[serde(deserialize_with = "nd")]
    pub included_contexts: Vec<RawTarget>,
    #[serde(deserialize_with = "nd")]
    pub excluded_contexts: Vec<RawTarget>,
    #[serde(deserialize_with = "nd")]
    pub rules: Vec<RawSegmentRule>,
    pub salt: String,
    pub unbounded: bool,
    pub unbounded_context_kind: String,
    #[serde(deserialize_with = "int")]
    pub generation: Option<i64>,
}

/// A rule of a segment.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub(crate) struct RawSegmentRule {
    #[serde(deserialize_with = "nd")]
    pub clauses: Vec<RawClause>,
    #[serde(deserialize_with = "int")]
    pub weight: Option<i64>,
    #[serde(deserialize_with = "nd")]
    pub bucket_by: Option<String>,
    #[serde(deserialize_with = "nd")]
    pub rollout_context_kind: Option<String>,
}
