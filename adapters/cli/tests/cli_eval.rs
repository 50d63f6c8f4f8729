//! `flagsync eval`: a data file's flags evaluated offline for a context.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_flagsync");

fn temp_file(name: &str, contents: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("flagsync-cli-eval-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

fn eval(data: &Path, context: &str, extra: &[&str]) -> Output {
    Command::new(BIN)
        .args([
            "eval",
            "--data",
            data.to_str().unwrap(),
            "--context",
            context,
        ])
        .args(extra)
        .output()
        .unwrap()
}

fn json_out(o: &Output) -> Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn data() -> Value {
    json!({
        "flags": {
            "beta": {"on": true, "variations": ["off", "on"], "offVariation": 0,
                     "fallthrough": {"variation": 0},
                     "rules": [{"id": "r", "variation": 1, "clauses": [
                         {"attribute": "segmentMatch", "op": "segmentMatch", "values": ["testers"]}]}]},
            "gated": {"on": true, "variations": [1, 2], "offVariation": 0,
                      "fallthrough": {"variation": 1},
                      "prerequisites": [{"key": "beta", "variation": 1}]},
            "off": {"on": false, "variations": [true, false], "offVariation": 1,
                    "fallthrough": {"variation": 0}}
        },
        "segments": {"testers": {"included": ["u1"]}},
        "flagValues": {"simple": {"a": [1]}}
    })
}

#[test]
fn every_flag_is_evaluated_with_segments_prerequisites_and_flag_values() {
    let file = temp_file("data.json", &data().to_string());
    let got = json_out(&eval(&file, r#"{"kind":"user","key":"u1"}"#, &[]));
    let values: Vec<(&str, &Value)> = got
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str(), &v["value"]))
        .collect();
    assert_eq!(
        values,
        [
            ("beta", &json!("on")),
            ("gated", &json!(2.0)),
            ("off", &json!(false)),
            ("simple", &json!({"a": [1]})),
        ]
    );
    assert_eq!(got["beta"]["reason"]["kind"], "RULE_MATCH");
    assert_eq!(got["gated"]["variationIndex"], 1);
    let other = json_out(&eval(&file, r#"{"kind":"user","key":"u2"}"#, &[]));
    assert_eq!(other["beta"]["value"], "off");
    assert_eq!(other["gated"]["value"], 1.0);
    assert_eq!(
        other["gated"]["reason"],
        json!({"kind": "PREREQUISITE_FAILED", "prerequisiteKey": "beta"})
    );
}

#[test]
fn chosen_flags_and_a_missing_one() {
    let file = temp_file("chosen.json", &data().to_string());
    let ctx = r#"{"kind":"multi","user":{"key":"u1"},"org":{"key":"o"}}"#;
    let got = json_out(&eval(&file, ctx, &["--flag", "off", "--flag", "nope"]));
    assert_eq!(got.as_object().unwrap().len(), 2);
    assert_eq!(got["off"]["value"], false);
    assert_eq!(
        got["nope"],
        json!({"value": null, "variationIndex": null,
               "reason": {"kind": "ERROR", "errorKind": "FLAG_NOT_FOUND"}})
    );
}

#[test]
fn a_bad_context_or_data_file_is_a_usage_error() {
    let file = temp_file("bad.json", &data().to_string());
    let out = eval(&file, "{\"kind\":\"user\"}", &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--context"));
    let broken = temp_file("broken.json", "{\"flags\":");
    assert_eq!(eval(&broken, r#"{"key":"u"}"#, &[]).status.code(), Some(2));
}
