//! The configuration of a relay (`flagsync serve --relay FILE`): the environments it
//! serves, each kept in sync with an upstream flag service by SDK key, and where
//! their events go.
//!
//! The file is JSON:
//!
//! ```json
//! {
//!   "upstream": "https://relay-upstream.example",
//!   "eventsUri": "https://events.example",
//!   "protocol": "fdv2",
//!   "initTimeoutSecs": 10,
//!   "environments": {
//!     "production": {"sdkKey": "sdk-prod-…", "envId": "prod", "redisPrefix": "{ld}:prod"},
//!     "staging": {"sdkKey": "sdk-staging-…", "streamUri": "http://127.0.0.1:9000"}
//!   }
//! }
//! ```
//!
//! `upstream` is the base URI of both the streaming and the polling service (set them
//! apart with `streamUri` and `pollingUri`), `eventsUri` the events service (no
//! forwarding without one); each environment may override any of them. `protocol`
//! is `fdv2` (the default) or `fdv1`. Unknown fields are refused, so a misspelt
//! option is not silently ignored.

use std::collections::BTreeMap;
use std::time::Duration;

use flagsync_core::config::sdk_key_is_well_formed;
use flagsync_core::endpoint::Url;
use serde::Deserialize;

/// The largest configuration file read (1 MiB).
pub const MAX_RELAY_CONFIG_BYTES: usize = 1 << 20;

/// The protocol a relay uses upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UpstreamProtocol {
    /// FDv2 (the default data system: streaming, polling fallback).
    #[default]
    Fdv2,
    /// FDv1 streaming.
    Fdv1,
}

/// One environment of a relay, resolved against the file's defaults.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayEnvironment {
    /// Its name (in logs and events; never the key).
    pub name: String,
    /// The SDK key: upstream and downstream alike.
    pub sdk_key: String,
    /// Sent as `X-LD-EnvID` downstream.
    pub env_id: Option<String>,
    /// The upstream streaming service's base URI.
    pub stream_uri: String,
    /// The upstream polling service's base URI.
    pub polling_uri: String,
    /// The upstream events service's base URI; `None`: events are accepted and dropped.
    pub events_uri: Option<String>,
    /// The Redis key prefix its data is kept under, when the relay keeps it in Redis.
    pub redis_prefix: Option<String>,
}

impl std::fmt::Debug for RelayEnvironment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayEnvironment")
            .field("name", &self.name)
            .field("sdk_key", &"<redacted>")
            .field("env_id", &self.env_id)
            .field("stream_uri", &self.stream_uri)
            .field("polling_uri", &self.polling_uri)
            .field("events_uri", &self.events_uri)
            .field("redis_prefix", &self.redis_prefix)
            .finish()
    }
}

/// A relay's configuration: see the [module docs](self).
///
/// ```
/// use flagsync_server::RelayConfig;
///
/// let config = RelayConfig::parse(br#"{"upstream": "http://127.0.0.1:8030",
///     "environments": {"prod": {"sdkKey": "sdk-1"}}}"#)?;
/// assert_eq!(config.environments[0].stream_uri, "http://127.0.0.1:8030");
/// assert!(RelayConfig::parse(br#"{"environments": {}}"#).is_err()); // none to serve
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayConfig {
    /// FDv2 or FDv1 upstream.
    pub protocol: UpstreamProtocol,
    /// How long an environment without data answers its SDKs `503`.
    pub init_timeout: Duration,
    /// The environments, sorted by name.
    pub environments: Vec<RelayEnvironment>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    upstream: Option<String>,
    stream_uri: Option<String>,
    polling_uri: Option<String>,
    events_uri: Option<String>,
    #[serde(default)]
    protocol: UpstreamProtocol,
    init_timeout_secs: Option<u64>,
    environments: BTreeMap<String, FileEnv>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileEnv {
    sdk_key: String,
    env_id: Option<String>,
    upstream: Option<String>,
    stream_uri: Option<String>,
    polling_uri: Option<String>,
    events_uri: Option<String>,
    redis_prefix: Option<String>,
}

impl RelayConfig {
    /// Read a configuration file's bytes. Errors name the field at fault, never a key.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() > MAX_RELAY_CONFIG_BYTES {
            return Err(format!(
                "the relay configuration is larger than {MAX_RELAY_CONFIG_BYTES} bytes"
            ));
        }
        let file: File = serde_json::from_slice(bytes)
            .map_err(|e| format!("the relay configuration is not valid: {e}"))?;
        if file.environments.is_empty() {
            return Err("the relay configuration names no environment".into());
        }
        let init_timeout = Duration::from_secs(file.init_timeout_secs.unwrap_or(10).min(3600));
        let mut environments = Vec::with_capacity(file.environments.len());
        let mut keys = std::collections::BTreeSet::new();
        for (name, env) in file.environments {
            check_key(&name, &env.sdk_key)?;
            if !keys.insert(env.sdk_key.clone()) {
                return Err(format!(
                    "environment {name:?} has the SDK key of another environment"
                ));
            }
            let base = env.upstream.as_ref().or(file.upstream.as_ref());
            let pick = |own: &Option<String>, shared: &Option<String>, what: &str| {
                own.clone()
                    .or_else(|| shared.clone())
                    .or_else(|| base.cloned())
                    .ok_or_else(|| {
                        format!(
                            "environment {name:?} has no {what} (set \"upstream\" or \"{what}\")"
                        )
                    })
            };
            let stream_uri = pick(&env.stream_uri, &file.stream_uri, "streamUri")?;
            let polling_uri = pick(&env.polling_uri, &file.polling_uri, "pollingUri")?;
            let events_uri = env.events_uri.or_else(|| file.events_uri.clone());
            for uri in [Some(&stream_uri), Some(&polling_uri), events_uri.as_ref()]
                .into_iter()
                .flatten()
            {
                check_uri(&name, uri)?;
            }
            environments.push(RelayEnvironment {
                name,
                sdk_key: env.sdk_key,
                env_id: env.env_id,
                stream_uri,
                polling_uri,
                events_uri,
                redis_prefix: env.redis_prefix,
            });
        }
        Ok(Self {
            protocol: file.protocol,
            init_timeout,
            environments,
        })
    }
}

