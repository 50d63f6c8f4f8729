//! flagsync's evaluation [`Detail`] → OpenFeature's [`ResolutionDetails`](open_feature::provider::ResolutionDetails), as
//! LaunchDarkly's Java provider maps it (`EvaluationDetailConverter` in
//! `openfeature-java-server`):
//!
//! | LaunchDarkly reason | OpenFeature reason |
//! | --- | --- |
//! | `OFF` | `DISABLED` |
//! | `TARGET_MATCH` | `TARGETING_MATCH` |
//! | `RULE_MATCH` | `RULE_MATCH` (a custom reason, kept as LaunchDarkly names it) |
//! | `FALLTHROUGH` | `FALLTHROUGH` (custom) |
//! | `PREREQUISITE_FAILED` | `PREREQUISITE_FAILED` (custom) |
//! | `ERROR` | an [`EvaluationError`], the caller's default applies |
//!
//! | LaunchDarkly `errorKind` | OpenFeature error code |
//! | --- | --- |
//! | `CLIENT_NOT_READY` | `PROVIDER_NOT_READY` |
//! | `FLAG_NOT_FOUND` | `FLAG_NOT_FOUND` |
//! | `MALFORMED_FLAG` | `PARSE_ERROR` |
//! | `WRONG_TYPE` | `TYPE_MISMATCH` |
//! | `EXCEPTION` | `GENERAL` |
//!
//! The variant is the variation index as a decimal string (`"0"`, `"1"`, …), absent
//! when the value is not a variation.

use flagsync::eval::{Detail, EvalError, Reason};
use open_feature::{
    EvaluationError, EvaluationErrorCode, EvaluationReason, FlagMetadata, StructValue, Value,
};

/// The flag-metadata keys of [`crate::FlagsyncProvider::with_reason_metadata`]:
/// LaunchDarkly's reason, field by field, as LaunchDarkly's JSON names them.
pub mod metadata_keys {
    /// LaunchDarkly's reason kind: `OFF`, `FALLTHROUGH`, `TARGET_MATCH`, `RULE_MATCH`,
    /// `PREREQUISITE_FAILED` (a string).
    pub const KIND: &str = "ld.reason.kind";
    /// For `RULE_MATCH`: the zero-based index of the rule (an integer).
    pub const RULE_INDEX: &str = "ld.reason.ruleIndex";
    /// For `RULE_MATCH`: the rule's id, when it has one (a string).
    pub const RULE_ID: &str = "ld.reason.ruleId";
    /// For `RULE_MATCH` and `FALLTHROUGH`: whether the variation came from an
    /// experiment (a boolean; present only when true, as in LaunchDarkly's JSON).
    pub const IN_EXPERIMENT: &str = "ld.reason.inExperiment";
    /// For `PREREQUISITE_FAILED`: the prerequisite flag's key (a string).
    pub const PREREQUISITE_KEY: &str = "ld.reason.prerequisiteKey";
}

/// LaunchDarkly's `errorKind` as an OpenFeature error code (the table above).
pub fn error_code(error: EvalError) -> EvaluationErrorCode {
    match error {
        EvalError::ClientNotReady => EvaluationErrorCode::ProviderNotReady,
        EvalError::FlagNotFound => EvaluationErrorCode::FlagNotFound,
        EvalError::MalformedFlag => EvaluationErrorCode::ParseError,
        EvalError::WrongType => EvaluationErrorCode::TypeMismatch,
        EvalError::Exception => EvaluationErrorCode::General(error.as_str().to_owned()),
    }
}

/// LaunchDarkly's reason as an OpenFeature reason (the table above); `None` for `ERROR`,
/// which is an error instead.
pub fn reason(reason: &Reason) -> Option<EvaluationReason> {
    Some(match reason {
        Reason::Off => EvaluationReason::Disabled,
        Reason::TargetMatch { .. } => EvaluationReason::TargetingMatch,
        Reason::RuleMatch { .. } => EvaluationReason::Other("RULE_MATCH".to_owned()),
        Reason::Fallthrough { .. } => EvaluationReason::Other("FALLTHROUGH".to_owned()),
        Reason::PrerequisiteFailed { .. } => {
            EvaluationReason::Other("PREREQUISITE_FAILED".to_owned())
        }
        Reason::Error { .. } => return None,
    })
}

