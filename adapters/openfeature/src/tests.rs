//! Unit tests: every context rule, reason, error code and value conversion.

use std::collections::HashMap;

use flagsync::eval::{Detail, EvalError, Reason};
use open_feature::{
    EvaluationContext, EvaluationContextFieldValue as F, EvaluationErrorCode as Code,
    EvaluationReason, FlagMetadataValue, StructValue, Value,
};
use serde_json::{Value as Json, json};

use crate::resolve::{self, json_to_value, metadata_keys, reason, resolution, struct_detail};
use crate::to_context;

fn ctx(key: Option<&str>) -> EvaluationContext {
    let c = EvaluationContext::default();
    match key {
        Some(k) => c.with_targeting_key(k),
        None => c,
    }
}

/// The LaunchDarkly JSON of the converted context.
fn ld(c: &EvaluationContext) -> Json {
    serde_json::to_value(to_context(c).expect("valid")).unwrap()
}

fn code(c: &EvaluationContext) -> Code {
    to_context(c).expect_err("invalid").code
}

#[test]
fn targeting_key_is_the_user_key() {
    assert_eq!(ld(&ctx(Some("u1"))), json!({"kind": "user", "key": "u1"}));
}

#[test]
fn key_attribute_when_no_targeting_key() {
    assert_eq!(
        ld(&ctx(None).with_custom_field("key", "k")),
        json!({"kind": "user", "key": "k"})
    );
    // An empty targetingKey counts as absent (LaunchDarkly's Java provider).
    assert_eq!(ld(&ctx(Some("")).with_custom_field("key", "k"))["key"], "k");
}

#[test]
fn targeting_key_wins_over_key_which_is_discarded() {
    let c = ctx(Some("tk")).with_custom_field("key", "k");
    assert_eq!(ld(&c), json!({"kind": "user", "key": "tk"}));
    // A non-string key is discarded too.
    let c = ctx(Some("tk")).with_custom_field("key", 5_i64);
    assert_eq!(ld(&c), json!({"kind": "user", "key": "tk"}));
}

#[test]
fn no_key_is_targeting_key_missing() {
    assert_eq!(code(&ctx(None)), Code::TargetingKeyMissing);
    assert_eq!(code(&ctx(Some(""))), Code::TargetingKeyMissing);
    assert_eq!(
        code(&ctx(None).with_custom_field("key", 5_i64)),
        Code::TargetingKeyMissing
    );
    assert_eq!(
        code(&ctx(None).with_custom_field("key", "")),
        Code::TargetingKeyMissing
    );
}

#[test]
fn kind_attribute() {
    let c = ctx(Some("o1")).with_custom_field("kind", "org");
    assert_eq!(ld(&c), json!({"kind": "org", "key": "o1"}));
    // Not a string: discarded, the kind is user.
    let c = ctx(Some("u")).with_custom_field("kind", true);
    assert_eq!(ld(&c), json!({"kind": "user", "key": "u"}));
    // A kind LaunchDarkly rejects: INVALID_CONTEXT, no panic.
    for bad in ["kind", "has space", ""] {
        let c = ctx(Some("u")).with_custom_field("kind", bad);
        assert_eq!(code(&c), Code::InvalidContext, "{bad:?}");
    }
}

#[test]
fn name_and_anonymous_and_their_wrong_types() {
    let c = ctx(Some("u"))
        .with_custom_field("name", "Ada")
        .with_custom_field("anonymous", true);
    assert_eq!(
        ld(&c),
        json!({"kind": "user", "key": "u", "name": "Ada", "anonymous": true})
    );
    let c = ctx(Some("u"))
        .with_custom_field("name", 3_i64)
        .with_custom_field("anonymous", "yes");
    assert_eq!(ld(&c), json!({"kind": "user", "key": "u"}));
}

#[test]
fn private_attributes() {
    let list = vec!["email".to_owned(), "/address/street".to_owned()];
    let c = ctx(Some("u")).with_custom_field("privateAttributes", F::new_struct(list));
    assert_eq!(
        ld(&c)["_meta"],
        json!({"privateAttributes": ["email", "/address/street"]})
    );
    let c = ctx(Some("u")).with_custom_field(
        "privateAttributes",
        F::new_struct(vec![Value::String("a".into())]),
    );
    assert_eq!(ld(&c)["_meta"], json!({"privateAttributes": ["a"]}));
    // Not a list, or not only strings: discarded.
    let c = ctx(Some("u")).with_custom_field("privateAttributes", "email");
    assert_eq!(ld(&c), json!({"kind": "user", "key": "u"}));
    let mixed = vec![Value::String("a".into()), Value::Int(1)];
    let c = ctx(Some("u")).with_custom_field("privateAttributes", F::new_struct(mixed));
    assert_eq!(ld(&c), json!({"kind": "user", "key": "u"}));
}