fn check_key(name: &str, key: &str) -> Result<(), String> {
    if !key.is_empty() && sdk_key_is_well_formed(key) {
        Ok(())
    } else {
        Err(format!(
            "environment {name:?}: the SDK key is malformed (letters, digits, '.', '_' and '-' only)"
        ))
    }
}

/// An upstream URI is one the SDK's own parser takes: `http://` or `https://` (the
/// scheme in any case, as RFC 3986 has it), a host, no whitespace.
fn check_uri(name: &str, uri: &str) -> Result<(), String> {
    Url::parse(uri).map(|_| ()).map_err(|e| {
        format!("environment {name:?}: {uri:?} is not an http:// or https:// URI: {e}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let c = RelayConfig::parse(
            br#"{"upstream": "http://up", "eventsUri": "http://ev", "protocol": "fdv1",
                 "initTimeoutSecs": 3, "environments": {
                   "b": {"sdkKey": "k2", "streamUri": "https://s", "redisPrefix": "{ld}:b"},
                   "a": {"sdkKey": "k1", "envId": "e1", "eventsUri": "http://own"}}}"#,
        )
        .unwrap();
        assert_eq!(c.protocol, UpstreamProtocol::Fdv1);
        assert_eq!(c.init_timeout, Duration::from_secs(3));
        let (a, b) = (&c.environments[0], &c.environments[1]);
        assert_eq!((a.name.as_str(), a.sdk_key.as_str()), ("a", "k1"));
        assert_eq!(a.stream_uri, "http://up");
        assert_eq!(a.events_uri.as_deref(), Some("http://own"));
        assert_eq!(b.stream_uri, "https://s");
        assert_eq!(b.polling_uri, "http://up");
        assert_eq!(b.events_uri.as_deref(), Some("http://ev"));
        assert_eq!(b.redis_prefix.as_deref(), Some("{ld}:b"));
        assert!(!format!("{a:?}").contains("k1"), "the key never shows");
    }

    #[test]
    fn a_scheme_in_any_case_is_the_scheme() {
        let c = RelayConfig::parse(
            br#"{"upstream": "HTTPS://up", "environments": {"a": {"sdkKey": "k", "streamUri": "Http://s"}}}"#,
        )
        .unwrap();
        let a = &c.environments[0];
        assert_eq!(Url::parse(&a.polling_uri).unwrap().origin(), "https://up");
        assert_eq!(Url::parse(&a.stream_uri).unwrap().origin(), "http://s");
    }

    #[test]
    fn refusals() {
        for (bad, why) in [
            (&br#"{"environments": {"a": {"sdkKey": "k"}}}"#[..], "streamUri"),
            (br#"{"upstream": "ftp://x", "environments": {"a": {"sdkKey": "k"}}}"#, "not an http"),
            (br#"{"upstream": "http://x", "environments": {"a": {"sdkKey": "k y"}}}"#, "malformed"),
            (br#"{"upstream": "http://x", "environments": {"a": {"sdkKey": "k"}, "b": {"sdkKey": "k"}}}"#, "another environment"),
            (br#"{"upstream": "http://x", "enviroments": {}}"#, "unknown field"),
            (br#"{"upstream": "http://x", "environments": {}}"#, "no environment"),
            (b"[", "not valid"),
        ] {
            let e = RelayConfig::parse(bad).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }
}
