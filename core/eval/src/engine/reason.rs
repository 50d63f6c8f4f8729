//! What an evaluation answers: [`Detail`] (value, variation index, [`Reason`]) and the
//! error kinds ([`EvalError`]), serialized as LaunchDarkly's SDKs write them.

use flagsync_core::bigseg::BigSegmentsStatus;
use serde::ser::{Serialize, SerializeMap, Serializer};

/// The variation index type (as in the official crate: signed, since flag data may name
/// a negative index, which is then a malformed flag).
pub type VariationIndex = isize;

/// Why an evaluation could not produce a flag value (`errorKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EvalError {
    /// The client has no flag data yet (`CLIENT_NOT_READY`).
    ClientNotReady,
    /// No flag with that key (`FLAG_NOT_FOUND`).
    FlagNotFound,
    /// The flag data is inconsistent, e.g. a rule names a variation that does not exist
    /// or prerequisites form a cycle (`MALFORMED_FLAG`).
    MalformedFlag,
    /// The value is not of the requested type (`WRONG_TYPE`).
    WrongType,
    /// An unexpected error stopped the evaluation (`EXCEPTION`).
    Exception,
}

impl EvalError {
    /// The JSON name, e.g. `MALFORMED_FLAG`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClientNotReady => "CLIENT_NOT_READY",
            Self::FlagNotFound => "FLAG_NOT_FOUND",
            Self::MalformedFlag => "MALFORMED_FLAG",
            Self::WrongType => "WRONG_TYPE",
            Self::Exception => "EXCEPTION",
        }
    }
}

impl Serialize for EvalError {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Why an evaluation gave its value: LaunchDarkly's evaluation reason.
///
/// The variants and their fields are the official crate's, plus `big_segments_status`
/// on every variant an evaluation can reach after querying a big segment: it is `Some`
/// when the evaluation (or a prerequisite's) met an unbounded segment, and then the worst
/// status seen (JSON `bigSegmentsStatus`). [`Reason::error`] and the other constructors
/// leave it `None`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The flag is off: its off variation (`OFF`).
    Off,
    /// The context's key is in one of the flag's targets (`TARGET_MATCH`).
    TargetMatch {
        /// `bigSegmentsStatus`.
        big_segments_status: Option<BigSegmentsStatus>,
    },
    /// The context matched rule `rule_index` (`RULE_MATCH`).
    RuleMatch {
        /// Zero-based index of the rule.
        rule_index: usize,
        /// The rule's `id` (omitted from JSON when empty).
        rule_id: String,
        /// The variation came from an experiment's bucket.
        in_experiment: bool,
        /// `bigSegmentsStatus`.
        big_segments_status: Option<BigSegmentsStatus>,
    },
    /// A prerequisite was off or did not give the required variation
    /// (`PREREQUISITE_FAILED`): the flag's off variation.
    PrerequisiteFailed {
        /// The key of the prerequisite flag that failed.
        prerequisite_key: String,
        /// `bigSegmentsStatus`.
        big_segments_status: Option<BigSegmentsStatus>,
    },
    /// No target or rule matched: the fallthrough (`FALLTHROUGH`).
    Fallthrough {
        /// The variation came from an experiment's bucket.
        in_experiment: bool,
        /// `bigSegmentsStatus`.
        big_segments_status: Option<BigSegmentsStatus>,
    },
    /// The flag could not be evaluated (`ERROR`): the caller's default value.
    Error {
        /// `errorKind`.
        error: EvalError,
        /// `bigSegmentsStatus`.
        big_segments_status: Option<BigSegmentsStatus>,
    },
}

impl Reason {
    /// `ERROR` with `error`.
    pub fn error(error: EvalError) -> Self {
        Self::Error {
            error,
            big_segments_status: None,
        }
    }

    /// `TARGET_MATCH`.
    pub fn target_match() -> Self {
        Self::TargetMatch {
            big_segments_status: None,
        }
    }

    /// `FALLTHROUGH`, not in an experiment.
    pub fn fallthrough() -> Self {
        Self::Fallthrough {
            in_experiment: false,
            big_segments_status: None,
        }
    }

