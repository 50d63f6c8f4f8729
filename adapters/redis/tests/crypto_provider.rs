//! The crypto provider of `rediss://` stores. The redis crate uses rustls' process-wide
//! default provider only, so a store installs flagsync-redis's chosen one (aws-lc-rs
//! with the `aws-lc-rs` feature, else ring) as that default, and is refused when the
//! default is another provider. One test in a process of its own: the default can be
//! installed once per process.
#![cfg(feature = "tls")]

use flagsync_redis::RedisStore;
use rustls::crypto::CryptoProvider;

/// The installed default provider's name, told by its key provider's type.
fn default_provider_name() -> Option<String> {
    CryptoProvider::get_default().map(|p| format!("{:?}", p.key_provider))
}

#[test]
fn rediss_stores_use_the_chosen_crypto_provider() {
    let chosen = flagsync_redis::crypto_provider_name();
    let expected = if cfg!(feature = "aws-lc-rs") {
        "aws-lc-rs"
    } else {
        "ring"
    };
    assert!(chosen.starts_with(expected), "{chosen}");
    assert_eq!(default_provider_name(), None);
    // Both providers compiled in: the application installed ring, flagsync-redis
    // chose aws-lc-rs; the redis crate would use ring, so the store is refused.
    #[cfg(all(feature = "ring", feature = "aws-lc-rs"))]
    {
        rustls::crypto::ring::default_provider()
            .install_default()
            .unwrap();
        let error = RedisStore::builder("rediss://127.0.0.1:1")
            .build()
            .unwrap_err();
        assert!(
            matches!(error, flagsync::persist::StoreError::Config(_)),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains("which is ring in this process") && text.contains("built for aws-lc-rs"),
            "{text}"
        );
        // A plaintext store does not care.
        RedisStore::builder("redis://127.0.0.1:1").build().unwrap();
    }
    // One provider compiled in: the first rediss:// store installs it.
    #[cfg(not(all(feature = "ring", feature = "aws-lc-rs")))]
    {
        RedisStore::builder("redis://127.0.0.1:1").build().unwrap();
        assert_eq!(default_provider_name(), None);
        RedisStore::builder("rediss://127.0.0.1:1").build().unwrap();
        let type_name = if expected == "ring" {
            "Ring"
        } else {
            "AwsLcRs"
        };
        assert_eq!(default_provider_name().as_deref(), Some(type_name));
        // Idempotent: a second store finds its provider installed.
        RedisStore::builder("rediss://127.0.0.1:1").build().unwrap();
    }
}
