//! An evaluation as OFREP answers it: `{key, value, reason, variant, metadata}`, a
//! code default (no `value`), or an evaluation failure `{key, errorCode,
//! errorDetails}`.
//!
//! Reasons as `flagsync-openfeature` gives them (its `resolve.rs`, after LaunchDarkly's
//! Java provider), so that a flag resolves the same through OFREP and through the
//! in-process provider:
//!
//! | LaunchDarkly | OFREP `reason` |
//! | --- | --- |
//! | `OFF` | `DISABLED` |
//! | `TARGET_MATCH` | `TARGETING_MATCH` |
//! | `RULE_MATCH` | `RULE_MATCH` (a custom reason, as LaunchDarkly names it) |
//! | `FALLTHROUGH` | `FALLTHROUGH` (custom) |
//! | `PREREQUISITE_FAILED` | `PREREQUISITE_FAILED` (custom) |
//! | `ERROR` | a failure: `FLAG_NOT_FOUND`, `PARSE_ERROR` (`MALFORMED_FLAG`), `GENERAL` (anything else) |
//!
//! OpenFeature allows custom reasons (OFREP's schema lists only the standard ones, but
//! its providers pass any string on). No value (a flag off, or whose prerequisite
//! failed, without an off variation) is OFREP's code default (ADR 0006): the reason as
//! above, no `value` and no `variant`, and the caller's default applies
//! (`flagsync-openfeature` answers an error there, which OpenFeature's Rust SDK needs
//! for the caller's default to apply; OFREP has a way to say it without an error).
//!
//! LaunchDarkly's own reason goes into `metadata` under the keys `flagsync-openfeature`
//! uses (`ld.reason.kind`, `ld.reason.ruleIndex`, `ld.reason.ruleId`,
//! `ld.reason.inExperiment`, `ld.reason.prerequisiteKey`): OFREP metadata values are
//! scalars, so the reason is flattened. The `variant` is the variation index in
//! decimal, as `flagsync-openfeature` gives it.
//!
//! Values: a number that is whole (and within ±2^53) is written as an integer (`2`,
//! not `2.0`), as LaunchDarkly's SDKs write values, so that an OFREP client resolving
//! an integer reads it as one.

use std::io::Write;

use flagsync_eval::{Detail, EvalError, FlagValue, Reason};
use serde_json::Value;

/// What an evaluation came to, for the single-flag endpoint's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A value (or a code default): `200`.
    Value,
    /// `FLAG_NOT_FOUND`: `404`.
    NotFound,
    /// An evaluation failure with this error code: `400` (`PARSE_ERROR`) or `500`
    /// (`GENERAL`).
    Failure(&'static str),
}

impl Outcome {
    /// The single-flag endpoint's status for it.
    pub(crate) fn status(self) -> u16 {
        match self {
            Self::Value => 200,
            Self::NotFound => 404,
            Self::Failure(PARSE_ERROR) => 400,
            Self::Failure(_) => 500,
        }
    }
}

/// OFREP's `PARSE_ERROR`.
pub(crate) const PARSE_ERROR: &str = "PARSE_ERROR";
/// OFREP's `GENERAL`.
pub(crate) const GENERAL: &str = "GENERAL";
/// OFREP's `FLAG_NOT_FOUND`.
pub(crate) const FLAG_NOT_FOUND: &str = "FLAG_NOT_FOUND";

/// Write flag `key`'s evaluation as one OFREP evaluation object into `out`.
pub(crate) fn write_evaluation(
    out: &mut Vec<u8>,
    key: &str,
    detail: &Detail<&FlagValue>,
) -> Outcome {
    out.extend_from_slice(b"{\"key\":");
    write_str(out, key);
    if let Reason::Error { error, .. } = &detail.reason {
        let (outcome, code, details) = match error {
            EvalError::FlagNotFound => (
                Outcome::NotFound,
                FLAG_NOT_FOUND,
                format!("flag {key:?} was not found"),
            ),
            EvalError::MalformedFlag => (
                Outcome::Failure(PARSE_ERROR),
                PARSE_ERROR,
                format!(
                    "flag {key:?} could not be evaluated: its data is malformed (MALFORMED_FLAG)"
                ),
            ),
            other => (
                Outcome::Failure(GENERAL),
                GENERAL,
                format!("flag {key:?} could not be evaluated ({})", other.as_str()),
            ),
        };
        out.extend_from_slice(b",\"errorCode\":\"");
        out.extend_from_slice(code.as_bytes());
        out.extend_from_slice(b"\",\"errorDetails\":");
        write_str(out, &details);
        out.push(b'}');
        return outcome;
    }
    if let (Some(value), Some(index)) = (detail.value, detail.variation_index) {
        out.extend_from_slice(b",\"value\":");
        write_value(out, value);
        let _ = write!(out, ",\"variant\":\"{index}\"");
    }
    out.extend_from_slice(b",\"reason\":\"");
    out.extend_from_slice(reason(&detail.reason).as_bytes());
    out.push(b'"');
    out.extend_from_slice(b",\"metadata\":");
    write_metadata(out, &detail.reason);
    out.push(b'}');
    Outcome::Value
}

/// LaunchDarkly's reason as OFREP's (the module's table).
pub(crate) fn reason(reason: &Reason) -> &'static str {
    match reason {
        Reason::Off => "DISABLED",
        Reason::TargetMatch { .. } => "TARGETING_MATCH",
        Reason::RuleMatch { .. } => "RULE_MATCH",
        Reason::Fallthrough { .. } => "FALLTHROUGH",
        Reason::PrerequisiteFailed { .. } => "PREREQUISITE_FAILED",
        Reason::Error { .. } => "ERROR",
    }
}