/// LaunchDarkly's reason in flag metadata, under [`metadata_keys`].
pub fn reason_metadata(reason: &Reason) -> FlagMetadata {
    use metadata_keys::*;
    let mut m = FlagMetadata::default();
    let kind = match reason {
        Reason::Off => "OFF",
        Reason::TargetMatch { .. } => "TARGET_MATCH",
        Reason::RuleMatch {
            rule_index,
            rule_id,
            in_experiment,
            ..
        } => {
            m.add_value(RULE_INDEX, *rule_index as i64);
            if !rule_id.is_empty() {
                m.add_value(RULE_ID, rule_id.as_str());
            }
            if *in_experiment {
                m.add_value(IN_EXPERIMENT, true);
            }
            "RULE_MATCH"
        }
        Reason::Fallthrough { in_experiment, .. } => {
            if *in_experiment {
                m.add_value(IN_EXPERIMENT, true);
            }
            "FALLTHROUGH"
        }
        Reason::PrerequisiteFailed {
            prerequisite_key, ..
        } => {
            m.add_value(PREREQUISITE_KEY, prerequisite_key.as_str());
            "PREREQUISITE_FAILED"
        }
        Reason::Error { .. } => "ERROR",
    };
    m.add_value(KIND, kind);
    m
}

/// The message of the error for a flag that is off without an off variation.
pub(crate) const OFF_WITHOUT_VALUE: &str =
    "the flag is off and has no off variation: the caller's default applies";

/// A typed detail as OpenFeature's resolution, or the error that makes the caller's
/// default apply. `metadata` adds [`reason_metadata`].
pub fn resolution<T>(
    detail: Detail<T>,
    metadata: bool,
) -> Result<open_feature::provider::ResolutionDetails<T>, EvaluationError> {
    let Some(reason_out) = reason(&detail.reason) else {
        let Reason::Error { error, .. } = detail.reason else {
            unreachable!("reason() is None only for ERROR")
        };
        return Err(EvaluationError {
            code: error_code(error),
            message: Some(format!("LaunchDarkly evaluation error {}", error.as_str())),
        });
    };
    // No variation: the flag is off without an off variation. LaunchDarkly's SDKs answer
    // the caller's default then, which OpenFeature's Rust SDK keeps from the provider: the
    // error makes its client fall back to it.
    let (Some(index), Some(value)) = (detail.variation_index, detail.value) else {
        return Err(EvaluationError {
            code: EvaluationErrorCode::General(OFF_WITHOUT_VALUE.to_owned()),
            message: Some(OFF_WITHOUT_VALUE.to_owned()),
        });
    };
    Ok(open_feature::provider::ResolutionDetails {
        value,
        variant: Some(variant(index)),
        flag_metadata: metadata.then(|| reason_metadata(&detail.reason)),
        reason: Some(reason_out),
    })
}

/// The variant: the variation index in decimal (without `fmt` for the usual small
/// indexes).
fn variant(index: flagsync::eval::engine::VariationIndex) -> String {
    const DIGITS: &str = "0123456789";
    match usize::try_from(index) {
        Ok(i) if i < DIGITS.len() => DIGITS[i..=i].to_owned(),
        _ => index.to_string(),
    }
}

/// A JSON value as an OpenFeature value: integers that fit `i64` become `Int`, other
/// numbers `Float`; `null` (which OpenFeature's Rust values cannot hold) is `None`, and
/// is left out of objects and arrays.
pub fn json_to_value(json: &serde_json::Value) -> Option<Value> {
    Some(match json {
        serde_json::Value::Null => return None,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64()?),
        },
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(items) => {
            Value::Array(items.iter().filter_map(json_to_value).collect())
        }
        serde_json::Value::Object(o) => Value::Struct(json_object_to_struct(o)),
    })
}

/// A JSON object as an OpenFeature structure ([`json_to_value`] for each field).
pub fn json_object_to_struct(object: &serde_json::Map<String, serde_json::Value>) -> StructValue {
    StructValue {
        fields: object
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), json_to_value(v)?)))
            .collect(),
    }
}

/// A structure flag's detail: an object is the structure; any other JSON value is
/// `TYPE_MISMATCH` (OpenFeature's structure type is an object).
pub fn struct_detail(detail: Detail<serde_json::Value>) -> Detail<StructValue> {
    let value = match detail.value {
        Some(serde_json::Value::Object(o)) => Some(json_object_to_struct(&o)),
        Some(_)
            if !matches!(detail.reason, Reason::Error { .. })
                && detail.variation_index.is_some() =>
        {
            return Detail {
                value: None,
                variation_index: None,
                reason: Reason::error(EvalError::WrongType),
            };
        }
        _ => None,
    };
    Detail {
        value,
        variation_index: detail.variation_index,
        reason: detail.reason,
    }
}
