//! The context cache: found by content, admitted on the second sighting, bounded in
//! entries and in bytes, never shared by two different contexts.

use std::cell::Cell;
use std::sync::Arc;

use flagsync::eval::{AttributeValue, Context, Reference};
use open_feature::{EvaluationContext, EvaluationContextFieldValue, EvaluationError, StructValue};

use crate::cache::ContextCache;
use crate::context::to_context;

/// Runs `of` through `cache`; answers the flagsync context's canonical key and `email`,
/// and whether it was converted (not found in the cache).
fn look_up(cache: &ContextCache, of: &EvaluationContext) -> (String, Option<String>, bool) {
    let converted = Cell::new(false);
    let convert = |of: &EvaluationContext| -> Result<Context, EvaluationError> {
        converted.set(true);
        to_context(of)
    };
    let (key, email) = cache
        .with_context(of, convert, |c: &Context| {
            let email = c
                .get_value(&Reference::new("email"))
                .and_then(|v| v.as_str().map(str::to_owned));
            (c.canonical_key().to_owned(), email)
        })
        .expect("a valid context");
    (key, email, converted.get())
}

fn user(key: &str, email: &str) -> EvaluationContext {
    EvaluationContext::default()
        .with_targeting_key(key)
        .with_custom_field("email", email)
        .with_custom_field("age", 36_i64)
        .with_custom_field("score", 0.5)
}

#[test]
fn a_context_is_stored_on_its_second_sighting_and_found_after() {
    let cache = ContextCache::new(64, 4096);
    let ada = user("ada", "ada@example.com");
    assert!(look_up(&cache, &ada).2, "first sighting: converted");
    assert_eq!(cache.len(), 0, "and not stored");
    assert!(look_up(&cache, &ada).2, "second sighting: converted");
    assert_eq!(cache.len(), 1, "and stored");
    let (key, email, converted) = look_up(&cache, &ada);
    assert!(!converted, "third: from the cache");
    assert_eq!(key, "ada");
    assert_eq!(email.as_deref(), Some("ada@example.com"));
}

#[test]
fn an_equal_context_built_apart_is_found_whatever_its_field_order() {
    let cache = ContextCache::new(64, 4096);
    let first = user("ada", "ada@example.com");
    look_up(&cache, &first);
    look_up(&cache, &first);
    // Another map (another hasher state, so another iteration order), same content.
    let again = EvaluationContext::default()
        .with_custom_field("score", 0.5)
        .with_custom_field("age", 36_i64)
        .with_custom_field("email", "ada@example.com")
        .with_targeting_key("ada");
    assert!(!look_up(&cache, &again).2);
}

#[test]
fn contexts_that_differ_anywhere_never_share_an_entry() {
    let cache = ContextCache::new(64, 4096);
    let ada = user("ada", "ada@example.com");
    look_up(&cache, &ada);
    look_up(&cache, &ada);
    let variants = [
        user("bob", "ada@example.com"),
        user("ada", "bob@example.com"),
        user("ada", "ada@example.com").with_custom_field("age", 37_i64),
        user("ada", "ada@example.com").with_custom_field("age", 36.0),
        user("ada", "ada@example.com").with_custom_field("score", -0.5),
        user("ada", "ada@example.com").with_custom_field("extra", true),
        EvaluationContext::default()
            .with_custom_field("key", "ada")
            .with_custom_field("email", "ada@example.com")
            .with_custom_field("age", 36_i64)
            .with_custom_field("score", 0.5),
    ];
    for variant in &variants {
        let (key, email, converted) = look_up(&cache, variant);
        assert!(converted, "{variant:?} is not the cached context");
        let expected = to_context(variant).expect("valid");
        assert_eq!(key, expected.canonical_key());
        assert_eq!(
            email,
            expected
                .get_value(&Reference::new("email"))
                .and_then(|v| v.as_str().map(str::to_owned))
        );
    }
}

#[test]
fn a_structure_is_the_same_only_as_the_same_structure() {
    let cache = ContextCache::new(64, 4096);
    let address = StructValue {
        fields: [(
            "city".to_owned(),
            open_feature::Value::String("Paris".into()),
        )]
        .into(),
    };
    let shared = EvaluationContextFieldValue::new_struct(address.clone());
    let with = |v: EvaluationContextFieldValue| {
        EvaluationContext::default()
            .with_targeting_key("ada")
            .with_custom_field("address", v)
    };
    look_up(&cache, &with(shared.clone()));
    look_up(&cache, &with(shared.clone()));
    assert!(
        !look_up(&cache, &with(shared)).2,
        "the same Arc: from the cache"
    );
    assert!(
        look_up(
            &cache,
            &with(EvaluationContextFieldValue::new_struct(address))
        )
        .2,
        "an equal structure in another Arc: converted"
    );
}

