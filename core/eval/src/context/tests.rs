//! The context types against the official `launchdarkly-server-sdk-evaluation` crate:
//! the same inputs must give the same results (validation errors, canonical keys,
//! references, attribute values, JSON), and the borrowed reads the owned ones.

use std::collections::HashMap;

use launchdarkly_server_sdk_evaluation as official;
use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

/// One builder call, applied to both crates' builders.
#[derive(Debug, Clone)]
enum Op {
    Kind(String),
    Key(String),
    Name(String),
    Anonymous(bool),
    Set(String, Value),
    Private(String),
    Unprivate(String),
}

fn build(ops: &[Op]) -> (Result<Context, String>, Result<official::Context, String>) {
    let mut ours = ContextBuilder::new("k");
    let mut theirs = official::ContextBuilder::new("k");
    for op in ops {
        match op {
            Op::Kind(k) => {
                ours.kind(k.clone());
                theirs.kind(k.clone());
            }
            Op::Key(k) => {
                ours.key(k.clone());
                theirs.key(k.clone());
            }
            Op::Name(n) => {
                ours.name(n.clone());
                theirs.name(n.clone());
            }
            Op::Anonymous(a) => {
                ours.anonymous(*a);
                theirs.anonymous(*a);
            }
            Op::Set(name, v) => {
                let a = ours.try_set_value(name, AttributeValue::from(v));
                let b = theirs.try_set_value(name, official::AttributeValue::from(v));
                assert_eq!(a, b, "try_set_value({name:?}, {v})");
            }
            Op::Private(r) => {
                ours.add_private_attribute(r.as_str());
                theirs.add_private_attribute(r.as_str());
            }
            Op::Unprivate(r) => {
                ours.remove_private_attribute(r.as_str());
                theirs.remove_private_attribute(r.as_str());
            }
        }
    }
    (ours.build(), theirs.build())
}

/// Both crates' results agree: the same error, or contexts with the same JSON, keys
/// and kinds.
fn assert_same(ours: &Result<Context, String>, theirs: &Result<official::Context, String>) {
    match (ours, theirs) {
        (Err(a), Err(b)) => assert_eq!(a, b),
        (Ok(a), Ok(b)) => {
            assert_eq!(
                serde_json::to_value(a).unwrap(),
                serde_json::to_value(b).unwrap()
            );
            assert_eq!(a.key(), b.key());
            assert_eq!(a.canonical_key(), b.canonical_key());
            assert_eq!(a.kind().as_ref(), b.kind().as_ref());
            assert_eq!(a.is_multi(), b.is_multi());
            let kinds = |k: Vec<&Kind>| k.iter().map(|k| k.to_string()).collect::<Vec<_>>();
            let official_kinds =
                |k: Vec<&official::Kind>| k.iter().map(|k| k.to_string()).collect::<Vec<_>>();
            assert_eq!(kinds(a.kinds()), official_kinds(b.kinds()));
        }
        _ => panic!("ours {ours:?}, theirs {theirs:?}"),
    }
}

/// Both crates read `json` alike: both refuse it, or both give contexts that agree.
fn assert_same_json(json: &Value) {
    let ours = serde_json::from_value::<Context>(json.clone());
    let theirs = serde_json::from_value::<official::Context>(json.clone());
    match (&ours, &theirs) {
        (Err(_), Err(_)) => {}
        (Ok(a), Ok(b)) => assert_same(&Ok(a.clone()), &Ok(b.clone())),
        _ => panic!("{json}: ours {ours:?}, theirs {theirs:?}"),
    }
}