    /// `PREREQUISITE_FAILED` for prerequisite `key`.
    pub fn prerequisite_failed(key: impl Into<String>) -> Self {
        Self::PrerequisiteFailed {
            prerequisite_key: key.into(),
            big_segments_status: None,
        }
    }

    /// The error kind of an `ERROR` reason.
    pub fn error_kind(&self) -> Option<EvalError> {
        match self {
            Self::Error { error, .. } => Some(*error),
            _ => None,
        }
    }

    /// True for an `ERROR` reason.
    pub fn is_error(&self) -> bool {
        matches!(self, Self::Error { .. })
    }

    /// True if the value came from an experiment's bucket (`inExperiment`).
    pub fn is_in_experiment(&self) -> bool {
        match self {
            Self::RuleMatch { in_experiment, .. } | Self::Fallthrough { in_experiment, .. } => {
                *in_experiment
            }
            _ => false,
        }
    }

    /// The big segments status (`bigSegmentsStatus`), if the evaluation met a big segment.
    pub fn big_segments_status(&self) -> Option<BigSegmentsStatus> {
        match self {
            Self::Off => None,
            Self::TargetMatch {
                big_segments_status,
            }
            | Self::RuleMatch {
                big_segments_status,
                ..
            }
            | Self::PrerequisiteFailed {
                big_segments_status,
                ..
            }
            | Self::Fallthrough {
                big_segments_status,
                ..
            }
            | Self::Error {
                big_segments_status,
                ..
            } => *big_segments_status,
        }
    }

    /// This reason with `bigSegmentsStatus` set (`OFF` never carries one: an off flag
    /// queries nothing).
    #[must_use]
    pub fn with_big_segments_status(mut self, status: BigSegmentsStatus) -> Self {
        match &mut self {
            Self::Off => {}
            Self::TargetMatch {
                big_segments_status,
            }
            | Self::RuleMatch {
                big_segments_status,
                ..
            }
            | Self::PrerequisiteFailed {
                big_segments_status,
                ..
            }
            | Self::Fallthrough {
                big_segments_status,
                ..
            }
            | Self::Error {
                big_segments_status,
                ..
            } => *big_segments_status = Some(status),
        }
        self
    }

    /// The JSON `kind`, e.g. `RULE_MATCH`.
    pub fn kind_str(&self) -> &'static str {
        match self {
            Self::Off => "OFF",
            Self::TargetMatch { .. } => "TARGET_MATCH",
            Self::RuleMatch { .. } => "RULE_MATCH",
            Self::PrerequisiteFailed { .. } => "PREREQUISITE_FAILED",
            Self::Fallthrough { .. } => "FALLTHROUGH",
            Self::Error { .. } => "ERROR",
        }
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("kind", self.kind_str())?;
        match self {
            Self::RuleMatch {
                rule_index,
                rule_id,
                in_experiment,
                ..
            } => {
                map.serialize_entry("ruleIndex", rule_index)?;
                if !rule_id.is_empty() {
                    map.serialize_entry("ruleId", rule_id)?;
                }
                if *in_experiment {
                    map.serialize_entry("inExperiment", &true)?;
                }
            }
            Self::PrerequisiteFailed {
                prerequisite_key, ..
            } => map.serialize_entry("prerequisiteKey", prerequisite_key)?,
            Self::Fallthrough { in_experiment, .. } => {
                if *in_experiment {
                    map.serialize_entry("inExperiment", &true)?;
                }
            }
            Self::Error { error, .. } => map.serialize_entry("errorKind", error)?,
            Self::Off | Self::TargetMatch { .. } => {}
        }
        if let Some(status) = self.big_segments_status() {
            map.serialize_entry("bigSegmentsStatus", status.as_str())?;
        }
        map.end()
    }
}

/// The result of an evaluation: the value, the index of the variation it is, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Detail<T> {
    /// The value: one of the flag's variations, the caller's default, or `None` (an off
    /// flag without an off variation, or an error before a default was applied).
    pub value: Option<T>,
    /// The index of the variation served; `None` when the value is not a variation.
    pub variation_index: Option<VariationIndex>,
    /// Why this value.
    pub reason: Reason,
}

