//! The relay's configuration file (`flagsync serve --relay FILE`,
//! `flagsync_server::RelayConfig`): arbitrary bytes, alone and as one environment of
//! an otherwise valid file. No panic; what is accepted names at least one environment,
//! each with a well-formed, distinct SDK key and upstream URIs the SDK's own URL
//! parser takes (http or https, the scheme in any case), and its `Debug`
//! never shows a key.
#![no_main]

use std::collections::BTreeSet;

use flagsync_core::endpoint::Url;
use flagsync_server::RelayConfig;
use libfuzzer_sys::fuzz_target;

fn check(bytes: &[u8]) {
    let Ok(config) = RelayConfig::parse(bytes) else {
        return;
    };
    assert!(!config.environments.is_empty());
    let mut keys = BTreeSet::new();
    for env in &config.environments {
        assert!(
            keys.insert(env.sdk_key.clone()),
            "a key serves two environments"
        );
        assert!(!env.sdk_key.is_empty());
        assert!(
            env.sdk_key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        );
        for uri in [
            Some(&env.stream_uri),
            Some(&env.polling_uri),
            env.events_uri.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            assert!(Url::parse(uri).is_ok(), "{uri}");
        }
        if env.sdk_key.len() >= 8 {
            let shown = format!("{env:?}");
            let elsewhere = [&env.name, &env.stream_uri, &env.polling_uri]
                .into_iter()
                .chain(env.events_uri.as_ref())
                .chain(env.env_id.as_ref())
                .chain(env.redis_prefix.as_ref())
                .any(|field| field.contains(&env.sdk_key));
            assert!(
                elsewhere || !shown.contains(&env.sdk_key),
                "Debug shows the key"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut wrapped = br#"{"upstream":"http://127.0.0.1:1","environments":{"e":"#.to_vec();
    wrapped.extend_from_slice(data);
    wrapped.extend_from_slice(b"}}");
    check(&wrapped);
});
