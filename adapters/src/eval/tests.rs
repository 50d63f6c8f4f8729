//! The client's model cache (models kept beside items, shelved by version, swept), a
//! client without data, and the secure mode hash through the client.

use std::sync::Arc;

use flagsync_core::Snapshot;
use flagsync_eval::{Models, MultiContextBuilder, Options};
use serde_json::{Value, json};

use super::{Context, ContextBuilder, Detail, EvalError, FlagValue, ModelCache, Reason};

/// A snapshot holding `flags` and `segments` (JSON objects with key and version).
fn snapshot(flags: &[Value], segments: &[Value]) -> Snapshot {
    flagsync_core::testing::snapshot_of(flags, segments)
}

fn ours(
    snapshot: &Snapshot,
    models: &ModelCache,
    key: &str,
    context: &Context,
) -> Detail<FlagValue> {
    super::evaluate_in(
        snapshot,
        models,
        None,
        key,
        context,
        Options::default(),
        |_, d| d.map(Clone::clone),
    )
}

fn user(key: &str) -> Context {
    ContextBuilder::new(key).build().unwrap()
}

#[test]
fn a_model_is_kept_beside_its_item_and_found_there_first() {
    let flag = json!({"key": "f", "version": 1, "on": true, "variations": [false, true],
                      "fallthrough": {"variation": 1}});
    let snap = snapshot(std::slice::from_ref(&flag), &[]);
    let models = ModelCache::default();
    let a = models.live_flag(&snap, "f").unwrap();
    let (_, derived) = snap
        .get_with_derived(flagsync_core::Kind::Flag, "f")
        .unwrap();
    let kept = derived.get::<Option<Arc<flagsync_eval::Flag>>>().unwrap();
    assert!(Arc::ptr_eq(kept.as_ref().unwrap(), &a));
    // Another cache (no shelf entry) still finds the model beside the item.
    let b = ModelCache::default().live_flag(&snap, "f").unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    // The same version stored again (a new stored item) comes from the shelf: no parse.
    let again = snapshot(&[flag], &[]);
    assert!(Arc::ptr_eq(&models.live_flag(&again, "f").unwrap(), &a));
    // An item the engine cannot read is remembered as such beside it.
    let bad = snapshot(&[json!({"key": "g", "version": 1, "variations": 3})], &[]);
    assert!(models.live_flag(&bad, "g").is_none());
    let (_, derived) = bad
        .get_with_derived(flagsync_core::Kind::Flag, "g")
        .unwrap();
    assert!(matches!(
        derived.get::<Option<Arc<flagsync_eval::Flag>>>(),
        Some(None)
    ));
}

#[test]
fn models_are_parsed_once_per_version_and_shared() {
    let flag = |v: u64, on: bool| {
        json!({"key": "f", "version": v, "on": on, "salt": "", "variations": [false, true],
               "offVariation": 0, "fallthrough": {"variation": 1}, "targets": [], "rules": [],
               "prerequisites": []})
    };
    let models = ModelCache::default();
    let old = snapshot(&[flag(1, true)], &[]);
    let a = models.live_flag(&old, "f").unwrap();
    let b = models.live_flag(&old, "f").unwrap();
    assert!(Arc::ptr_eq(&a, &b), "one parse per version");
    let new = snapshot(&[flag(2, false)], &[]);
    let c = models.live_flag(&new, "f").unwrap();
    assert_eq!((c.version, models.len()), (2, (1, 0)));
    // A reader still on the old snapshot gets its own version, and the newer entry stays.
    assert_eq!(models.live_flag(&old, "f").unwrap().version, 1);
    assert!(Arc::ptr_eq(&models.live_flag(&new, "f").unwrap(), &c));
    let ctx = user("u");
    assert_eq!(
        ours(&old, &models, "f", &ctx).value,
        Some(FlagValue::Bool(true))
    );
    assert_eq!(
        ours(&new, &models, "f", &ctx).value,
        Some(FlagValue::Bool(false))
    );
}

#[test]
fn entries_of_deleted_items_are_swept() {
    let models = ModelCache::default();
    let flag = |k: usize| {
        json!({"key": format!("f{k}"), "version": 1, "on": false, "salt": "", "variations": [0],
               "offVariation": 0, "fallthrough": {"variation": 0}, "targets": [], "rules": [],
               "prerequisites": []})
    };
    let all: Vec<Value> = (0..5000).map(flag).collect();
    let snap = snapshot(&all, &[]);
    for k in 0..4000 {
        models.live_flag(&snap, &format!("f{k}")).unwrap();
    }
    assert_eq!(models.len().0, 4000);
    // The store now holds the first 100 and 200 new ones; the insertion that triggers
    // the sweep (every 4096th) drops the entries of the 3,900 flags that left.
    let bigger: Vec<Value> = all[..100]
        .iter()
        .cloned()
        .chain((5000..5200).map(flag))
        .collect();
    let later = snapshot(&bigger, &[]);
    for k in 5000..5200 {
        models.live_flag(&later, &format!("f{k}")).unwrap();
    }
    assert!(models.len().0 <= 300, "{} entries left", models.len().0);
}