#[test]
fn builder_errors_are_the_official_ones() {
    let cases: &[&[Op]] = &[
        &[],
        &[Op::Key(String::new())],
        &[Op::Kind(String::new())],
        &[Op::Kind("kind".into())],
        &[Op::Kind("multi".into())],
        &[Op::Kind("a b".into())],
        &[Op::Kind("🦀".into())],
        &[Op::Kind("org".into()), Op::Key(String::new())],
        &[Op::Kind("Org-1.x_y".into())],
        &[
            Op::Set("kind".into(), json!("org")),
            Op::Set("key".into(), json!("")),
        ],
    ];
    for ops in cases {
        let (ours, theirs) = build(ops);
        assert_same(&ours, &theirs);
    }
    let (ours, _) = build(&[Op::Kind("multi".into())]);
    assert_eq!(ours.unwrap_err(), "context kind cannot be 'multi'");
    let (ours, _) = build(&[Op::Key(String::new())]);
    assert_eq!(ours.unwrap_err(), "key cannot be empty");
}

#[test]
fn special_attribute_names_take_only_their_type() {
    let mut b = ContextBuilder::new("k");
    assert!(!b.try_set_value("key", AttributeValue::Bool(true)));
    assert!(!b.try_set_value("anonymous", AttributeValue::from("yes")));
    assert!(!b.try_set_value("_meta", AttributeValue::from("x")));
    assert!(!b.try_set_value("", AttributeValue::from("x")));
    assert!(b.try_set_value("name", AttributeValue::from("Ann")));
    assert!(b.try_set_value("name", AttributeValue::Null));
    assert!(b.try_set_value("plan", AttributeValue::from("gold")));
    assert!(b.try_set_value("plan", AttributeValue::Null));
    let c = b.build().unwrap();
    assert_eq!(c.name(), None);
    assert_eq!(c.get_value(&Reference::new("plan")), None);
    assert_eq!(
        serde_json::to_value(&c).unwrap(),
        json!({"kind": "user", "key": "k"})
    );
}

#[test]
fn canonical_keys_are_the_official_ones() {
    for (kind, key) in [
        ("user", "a"),
        ("user", "a:b%c"),
        ("org", "a"),
        ("org", "a:b%c"),
        ("org", "%3A"),
    ] {
        let (ours, theirs) = build(&[Op::Kind(kind.into()), Op::Key(key.into())]);
        assert_eq!(
            ours.unwrap().canonical_key(),
            theirs.unwrap().canonical_key()
        );
    }
    let multi = MultiContextBuilder::new()
        .add_context(ContextBuilder::new("u:1").build().unwrap())
        .add_context(ContextBuilder::new("o%1").kind("org").build().unwrap())
        .build()
        .unwrap();
    assert_eq!(multi.canonical_key(), "org:o%251:user:u%3A1");
    assert_eq!(multi.key(), "");
}

#[test]
fn multi_contexts_are_built_as_the_official_ones() {
    let user = ContextBuilder::new("u").build().unwrap();
    let org = ContextBuilder::new("o").kind("org").build().unwrap();
    let org2 = ContextBuilder::new("o2").kind("org").build().unwrap();
    assert_eq!(
        MultiContextBuilder::new().build().unwrap_err(),
        "multi-kind context must contain at least one nested context"
    );
    assert_eq!(
        MultiContextBuilder::of(vec![org.clone(), org2])
            .build()
            .unwrap_err(),
        "multi-kind context cannot have same kind more than once"
    );
    // One context is that context.
    assert_eq!(
        MultiContextBuilder::of(vec![org.clone()]).build().unwrap(),
        org
    );
    let multi = MultiContextBuilder::of(vec![user.clone(), org.clone()])
        .build()
        .unwrap();
    // A multi-kind context added adds its contexts.
    let again = MultiContextBuilder::new()
        .add_context(multi.clone())
        .build()
        .unwrap();
    assert_eq!(again, multi);
    assert_eq!(multi.kind().as_ref(), "multi");
    assert_eq!(
        multi.get_value(&Reference::new("kind")),
        Some(AttributeValue::from("multi"))
    );
    assert_eq!(multi.get_value(&Reference::new("key")), None);
    assert_eq!(multi.as_kind(&Kind::user()), Some(&user));
    assert_eq!(multi.as_kind(&Kind::try_from("org").unwrap()), Some(&org));
    assert_eq!(multi.as_kind(&Kind::try_from("device").unwrap()), None);
    assert_eq!(org.as_kind(&Kind::user()), None);
    let keys = multi.context_keys();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[&Kind::user()], "u");
    let theirs = official::MultiContextBuilder::new()
        .add_context(official::ContextBuilder::new("u").build().unwrap())
        .add_context(
            official::ContextBuilder::new("o")
                .kind("org")
                .build()
                .unwrap(),
        )
        .build();
    assert_same(&Ok(multi), &theirs);
}

