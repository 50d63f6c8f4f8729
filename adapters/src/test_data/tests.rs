//! The builders make the flag JSON LaunchDarkly's `TestData` makes for the same calls
//! (expectations from Go `ldtestdata`'s `test_data_source_flag_test.go` and Python's
//! `test_test_data_source.py`).

use serde_json::{Value, json};

use super::{FlagBuilder, TestData};

/// A boolean flag at version 1 as LaunchDarkly's builders make it, with `extra`.
fn basic_bool(extra: Value) -> Value {
    let mut flag = json!({
        "key": "flagkey", "version": 1, "on": true,
        "variations": [true, false], "offVariation": 1, "fallthrough": {"variation": 0},
        "targets": [], "contextTargets": [], "rules": [], "prerequisites": [], "salt": "",
    });
    for (k, v) in extra.as_object().unwrap() {
        flag[k] = v.clone();
    }
    flag
}

fn built(configure: impl FnOnce(FlagBuilder) -> FlagBuilder) -> Value {
    let td = TestData::new();
    td.update(configure(td.flag("flagkey")));
    td.flag_json("flagkey").unwrap()
}

const THREE: [&str; 3] = ["red", "green", "blue"];

#[test]
fn simple_boolean_flags() {
    assert_eq!(built(|f| f), basic_bool(json!({})));
    assert_eq!(built(FlagBuilder::boolean_flag), basic_bool(json!({})));
    assert_eq!(built(|f| f.on(true)), basic_bool(json!({})));
    assert_eq!(built(|f| f.on(false)), basic_bool(json!({"on": false})));
    assert_eq!(
        built(|f| f.variation_for_all(false)),
        basic_bool(json!({"fallthrough": {"variation": 1}}))
    );
    assert_eq!(built(|f| f.variation_for_all(true)), basic_bool(json!({})));
    assert_eq!(
        built(|f| f.fallthrough_variation(true).off_variation(false)),
        basic_bool(json!({}))
    );
    assert_eq!(
        built(|f| f.fallthrough_variation(false).off_variation(true)),
        basic_bool(json!({"fallthrough": {"variation": 1}, "offVariation": 0}))
    );
}

#[test]
fn boolean_methods_make_the_flag_boolean_again() {
    assert_eq!(
        built(|f| f.variations([1, 2]).boolean_flag()),
        basic_bool(json!({}))
    );
    assert_eq!(
        built(|f| f.variations([json!(true), json!(2)]).boolean_flag()),
        basic_bool(json!({}))
    );
    assert_eq!(
        built(|f| f.value_for_all("x").boolean_flag()),
        basic_bool(json!({}))
    );
}

#[test]
fn flags_with_string_variations() {
    assert_eq!(
        built(|f| f
            .variations(THREE)
            .off_variation_index(0)
            .fallthrough_variation_index(2)),
        basic_bool(
            json!({"variations": THREE, "offVariation": 0, "fallthrough": {"variation": 2}})
        )
    );
    assert_eq!(
        built(|f| f.variations(THREE).variation_for_all_index(1)),
        basic_bool(
            json!({"variations": THREE, "offVariation": 1, "fallthrough": {"variation": 1}})
        )
    );
    assert_eq!(
        built(|f| f.value_for_all(json!({"a": 1}))),
        basic_bool(json!({"variations": [{"a": 1}], "offVariation": 1}))
    );
}

fn user_targets(targets: Value) -> Value {
    let context: Vec<Value> = targets
        .as_array()
        .unwrap()
        .iter()
        .map(|t| json!({"contextKind": "user", "variation": t["variation"], "values": []}))
        .collect();
    basic_bool(json!({"targets": targets, "contextTargets": context}))
}

#[test]
fn user_targets_go_in_targets_with_a_placeholder_context_target() {
    assert_eq!(
        built(|f| f
            .variation_for_user("a", true)
            .variation_for_user("b", true)),
        user_targets(json!([{"variation": 0, "values": ["a", "b"]}]))
    );
    assert_eq!(
        built(|f| f
            .variation_for_user("a", true)
            .variation_for_user("a", true)),
        user_targets(json!([{"variation": 0, "values": ["a"]}]))
    );
    assert_eq!(
        built(|f| f
            .variation_for_user("a", false)
            .variation_for_user("b", true)
            .variation_for_user("c", false)),
        user_targets(
            json!([{"variation": 0, "values": ["b"]}, {"variation": 1, "values": ["a", "c"]}])
        )
    );
    assert_eq!(
        built(|f| f
            .variation_for_user("a", true)
            .variation_for_user("b", true)
            .variation_for_user("a", false)),
        user_targets(json!([{"variation": 0, "values": ["b"]}, {"variation": 1, "values": ["a"]}]))
    );
    // An empty kind is `user`.
    assert_eq!(
        built(|f| f
            .variation_for_context("", "a", true)
            .variation_for_context("", "b", true)),
        user_targets(json!([{"variation": 0, "values": ["a", "b"]}]))
    );
}

