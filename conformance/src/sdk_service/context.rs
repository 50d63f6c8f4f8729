//! The context commands: `contextBuild`, `contextConvert`, `contextComparison`.

use std::collections::BTreeMap;

use flagsync::eval::{AttributeValue, Context, ContextBuilder, MultiContextBuilder, same_context};
use serde::Deserialize;
use serde_json::{Value, json};

/// One single-kind context for `contextBuild`.
#[derive(Debug, Deserialize)]
pub struct BuildSingle {
    /// The kind (default `user`).
    #[serde(default)]
    pub kind: Option<String>,
    /// The key.
    pub key: String,
    /// The name.
    #[serde(default)]
    pub name: Option<String>,
    /// Anonymous.
    #[serde(default)]
    pub anonymous: Option<bool>,
    /// Private attributes, as references.
    #[serde(default)]
    pub private: Option<Vec<String>>,
    /// Other attributes, by name.
    #[serde(default)]
    pub custom: Option<BTreeMap<String, AttributeValue>>,
}

/// `contextBuild`: one of `single` and `multi`.
#[derive(Debug, Deserialize)]
pub struct BuildParams {
    /// A single-kind context.
    #[serde(default)]
    pub single: Option<BuildSingle>,
    /// A multi-kind context.
    #[serde(default)]
    pub multi: Option<Vec<BuildSingle>>,
}

/// `contextConvert`.
#[derive(Debug, Deserialize)]
pub struct ConvertParams {
    /// JSON text, possibly invalid.
    pub input: String,
}

/// One attribute of a `contextComparison` context.
#[derive(Debug, Deserialize)]
pub struct Attribute {
    /// Its name.
    pub name: String,
    /// Its value.
    #[serde(default)]
    pub value: Option<AttributeValue>,
}

/// One private attribute of a `contextComparison` context.
#[derive(Debug, Deserialize)]
pub struct PrivateAttribute {
    /// A reference, or a literal attribute name.
    pub value: String,
    /// `value` is an attribute name, not a reference.
    #[serde(default)]
    pub literal: bool,
}

/// One single-kind context of `contextComparison`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompareSingle {
    /// The kind.
    pub kind: String,
    /// The key.
    pub key: String,
    /// Attributes, set in order.
    #[serde(default)]
    pub attributes: Option<Vec<Attribute>>,
    /// Private attributes, added in order.
    #[serde(default)]
    pub private_attributes: Option<Vec<PrivateAttribute>>,
}

/// One context of `contextComparison`.
#[derive(Debug, Deserialize)]
pub struct CompareContext {
    /// A single-kind context.
    #[serde(default)]
    pub single: Option<CompareSingle>,
    /// A multi-kind context.
    #[serde(default)]
    pub multi: Option<Vec<CompareSingle>>,
}

/// `contextComparison`.
#[derive(Debug, Deserialize)]
pub struct CompareParams {
    /// The first context.
    pub context1: CompareContext,
    /// The second.
    pub context2: CompareContext,
}

/// `{"output": json}` or `{"error": message}`.
fn output(result: Result<Context, String>) -> Value {
    match result.and_then(|c| serde_json::to_string(&c).map_err(|e| e.to_string())) {
        Ok(json) => json!({ "output": json }),
        Err(error) => json!({ "error": error }),
    }
}

fn build_single(p: &BuildSingle) -> Result<Context, String> {
    let mut b = ContextBuilder::new(p.key.clone());
    if let Some(kind) = &p.kind {
        b.kind(kind.clone());
    }
    if let Some(name) = &p.name {
        b.name(name.clone());
    }
    if let Some(anonymous) = p.anonymous {
        b.anonymous(anonymous);
    }
    for reference in p.private.iter().flatten() {
        b.add_private_attribute(reference.as_str());
    }
    for (name, value) in p.custom.iter().flatten() {
        b.set_value(name, value.clone());
    }
    b.build()
}

