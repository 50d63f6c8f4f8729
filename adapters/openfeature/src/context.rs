//! OpenFeature evaluation context → flagsync (LaunchDarkly) [`Context`], as
//! LaunchDarkly's own providers convert it (their `EvaluationContextConverter` in
//! `openfeature-java-server`, `EvalContextConverter` in `openfeature-dotnet-server`,
//! `translateContext` in `openfeature-node-server`):
//!
//! - `kind` (a string) is the context kind, `user` when absent; a `kind` of another type
//!   is discarded with a warning. `kind: "multi"` makes a multi-kind context: every other
//!   top-level attribute is a structure, one context of that kind, with its own
//!   `targetingKey` or `key`; a top-level attribute that is not a structure is skipped
//!   with a warning.
//! - The key is the `targetingKey`, else a `key` attribute (a string). With both, the
//!   `key` attribute is discarded with a warning; an empty `targetingKey` counts as
//!   absent (as in the Java provider).
//! - `name` (a string) and `anonymous` (a boolean) are the built-in attributes; of
//!   another type they are discarded with an error log.
//! - `privateAttributes`, a list of strings, are the private attributes (attribute
//!   references such as `/address/street`); anything else there is discarded with an
//!   error log.
//! - Every other attribute is an attribute: booleans, numbers, strings, date-times (as
//!   RFC 3339 strings), structures and lists.
//!
//! OpenFeature's Rust SDK (0.3) keeps a structure value as `Arc<dyn Any>`; the provider
//! reads these types there: [`StructValue`], [`Value`], [`EvaluationContext`],
//! `HashMap<String, EvaluationContextFieldValue>`, `Vec<Value>`,
//! `Vec<EvaluationContextFieldValue>`, `Vec<String>`, `Vec<&'static str>`,
//! [`serde_json::Value`] and flagsync's [`AttributeValue`]. A structure of any other
//! type is discarded with a warning.
//!
//! A context without a key fails with `TARGETING_KEY_MISSING` (what LaunchDarkly's
//! providers answer: the SDK's `USER_NOT_SPECIFIED`); any other context that makes no
//! valid LaunchDarkly context (an invalid kind, a multi-kind context without a valid
//! context, or with a kind twice) fails with `INVALID_CONTEXT`. Neither panics.

use std::collections::HashMap;

use flagsync::eval::{AttributeValue, Context, ContextBuilder, MultiContextBuilder};
use open_feature::{
    EvaluationContext, EvaluationContextFieldValue, EvaluationError, EvaluationErrorCode,
    StructValue, Value,
};
use tracing::{error, warn};

/// A context attribute, at the top level or inside a structure.
#[derive(Clone, Copy)]
enum Field<'a> {
    Top(&'a EvaluationContextFieldValue),
    Nested(&'a AttributeValue),
}

impl<'a> Field<'a> {
    fn as_str(self) -> Option<&'a str> {
        match self {
            Self::Top(EvaluationContextFieldValue::String(s)) => Some(s),
            Self::Nested(AttributeValue::String(s)) => Some(s),
            _ => None,
        }
    }

    fn as_bool(self) -> Option<bool> {
        match self {
            Self::Top(EvaluationContextFieldValue::Bool(b)) => Some(*b),
            Self::Nested(AttributeValue::Bool(b)) => Some(*b),
            _ => None,
        }
    }

    /// The value as an attribute; `None` for a structure of a type the provider cannot
    /// read.
    fn to_attribute(self) -> Option<AttributeValue> {
        match self {
            Self::Nested(v) => Some(v.clone()),
            Self::Top(v) => field_to_attribute(v),
        }
    }
}

/// An OpenFeature context value as an attribute value.
fn field_to_attribute(value: &EvaluationContextFieldValue) -> Option<AttributeValue> {
    Some(match value {
        EvaluationContextFieldValue::Bool(b) => AttributeValue::Bool(*b),
        EvaluationContextFieldValue::Int(i) => AttributeValue::Number(*i as f64),
        EvaluationContextFieldValue::Float(f) => AttributeValue::Number(*f),
        EvaluationContextFieldValue::String(s) => AttributeValue::String(s.clone()),
        EvaluationContextFieldValue::DateTime(t) => AttributeValue::String(
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()?,
        ),
        EvaluationContextFieldValue::Struct(any) => return any_to_attribute(any.as_ref()),
    })
}