#[test]
fn a_client_without_data_answers_defaults_with_client_not_ready() {
    let client = crate::Client::builder("sdk-key").build().unwrap();
    let ctx = user("u");
    let not_ready = Reason::error(EvalError::ClientNotReady);
    assert!(client.bool_variation("f", &ctx, true));
    let d = client.bool_variation_detail("f", &ctx, true);
    assert_eq!(
        (d.value, d.variation_index, d.reason),
        (Some(true), None, not_ready.clone())
    );
    assert_eq!(client.string_variation("f", &ctx, "dflt"), "dflt");
    assert_eq!(
        client.float_variation_detail("f", &ctx, 1.5).reason,
        not_ready
    );
    assert_eq!(client.int_variation("f", &ctx, 7), 7);
    assert_eq!(
        client.json_variation("f", &ctx, json!({"a": 1})),
        json!({"a": 1})
    );
    assert_eq!(
        client.variation("f", &ctx, "x".to_owned()),
        FlagValue::Str("x".into())
    );
    let state = client.all_flags_state(&ctx, super::AllFlagsOptions::new());
    assert!(!state.valid() && state.is_empty());
    assert_eq!(state.to_json(), r#"{"$flagsState":{},"$valid":false}"#);
}

/// The sdk-test-harness's cases (sdktests/server_side_secure_mode_hash.go, taken from
/// the Go SDK), then the multi-kind and plain cases of LaunchDarkly's Rust SDK
/// (launchdarkly-server-sdk src/client.rs, tests `secure_mode_hash*`).
#[test]
fn secure_mode_hash_matches_the_reference_vectors() {
    let key1 = "sdk-01234567-89ab-cdef-0123-456789abcdef";
    let key2 = "sdk-11234567-89ab-cdef-0123-456789abcdef";
    let mut with_attributes = ContextBuilder::new("user-key-123");
    with_attributes
        .anonymous(true)
        .name("a")
        .set_string("email", "b");
    let other = ContextBuilder::new("user-key-123")
        .kind("other")
        .build()
        .unwrap();
    let multi = MultiContextBuilder::new()
        .add_context(
            ContextBuilder::new("org-key|1")
                .kind("org")
                .build()
                .unwrap(),
        )
        .add_context(user("user-key:2"))
        .build()
        .unwrap();
    let cases = [
        (
            key1,
            user("user-key-123"),
            "73df666a13f2c474e50aa34ca5a761e89abb737fb139ff65fdde7fa85c9dcacd",
        ),
        (
            key1,
            with_attributes.build().unwrap(),
            "73df666a13f2c474e50aa34ca5a761e89abb737fb139ff65fdde7fa85c9dcacd",
        ),
        (
            key2,
            user("user-key-123"),
            "63538426a9845721a5547b4715f4284b060c21743702a896e1ff8a9a5b57215d",
        ),
        (
            key1,
            user("user-key-456"),
            "55be6b5ceb2a11acc6a7e9c60dbee5022d9c7084baf9ecd8cf69d12bce5a92fb",
        ),
        (
            key1,
            other,
            "98a933ca26d2951547fc021981ebcdeda95fbca2ac3f767ae67f7042d5458f72",
        ),
        (
            "secret",
            user("Message"),
            "aa747c502a898200f9e4fa21bac68136f886a0e27aec70ba06daf2e2a5cb5597",
        ),
        (
            "secret",
            multi,
            "5687e6383b920582ed50c2a96c98a115f1b6aad85a60579d761d9b8797415163",
        ),
    ];
    for (sdk_key, context, want) in cases {
        let client = crate::Client::builder(sdk_key).build().unwrap();
        assert_eq!(
            client.secure_mode_hash(&context),
            want,
            "{sdk_key} {:?}",
            context.canonical_key()
        );
        assert_eq!(
            format!("{:?}", client.inner.secure_mode),
            "SecureModeKey(<redacted>)"
        );
    }
    // The key the client sends is the one it hashes with, however it was set.
    let client = crate::Client::builder("sdk-other")
        .core_config(|c| c.identity.sdk_key = key2.to_owned())
        .build()
        .unwrap();
    assert_eq!(
        client.secure_mode_hash(&user("user-key-123")),
        "63538426a9845721a5547b4715f4284b060c21743702a896e1ff8a9a5b57215d"
    );
}