#[test]
fn attributes_of_every_type() {
    let nested = StructValue::default()
        .with_field("city", "Paris")
        .with_field("zip", 75001_i64)
        .with_field(
            "tags",
            Value::Array(vec![Value::Bool(true), Value::Float(1.5)]),
        );
    let when = time::OffsetDateTime::from_unix_timestamp(0).unwrap();
    let c = ctx(Some("u"))
        .with_custom_field("b", true)
        .with_custom_field("i", 42_i64)
        .with_custom_field("f", 0.25)
        .with_custom_field("s", "x")
        .with_custom_field("t", when)
        .with_custom_field("address", F::new_struct(nested))
        .with_custom_field(
            "list",
            F::new_struct(vec![Value::Int(1), Value::String("two".into())]),
        )
        .with_custom_field("strings", F::new_struct(vec!["a", "b"]))
        .with_custom_field(
            "json",
            F::new_struct(json!({"deep": {"n": null, "k": [1]}})),
        )
        .with_custom_field("opaque", F::new_struct(std::time::Duration::from_secs(1)));
    assert_eq!(
        ld(&c),
        json!({"kind": "user", "key": "u", "b": true, "i": 42.0, "f": 0.25, "s": "x",
            "t": "1970-01-01T00:00:00Z",
            "address": {"city": "Paris", "zip": 75001.0, "tags": [true, 1.5]},
            "list": [1.0, "two"], "strings": ["a", "b"], "json": {"deep": {"n": null, "k": [1.0]}}})
    );
}

fn org() -> StructValue {
    StructValue::default()
        .with_field("targetingKey", "o1")
        .with_field("name", "Acme")
        .with_field("employees", 10_i64)
}

#[test]
fn multi_kind_context() {
    let user = ctx(Some("u1")).with_custom_field("anonymous", true);
    let mut fields = HashMap::new();
    fields.insert("key".to_owned(), F::String("d1".into()));
    fields.insert("privateAttributes".to_owned(), F::new_struct(vec!["os"]));
    fields.insert("os".to_owned(), F::String("linux".into()));
    let c = ctx(Some("ignored"))
        .with_custom_field("kind", "multi")
        .with_custom_field("user", F::new_struct(user))
        .with_custom_field("org", F::new_struct(org()))
        .with_custom_field("device", F::new_struct(fields))
        .with_custom_field("stray", "not a structure");
    assert_eq!(
        ld(&c),
        json!({"kind": "multi",
            "user": {"key": "u1", "anonymous": true},
            "org": {"key": "o1", "name": "Acme", "employees": 10.0},
            "device": {"key": "d1", "os": "linux", "_meta": {"privateAttributes": ["os"]}}})
    );
}

#[test]
fn multi_kind_context_errors() {
    // No structure at all: no context.
    let c = ctx(Some("u")).with_custom_field("kind", "multi");
    assert_eq!(code(&c), Code::InvalidContext);
    // A part without a key.
    let c = ctx(None)
        .with_custom_field("kind", "multi")
        .with_custom_field("org", F::new_struct(org()))
        .with_custom_field(
            "user",
            F::new_struct(StructValue::default().with_field("name", "x")),
        );
    assert_eq!(code(&c), Code::TargetingKeyMissing);
    // A part of an invalid kind.
    let c = ctx(None)
        .with_custom_field("kind", "multi")
        .with_custom_field("bad kind", F::new_struct(org()));
    assert_eq!(code(&c), Code::InvalidContext);
    // One part alone is that single context.
    let c = ctx(None)
        .with_custom_field("kind", "multi")
        .with_custom_field("org", F::new_struct(org()));
    assert_eq!(
        ld(&c),
        json!({"kind": "org", "key": "o1", "name": "Acme", "employees": 10.0})
    );
}

fn detail<T>(value: T, index: isize, reason: Reason) -> Detail<T> {
    Detail {
        value: Some(value),
        variation_index: Some(index),
        reason,
    }
}

fn rule_match() -> Reason {
    Reason::RuleMatch {
        rule_index: 2,
        rule_id: "r2".into(),
        in_experiment: true,
        big_segments_status: None,
    }
}

fn prereq() -> Reason {
    Reason::PrerequisiteFailed {
        prerequisite_key: "p".into(),
        big_segments_status: None,
    }
}

#[test]
fn every_reason() {
    let other = |s: &str| Some(EvaluationReason::Other(s.to_owned()));
    assert_eq!(reason(&Reason::Off), Some(EvaluationReason::Disabled));
    assert_eq!(
        reason(&Reason::target_match()),
        Some(EvaluationReason::TargetingMatch)
    );
    assert_eq!(reason(&rule_match()), other("RULE_MATCH"));
    assert_eq!(reason(&Reason::fallthrough()), other("FALLTHROUGH"));
    assert_eq!(reason(&prereq()), other("PREREQUISITE_FAILED"));
    assert_eq!(reason(&Reason::error(EvalError::Exception)), None);
    let r = resolution(detail(true, 1, Reason::fallthrough()), false).unwrap();
    assert!(r.value);
    assert_eq!(r.variant.as_deref(), Some("1"));
    assert_eq!(r.reason.unwrap().to_string(), "FALLTHROUGH");
    assert_eq!(r.flag_metadata, None);
}