/// An OpenFeature evaluation value as an attribute value.
pub(crate) fn value_to_attribute(value: &Value) -> AttributeValue {
    match value {
        Value::Bool(b) => AttributeValue::Bool(*b),
        Value::Int(i) => AttributeValue::Number(*i as f64),
        Value::Float(f) => AttributeValue::Number(*f),
        Value::String(s) => AttributeValue::String(s.clone()),
        Value::Array(items) => {
            AttributeValue::Array(items.iter().map(value_to_attribute).collect())
        }
        Value::Struct(s) => struct_to_attribute(s),
    }
}

fn struct_to_attribute(s: &StructValue) -> AttributeValue {
    AttributeValue::Object(
        s.fields
            .iter()
            .map(|(k, v)| (k.clone(), value_to_attribute(v)))
            .collect(),
    )
}

fn context_to_attribute(c: &EvaluationContext) -> AttributeValue {
    let mut object: HashMap<String, AttributeValue> = fields_to_object(&c.custom_fields);
    if let Some(key) = &c.targeting_key {
        object.insert(
            TARGETING_KEY.to_owned(),
            AttributeValue::String(key.clone()),
        );
    }
    AttributeValue::Object(object)
}

fn fields_to_object(
    fields: &HashMap<String, EvaluationContextFieldValue>,
) -> HashMap<String, AttributeValue> {
    fields
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), field_to_attribute(v)?)))
        .collect()
}

/// A structure value (`Arc<dyn Any>`) as an attribute value, for the types listed in
/// the module's documentation.
fn any_to_attribute(any: &(dyn std::any::Any + Send + Sync)) -> Option<AttributeValue> {
    if let Some(s) = any.downcast_ref::<StructValue>() {
        return Some(struct_to_attribute(s));
    }
    if let Some(v) = any.downcast_ref::<Value>() {
        return Some(value_to_attribute(v));
    }
    if let Some(c) = any.downcast_ref::<EvaluationContext>() {
        return Some(context_to_attribute(c));
    }
    if let Some(m) = any.downcast_ref::<HashMap<String, EvaluationContextFieldValue>>() {
        return Some(AttributeValue::Object(fields_to_object(m)));
    }
    if let Some(v) = any.downcast_ref::<Vec<Value>>() {
        return Some(AttributeValue::Array(
            v.iter().map(value_to_attribute).collect(),
        ));
    }
    if let Some(v) = any.downcast_ref::<Vec<EvaluationContextFieldValue>>() {
        return Some(AttributeValue::Array(
            v.iter().filter_map(field_to_attribute).collect(),
        ));
    }
    if let Some(v) = any.downcast_ref::<Vec<String>>() {
        return Some(AttributeValue::Array(
            v.iter()
                .map(|s| AttributeValue::String(s.clone()))
                .collect(),
        ));
    }
    if let Some(v) = any.downcast_ref::<Vec<&'static str>>() {
        return Some(AttributeValue::Array(
            v.iter().map(|s| AttributeValue::from(*s)).collect(),
        ));
    }
    if let Some(v) = any.downcast_ref::<serde_json::Value>() {
        return Some(AttributeValue::from(v));
    }
    any.downcast_ref::<AttributeValue>().cloned()
}

const TARGETING_KEY: &str = "targetingKey";
const MULTI: &str = "multi";

fn invalid(code: EvaluationErrorCode, message: impl Into<String>) -> EvaluationError {
    EvaluationError {
        code,
        message: Some(message.into()),
    }
}

/// Convert an OpenFeature evaluation context to a flagsync context (see the module's
/// documentation for the rules, LaunchDarkly's providers').
pub fn to_context(context: &EvaluationContext) -> Result<Context, EvaluationError> {
    let fields = &context.custom_fields;
    // `kind` and `key` in one pass over the fields (no hashing of the names).
    let (mut kind_field, mut key_field) = (None, None);
    for (name, value) in fields {
        match name.as_str() {
            "kind" => kind_field = Some(value),
            "key" => key_field = Some(value),
            _ => {}
        }
    }
    let mut kind = "user";
    match kind_field {
        Some(EvaluationContextFieldValue::String(k)) if k == MULTI => return to_multi(fields),
        Some(EvaluationContextFieldValue::String(k)) => kind = k,
        Some(_) => {
            warn!("The EvaluationContext contained an invalid kind and it will be discarded.")
        }
        None => {}
    }
    let targeting_key = context.targeting_key.as_deref().filter(|k| !k.is_empty());
    let key = choose_key(targeting_key, key_field.map(Field::Top))?;
    build_single(
        kind,
        key,
        fields
            .iter()
            .map(|(name, value)| (name.as_str(), Field::Top(value))),
    )
}

