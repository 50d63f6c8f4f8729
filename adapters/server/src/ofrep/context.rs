//! An OFREP request's `context` (OpenFeature's evaluation context as JSON) → a
//! LaunchDarkly [`Context`], by the rules `flagsync-openfeature` follows (its
//! `context.rs`, after LaunchDarkly's own OpenFeature providers). The server cannot
//! depend on that crate (it would pull in the SDK), so the rules are written again
//! here, for JSON; `adapters/openfeature/tests/ofrep.rs` checks that both give the same
//! context on a table of cases.
//!
//! - `kind` (a string) is the context kind, `user` when absent; a `kind` of another
//!   type is discarded. `kind: "multi"` makes a multi-kind context: every other
//!   top-level attribute is an object, one context of that kind, with its own
//!   `targetingKey` or `key`; a top-level attribute that is not an object is skipped.
//! - The key is `targetingKey`, else a `key` attribute (strings; an empty one counts
//!   as absent, as does a `targetingKey` that is not a string: OpenFeature's
//!   targeting key is a string).
//! - `name` (a string) and `anonymous` (a boolean) are the built-in attributes; of
//!   another type they are discarded.
//! - `privateAttributes`, a list of strings, are the private attributes (attribute
//!   references such as `/address/street`); anything else there is discarded.
//! - Every other attribute is an attribute, its JSON value as it is (`null` is no
//!   attribute).
//!
//! No key: `TARGETING_KEY_MISSING`. Anything else that makes no valid LaunchDarkly
//! context (an invalid kind, a multi-kind context with no valid part or a kind twice):
//! `INVALID_CONTEXT`. Nothing here panics, whatever the JSON.

use flagsync_eval::{AttributeValue, Context, ContextBuilder, MultiContextBuilder};
use serde_json::{Map, Value};
use tracing::{debug, warn};

/// Why a context makes no LaunchDarkly context: OFREP's error code and a message.
///
/// ```
/// use flagsync_server::{OfrepContextError, ofrep_context};
///
/// let e = ofrep_context(&serde_json::json!({"plan": "free"})).unwrap_err();
/// assert_eq!(e.code, "TARGETING_KEY_MISSING");
/// assert_eq!(ofrep_context(&serde_json::json!({"targetingKey": "u1"})).unwrap().key(), "u1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OfrepContextError {
    /// `TARGETING_KEY_MISSING` or `INVALID_CONTEXT`.
    pub code: &'static str,
    /// What is wrong (no attribute values in it).
    pub message: String,
}

impl std::fmt::Display for OfrepContextError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for OfrepContextError {}

/// OFREP's `TARGETING_KEY_MISSING`.
pub(crate) const TARGETING_KEY_MISSING: &str = "TARGETING_KEY_MISSING";
/// OFREP's `INVALID_CONTEXT`.
pub(crate) const INVALID_CONTEXT: &str = "INVALID_CONTEXT";

const TARGETING_KEY: &str = "targetingKey";
const MULTI: &str = "multi";

fn missing_key() -> OfrepContextError {
    OfrepContextError {
        code: TARGETING_KEY_MISSING,
        message: "The EvaluationContext must contain either a 'targetingKey' or a 'key' and the \
                  type must be a string."
            .to_owned(),
    }
}

fn invalid(message: String) -> OfrepContextError {
    OfrepContextError {
        code: INVALID_CONTEXT,
        message,
    }
}

/// An OFREP evaluation context (the JSON object of a request's `context`) as a
/// LaunchDarkly context, as `flagsync-openfeature` converts OpenFeature's evaluation
/// context (see the rules in the README's OFREP section).
///
/// ```
/// use flagsync_server::ofrep_context;
/// use serde_json::json;
///
/// let multi = ofrep_context(&json!({
///     "kind": "multi",
///     "user": {"targetingKey": "u1", "name": "Ann"},
///     "org": {"key": "o1", "privateAttributes": ["plan"], "plan": "gold"},
/// })).unwrap();
/// assert!(multi.is_multi());
/// ```
pub fn ofrep_context(context: &Value) -> Result<Context, OfrepContextError> {
    let Value::Object(fields) = context else {
        return Err(invalid("the context must be a JSON object".to_owned()));
    };
    let mut kind = "user";
    match fields.get("kind") {
        Some(Value::String(k)) if k == MULTI => return to_multi(fields),
        Some(Value::String(k)) => kind = k,
        Some(_) => {
            warn!("The EvaluationContext contained an invalid kind and it will be discarded.")
        }
        None => {}
    }
    build_single(kind, choose_key(fields)?, fields)
}

/// The key: a non-empty string `targetingKey`, else a non-empty string `key`.
fn choose_key(fields: &Map<String, Value>) -> Result<&str, OfrepContextError> {
    let targeting_key = fields
        .get(TARGETING_KEY)
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty());
    let key = fields.get("key");
    let key_str = key.and_then(Value::as_str);
    if key.is_some() && key_str.is_none() {
        debug!("A non-string 'key' attribute was provided.");
    }
    targeting_key
        .or(key_str.filter(|k| !k.is_empty()))
        .ok_or_else(missing_key)
}

/// One single-kind context (alone, or a part of a multi-kind context).
fn build_single(
    kind: &str,
    key: &str,
    fields: &Map<String, Value>,
) -> Result<Context, OfrepContextError> {
    let mut builder = ContextBuilder::new(key);
    if kind != "user" {
        builder.kind(kind);
    }
    for (name, value) in fields {
        match name.as_str() {
            "key" | TARGETING_KEY | "kind" => {}
            "privateAttributes" => match value {
                Value::Array(items) if items.iter().all(Value::is_string) => {
                    for reference in items.iter().filter_map(Value::as_str) {
                        builder.add_private_attribute(reference);
                    }
                }
                _ => debug!("'privateAttributes' must be a list of strings; discarded."),
            },
            "anonymous" => match value {
                Value::Bool(b) => {
                    builder.anonymous(*b);
                }
                _ => debug!("The attribute 'anonymous' must be a boolean and it was not."),
            },
            "name" => match value {
                Value::String(s) => {
                    builder.name(s.as_str());
                }
                _ => debug!("The attribute 'name' must be a string and it was not."),
            },
            _ => {
                builder.set_value(name, AttributeValue::from(value));
            }
        }
    }
    builder
        .build()
        .map_err(|e| invalid(format!("no valid LaunchDarkly context: {e}")))
}

/// `kind: "multi"`: each other top-level object is one context of its attribute's name
/// as kind. A part without a key makes the whole context invalid
/// (`TARGETING_KEY_MISSING`), as in LaunchDarkly's providers.
fn to_multi(fields: &Map<String, Value>) -> Result<Context, OfrepContextError> {
    let mut multi = MultiContextBuilder::new();
    let mut missing = None;
    for (kind, value) in fields {
        if kind == "kind" {
            continue;
        }
        let Value::Object(attributes) = value else {
            debug!("Top level attributes in a multi-kind context should be objects.");
            continue;
        };
        match choose_key(attributes) {
            Ok(key) => {
                multi.add_context(build_single(kind, key, attributes)?);
            }
            Err(e) => missing = Some(e),
        }
    }
    if let Some(e) = missing {
        return Err(e);
    }
    multi
        .build()
        .map_err(|e| invalid(format!("no valid LaunchDarkly context: {e}")))
}
