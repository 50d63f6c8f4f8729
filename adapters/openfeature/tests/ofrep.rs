//! flagsync-server's OFREP endpoints against OpenFeature:
//!
//! - the server's JSON context mapping (`flagsync_server::ofrep_context`) gives the
//!   same LaunchDarkly context as this crate's (`flagsync_openfeature::to_context`) on
//!   a table of cases;
//! - OpenFeature's own Rust OFREP provider (`open-feature-ofrep` 0.1.2, on the
//!   workspace's `open-feature` 0.3) through an OpenFeature client, against a server
//!   in process, for every flag of the OFREP data set: values, variants, reasons and
//!   error codes.
//!
//! What `open-feature-ofrep` 0.1.2 does with the answers (so what is asserted): it
//! reports every success with the reason `STATIC` (it ignores the server's reason;
//! the server's reasons are checked over raw HTTP in `adapters/server/tests/ofrep.rs`)
//! and the server's `variant`; it makes any `400` `INVALID_CONTEXT` (whatever the
//! body's `errorCode`), `404` `FLAG_NOT_FOUND`, `401`/`403` `GENERAL`, and a success
//! without a `value` (OFREP's code default) or of another type `PARSE_ERROR`. It sends
//! a structure in the context as its `Debug` text, so multi-kind contexts cannot go
//! through it (the table below checks them).

use flagsync_core::store::{Change, ChangeSet, Store};
use flagsync_core::{Kind, Snapshot};
use flagsync_eval::{Context, Reason};
use flagsync_server::{Server, ofrep_context};
use open_feature::provider::FeatureProvider;
use open_feature::{
    EvaluationContext, EvaluationContextFieldValue as F, EvaluationErrorCode as Code,
    EvaluationReason, OpenFeature, StructValue,
};
use open_feature_ofrep::{OfrepOptions, OfrepProvider};
use serde_json::{Value, json};

const KEY: &str = "sdk-ofrep-provider";
const DATA: &str = include_str!("../../server/tests/data/ofrep.json");

/// The OpenFeature context an OFREP client would send as `json`.
fn of_context(json: &Value) -> EvaluationContext {
    let mut c = EvaluationContext::default();
    for (name, value) in json.as_object().unwrap() {
        if name == "targetingKey" {
            if let Some(k) = value.as_str() {
                c = c.with_targeting_key(k);
            }
            continue;
        }
        c = match value {
            Value::Bool(b) => c.with_custom_field(name, *b),
            Value::String(s) => c.with_custom_field(name, s.as_str()),
            Value::Number(n) if n.is_i64() => c.with_custom_field(name, n.as_i64().unwrap()),
            Value::Number(n) => c.with_custom_field(name, n.as_f64().unwrap()),
            Value::Null => c,
            other => c.with_custom_field(name, F::new_struct(other.clone())),
        };
    }
    c
}

/// Both mappings' answers, errors as OFREP's codes.
fn both(json: &Value) -> (Result<Context, String>, Result<Context, String>) {
    let server = ofrep_context(json).map_err(|e| e.code.to_owned());
    let provider = flagsync_openfeature::to_context(&of_context(json)).map_err(|e| match e.code {
        Code::TargetingKeyMissing => "TARGETING_KEY_MISSING".to_owned(),
        Code::InvalidContext => "INVALID_CONTEXT".to_owned(),
        other => format!("{other:?}"),
    });
    (server, provider)
}

