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
//!     "staging": {"sdkKey": "sdk-staging-…", "streamUri": "http://127.0.0.1:9000"},
//!     "mobile": {"sdkKey": "sdk-mobile-…", "payloadFilters": ["ios", "android"]}
//!   }
//! }
//! ```
//!
//! `payloadFilters` lists the payload filters (LaunchDarkly's filtered environments)
//! the relay serves for an environment: each is kept in sync upstream with
//! `filter=KEY` and served to SDKs configured with that filter; a request with a
//! filter that is not listed gets `404`, never the whole environment.
//!
//! Where and how the relay listens may be set in the file too (all optional; the
//! command line and the environment win over them):
//!
//! ```json
//! {
//!   "listen": ["0.0.0.0:8030", "[::]:8030"],
//!   "tls": {"certFile": "/etc/flagsync/cert.pem", "keyFile": "/etc/flagsync/key.pem",
//!           "clientCaFile": "/etc/flagsync/clients.pem"},
//!   "maxConnections": 20000, "headTimeoutSecs": 10, "bodyTimeoutSecs": 30,
//!   "idleTimeoutSecs": 60, "maxStreamLifetimeSecs": 3600, "disconnectedStatusTimeSecs": 60
//! }
//! ```
//!
//! Client-side (JavaScript) and mobile SDKs are served too: `envId` is the
//! environment's client-side ID (in their paths), `mobileKey` its mobile key,
//! `secureMode: true` requires their secure mode hash, `allowedOrigin` lists the
//! origins browsers may call from (default: any). `clientSideUri` (file-wide or per
//! environment; default `https://clientsdk.launchdarkly.com`) is where the relay
//! fetches each environment's goals (`GET {clientSideUri}/sdk/goals/{envId}`).
//!
//! ```json
//! {"upstream": "https://relay-upstream.example",
//!  "environments": {"web": {"sdkKey": "sdk-…", "envId": "5f…", "mobileKey": "mob-…",
//!                           "secureMode": true, "allowedOrigin": ["https://app.example"]}}}
//! ```
//!
//! `upstream` is the base URI of both the streaming and the polling service (set them
//! apart with `streamUri` and `pollingUri`), `eventsUri` the events service (no
//! forwarding without one); each environment may override any of them. `protocol`
//! is `fdv2` (the default) or `fdv1`. Unknown fields are refused, so a misspelt
//! option is not silently ignored.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use flagsync_core::config::sdk_key_is_well_formed;
use flagsync_core::endpoint::Url;
use serde::Deserialize;

use crate::builder::ServerBuilder;
use crate::tls::TlsSettings;

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
    /// The payload filters served beside the whole environment (`payloadFilters`).
    pub payload_filters: Vec<String>,
    /// The mobile key its mobile SDKs send (`mobileKey`); never logged.
    pub mobile_key: Option<String>,
    /// Client-side SDKs must send the secure mode hash (`secureMode`).
    pub secure_mode: bool,
    /// The origins browsers may call from (`allowedOrigin`); empty: any.
    pub allowed_origins: Vec<String>,
    /// The base URI goals are fetched from (`clientSideUri`).
    pub client_side_uri: String,
}

/// Where a relay fetches goals when no `clientSideUri` is given: LaunchDarkly's
/// client-side service.
pub const DEFAULT_CLIENT_SIDE_URI: &str = "https://clientsdk.launchdarkly.com";

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
            .field("payload_filters", &self.payload_filters)
            .field(
                "mobile_key",
                &self.mobile_key.as_ref().map(|_| "<redacted>"),
            )
            .field("secure_mode", &self.secure_mode)
            .field("allowed_origins", &self.allowed_origins)
            .field("client_side_uri", &self.client_side_uri)
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
    /// Where and how it listens, as far as the file says.
    pub network: NetworkConfig,
}

/// Where and how a relay listens, as far as its file says (every field optional).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NetworkConfig {
    /// The addresses to listen on (`listen`).
    pub listen: Vec<SocketAddr>,
    /// TLS (`tls`: `certFile`, `keyFile`, `clientCaFile`).
    pub tls: Option<TlsSettings>,
    /// `maxConnections`.
    pub max_connections: Option<usize>,
    /// `headTimeoutSecs`.
    pub head_timeout: Option<Duration>,
    /// `bodyTimeoutSecs`.
    pub body_timeout: Option<Duration>,
    /// `idleTimeoutSecs`.
    pub idle_timeout: Option<Duration>,
    /// `maxStreamLifetimeSecs`.
    pub max_stream_lifetime: Option<Duration>,
    /// `disconnectedStatusTimeSecs`.
    pub disconnected_status_time: Option<Duration>,
}

