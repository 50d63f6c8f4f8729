//! `Client::*_variation` and `Client::*_variation_detail`.

use super::{Context, Detail, EvalError, FlagValue};

use crate::Client;

/// Turn the engine's detail into a typed one: a missing value becomes `default` (the
/// reason stays, as in every LaunchDarkly SDK); a value of another type becomes
/// `default` with `ERROR`/`WRONG_TYPE`.
pub(crate) fn typed<T>(
    detail: Detail<&FlagValue>,
    default: impl FnOnce() -> T,
    convert: impl FnOnce(&FlagValue) -> Option<T>,
) -> Detail<T> {
    let Some(value) = detail.value else {
        return Detail {
            value: Some(default()),
            variation_index: None,
            reason: detail.reason,
        };
    };
    match convert(value) {
        Some(value) => Detail {
            value: Some(value),
            variation_index: detail.variation_index,
            reason: detail.reason,
        },
        None => Detail::err_default(EvalError::WrongType, default()),
    }
}

fn as_bool(v: &FlagValue) -> Option<bool> {
    match v {
        FlagValue::Bool(b) => Some(*b),
        _ => None,
    }
}

fn as_string(v: &FlagValue) -> Option<String> {
    match v {
        FlagValue::Str(s) => Some(s.clone()),
        _ => None,
    }
}

fn as_float(v: &FlagValue) -> Option<f64> {
    match v {
        FlagValue::Number(n) => Some(*n),
        _ => None,
    }
}

fn as_int(v: &FlagValue) -> Option<i64> {
    match v {
        // The engine's rule: truncate, within ±(2^53 − 1).
        FlagValue::Number(_) => v.as_int(),
        _ => None,
    }
}

/// Evaluation. Every method answers; none returns an error or panics. See
/// [`crate::eval`] for how it works and what happens before the client has data.
impl Client {
    /// The value of boolean flag `key` for `context`, or `default` if the flag is
    /// unknown, not a boolean, off without an off variation, or the client has no data
    /// yet.
    ///
    /// ```no_run
    /// # fn demo(client: &flagsync::Client) {
    /// use flagsync::eval::ContextBuilder;
    ///
    /// let context = ContextBuilder::new("user-123").build().expect("valid");
    /// let on = client.bool_variation("dark-mode", &context, false);
    /// # }
    /// ```
    pub fn bool_variation(&self, key: &str, context: &Context, default: bool) -> bool {
        self.evaluate_typed(key, context, default, false, as_bool, |v| (*v).into())
            .value
            .unwrap_or(default)
    }

    /// [`Client::bool_variation`] with the variation index and the reason.
    ///
    /// ```no_run
    /// # fn demo(client: &flagsync::Client) {
    /// use flagsync::eval::{ContextBuilder, EvalError, Reason};
    ///
    /// let context = ContextBuilder::new("user-123").build().expect("valid");
    /// let detail = client.bool_variation_detail("dark-mode", &context, false);
    /// if detail.reason == Reason::error(EvalError::ClientNotReady) {
    ///     // no data yet: `detail.value` is the default
    /// }
    /// # }
    /// ```
    pub fn bool_variation_detail(
        &self,
        key: &str,
        context: &Context,
        default: bool,
    ) -> Detail<bool> {
        self.evaluate_typed(key, context, default, true, as_bool, |v| (*v).into())
    }

    /// The value of string flag `key` for `context`, or `default` (see
    /// [`Client::bool_variation`]).
    pub fn string_variation(&self, key: &str, context: &Context, default: &str) -> String {
        self.evaluate_typed(key, context, default.to_owned(), false, as_string, |v| {
            v.as_str().into()
        })
        .value
        .unwrap_or_else(|| default.to_owned())
    }

    /// [`Client::string_variation`] with the variation index and the reason.
    pub fn string_variation_detail(
        &self,
        key: &str,
        context: &Context,
        default: &str,
    ) -> Detail<String> {
        self.evaluate_typed(key, context, default.to_owned(), true, as_string, |v| {
            v.as_str().into()
        })
    }

    /// The value of number flag `key` for `context`, or `default` (see
    /// [`Client::bool_variation`]).
    pub fn float_variation(&self, key: &str, context: &Context, default: f64) -> f64 {
        self.evaluate_typed(key, context, default, false, as_float, |v| (*v).into())
            .value
            .unwrap_or(default)
    }

    /// [`Client::float_variation`] with the variation index and the reason.
    pub fn float_variation_detail(
        &self,
        key: &str,
        context: &Context,
        default: f64,
    ) -> Detail<f64> {
        self.evaluate_typed(key, context, default, true, as_float, |v| (*v).into())
    }

    /// The value of number flag `key` for `context`, truncated to an integer, or
    /// `default` (see [`Client::bool_variation`]). A number beyond ±(2⁵³ − 1) is the
    /// wrong type.
    pub fn int_variation(&self, key: &str, context: &Context, default: i64) -> i64 {
        self.evaluate_typed(key, context, default, false, as_int, |v| (*v).into())
            .value
            .unwrap_or(default)
    }

    /// [`Client::int_variation`] with the variation index and the reason.
    pub fn int_variation_detail(&self, key: &str, context: &Context, default: i64) -> Detail<i64> {
        self.evaluate_typed(key, context, default, true, as_int, |v| (*v).into())
    }

    /// The value of flag `key` for `context` as JSON (any variation type), or `default`
    /// (see [`Client::bool_variation`]).
    ///
    /// ```no_run
    /// # fn demo(client: &flagsync::Client) {
    /// use flagsync::eval::ContextBuilder;
    /// use serde_json::json;
    ///
    /// let context = ContextBuilder::new("user-123").build().expect("valid");
    /// let limits = client.json_variation("limits", &context, json!({"requests": 100}));
    /// # }
    /// ```
    pub fn json_variation(
        &self,
        key: &str,
        context: &Context,
        default: serde_json::Value,
    ) -> serde_json::Value {
        self.evaluate_typed(
            key,
            context,
            default,
            false,
            FlagValue::as_json,
            Clone::clone,
        )
        .value
        .unwrap_or_default()
    }

    /// [`Client::json_variation`] with the variation index and the reason.
    pub fn json_variation_detail(
        &self,
        key: &str,
        context: &Context,
        default: serde_json::Value,
    ) -> Detail<serde_json::Value> {
        self.evaluate_typed(
            key,
            context,
            default,
            true,
            FlagValue::as_json,
            Clone::clone,
        )
    }

    /// The value of flag `key` for `context`, whatever its type, or `default` (see
    /// [`Client::bool_variation`]). No type check: the flag's value is returned as is.
    pub fn variation(
        &self,
        key: &str,
        context: &Context,
        default: impl Into<FlagValue>,
    ) -> FlagValue {
        self.evaluate_typed(
            key,
            context,
            default.into(),
            false,
            |v| Some(v.clone()),
            |v| v.as_json().unwrap_or_default(),
        )
        .value
        .unwrap_or(FlagValue::Json(serde_json::Value::Null))
    }

    /// [`Client::variation`] with the variation index and the reason.
    pub fn variation_detail(
        &self,
        key: &str,
        context: &Context,
        default: impl Into<FlagValue>,
    ) -> Detail<FlagValue> {
        self.evaluate_typed(
            key,
            context,
            default.into(),
            true,
            |v| Some(v.clone()),
            |v| v.as_json().unwrap_or_default(),
        )
    }
}