#[test]
fn the_servers_context_mapping_is_the_providers() {
    let cases = [
        json!({"targetingKey": "u1"}),
        json!({"targetingKey": "u1", "key": "k"}),
        json!({"key": "k"}),
        json!({"targetingKey": "", "key": "k"}),
        json!({"key": 5}),
        json!({"targetingKey": ""}),
        json!({}),
        json!({"email": "a@b.c"}),
        json!({"targetingKey": "o1", "kind": "org"}),
        json!({"targetingKey": "u", "kind": true}),
        json!({"targetingKey": "u", "kind": "kind"}),
        json!({"targetingKey": "u", "kind": "has space"}),
        json!({"targetingKey": "u", "kind": ""}),
        json!({"targetingKey": "u", "name": "Ada", "anonymous": true}),
        json!({"targetingKey": "u", "name": 3, "anonymous": "yes"}),
        json!({"targetingKey": "u", "privateAttributes": ["email", "/address/street"], "email": "x"}),
        json!({"targetingKey": "u", "privateAttributes": "email"}),
        json!({"targetingKey": "u", "privateAttributes": ["a", 1]}),
        json!({"targetingKey": "u", "n": 3, "f": 2.5, "b": false, "s": "x",
               "list": [1, "two", {"three": 3}], "obj": {"a": {"b": [true]}}}),
        json!({"kind": "multi", "user": {"targetingKey": "u1", "name": "Ann"},
               "org": {"key": "o1", "privateAttributes": ["plan"], "plan": "gold"}}),
        json!({"kind": "multi", "user": {"targetingKey": "u1"}, "note": "not an object"}),
        json!({"kind": "multi", "user": {"name": "no key"}, "org": {"key": "o1"}}),
        json!({"kind": "multi"}),
        json!({"kind": "multi", "user": {"targetingKey": "u1"}, "bad kind": {"key": "x"}}),
        json!({"kind": "multi", "user": {"targetingKey": "u1", "kind": "ignored", "anonymous": true}}),
    ];
    for case in &cases {
        let (server, provider) = both(case);
        assert_eq!(server, provider, "{case}");
    }
}

/// The data set as the engine reads it.
fn snapshot(data: &Value) -> Snapshot {
    let mut changes = Vec::new();
    for (kind, field) in [(Kind::Flag, "flags"), (Kind::Segment, "segments")] {
        for item in data[field].as_object().unwrap().values() {
            let raw = bytes::Bytes::from(item.to_string());
            changes.push(Change::from_json(kind, raw).unwrap());
        }
    }
    let mut store = Store::new();
    store.apply(ChangeSet::fdv1_full(changes));
    store.snapshot()
}

/// What the provider must give: `Ok((value as JSON, variant))` or the error code.
fn expected(snap: &Snapshot, flag: &str, context: &Context) -> Result<(Value, String), Code> {
    use flagsync_eval::{Options, SlotModels, evaluate_flag};
    evaluate_flag(
        snap,
        &SlotModels,
        flag,
        context,
        Options::default(),
        |_, d| {
            match (&d.reason, d.value, d.variation_index) {
                (Reason::Error { error, .. }, _, _) if error.as_str() == "FLAG_NOT_FOUND" => {
                    Err(Code::FlagNotFound)
                }
                // A malformed flag is a 400, which the provider reads as INVALID_CONTEXT.
                (Reason::Error { .. }, _, _) => Err(Code::InvalidContext),
                (_, Some(v), Some(i)) => {
                    // A whole number is an integer on the wire (and to the provider).
                    let v = serde_json::to_value(v).unwrap();
                    let v = match v.as_f64() {
                        Some(n) if v.is_f64() && n.fract() == 0.0 => json!(n as i64),
                        _ => v,
                    };
                    Ok((v, i.to_string()))
                }
                // A code default (no value): the provider finds no value to parse.
                _ => Err(Code::ParseError),
            }
        },
    )
}

/// The typed evaluation a flag's first variation calls for, as JSON.
async fn resolve(
    client: &open_feature::Client,
    flag: &str,
    kind: &Value,
    ctx: &EvaluationContext,
) -> Result<(Value, Option<String>, Option<EvaluationReason>), Code> {
    macro_rules! details {
        ($method:ident, $conv:expr) => {
            client
                .$method(flag, Some(ctx), None)
                .await
                .map(|d| ($conv(d.value), d.variant, d.reason))
                .map_err(|e| e.code)
        };
    }
    match kind {
        Value::Bool(_) => details!(get_bool_details, Value::Bool),
        Value::String(_) => details!(get_string_details, Value::String),
        Value::Number(n) if n.is_i64() => details!(get_int_details, Value::from),
        Value::Number(_) => details!(get_float_details, Value::from),
        _ => client
            .get_struct_details::<StructValue>(flag, Some(ctx), None)
            .await
            .map(|d| (struct_json(d.value), d.variant, d.reason))
            .map_err(|e| e.code),
    }
}