#[test]
fn without_anonymous_contexts_drops_the_anonymous_ones() {
    let anon = ContextBuilder::new("u").anonymous(true).build().unwrap();
    let org = ContextBuilder::new("o").kind("org").build().unwrap();
    assert!(anon.without_anonymous_contexts().is_err());
    assert_eq!(org.without_anonymous_contexts().unwrap(), org);
    let multi = MultiContextBuilder::of(vec![anon.clone(), org.clone()])
        .build()
        .unwrap();
    assert_eq!(multi.without_anonymous_contexts().unwrap(), org);
    let all_anon = MultiContextBuilder::of(vec![
        anon,
        ContextBuilder::new("o")
            .kind("org")
            .anonymous(true)
            .build()
            .unwrap(),
    ])
    .build()
    .unwrap();
    assert!(all_anon.without_anonymous_contexts().is_err());
}

/// The official crate's test context: every kind of attribute.
fn rich() -> Context {
    let map = HashMap::from([
        (
            "array".to_owned(),
            AttributeValue::Array(vec!["first".into(), "second".into()]),
        ),
        ("1".to_owned(), AttributeValue::Bool(true)),
        (
            "deeper".to_owned(),
            AttributeValue::Object(HashMap::from([("x".to_owned(), 1.0.into())])),
        ),
    ]);
    ContextBuilder::new("my-key")
        .kind("org")
        .name("my-name")
        .anonymous(true)
        .set_string("attr", "my-attr")
        .set_string("starts-with-slash", "love that prefix")
        .set_string("crazy~name", "still works")
        .set_string("a/b", "slash")
        .set_value("my-map", AttributeValue::Object(map))
        .add_private_attribute("attr")
        .build()
        .unwrap()
}

#[test]
fn values_are_read_as_the_official_crate_reads_them() {
    let ours = rich();
    let theirs: official::Context =
        serde_json::from_value(serde_json::to_value(&ours).unwrap()).unwrap();
    for r in [
        "kind",
        "key",
        "name",
        "anonymous",
        "attr",
        "/attr",
        "/starts-with-slash",
        "/crazy~0name",
        "crazy~name",
        "a/b",
        "/a~1b",
        "/a/b",
        "/other",
        "/",
        "",
        "/a//b",
        "/a~2",
        "privateAttributes",
        "_meta",
        "secondary",
        "/my-map/array",
        "/my-map/1",
        "/my-map/deeper/x",
        "/my-map/deeper/y",
        "/my-map/missing",
        "/my-map/array/0",
        "/starts-with-slash/1",
        "/key/x",
        "/name/x",
    ] {
        let mine = ours.get_value(&Reference::new(r));
        let official = theirs.get_value(&official::Reference::new(r));
        assert_eq!(
            mine.as_ref().map(|v| serde_json::to_value(v).unwrap()),
            official.map(|v| serde_json::to_value(v).unwrap()),
            "{r}"
        );
        // The borrowed read is the same value.
        assert_eq!(
            ours.attribute(&Reference::new(r)).map(|v| v.to_value()),
            mine,
            "{r}"
        );
    }
}

#[test]
fn built_in_attributes_are_borrowed() {
    let c = rich();
    let r = |s: &str| c.attribute(&Reference::new(s));
    assert_eq!(r("kind"), Some(AttributeRef::Str("org")));
    assert_eq!(r("key"), Some(AttributeRef::Str("my-key")));
    assert_eq!(r("name"), Some(AttributeRef::Str("my-name")));
    assert_eq!(r("anonymous"), Some(AttributeRef::Bool(true)));
    assert_eq!(r("attr").and_then(|v| v.as_str()), Some("my-attr"));
    assert_eq!(
        r("/my-map/deeper/x"),
        Some(AttributeRef::Value(&AttributeValue::Number(1.0)))
    );
    let plain = ContextBuilder::new("k").build().unwrap();
    assert_eq!(plain.attribute(&Reference::new("name")), None);
    assert_eq!(
        plain.get_value(&Reference::new("anonymous")),
        Some(AttributeValue::Bool(false))
    );
}