#[test]
fn context_targets_of_other_kinds() {
    assert_eq!(
        built(|f| f
            .variation_for_context("org", "a", true)
            .variation_for_context("org", "b", true)),
        basic_bool(
            json!({"contextTargets": [{"contextKind": "org", "variation": 0, "values": ["a", "b"]}]})
        )
    );
    assert_eq!(
        built(|f| f
            .variation_for_context("org", "a", true)
            .variation_for_context("other", "a", true)),
        basic_bool(json!({"contextTargets": [
            {"contextKind": "org", "variation": 0, "values": ["a"]},
            {"contextKind": "other", "variation": 0, "values": ["a"]},
        ]}))
    );
    assert_eq!(
        built(|f| f
            .variations(THREE)
            .off_variation_index(0)
            .fallthrough_variation_index(2)
            .variation_index_for_context("org", "a", 2)
            .variation_index_for_context("org", "b", 2)),
        basic_bool(
            json!({"variations": THREE, "offVariation": 0, "fallthrough": {"variation": 2},
            "contextTargets": [{"contextKind": "org", "variation": 2, "values": ["a", "b"]}]})
        )
    );
    // Targets cleared by variation_for_all.
    assert_eq!(
        built(|f| f.variation_for_user("a", false).variation_for_all(true)),
        basic_bool(json!({}))
    );
}

fn clause(kind: &str, attr: &str, value: &str, negate: bool) -> Value {
    json!({"contextKind": kind, "attribute": attr, "op": "in", "values": [value], "negate": negate})
}

#[test]
fn rules() {
    let lucy = |variation: u64| {
        basic_bool(json!({"rules": [{"id": "rule0", "variation": variation,
            "clauses": [clause("user", "name", "Lucy", false)]}]}))
    };
    assert_eq!(
        built(|f| f.if_match("name", ["Lucy"]).then_return(true)),
        lucy(0)
    );
    assert_eq!(
        built(|f| f.if_match("name", ["Lucy"]).then_return_index(0)),
        lucy(0)
    );
    assert_eq!(
        built(|f| f.if_match("name", ["Lucy"]).then_return(false)),
        lucy(1)
    );
    assert_eq!(
        built(|f| f.if_not_match("name", ["Lucy"]).then_return(true)),
        basic_bool(json!({"rules": [{"id": "rule0", "variation": 0,
            "clauses": [clause("user", "name", "Lucy", true)]}]}))
    );
    assert_eq!(
        built(|f| f
            .if_match("name", ["Lucy"])
            .and_match("country", ["gb"])
            .then_return(true)),
        basic_bool(
            json!({"rules": [{"id": "rule0", "variation": 0, "clauses": [
            clause("user", "name", "Lucy", false), clause("user", "country", "gb", false)]}]})
        )
    );
    assert_eq!(
        built(|f| f
            .if_match("name", ["Lucy"])
            .then_return(true)
            .if_match("name", ["Mina"])
            .then_return(true)),
        basic_bool(json!({"rules": [
            {"id": "rule0", "variation": 0, "clauses": [clause("user", "name", "Lucy", false)]},
            {"id": "rule1", "variation": 0, "clauses": [clause("user", "name", "Mina", false)]},
        ]}))
    );
    assert_eq!(
        built(|f| f
            .if_match_context("org", "name", ["Catco"])
            .then_return(true)),
        basic_bool(json!({"rules": [{"id": "rule0", "variation": 0,
            "clauses": [clause("org", "name", "Catco", false)]}]}))
    );
    assert_eq!(
        built(|f| f
            .if_not_match_context("org", "name", ["Catco"])
            .and_not_match("name", ["x"])
            .then_return(true)),
        basic_bool(
            json!({"rules": [{"id": "rule0", "variation": 0, "clauses": [
            clause("org", "name", "Catco", true), clause("user", "name", "x", true)]}]})
        )
    );
}

#[test]
fn versions_and_builders_are_kept_per_flag() {
    let td = TestData::new();
    td.update(td.flag("a"));
    td.update(td.flag("a").on(false));
    td.update(td.flag("b"));
    assert_eq!(td.flag_json("a").unwrap()["version"], 2);
    assert_eq!(td.flag_json("b").unwrap()["version"], 1);
    assert_eq!(
        td.flag("a"),
        FlagBuilder::new("a").on(false),
        "a copy of the last builder"
    );
    assert_eq!(td.flag("new"), FlagBuilder::new("new"));

    td.use_preconfigured_flag(json!({"key": "a", "version": 40, "on": true, "variations": [1]}));
    assert_eq!(
        td.flag_json("a").unwrap()["version"],
        3,
        "the version is managed"
    );
    assert_eq!(
        td.flag("a"),
        FlagBuilder::new("a"),
        "no builder for a preconfigured flag"
    );
    td.use_preconfigured_segment(json!({"key": "s", "included": ["u"]}));
    td.use_preconfigured_segment(json!({"key": "s", "included": ["v"]}));
    let cs = td.change_set();
    assert_eq!(cs.changes.len(), 3);
    assert_eq!(
        (cs.changes[0].key.as_str(), cs.changes[0].item.version),
        ("s", 2)
    );
}