fn struct_json(s: StructValue) -> Value {
    fn value(v: &open_feature::Value) -> Value {
        match v {
            open_feature::Value::Bool(b) => json!(b),
            open_feature::Value::Int(i) => json!(i),
            open_feature::Value::Float(f) => json!(f),
            open_feature::Value::String(s) => json!(s),
            open_feature::Value::Array(a) => a.iter().map(value).collect(),
            open_feature::Value::Struct(s) => s
                .fields
                .iter()
                .map(|(k, v)| (k.clone(), value(v)))
                .collect(),
        }
    }
    s.fields
        .iter()
        .map(|(k, v)| (k.clone(), value(v)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ofrep_provider_reads_every_flag() {
    let data: Value = serde_json::from_str(DATA).unwrap();
    let server = Server::builder()
        .sdk_key(Some(KEY.into()))
        .data(data.clone())
        .start()
        .unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    let bearer = format!("Bearer {KEY}");
    headers.insert("Authorization", bearer.parse().unwrap());
    let options = OfrepOptions {
        base_url: server.url(),
        headers,
        ..Default::default()
    };
    let provider = OfrepProvider::new(options.clone()).await.unwrap();
    assert_eq!(provider.metadata().name, "ofrep");
    let mut api = OpenFeature::singleton_mut().await;
    api.set_provider(provider).await;
    let client = api.create_client();
    drop(api);

    let snap = snapshot(&data);
    let contexts = [
        json!({"targetingKey": "u1"}),
        json!({"targetingKey": "u-target"}),
        json!({"targetingKey": "u2", "email": "ann@vip.example"}),
        json!({"targetingKey": "u-beta", "plan": "gold", "seats": 3, "ratio": 0.5}),
        json!({"targetingKey": "o1", "kind": "org"}),
        json!({"key": "zz", "anonymous": true}),
    ];
    let flags = data["flags"].as_object().unwrap();
    let mut checked = 0;
    for ctx_json in &contexts {
        let context = ofrep_context(ctx_json).unwrap();
        let ctx = of_context(ctx_json);
        for (flag, body) in flags {
            let kind = &body["variations"][0];
            let got = resolve(&client, flag, kind, &ctx).await;
            match expected(&snap, flag, &context) {
                Ok((value, variant)) => {
                    let (v, var, reason) =
                        got.unwrap_or_else(|e| panic!("{flag} {ctx_json}: {e:?}"));
                    assert_eq!(v, value, "{flag} {ctx_json}");
                    assert_eq!(var.as_deref(), Some(variant.as_str()), "{flag}");
                    assert_eq!(reason, Some(EvaluationReason::Static), "{flag}");
                }
                Err(code) => assert_eq!(got.unwrap_err(), code, "{flag} {ctx_json}"),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, contexts.len() * flags.len());

    // Error codes beyond the data: an unknown flag, no key, a value of another type,
    // and a key the server refuses.
    let u1 = of_context(&json!({"targetingKey": "u1"}));
    let code = |r: Result<_, open_feature::EvaluationError>| {
        r.map(|_: open_feature::EvaluationDetails<bool>| ())
            .unwrap_err()
            .code
    };
    assert_eq!(
        code(client.get_bool_details("nope", Some(&u1), None).await),
        Code::FlagNotFound
    );
    let no_key = of_context(&json!({"email": "x"}));
    assert_eq!(
        code(
            client
                .get_bool_details("bool-flag", Some(&no_key), None)
                .await
        ),
        Code::InvalidContext
    );
    assert_eq!(
        code(
            client
                .get_bool_details("string-flag", Some(&u1), None)
                .await
        ),
        Code::ParseError
    );
    // The provider's value falls back to the caller's default on errors.
    assert!(
        client
            .get_bool_value("nope", Some(&u1), None)
            .await
            .is_err()
    );

    let wrong = OfrepProvider::new(OfrepOptions {
        headers: {
            let mut h = reqwest::header::HeaderMap::new();
            h.insert("X-API-Key", "wrong".parse().unwrap());
            h
        },
        ..options.clone()
    })
    .await
    .unwrap();
    let err = wrong
        .resolve_bool_value("bool-flag", &u1)
        .await
        .unwrap_err();
    assert!(matches!(err.code, Code::General(_)), "{err:?}");
    // X-API-Key with the right key works as Bearer does.
    let api_key = OfrepProvider::new(OfrepOptions {
        headers: {
            let mut h = reqwest::header::HeaderMap::new();
            h.insert("X-API-Key", KEY.parse().unwrap());
            h
        },
        ..options
    })
    .await
    .unwrap();
    let ok = api_key.resolve_int_value("int-flag", &u1).await.unwrap();
    assert_eq!((ok.value, ok.variant.as_deref()), (2, Some("0")));
    server.shutdown();
}