#[test]
fn many_attributes_are_found_by_bisection() {
    let mut b = ContextBuilder::new("k");
    for i in (0..40).rev() {
        b.set_float(&format!("a{i}"), f64::from(i));
    }
    let c = b.build().unwrap();
    for i in 0..40 {
        assert_eq!(
            c.get_value(&Reference::new(format!("a{i}"))),
            Some(AttributeValue::Number(f64::from(i)))
        );
    }
    assert_eq!(c.get_value(&Reference::new("a40")), None);
    assert_eq!(c.get_value(&Reference::new("b")), None);
}

#[test]
fn references_parse_as_the_official_ones() {
    for s in [
        "", "/", "a", "a/b", "/a", "/a/b", "/a~0b", "/a~1b", "/a~", "/a~2", "/a//b", "/a/", "//",
        "~0", "/~01", "/🦀/~1",
    ] {
        assert_same_reference(s);
    }
    let r = Reference::new("/a~1b/c");
    assert_eq!(
        (r.depth(), r.component(0), r.component(1)),
        (2, Some("a/b"), Some("c"))
    );
    assert_eq!(
        Reference::new("/a~2").error(),
        "Reference contains invalid escape sequence"
    );
    assert_eq!(Reference::new("").error(), "Reference cannot be empty");
    assert_eq!(
        Reference::new("/a//b").error(),
        "Reference contains double or trailing slash"
    );
    assert_eq!(Reference::new("/a").error(), "");
    assert_eq!(Reference::from("x"), Reference::from(String::from("x")));
    assert_eq!(String::from(Reference::new("/a~2")), "/a~2");
    assert_eq!(
        serde_json::to_value(Reference::new("/a~2")).unwrap(),
        json!("/a~2")
    );
    assert!(!Reference::default().is_valid());
}

fn assert_same_reference(s: &str) {
    let (a, b) = (Reference::new(s), official::Reference::new(s));
    assert_eq!(a.is_valid(), b.is_valid(), "{s:?}");
    assert_eq!(a.error(), b.error(), "{s:?}");
    assert_eq!(a.depth(), b.depth(), "{s:?}");
    for i in 0..=a.depth() {
        assert_eq!(a.component(i), b.component(i), "{s:?} {i}");
    }
    assert_eq!(a.to_string(), b.to_string());
}

#[test]
fn kinds_are_checked_as_the_official_ones() {
    for s in ["user", "org", "", "kind", "multi", "a b", "A-z.0_9", "é"] {
        let (a, b) = (Kind::try_from(s), official::Kind::try_from(s));
        assert_eq!(a.map(String::from), b.map(String::from), "{s:?}");
    }
    assert!(Kind::default().is_user());
    assert!(serde_json::from_value::<Kind>(json!("multi")).is_err());
    let mut kinds = ["user", "l", "v", "n"].map(|k| Kind::try_from(k).unwrap());
    kinds.sort();
    assert_eq!(kinds.map(String::from), ["l", "n", "user", "v"]);
    assert_eq!(Kind::user(), "user");
}