/// The key: `targetingKey`, else a string `key` attribute; LaunchDarkly's providers'
/// warnings.
fn choose_key<'a>(
    targeting_key: Option<&'a str>,
    key: Option<Field<'a>>,
) -> Result<&'a str, EvaluationError> {
    let key_str = key.and_then(Field::as_str);
    if key.is_some() && key_str.is_none() {
        warn!("A non-string 'key' attribute was provided.");
    }
    if targeting_key.is_some() && key_str.is_some() {
        warn!(
            "The EvaluationContext contained both a 'targetingKey' and a 'key' attribute. \
             The 'key' attribute will be discarded."
        );
    }
    match targeting_key.or(key_str.filter(|k| !k.is_empty())) {
        Some(key) => Ok(key),
        None => {
            let message = "The EvaluationContext must contain either a 'targetingKey' or a 'key' \
                           and the type must be a string.";
            error!("{message}");
            Err(invalid(EvaluationErrorCode::TargetingKeyMissing, message))
        }
    }
}

/// One single-kind context (alone, or a part of a multi-kind context).
fn build_single<'a>(
    kind: &str,
    key: &str,
    fields: impl Iterator<Item = (&'a str, Field<'a>)>,
) -> Result<Context, EvaluationError> {
    let mut builder = ContextBuilder::new(key);
    if kind != "user" {
        builder.kind(kind);
    }
    for (name, value) in fields {
        match name {
            "key" | TARGETING_KEY | "kind" => {}
            "privateAttributes" => match private_attributes(value) {
                Ok(references) => {
                    for reference in references {
                        builder.add_private_attribute(reference);
                    }
                }
                Err(message) => error!("{message}"),
            },
            "anonymous" => match value.as_bool() {
                Some(b) => {
                    builder.anonymous(b);
                }
                None => error!("The attribute 'anonymous' must be a boolean and it was not."),
            },
            "name" => match value.as_str() {
                Some(s) => {
                    builder.name(s);
                }
                None => error!("The attribute 'name' must be a string and it was not."),
            },
            _ => match value.to_attribute() {
                Some(v) => {
                    builder.set_value(name, v);
                }
                None => warn!(
                    "The attribute '{name}' holds a structure of a type the provider cannot \
                     read; it will be discarded."
                ),
            },
        }
    }
    builder.build().map_err(|e| {
        error!("The EvaluationContext makes no valid LaunchDarkly context: {e}.");
        invalid(EvaluationErrorCode::InvalidContext, e)
    })
}

/// `privateAttributes`: a list of strings, or the Java provider's error messages.
fn private_attributes(value: Field<'_>) -> Result<Vec<String>, &'static str> {
    let Some(AttributeValue::Array(items)) = value.to_attribute() else {
        return Err(
            "A key of 'privateAttributes' in an evaluation context must have a list value.",
        );
    };
    items
        .into_iter()
        .map(|item| match item {
            AttributeValue::String(s) => Ok(s),
            _ => Err("A key of 'privateAttributes' must be a list of only string values."),
        })
        .collect()
}

/// `kind: "multi"`: each other top-level structure is one context of its attribute's
/// name as kind.
fn to_multi(
    fields: &HashMap<String, EvaluationContextFieldValue>,
) -> Result<Context, EvaluationError> {
    let mut multi = MultiContextBuilder::new();
    let mut missing_key = None;
    for (kind, value) in fields {
        if kind == "kind" {
            continue;
        }
        let Some(AttributeValue::Object(attributes)) = field_to_attribute(value) else {
            warn!("Top level attributes in a multi-kind context should be Structure types.");
            continue;
        };
        let targeting_key = attributes
            .get(TARGETING_KEY)
            .and_then(AttributeValue::as_str)
            .filter(|k| !k.is_empty());
        let key = match choose_key(targeting_key, attributes.get("key").map(Field::Nested)) {
            Ok(key) => key,
            Err(e) => {
                missing_key = Some(e);
                continue;
            }
        };
        let attrs = attributes
            .iter()
            .map(|(name, value)| (name.as_str(), Field::Nested(value)));
        multi.add_context(build_single(kind, key, attrs)?);
    }
    // A part without a key makes the whole context invalid, as in LaunchDarkly's SDKs.
    if let Some(e) = missing_key {
        return Err(e);
    }
    multi.build().map_err(|e| {
        error!("The EvaluationContext makes no valid LaunchDarkly context: {e}.");
        invalid(EvaluationErrorCode::InvalidContext, e)
    })
}