impl NetworkConfig {
    /// `builder` with every setting given here.
    pub fn apply(&self, mut builder: ServerBuilder) -> ServerBuilder {
        for addr in &self.listen {
            builder = builder.listen(*addr);
        }
        if let Some(tls) = &self.tls {
            builder = builder.tls(tls.clone());
        }
        if let Some(n) = self.max_connections {
            builder = builder.max_connections(n);
        }
        if let Some(t) = self.head_timeout {
            builder = builder.head_timeout(t);
        }
        if let Some(t) = self.body_timeout {
            builder = builder.body_timeout(t);
        }
        if let Some(t) = self.idle_timeout {
            builder = builder.idle_timeout(t);
        }
        if let Some(t) = self.max_stream_lifetime {
            builder = builder.max_stream_lifetime(t);
        }
        if let Some(t) = self.disconnected_status_time {
            builder = builder.disconnected_status_time(t);
        }
        builder
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileTls {
    cert_file: PathBuf,
    key_file: PathBuf,
    client_ca_file: Option<PathBuf>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct File {
    upstream: Option<String>,
    stream_uri: Option<String>,
    polling_uri: Option<String>,
    events_uri: Option<String>,
    client_side_uri: Option<String>,
    #[serde(default)]
    protocol: UpstreamProtocol,
    init_timeout_secs: Option<u64>,
    environments: BTreeMap<String, FileEnv>,
    #[serde(default)]
    listen: Vec<String>,
    tls: Option<FileTls>,
    max_connections: Option<usize>,
    head_timeout_secs: Option<f64>,
    body_timeout_secs: Option<f64>,
    idle_timeout_secs: Option<f64>,
    max_stream_lifetime_secs: Option<f64>,
    disconnected_status_time_secs: Option<f64>,
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
    #[serde(default)]
    payload_filters: Vec<String>,
    mobile_key: Option<String>,
    #[serde(default)]
    secure_mode: bool,
    #[serde(default)]
    allowed_origin: Vec<String>,
    client_side_uri: Option<String>,
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
            let client_side_uri = env
                .client_side_uri
                .or_else(|| file.client_side_uri.clone())
                .unwrap_or_else(|| DEFAULT_CLIENT_SIDE_URI.to_owned());
            if env.secure_mode && env.env_id.is_none() {
                return Err(format!(
                    "environment {name:?} has \"secureMode\" but no \"envId\" (its client-side ID)"
                ));
            }
            if env.mobile_key.as_deref() == Some("") {
                return Err(format!("environment {name:?} has an empty \"mobileKey\""));
            }
            for uri in [
                Some(&stream_uri),
                Some(&polling_uri),
                events_uri.as_ref(),
                Some(&client_side_uri),
            ]
            .into_iter()
            .flatten()
            {
                check_uri(&name, uri)?;
            }
            let mut filters = std::collections::BTreeSet::new();
            for filter in &env.payload_filters {
                if !valid_filter(filter) {
                    return Err(format!(
                        "environment {name:?}: payload filter {filter:?} is not a filter key (letters, digits, '.', '_' and '-', starting with a letter or digit)"
                    ));
                }
                if !filters.insert(filter) {
                    return Err(format!(
                        "environment {name:?} lists payload filter {filter:?} twice"
                    ));
                }
            }
            environments.push(RelayEnvironment {
                name,
                sdk_key: env.sdk_key,
                env_id: env.env_id,
                stream_uri,
                polling_uri,
                events_uri,
                redis_prefix: env.redis_prefix,
                payload_filters: env.payload_filters,
                mobile_key: env.mobile_key,
                secure_mode: env.secure_mode,
                allowed_origins: env.allowed_origin,
                client_side_uri,
            });
        }
        let mut listen = Vec::with_capacity(file.listen.len());
        for addr in &file.listen {
            listen.push(addr.parse().map_err(|_| {
                format!(
                    "\"listen\": {addr:?} is not ADDR:PORT (such as 0.0.0.0:8030 or [::1]:8030)"
                )
            })?);
        }
        let secs = |v: Option<f64>, what: &str| {
            v.map(|s| {
                Duration::try_from_secs_f64(s)
                    .map_err(|_| format!("\"{what}\" must be a non-negative number of seconds"))
            })
            .transpose()
        };
        let network = NetworkConfig {
            listen,
            tls: file.tls.map(|t| {
                let tls = TlsSettings::new(t.cert_file, t.key_file);
                match t.client_ca_file {
                    Some(ca) => tls.client_ca(ca),
                    None => tls,
                }
            }),
            max_connections: file.max_connections,
            head_timeout: secs(file.head_timeout_secs, "headTimeoutSecs")?,
            body_timeout: secs(file.body_timeout_secs, "bodyTimeoutSecs")?,
            idle_timeout: secs(file.idle_timeout_secs, "idleTimeoutSecs")?,
            max_stream_lifetime: secs(file.max_stream_lifetime_secs, "maxStreamLifetimeSecs")?,
            disconnected_status_time: secs(
                file.disconnected_status_time_secs,
                "disconnectedStatusTimeSecs",
            )?,
        };
        Ok(Self {
            protocol: file.protocol,
            init_timeout,
            environments,
            network,
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

/// `^[a-zA-Z0-9][._\-a-zA-Z0-9]*$`: a filter key, as LaunchDarkly's SDKs check it.
fn valid_filter(key: &str) -> bool {
    let mut bytes = key.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_side_and_mobile_settings() {
        let config = RelayConfig::parse(
            br#"{"upstream": "http://up", "clientSideUri": "http://cs",
                 "environments": {"a": {"sdkKey": "k1", "envId": "e1", "mobileKey": "mob-1",
                                        "secureMode": true, "allowedOrigin": ["https://x"]},
                                  "b": {"sdkKey": "k2"}}}"#,
        )
        .unwrap();
        let a = &config.environments[0];
        assert_eq!(a.mobile_key.as_deref(), Some("mob-1"));
        assert!(a.secure_mode);
        assert_eq!(a.allowed_origins, ["https://x"]);
        assert_eq!(a.client_side_uri, "http://cs");
        assert!(
            !format!("{a:?}").contains("mob-1"),
            "the mobile key is redacted"
        );
        let b = &config.environments[1];
        assert_eq!((b.mobile_key.as_ref(), b.secure_mode), (None, false));
        let no_id = br#"{"upstream": "http://up", "environments": {"a": {"sdkKey": "k", "secureMode": true}}}"#;
        assert!(RelayConfig::parse(no_id).unwrap_err().contains("envId"));
        let default = br#"{"upstream": "http://up", "environments": {"a": {"sdkKey": "k"}}}"#;
        let default = RelayConfig::parse(default).unwrap();
        assert_eq!(
            default.environments[0].client_side_uri,
            DEFAULT_CLIENT_SIDE_URI
        );
    }

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
        assert_eq!(c.network, NetworkConfig::default());
    }

    #[test]
    fn network_settings() {
        let c = RelayConfig::parse(
            br#"{"upstream": "http://up", "environments": {"a": {"sdkKey": "k"}},
                 "listen": ["0.0.0.0:8030", "[::1]:9"], "maxConnections": 5,
                 "tls": {"certFile": "c.pem", "keyFile": "k.pem"},
                 "headTimeoutSecs": 2.5, "maxStreamLifetimeSecs": 60}"#,
        )
        .unwrap();
        let n = &c.network;
        assert_eq!(n.listen.len(), 2);
        assert!(n.listen[1].is_ipv6());
        assert_eq!(n.tls, Some(TlsSettings::new("c.pem", "k.pem")));
        assert_eq!(n.max_connections, Some(5));
        assert_eq!(n.head_timeout, Some(Duration::from_millis(2500)));
        assert_eq!(n.max_stream_lifetime, Some(Duration::from_secs(60)));
        for (bad, why) in [
            (&br#"{"upstream": "http://x", "environments": {"a": {"sdkKey": "k"}}, "listen": ["8030"]}"#[..], "listen"),
            (br#"{"upstream": "http://x", "environments": {"a": {"sdkKey": "k"}}, "idleTimeoutSecs": -1}"#, "idleTimeoutSecs"),
        ] {
            let e = RelayConfig::parse(bad).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
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