#[test]
fn json_forms_are_the_official_ones() {
    let cases = [
        json!({"kind": "user", "key": "k"}),
        json!({"kind": "org", "key": "k", "name": "n", "anonymous": true, "a": [1, {"b": null}],
               "_meta": {"privateAttributes": ["a", "/b/c"], "other": 1}}),
        json!({"kind": "org", "key": "k", "anonymous": false, "name": null, "x": null}),
        json!({"kind": "multi", "user": {"key": "u", "kind": "ignored"},
               "org": {"key": "o", "plan": "gold", "_meta": {"privateAttributes": ["plan"]}}}),
        json!({"kind": "multi", "org": {"key": "o"}}),
        json!({"kind": "multi"}),
        json!({"kind": "multi", "org": {"key": "o"}, "multi": {"key": "m"}}),
        json!({"kind": "multi", "org": {"key": ""}, "user": {"key": "u"}}),
        json!({"kind": "multi", "org": ["o"]}),
        json!({"key": "old", "name": "n", "secondary": "s", "anonymous": true, "email": "e",
               "firstName": "f", "lastName": "l", "avatar": "a", "country": "c", "ip": "i",
               "custom": {"email": "custom", "key": "no", "kind": "no", "x": 1, "ip": null},
               "privateAttributeNames": ["email", "/x"], "ignored": true}),
        json!({"key": ""}),
        json!({"key": "k", "custom": null, "privateAttributeNames": null}),
        json!({"key": "k", "email": 1}),
        json!({"key": "k", "custom": 1}),
        json!({"name": "no key"}),
        json!({"kind": null, "key": "k"}),
        json!({"kind": "", "key": "k"}),
        json!({"kind": 1, "key": "k"}),
        json!({"kind": true, "key": "k"}),
        json!({"kind": "kind", "key": "k"}),
        json!({"kind": "a b", "key": "k"}),
        json!({"kind": "org"}),
        json!({"kind": "org", "key": 1}),
        json!({"kind": "org", "key": null}),
        json!({"kind": "org", "key": ""}),
        json!({"kind": "org", "key": "k", "name": 1}),
        json!({"kind": "org", "key": "k", "anonymous": "yes"}),
        json!({"kind": "org", "key": "k", "anonymous": null}),
        json!({"kind": "org", "key": "k", "_meta": null}),
        json!({"kind": "org", "key": "k", "_meta": 1}),
        json!({"kind": "org", "key": "k", "_meta": {"secondary": "s"}}),
        json!({"kind": "org", "key": "k", "_meta": {"privateAttributes": [1]}}),
        json!({"kind": "org", "key": "k", "_meta": ["s", ["a"]]}),
        json!({"kind": "org", "key": "k", "_meta": ["s"]}),
        json!({"kind": "org", "key": "k", "": 1}),
        json!("k"),
        json!(null),
        json!([]),
    ];
    for json in &cases {
        assert_same_json(json);
    }
}

#[test]
fn the_old_user_format_is_written_as_a_user() {
    let c: Context = serde_json::from_value(json!({
        "key": "old", "secondary": "s", "email": "e", "custom": {"x": 1, "email": null},
        "privateAttributeNames": ["/x"],
    }))
    .unwrap();
    assert_eq!(
        serde_json::to_value(&c).unwrap(),
        json!({"kind": "user", "key": "old", "x": 1.0,
               "_meta": {"secondary": "s", "privateAttributes": ["/~1x"]}})
    );
    assert_eq!(c.get_value(&Reference::new("email")), None);
    // Written and read again: the same context.
    let again: Context = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
    assert_eq!(again, c);
}

#[test]
fn attribute_and_flag_values_have_the_official_json() {
    for v in [
        json!(null),
        json!(true),
        json!(1),
        json!(-1),
        json!(1.5),
        json!(u64::MAX),
        json!("s"),
        json!([1, "a", null, [true]]),
        json!({"a": {"b": [1]}, "c": null}),
    ] {
        let ours: AttributeValue = serde_json::from_value(v.clone()).unwrap();
        let theirs: official::AttributeValue = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(
            serde_json::to_value(&ours).unwrap(),
            serde_json::to_value(&theirs).unwrap()
        );
        assert_eq!(ours, AttributeValue::from(&v));
        let ours: FlagValue = serde_json::from_value(v.clone()).unwrap();
        let theirs: official::FlagValue = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(
            serde_json::to_value(&ours).unwrap(),
            serde_json::to_value(&theirs).unwrap()
        );
        assert_eq!(ours.as_json(), theirs.as_json());
        assert_eq!(ours.as_int(), theirs.as_int());
        assert_eq!(ours.as_string(), theirs.as_string());
        assert_eq!(ours.as_bool(), theirs.as_bool());
        assert_eq!(ours, FlagValue::from(v));
    }
    assert_eq!(FlagValue::Number(1e300).as_int(), None);
    assert_eq!(FlagValue::Number(-2.9).as_int(), Some(-2));
    let array = AttributeValue::from(vec!["a", "b"]);
    assert_eq!(
        array.find(|v| v.as_str() == Some("b")),
        Some(&AttributeValue::from("b"))
    );
    assert_eq!(AttributeValue::Null.find(|_| true), None);
    assert_eq!(
        AttributeValue::from(HashMap::from([("a", 1i64)])),
        AttributeValue::Object(HashMap::from([(
            "a".to_owned(),
            AttributeValue::Number(1.0)
        )]))
    );
}