fn multi(contexts: Result<Vec<Context>, String>) -> Result<Context, String> {
    MultiContextBuilder::of(contexts?).build()
}

/// `contextBuild`.
pub fn build(p: &BuildParams) -> Value {
    output(match (&p.single, &p.multi) {
        (Some(single), _) => build_single(single),
        (None, Some(list)) => multi(list.iter().map(build_single).collect()),
        (None, None) => Err("neither single nor multi".to_owned()),
    })
}

/// `contextConvert`: the SDK's JSON reading, then its JSON writing.
pub fn convert(p: &ConvertParams) -> Value {
    output(serde_json::from_str::<Context>(&p.input).map_err(|e| e.to_string()))
}

/// An attribute name as a reference: names that start with `/` are escaped.
fn literal_reference(name: &str) -> String {
    if name.starts_with('/') {
        format!("/{}", name.replace('~', "~0").replace('/', "~1"))
    } else {
        name.to_owned()
    }
}

fn compare_single(p: &CompareSingle) -> Result<Context, String> {
    let mut b = ContextBuilder::new(p.key.clone());
    b.kind(p.kind.clone());
    for a in p.attributes.iter().flatten() {
        b.set_value(&a.name, a.value.clone().unwrap_or(AttributeValue::Null));
    }
    for private in p.private_attributes.iter().flatten() {
        let reference = if private.literal {
            literal_reference(&private.value)
        } else {
            private.value.clone()
        };
        b.add_private_attribute(reference.as_str());
    }
    b.build()
}

fn compare_context(c: &CompareContext) -> Result<Context, String> {
    match (&c.single, &c.multi) {
        (Some(single), _) => compare_single(single),
        (None, Some(list)) => multi(list.iter().map(compare_single).collect()),
        (None, None) => Err("neither single nor multi".to_owned()),
    }
}

/// `contextComparison`: `{"equals": …}`; a context that cannot be built is an error.
pub fn compare(p: &CompareParams) -> Result<Value, String> {
    let a = compare_context(&p.context1)?;
    let b = compare_context(&p.context2)?;
    Ok(json!({ "equals": same_context(&a, &b) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_literal_name_becomes_an_escaped_reference() {
        assert_eq!(literal_reference("name"), "name");
        assert_eq!(literal_reference("/address/street"), "/~1address~1street");
        assert_eq!(literal_reference("/a~b"), "/~1a~0b");
    }

    #[test]
    fn build_and_convert_answer_output_or_error() {
        let p: BuildParams = serde_json::from_value(json!({
            "single": {"kind": "org", "key": "k", "name": "n", "custom": {"a": 1}}
        }))
        .expect("params");
        let out = build(&p);
        let text = out["output"].as_str().expect("output");
        let v: Value = serde_json::from_str(text).expect("json");
        assert_eq!(v, json!({"kind": "org", "key": "k", "name": "n", "a": 1.0}));
        let bad = convert(&ConvertParams { input: "{".into() });
        assert!(bad["error"].is_string() && bad.get("output").is_none());
        let user = convert(&ConvertParams {
            input: r#"{"key": "a", "custom": {"x": 1}}"#.into(),
        });
        let v: Value =
            serde_json::from_str(user["output"].as_str().expect("output")).expect("json");
        assert_eq!(v, json!({"kind": "user", "key": "a", "x": 1.0}));
    }

    #[test]
    fn equivalent_private_attributes_compare_equal() {
        let p: CompareParams = serde_json::from_value(json!({
            "context1": {"single": {"kind": "user", "key": "k",
                "privateAttributes": [{"value": "/address/street", "literal": true}]}},
            "context2": {"single": {"kind": "user", "key": "k",
                "privateAttributes": [{"value": "/~1address~1street", "literal": false}]}}
        }))
        .expect("params");
        assert_eq!(compare(&p), Ok(json!({"equals": true})));
    }
}
