//! [`AttributeValue`]: the JSON value of a context attribute.

use std::collections::HashMap;
use std::fmt;

use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// The value of a context attribute: any JSON value.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum AttributeValue {
    /// A string.
    String(String),
    /// An array.
    Array(Vec<Self>),
    /// A number (JSON does not tell integers from floats).
    Number(f64),
    /// A boolean.
    Bool(bool),
    /// An object.
    Object(HashMap<String, Self>),
    /// `null`: setting an attribute to it removes the attribute.
    Null,
}

impl AttributeValue {
    /// The string, for a string; no conversion.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number, for a number; no conversion.
    pub fn to_f64(&self) -> Option<f64> {
        match self {
            Self::Number(f) => Some(*f),
            _ => None,
        }
    }

    /// The boolean, for a boolean; no conversion.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Self::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The first value satisfying `p`: this value itself, or for an array its first
    /// element that does. `null` never does.
    pub fn find<P>(&self, p: P) -> Option<&Self>
    where
        P: Fn(&Self) -> bool,
    {
        match self {
            Self::Array(values) => values.iter().find(|v| p(v)),
            Self::Null => None,
            other => p(other).then_some(other),
        }
    }
}

impl From<&str> for AttributeValue {
    fn from(s: &str) -> Self {
        Self::String(s.to_owned())
    }
}

impl From<String> for AttributeValue {
    fn from(s: String) -> Self {
        Self::String(s)
    }
}

impl From<bool> for AttributeValue {
    fn from(b: bool) -> Self {
        Self::Bool(b)
    }
}

impl From<i64> for AttributeValue {
    fn from(i: i64) -> Self {
        Self::Number(i as f64)
    }
}

impl From<f64> for AttributeValue {
    fn from(f: f64) -> Self {
        Self::Number(f)
    }
}

impl<T> From<Vec<T>> for AttributeValue
where
    Self: From<T>,
{
    /// An array of the converted elements.
    fn from(v: Vec<T>) -> Self {
        v.into_iter().collect()
    }
}

impl<S, T> From<HashMap<S, T>> for AttributeValue
where
    String: From<S>,
    Self: From<T>,
{
    /// An object of the converted entries.
    fn from(map: HashMap<S, T>) -> Self {
        map.into_iter().collect()
    }
}

impl<T> FromIterator<T> for AttributeValue
where
    Self: From<T>,
{
    /// An array.
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Self::Array(iter.into_iter().map(Self::from).collect())
    }
}

impl<S, T> FromIterator<(S, T)> for AttributeValue
where
    String: From<S>,
    Self: From<T>,
{
    /// An object.
    fn from_iter<I: IntoIterator<Item = (S, T)>>(iter: I) -> Self {
        Self::Object(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

impl From<&Value> for AttributeValue {
    /// The JSON value; a number `f64` cannot hold (only with serde_json's
    /// `arbitrary_precision`) becomes its string.
    fn from(v: &Value) -> Self {
        match v {
            Value::Null => Self::Null,
            Value::Bool(b) => Self::Bool(*b),
            Value::Number(n) => match n.as_f64() {
                Some(f) => Self::Number(f),
                None => Self::String(n.to_string()),
            },
            Value::String(s) => Self::String(s.clone()),
            Value::Array(a) => Self::Array(a.iter().map(Self::from).collect()),
            Value::Object(o) => {
                Self::Object(o.iter().map(|(k, v)| (k.clone(), v.into())).collect())
            }
        }
    }
}

impl<'de> Deserialize<'de> for AttributeValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(AttributeValueVisitor)
    }
}

/// Any JSON value, read straight into an [`AttributeValue`].
struct AttributeValueVisitor;

impl<'de> Visitor<'de> for AttributeValueVisitor {
    type Value = AttributeValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(AttributeValue::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(AttributeValue::Number(v as f64))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(AttributeValue::Number(v as f64))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(AttributeValue::Number(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(AttributeValue::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(AttributeValue::String(v))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(AttributeValue::Null)
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(AttributeValue::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        AttributeValue::deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(v) = seq.next_element()? {
            out.push(v);
        }
        Ok(AttributeValue::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = HashMap::with_capacity(map.size_hint().unwrap_or(0).min(64));
        while let Some((k, v)) = map.next_entry::<String, AttributeValue>()? {
            out.insert(k, v);
        }
        Ok(AttributeValue::Object(out))
    }
}