#[test]
fn every_error_code() {
    let cases = [
        (
            EvalError::ClientNotReady,
            Code::ProviderNotReady,
            "PROVIDER_NOT_READY",
        ),
        (
            EvalError::FlagNotFound,
            Code::FlagNotFound,
            "FLAG_NOT_FOUND",
        ),
        (EvalError::MalformedFlag, Code::ParseError, "PARSE_ERROR"),
        (EvalError::WrongType, Code::TypeMismatch, "TYPE_MISMATCH"),
        (
            EvalError::Exception,
            Code::General("EXCEPTION".into()),
            "EXCEPTION",
        ),
    ];
    for (error, code, name) in cases {
        assert_eq!(resolve::error_code(error), code);
        let d = Detail {
            value: Some(7_i64),
            variation_index: None,
            reason: Reason::error(error),
        };
        let e = resolution(d, true).unwrap_err();
        assert_eq!(e.code, code);
        assert_eq!(e.code.to_string(), name);
    }
}

#[test]
fn off_without_off_variation_is_an_error_so_the_default_applies() {
    let d = Detail {
        value: Some(false),
        variation_index: None,
        reason: Reason::Off,
    };
    assert!(matches!(
        resolution(d, false).unwrap_err().code,
        Code::General(_)
    ));
    let off = resolution(detail("x".to_owned(), 0, Reason::Off), false).unwrap();
    assert_eq!(off.reason, Some(EvaluationReason::Disabled));
    assert_eq!(off.variant.as_deref(), Some("0"));
}

#[test]
fn reason_metadata() {
    let m = |r: Reason| {
        resolution(detail(1.5, 3, r), true)
            .unwrap()
            .flag_metadata
            .unwrap()
            .values
    };
    let s = |v: &str| FlagMetadataValue::String(v.into());
    let rule = m(rule_match());
    assert_eq!(rule[metadata_keys::KIND], s("RULE_MATCH"));
    assert_eq!(rule[metadata_keys::RULE_INDEX], FlagMetadataValue::Int(2));
    assert_eq!(rule[metadata_keys::RULE_ID], s("r2"));
    assert_eq!(
        rule[metadata_keys::IN_EXPERIMENT],
        FlagMetadataValue::Bool(true)
    );
    let pre = m(prereq());
    assert_eq!(pre[metadata_keys::PREREQUISITE_KEY], s("p"));
    let fall = m(Reason::fallthrough());
    assert_eq!(fall.len(), 1);
    assert_eq!(fall[metadata_keys::KIND], s("FALLTHROUGH"));
    assert_eq!(m(Reason::Off)[metadata_keys::KIND], s("OFF"));
    assert_eq!(
        m(Reason::target_match())[metadata_keys::KIND],
        s("TARGET_MATCH")
    );
}

#[test]
fn json_values() {
    assert_eq!(json_to_value(&json!(3)), Some(Value::Int(3)));
    assert_eq!(json_to_value(&json!(-3)), Some(Value::Int(-3)));
    assert_eq!(json_to_value(&json!(3.5)), Some(Value::Float(3.5)));
    assert_eq!(
        json_to_value(&json!(u64::MAX)),
        Some(Value::Float(u64::MAX as f64))
    );
    assert_eq!(json_to_value(&json!(null)), None);
    assert_eq!(
        json_to_value(&json!({"a": [1, null, "s"], "b": null, "c": {"d": false}})),
        Some(Value::Struct(
            StructValue::default()
                .with_field(
                    "a",
                    Value::Array(vec![Value::Int(1), Value::String("s".into())])
                )
                .with_field(
                    "c",
                    Value::Struct(StructValue::default().with_field("d", false))
                )
        ))
    );
}

#[test]
fn structure_details() {
    let d = struct_detail(detail(json!({"n": 1}), 0, Reason::fallthrough()));
    assert_eq!(d.value, Some(StructValue::default().with_field("n", 1_i64)));
    assert_eq!(d.variation_index, Some(0));
    // Not an object: TYPE_MISMATCH.
    for v in [json!(true), json!([1]), json!("s"), json!(null)] {
        let d = struct_detail(detail(v, 0, Reason::fallthrough()));
        assert_eq!(d.reason, Reason::error(EvalError::WrongType));
    }
    // An error stays that error.
    let d = struct_detail(Detail {
        value: Some(Json::Null),
        variation_index: None,
        reason: Reason::error(EvalError::FlagNotFound),
    });
    assert_eq!(resolution(d, false).unwrap_err().code, Code::FlagNotFound);
}