/// LaunchDarkly's reason, flattened (see the module docs).
fn write_metadata(out: &mut Vec<u8>, reason: &Reason) {
    let kind = match reason {
        Reason::Off => "OFF",
        Reason::TargetMatch { .. } => "TARGET_MATCH",
        Reason::RuleMatch { .. } => "RULE_MATCH",
        Reason::Fallthrough { .. } => "FALLTHROUGH",
        Reason::PrerequisiteFailed { .. } => "PREREQUISITE_FAILED",
        Reason::Error { .. } => "ERROR",
    };
    out.extend_from_slice(b"{\"ld.reason.kind\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.push(b'"');
    match reason {
        Reason::RuleMatch {
            rule_index,
            rule_id,
            in_experiment,
            ..
        } => {
            let _ = write!(out, ",\"ld.reason.ruleIndex\":{rule_index}");
            if !rule_id.is_empty() {
                out.extend_from_slice(b",\"ld.reason.ruleId\":");
                write_str(out, rule_id);
            }
            if *in_experiment {
                out.extend_from_slice(b",\"ld.reason.inExperiment\":true");
            }
        }
        Reason::Fallthrough {
            in_experiment: true,
            ..
        } => out.extend_from_slice(b",\"ld.reason.inExperiment\":true"),
        Reason::PrerequisiteFailed {
            prerequisite_key, ..
        } => {
            out.extend_from_slice(b",\"ld.reason.prerequisiteKey\":");
            write_str(out, prerequisite_key);
        }
        _ => {}
    }
    out.push(b'}');
}

/// A JSON string.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    let _ = serde_json::to_writer(&mut *out, s);
}

/// The largest magnitude written as an integer: 2^53.
const WHOLE_LIMIT: f64 = 9_007_199_254_740_992.0;

/// A flag value as JSON, a whole number as an integer.
pub(crate) fn write_value(out: &mut Vec<u8>, value: &FlagValue) {
    match value {
        FlagValue::Bool(true) => out.extend_from_slice(b"true"),
        FlagValue::Bool(false) => out.extend_from_slice(b"false"),
        FlagValue::Str(s) => write_str(out, s),
        FlagValue::Number(n) => match whole(*n) {
            Some(i) => {
                let _ = write!(out, "{i}");
            }
            None => {
                let _ = serde_json::to_writer(&mut *out, &Value::from(*n));
            }
        },
        FlagValue::Json(v) => {
            let _ = serde_json::to_writer(&mut *out, v);
        }
    }
}

/// A flag value as a JSON value (for analytics events), a whole number as an integer.
pub(crate) fn to_json(value: &FlagValue) -> Value {
    match value {
        FlagValue::Bool(b) => Value::Bool(*b),
        FlagValue::Str(s) => Value::String(s.clone()),
        FlagValue::Number(n) => whole(*n).map_or_else(|| Value::from(*n), Value::from),
        FlagValue::Json(v) => v.clone(),
    }
}

/// `n` as an integer if it is whole and within ±2^53.
fn whole(n: f64) -> Option<i64> {
    #[allow(clippy::cast_possible_truncation, reason = "whole and within ±2^53")]
    (n.fract() == 0.0 && n.abs() < WHOLE_LIMIT).then_some(n as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(detail: Detail<&FlagValue>) -> (Outcome, Value) {
        let mut out = Vec::new();
        let outcome = write_evaluation(&mut out, "f", &detail);
        (outcome, serde_json::from_slice(&out).unwrap())
    }

    #[test]
    fn whole_numbers_are_integers_and_others_stay() {
        let two = FlagValue::Number(2.0);
        let detail = Detail {
            value: Some(&two),
            variation_index: Some(1),
            reason: Reason::Off,
        };
        let (outcome, json) = render(detail);
        assert_eq!(outcome, Outcome::Value);
        assert_eq!(json["value"].to_string(), "2");
        assert_eq!(json["variant"], "1");
        assert_eq!(json["reason"], "DISABLED");
        assert_eq!(json["metadata"]["ld.reason.kind"], "OFF");
        let mut out = Vec::new();
        write_value(&mut out, &FlagValue::Number(2.5));
        assert_eq!(out, b"2.5");
        assert_eq!(to_json(&FlagValue::Number(-3.0)).to_string(), "-3");
        assert!(to_json(&FlagValue::Number(1e300)).is_f64());
    }

    #[test]
    fn reasons_are_flagsync_openfeatures() {
        let rule = Reason::RuleMatch {
            rule_index: 0,
            rule_id: "r".into(),
            in_experiment: true,
            big_segments_status: None,
        };
        assert_eq!(reason(&rule), "RULE_MATCH");
        assert_eq!(reason(&Reason::fallthrough()), "FALLTHROUGH");
        assert_eq!(reason(&Reason::target_match()), "TARGETING_MATCH");
        assert_eq!(reason(&Reason::Off), "DISABLED");
    }

    #[test]
    fn no_value_is_a_code_default_and_errors_are_failures() {
        let (outcome, json) = render(Detail::empty(Reason::Off));
        assert_eq!(outcome, Outcome::Value);
        assert_eq!(
            json,
            serde_json::json!({"key": "f", "reason": "DISABLED",
            "metadata": {"ld.reason.kind": "OFF"}})
        );
        let (outcome, json) = render(Detail::err(EvalError::MalformedFlag));
        assert_eq!(
            (outcome.status(), &json["errorCode"]),
            (400, &Value::from("PARSE_ERROR"))
        );
        let (outcome, json) = render(Detail::err(EvalError::FlagNotFound));
        assert_eq!(
            (outcome.status(), &json["errorCode"]),
            (404, &Value::from("FLAG_NOT_FOUND"))
        );
        let (outcome, _) = render(Detail::err(EvalError::Exception));
        assert_eq!(outcome.status(), 500);
    }
}
