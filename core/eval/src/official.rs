//! The official evaluation crate (a dev-dependency) as a reference: its engine over
//! its own models, and its details and contexts in flagsync's types.

use std::collections::HashMap;

use launchdarkly_server_sdk_evaluation as official;
use serde_json::Value;

use crate::{Context, Detail, EvalError, FlagValue, Reason};

/// The official engine's way: its models, handed out by clone.
pub(crate) struct ByValue {
    pub(crate) flags: HashMap<String, official::Flag>,
    segments: HashMap<String, official::Segment>,
}

impl ByValue {
    pub(crate) fn new(flags: &[Value], segments: &[Value]) -> Self {
        let parse = |v: &Value| (v["key"].as_str().unwrap().to_owned(), v.clone());
        Self {
            flags: flags
                .iter()
                .map(parse)
                .map(|(k, v)| (k, serde_json::from_value(v).unwrap()))
                .collect(),
            segments: segments
                .iter()
                .map(parse)
                .map(|(k, v)| (k, serde_json::from_value(v).unwrap()))
                .collect(),
        }
    }
}

impl official::Store for ByValue {
    fn flag(&self, key: &str) -> Option<official::Flag> {
        self.flags.get(key).cloned()
    }
    fn segment(&self, key: &str) -> Option<official::Segment> {
        self.segments.get(key).cloned()
    }
}

/// The official crate's copy of `context` (through its JSON), for its engine.
pub(crate) fn official_context(context: &Context) -> official::Context {
    let json = serde_json::to_value(context).expect("a context serializes");
    serde_json::from_value(json).expect("the official crate reads every context")
}

/// The official crate's flag value as flagsync's.
fn from_official_value(v: official::FlagValue) -> FlagValue {
    match v {
        official::FlagValue::Bool(b) => FlagValue::Bool(b),
        official::FlagValue::Str(s) => FlagValue::Str(s),
        official::FlagValue::Number(n) => FlagValue::Number(n),
        official::FlagValue::Json(j) => FlagValue::Json(j),
    }
}

/// The official engine's detail in flagsync's types (its reasons have no big segments
/// status).
pub(crate) fn from_official(d: official::Detail<official::FlagValue>) -> Detail<FlagValue> {
    let reason = match d.reason {
        official::Reason::Off => Reason::Off,
        official::Reason::TargetMatch => Reason::target_match(),
        official::Reason::RuleMatch {
            rule_index,
            rule_id,
            in_experiment,
        } => Reason::RuleMatch {
            rule_index,
            rule_id,
            in_experiment,
            big_segments_status: None,
        },
        official::Reason::PrerequisiteFailed { prerequisite_key } => {
            Reason::prerequisite_failed(prerequisite_key)
        }
        official::Reason::Fallthrough { in_experiment } => Reason::Fallthrough {
            in_experiment,
            big_segments_status: None,
        },
        official::Reason::Error { error } => Reason::error(match error {
            official::Error::ClientNotReady => EvalError::ClientNotReady,
            official::Error::FlagNotFound => EvalError::FlagNotFound,
            official::Error::MalformedFlag => EvalError::MalformedFlag,
            official::Error::WrongType => EvalError::WrongType,
            official::Error::Exception => EvalError::Exception,
        }),
    };
    // A failed evaluation serves no variation (the official engine may keep one).
    let failed = reason.is_error();
    Detail {
        value: d.value.filter(|_| !failed).map(from_official_value),
        variation_index: d.variation_index.filter(|_| !failed),
        reason,
    }
}
