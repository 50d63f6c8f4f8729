//! OpenFeature evaluation contexts (built from arbitrary fields, nested ones for
//! multi-kind contexts) through `flagsync_openfeature::to_context`: a LaunchDarkly context
//! or an error (`TARGETING_KEY_MISSING`, `INVALID_CONTEXT`), never a panic; a context it
//! makes has a key and serializes.
#![no_main]

use std::sync::Arc;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use open_feature::{EvaluationContext, EvaluationContextFieldValue, EvaluationErrorCode};

/// A field value: the kinds OpenFeature's Rust SDK has, a nested context for the parts
/// of a multi-kind one.
#[derive(Debug, Arbitrary)]
enum Field {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Nested(Option<String>, Vec<(String, Leaf)>),
    Strings(Vec<String>),
}

#[derive(Debug, Arbitrary)]
enum Leaf {
    Bool(bool),
    Str(String),
    Int(i64),
}

fn leaf(l: Leaf) -> EvaluationContextFieldValue {
    match l {
        Leaf::Bool(b) => EvaluationContextFieldValue::Bool(b),
        Leaf::Str(s) => EvaluationContextFieldValue::String(s),
        Leaf::Int(i) => EvaluationContextFieldValue::Int(i),
    }
}

fn field(f: Field) -> EvaluationContextFieldValue {
    match f {
        Field::Bool(b) => EvaluationContextFieldValue::Bool(b),
        Field::Int(i) => EvaluationContextFieldValue::Int(i),
        Field::Float(x) => EvaluationContextFieldValue::Float(x),
        Field::Str(s) => EvaluationContextFieldValue::String(s),
        Field::Nested(key, fields) => {
            let mut nested = EvaluationContext {
                targeting_key: key,
                ..Default::default()
            };
            for (name, value) in fields {
                nested.custom_fields.insert(name, leaf(value));
            }
            EvaluationContextFieldValue::Struct(Arc::new(nested))
        }
        Field::Strings(v) => EvaluationContextFieldValue::Struct(Arc::new(v)),
    }
}

/// Names that mean something to the conversion come up often.
const NAMES: [&str; 8] = [
    "kind",
    "key",
    "name",
    "anonymous",
    "privateAttributes",
    "org",
    "user",
    "x",
];

/// A top-level field: a byte choosing a well-known name (when no name is given), the
/// name, the value.
type TopField = (u8, Option<String>, Field);

fuzz_target!(|input: (Option<String>, Vec<TopField>)| {
    let (targeting_key, fields) = input;
    let mut context = EvaluationContext {
        targeting_key,
        ..Default::default()
    };
    for (pick, name, value) in fields {
        let name = name.unwrap_or_else(|| NAMES[usize::from(pick) % NAMES.len()].to_owned());
        // `kind: multi` now and then.
        let value = match (name.as_str(), pick % 4) {
            ("kind", 0) => EvaluationContextFieldValue::String("multi".into()),
            _ => field(value),
        };
        context.custom_fields.insert(name, value);
    }
    match flagsync_openfeature::to_context(&context) {
        Ok(ld) => {
            assert!(!ld.key().is_empty() || ld.is_multi());
            serde_json::to_string(&ld).expect("a context serializes");
        }
        Err(e) => assert!(
            matches!(
                e.code,
                EvaluationErrorCode::TargetingKeyMissing | EvaluationErrorCode::InvalidContext
            ),
            "{e:?}"
        ),
    }
});