impl<T> Detail<T> {
    /// No value and no variation, for `reason`.
    pub fn empty(reason: Reason) -> Self {
        Self {
            value: None,
            variation_index: None,
            reason,
        }
    }

    /// No value, reason `ERROR` with `error`.
    pub fn err(error: EvalError) -> Self {
        Self::empty(Reason::error(error))
    }

    /// The caller's `default`, reason `ERROR` with `error`.
    pub fn err_default(error: EvalError, default: T) -> Self {
        Self {
            value: Some(default),
            variation_index: None,
            reason: Reason::error(error),
        }
    }

    /// The same detail with `f` applied to the value.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Detail<U> {
        Detail {
            value: self.value.map(f),
            variation_index: self.variation_index,
            reason: self.reason,
        }
    }

    /// `default` when there is no value (the variation index goes, the reason stays, as
    /// in every LaunchDarkly SDK).
    #[must_use]
    pub fn or(mut self, default: T) -> Self {
        if self.value.is_none() {
            self.value = Some(default);
            self.variation_index = None;
        }
        self
    }
}

impl<T: Serialize> Serialize for Detail<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(v) = &self.value {
            map.serialize_entry("value", v)?;
        }
        if let Some(i) = self.variation_index {
            map.serialize_entry("variationIndex", &i)?;
        }
        map.serialize_entry("reason", &self.reason)?;
        map.end()
    }
}

/// The worse of two big segments statuses (Go's `computeUpdatedBigSegmentsStatus`:
/// NOT_CONFIGURED > STORE_ERROR > STALE > HEALTHY).
pub(crate) fn worse(old: Option<BigSegmentsStatus>, new: BigSegmentsStatus) -> BigSegmentsStatus {
    fn rank(s: BigSegmentsStatus) -> u8 {
        match s {
            BigSegmentsStatus::Healthy => 0,
            BigSegmentsStatus::Stale => 1,
            BigSegmentsStatus::StoreError => 2,
            BigSegmentsStatus::NotConfigured => 3,
        }
    }
    match old {
        Some(old) if rank(old) > rank(new) => old,
        _ => new,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reasons_serialize_as_launchdarkly_writes_them() {
        let cases = [
            (Reason::Off, json!({"kind": "OFF"})),
            (Reason::target_match(), json!({"kind": "TARGET_MATCH"})),
            (
                Reason::RuleMatch {
                    rule_index: 2,
                    rule_id: "r".into(),
                    in_experiment: true,
                    big_segments_status: Some(BigSegmentsStatus::Stale),
                },
                json!({"kind": "RULE_MATCH", "ruleIndex": 2, "ruleId": "r", "inExperiment": true, "bigSegmentsStatus": "STALE"}),
            ),
            (
                Reason::RuleMatch {
                    rule_index: 0,
                    rule_id: String::new(),
                    in_experiment: false,
                    big_segments_status: None,
                },
                json!({"kind": "RULE_MATCH", "ruleIndex": 0}),
            ),
            (
                Reason::prerequisite_failed("p"),
                json!({"kind": "PREREQUISITE_FAILED", "prerequisiteKey": "p"}),
            ),
            (Reason::fallthrough(), json!({"kind": "FALLTHROUGH"})),
            (
                Reason::error(EvalError::MalformedFlag)
                    .with_big_segments_status(BigSegmentsStatus::NotConfigured),
                json!({"kind": "ERROR", "errorKind": "MALFORMED_FLAG", "bigSegmentsStatus": "NOT_CONFIGURED"}),
            ),
        ];
        for (reason, expected) in cases {
            assert_eq!(
                serde_json::to_value(&reason).unwrap(),
                expected,
                "{reason:?}"
            );
        }
    }

    #[test]
    fn the_worst_big_segments_status_wins() {
        use BigSegmentsStatus::*;
        assert_eq!(worse(None, Healthy), Healthy);
        assert_eq!(worse(Some(Stale), Healthy), Stale);
        assert_eq!(worse(Some(Stale), StoreError), StoreError);
        assert_eq!(worse(Some(NotConfigured), StoreError), NotConfigured);
    }
}