/// Builder calls over a small universe of names and values, special ones included.
fn op() -> impl Strategy<Value = Op> {
    let name = prop::sample::select(vec![
        "kind",
        "key",
        "name",
        "anonymous",
        "_meta",
        "",
        "a",
        "b",
        "/c",
        "privateAttributes",
        "secondary",
        "custom",
    ])
    .prop_map(String::from);
    let value = prop::sample::select(vec![
        json!(null),
        json!(true),
        json!(2.5),
        json!("org"),
        json!(""),
        json!(["x", 1]),
        json!({"p": {"q": 1}}),
    ]);
    let reference = prop::sample::select(vec!["a", "/a", "/c", "/~1c", "name", "/p/q", "", "/"])
        .prop_map(String::from);
    let kind = prop::sample::select(vec!["user", "org", "device", "", "multi", "a b"])
        .prop_map(String::from);
    prop_oneof![
        kind.prop_map(Op::Kind),
        prop::sample::select(vec!["k", "", "a:b", "%"]).prop_map(|k| Op::Key(k.into())),
        prop::sample::select(vec!["n", ""]).prop_map(|n| Op::Name(n.into())),
        any::<bool>().prop_map(Op::Anonymous),
        (name, value).prop_map(|(n, v)| Op::Set(n, v)),
        reference.clone().prop_map(Op::Private),
        reference.prop_map(Op::Unprivate),
    ]
}

/// A JSON value that is often close to a context: mostly valid fields, some not.
fn context_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(json!(null)),
        any::<bool>().prop_map(Value::from),
        (-3i32..3).prop_map(Value::from),
        prop::sample::select(vec!["", "k", "org", "user", "multi", "a b", "/x"])
            .prop_map(Value::from),
    ];
    let value = leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::vec((field(), inner), 0..4)
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    });
    prop::collection::vec((field(), value), 0..8).prop_map(|fields| {
        let mut object: serde_json::Map<String, Value> = fields.into_iter().collect();
        object.entry("key").or_insert_with(|| json!("k"));
        Value::Object(object)
    })
}

fn field() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "kind",
        "key",
        "name",
        "anonymous",
        "_meta",
        "privateAttributes",
        "secondary",
        "custom",
        "privateAttributeNames",
        "email",
        "ip",
        "user",
        "org",
        "a",
        "",
    ])
    .prop_map(String::from)
}

proptest! {
    #[test]
    fn built_contexts_are_the_official_ones(ops in prop::collection::vec(op(), 0..12)) {
        let (ours, theirs) = build(&ops);
        assert_same(&ours, &theirs);
        if let Ok(c) = ours {
            // Written and read again: the same context.
            let again: Context = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
            prop_assert_eq!(again, c);
        }
    }

    #[test]
    fn json_is_read_as_the_official_crate_reads_it(json in context_json()) {
        assert_same_json(&json);
        // The same fields as a multi-kind context's `org`, or a user's `custom`.
        assert_same_json(&json!({"kind": "multi", "org": json.clone(), "user": {"key": "u"}}));
        assert_same_json(&json!({"key": "u", "custom": json}));
    }

    #[test]
    fn any_reference_parses_as_the_official_one(s in "(/?[a-c~01/]{0,6})|\\PC{0,8}") {
        assert_same_reference(&s);
    }
}