#[test]
fn the_cache_holds_at_most_its_entries() {
    let cache = ContextCache::new(16, 4096);
    for i in 0..200 {
        let c = user(&format!("user-{i}"), "x@example.com");
        look_up(&cache, &c);
        look_up(&cache, &c);
        assert!(cache.len() <= 16);
    }
    assert!(cache.len() > 8, "most slots in use: {}", cache.len());
}

#[test]
fn a_context_past_the_entry_limit_is_converted_every_time() {
    let cache = ContextCache::new(16, 4096);
    let big = user("ada", &"x".repeat(4096));
    for _ in 0..3 {
        assert!(look_up(&cache, &big).2);
    }
    assert_eq!(cache.len(), 0);
    // The same limit counts what a structure holds.
    let nested = EvaluationContext::default()
        .with_targeting_key("ada")
        .with_custom_field(
            "blob",
            EvaluationContextFieldValue::new_struct(serde_json::json!({"a": "y".repeat(3000)})),
        );
    for _ in 0..3 {
        assert!(look_up(&cache, &nested).2);
    }
    assert_eq!(cache.len(), 0);
    let small = user("ada", "ada@example.com");
    look_up(&cache, &small);
    look_up(&cache, &small);
    assert_eq!(cache.len(), 1);
}

#[test]
fn a_structure_the_provider_cannot_read_is_never_stored() {
    let cache = ContextCache::new(16, 4096);
    let odd = EvaluationContext::default()
        .with_targeting_key("ada")
        .with_custom_field(
            "odd",
            EvaluationContextFieldValue::new_struct(vec![1u8; 10]),
        );
    for _ in 0..3 {
        assert!(look_up(&cache, &odd).2);
    }
    assert_eq!(cache.len(), 0);
}

#[test]
fn no_entries_means_no_cache() {
    let cache = ContextCache::new(0, 4096);
    let ada = user("ada", "ada@example.com");
    for _ in 0..3 {
        assert!(look_up(&cache, &ada).2);
    }
    assert_eq!(cache.len(), 0);
}

#[test]
fn a_context_that_fails_is_never_stored() {
    let cache = ContextCache::new(16, 4096);
    let keyless = EvaluationContext::default().with_custom_field("email", "a@b");
    for _ in 0..3 {
        let error = cache
            .with_context(&keyless, to_context, |_| ())
            .expect_err("no key");
        assert_eq!(
            error.code,
            open_feature::EvaluationErrorCode::TargetingKeyMissing
        );
    }
    assert_eq!(cache.len(), 0);
}

#[test]
fn a_date_time_is_the_same_only_with_its_offset() {
    use time::{OffsetDateTime, UtcOffset};
    let cache = ContextCache::new(16, 4096);
    let instant = OffsetDateTime::from_unix_timestamp(1_700_000_000).expect("time");
    let at = |t: OffsetDateTime| {
        EvaluationContext::default()
            .with_targeting_key("ada")
            .with_custom_field("seen", t)
    };
    look_up(&cache, &at(instant));
    look_up(&cache, &at(instant));
    assert!(!look_up(&cache, &at(instant)).2);
    let elsewhere = instant.to_offset(UtcOffset::from_hms(2, 0, 0).expect("offset"));
    let converted = Cell::new(false);
    let seen = cache
        .with_context(
            &at(elsewhere),
            |of| {
                converted.set(true);
                to_context(of)
            },
            |c| c.get_value(&Reference::new("seen")),
        )
        .expect("valid");
    assert!(converted.get(), "another offset is another attribute value");
    assert_eq!(
        seen,
        Some(AttributeValue::String("2023-11-15T00:13:20+02:00".into()))
    );
}

#[test]
fn clones_of_the_provider_share_the_cache() {
    let client = Arc::new(
        flagsync::Client::builder("k")
            .send_events(false)
            .build()
            .expect("client"),
    );
    let provider = crate::FlagsyncProvider::new(client).with_context_cache(8, 4096);
    let clone = provider.clone();
    assert!(Arc::ptr_eq(&provider.contexts, &clone.contexts));
}
