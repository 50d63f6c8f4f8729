//! [`FlagValue`]: the value of a flag variation.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// A flag variation's value: any JSON value, with booleans, strings and numbers apart.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FlagValue {
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(String),
    /// A number.
    Number(f64),
    /// Any other JSON value: `null`, an array or an object.
    Json(Value),
}

/// The largest magnitude [`FlagValue::as_int`] converts: 2^53 − 1, beyond which `f64`
/// no longer holds every integer.
const MAX_SAFE_INT: f64 = 9_007_199_254_740_991.0;

impl FlagValue {
    /// The boolean, for a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Self::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// A copy of the string, for a string.
    pub fn as_string(&self) -> Option<String> {
        match self {
            Self::Str(s) => Some(s.clone()),
            _ => None,
        }
    }

    /// The number, for a number.
    pub fn as_float(&self) -> Option<f64> {
        match self {
            Self::Number(f) => Some(*f),
            _ => None,
        }
    }

    /// The number truncated to an integer, for a number of magnitude up to 2^53 − 1.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Self::Number(f) if f.abs() <= MAX_SAFE_INT => Some(*f as i64),
            _ => None,
        }
    }

    /// The value as JSON (always `Some`).
    pub fn as_json(&self) -> Option<Value> {
        Some(match self {
            Self::Bool(b) => Value::from(*b),
            Self::Str(s) => Value::from(s.as_str()),
            Self::Number(f) => Value::from(*f),
            Self::Json(v) => v.clone(),
        })
    }
}

impl From<bool> for FlagValue {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}

impl From<String> for FlagValue {
    fn from(s: String) -> Self {
        Self::Str(s)
    }
}

impl From<f64> for FlagValue {
    fn from(f: f64) -> Self {
        Self::Number(f)
    }
}

impl From<i64> for FlagValue {
    fn from(i: i64) -> Self {
        Self::Number(i as f64)
    }
}

impl From<Value> for FlagValue {
    /// Booleans, strings and numbers as such; anything else as JSON. A number `f64`
    /// cannot hold (only with serde_json's `arbitrary_precision`) becomes a JSON string.
    fn from(v: Value) -> Self {
        match v {
            Value::Bool(b) => Self::Bool(b),
            Value::String(s) => Self::Str(s),
            Value::Number(n) => match n.as_f64() {
                Some(f) => Self::Number(f),
                None => Self::Json(Value::String(n.to_string())),
            },
            other => Self::Json(other),
        }
    }
}

impl<'de> Deserialize<'de> for FlagValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(Self::from)
    }
}
