//! `POST /`: the harness's client configuration (servicedef/sdk_config.go) and the
//! `flagsync::Client` it becomes.

use std::sync::Arc;
use std::time::Duration;

use flagsync::events::EventsOptions;
use flagsync::persist::{CacheConfig, StoreMode};
use flagsync::{Client, ClientBuilder, Fdv2Config, SourceSpec};
use flagsync_redis::RedisStore;
use serde::Deserialize;

use super::runtime::ServiceRuntime;

/// LaunchDarkly's service URIs, used when the harness gives none.
const DEFAULT_STREAM_URI: &str = "https://stream.launchdarkly.com";
const DEFAULT_POLLING_URI: &str = "https://sdk.launchdarkly.com";

/// The body of `POST /`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateParams {
    /// The test's name, for the log.
    #[serde(default)]
    pub tag: Option<String>,
    /// The client's settings.
    pub configuration: SdkConfig,
}

/// `configuration`. Absent and `null` properties are the same (`Option`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SdkConfig {
    /// The SDK key.
    pub credential: String,
    /// How long to wait for initialization (default 5 s; 0 means the default).
    #[serde(default)]
    pub start_wait_time_ms: Option<f64>,
    /// A client that did not initialize is still a success.
    #[serde(default)]
    pub init_can_fail: Option<bool>,
    /// Base URIs by service, apart from whether the service is used.
    #[serde(default)]
    pub service_endpoints: Option<Endpoints>,
    /// TLS settings.
    #[serde(default)]
    pub tls: Option<Tls>,
    /// An HTTP proxy.
    #[serde(default)]
    pub proxy: Option<Proxy>,
    /// Streaming (the default data source).
    #[serde(default)]
    pub streaming: Option<Streaming>,
    /// Polling instead of streaming.
    #[serde(default)]
    pub polling: Option<Polling>,
    /// Analytics events: sent when present, none when absent.
    #[serde(default)]
    pub events: Option<Events>,
    /// Big segments over the harness's callback store.
    #[serde(default)]
    pub big_segments: Option<super::bigseg::BigSegmentsConfig>,
    /// `X-LaunchDarkly-Tags`.
    #[serde(default)]
    pub tags: Option<Tags>,
    /// Client-side settings: the harness sends an initial context with some event
    /// tests whatever the SDK; a server-side SDK has no use for them.
    #[serde(default)]
    pub client_side: Option<serde_json::Value>,
    /// Evaluation and track hooks: the harness's test hooks.
    #[serde(default)]
    pub hooks: Option<super::hooks::HooksConfig>,
    /// `X-LaunchDarkly-Wrapper`.
    #[serde(default)]
    pub wrapper: Option<Wrapper>,
    /// A persistent store.
    #[serde(default)]
    pub persistent_data_store: Option<PersistentDataStore>,
    /// The FDv2 data system (harness v3). Its presence tells a v3 configuration from a
    /// v2 one: with it, `streaming` and `polling` are not read.
    #[serde(default)]
    pub data_system: Option<DataSystem>,
}

/// `dataSystem` (harness v3, servicedef `DataSystem`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataSystem {
    /// The SDK's default data system (client-side harness runs send this instead of
    /// sources).
    #[serde(default)]
    pub use_default_data_system: Option<bool>,
    /// A persistent store.
    #[serde(default)]
    pub store: Option<DataStore>,
    /// `0`: read-only; `1`: read-write (the data sources' data is written to the store).
    #[serde(default)]
    pub store_mode: Option<u8>,
    /// Initializers, run in order.
    #[serde(default)]
    pub initializers: Option<Vec<Initializer>>,
    /// Synchronizers, in order of preference.
    #[serde(default)]
    pub synchronizers: Option<Vec<Synchronizer>>,
    /// The FDv1 polling source the server's fallback directive switches to; absent: the
    /// directive halts the data system.
    #[serde(default)]
    pub fdv1_fallback: Option<Polling>,
    /// Client-side connection modes: refused (a server-side SDK has none).
    #[serde(default)]
    pub connection_mode_config: Option<serde_json::Value>,
}

/// `dataSystem.store`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataStore {
    /// The store, as the top-level `persistentDataStore`.
    #[serde(default)]
    pub persistent_data_store: Option<PersistentDataStore>,
}

/// One of `dataSystem.initializers`.
#[derive(Debug, Default, Deserialize)]
pub struct Initializer {
    /// FDv2 polling.
    #[serde(default)]
    pub polling: Option<Polling>,
}

/// One of `dataSystem.synchronizers`.
#[derive(Debug, Default, Deserialize)]
pub struct Synchronizer {
    /// The FDv2 stream.
    #[serde(default)]
    pub streaming: Option<Streaming>,
    /// FDv2 polling.
    #[serde(default)]
    pub polling: Option<Polling>,
}

/// `events`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Events {
    /// The base URI (empty: from `serviceEndpoints`).
    pub base_uri: Option<String>,
    /// The queue's capacity (0: the default).
    pub capacity: Option<u64>,
    /// Diagnostic events on.
    pub enable_diagnostics: Option<bool>,
    /// Every attribute private.
    pub all_attributes_private: Option<bool>,
    /// Attributes private in every context.
    pub global_private_attributes: Option<Vec<String>>,
    /// The flush interval (0: the default).
    pub flush_interval_ms: Option<u64>,
    /// Leave anonymous contexts out of index and identify events.
    pub omit_anonymous_contexts: Option<bool>,
    /// Compress payloads.
    pub enable_gzip: Option<bool>,
}

/// `serviceEndpoints`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoints {
    /// The streaming base URI.
    #[serde(default)]
    pub streaming: Option<String>,
    /// The polling base URI.
    #[serde(default)]
    pub polling: Option<String>,
    /// The events base URI.
    #[serde(default)]
    pub events: Option<String>,
}

/// `tls`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tls {
    /// Accept any certificate.
    #[serde(default)]
    pub skip_verify_peer: Option<bool>,
    /// A PEM file of the CA certificates to trust instead of the built-in roots.
    #[serde(default, rename = "customCAFile")]
    pub custom_ca_file: Option<String>,
}

/// `proxy`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Proxy {
    /// `http://host:port`.
    #[serde(default)]
    pub http_proxy: Option<String>,
}

/// `streaming`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Streaming {
    /// The base URI (empty: from `serviceEndpoints`).
    #[serde(default)]
    pub base_uri: Option<String>,
    /// The first reconnect delay.
    #[serde(default)]
    pub initial_retry_delay_ms: Option<f64>,
    /// A payload filter key.
    #[serde(default)]
    pub filter: Option<String>,
}

/// `polling`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Polling {
    /// The base URI (empty: from `serviceEndpoints`).
    #[serde(default)]
    pub base_uri: Option<String>,
    /// The poll interval.
    #[serde(default)]
    pub poll_interval_ms: Option<f64>,
    /// A payload filter key.
    #[serde(default)]
    pub filter: Option<String>,
}

/// `tags`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tags {
    /// `application-id`.
    #[serde(default)]
    pub application_id: Option<String>,
    /// `application-version`.
    #[serde(default)]
    pub application_version: Option<String>,
}

/// `wrapper`.
#[derive(Debug, Default, Deserialize)]
pub struct Wrapper {
    /// The wrapper's name.
    #[serde(default)]
    pub name: String,
    /// Its version.
    #[serde(default)]
    pub version: String,
}

/// `persistentDataStore`.
#[derive(Debug, Deserialize)]
pub struct PersistentDataStore {
    /// Which database.
    pub store: StoreParams,
    /// The read cache.
    pub cache: CacheParams,
}

/// `persistentDataStore.store`.
#[derive(Debug, Deserialize)]
pub struct StoreParams {
    /// `redis`, `consul` or `dynamodb`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The key prefix (default `launchdarkly`).
    #[serde(default)]
    pub prefix: Option<String>,
    /// Where the database is.
    pub dsn: String,
}

/// `persistentDataStore.cache`.
#[derive(Debug, Deserialize)]
pub struct CacheParams {
    /// `off`, `ttl` or `infinite`.
    pub mode: String,
    /// The TTL in seconds, for `ttl`.
    #[serde(default)]
    pub ttl: Option<f64>,
}

/// Why a client was not made: the status to answer and the text for the harness's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 400 (settings this service cannot honour) or 500 (the client failed).
    pub status: u16,
    /// What went wrong.
    pub message: String,
}

fn refuse(status: u16, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        message: message.into(),
    }
}

fn millis(ms: f64) -> Duration {
    Duration::from_secs_f64(ms.max(0.0) / 1000.0)
}

/// The first non-empty URI of `uris`.
fn first_uri<'a>(uris: impl IntoIterator<Item = Option<&'a str>>) -> Option<&'a str> {
    uris.into_iter().flatten().find(|u| !u.is_empty())
}

impl SdkConfig {
    /// How long creation waits for the client to initialize.
    pub fn start_wait(&self) -> Duration {
        match self.start_wait_time_ms {
            Some(ms) if ms > 0.0 => millis(ms),
            _ => Duration::from_secs(5),
        }
    }

    /// The builder these settings describe, on `runtime`.
    pub fn builder(&self, runtime: &ServiceRuntime) -> Result<ClientBuilder, Refusal> {
        let endpoints = self.service_endpoints.as_ref();
        let endpoint_stream = endpoints.and_then(|e| e.streaming.as_deref());
        let endpoint_poll = endpoints.and_then(|e| e.polling.as_deref());
        let mut b = Client::builder(self.credential.clone()).runtime(runtime.runtime());
        if let Some(hooks) = &self.hooks {
            b = b.hooks(hooks.build());
        }
        if let Some(big_segments) = &self.big_segments {
            b = b.big_segments(big_segments.options());
        }
        b = b
            .stream_uri(first_uri([endpoint_stream]).unwrap_or(DEFAULT_STREAM_URI))
            .polling_uri(first_uri([endpoint_poll]).unwrap_or(DEFAULT_POLLING_URI));
        let (mut b, store_mode) = match &self.data_system {
            Some(ds) => ds.apply(b, endpoint_stream, endpoint_poll)?,
            None => self.data_source_v2(b, endpoint_stream),
        };
        if let Some(tags) = &self.tags {
            b = b.application(
                tags.application_id.clone().unwrap_or_default(),
                tags.application_version.clone().unwrap_or_default(),
            );
        }
        if let Some(w) = &self.wrapper {
            b = b.wrapper(w.name.clone(), w.version.clone());
        }
        b = match self.proxy.as_ref().and_then(|p| p.http_proxy.as_deref()) {
            Some(url) if !url.is_empty() => b.proxy(url),
            _ => b.no_proxy(),
        };
        if let Some(tls) = &self.tls {
            if tls.skip_verify_peer == Some(true) {
                b = b.danger_accept_invalid_certs(true);
            }
            if let Some(path) = tls.custom_ca_file.as_deref().filter(|p| !p.is_empty()) {
                let pem = std::fs::read(path)
                    .map_err(|e| refuse(400, format!("cannot read customCAFile {path}: {e}")))?;
                b = b.tls_built_in_roots(false).add_root_certificate_pem(pem);
            }
        }
        let endpoint_events = endpoints.and_then(|e| e.events.as_deref());
        b = match &self.events {
            None => b.send_events(false),
            Some(e) => {
                let mut options = EventsOptions::default();
                options.events_uri = Some(
                    first_uri([e.base_uri.as_deref(), endpoint_events])
                        .unwrap_or(flagsync::events::DEFAULT_EVENTS_URI)
                        .to_owned(),
                );
                if let Some(c) = e.capacity.filter(|&c| c > 0) {
                    options.capacity = usize::try_from(c).unwrap_or(usize::MAX);
                }
                if let Some(ms) = e.flush_interval_ms.filter(|&ms| ms > 0) {
                    options.flush_interval = Duration::from_millis(ms);
                }
                options.diagnostic_opt_out = e.enable_diagnostics != Some(true);
                options.all_attributes_private = e.all_attributes_private == Some(true);
                options.private_attributes =
                    e.global_private_attributes.clone().unwrap_or_default();
                options.omit_anonymous_contexts = e.omit_anonymous_contexts == Some(true);
                options.gzip = e.enable_gzip == Some(true);
                b.events(options)
            }
        };
        let store = self
            .data_system
            .as_ref()
            .and_then(|ds| ds.store.as_ref())
            .and_then(|s| s.persistent_data_store.as_ref())
            .or(self.persistent_data_store.as_ref());
        if let Some(p) = store {
            let (store, cache) = persistent_store(p)?;
            b = match store_mode {
                Some(mode) => b.persistent_store(store, mode, cache),
                None => b.daemon(store, cache),
            };
        }
        Ok(b)
    }

    /// The v2 harness's data source (`streaming`, else `polling`, else daemon mode with
    /// a store and no streaming endpoint), and the mode of a persistent store: `None`
    /// for daemon mode.
    fn data_source_v2(
        &self,
        mut b: ClientBuilder,
        endpoint_stream: Option<&str>,
    ) -> (ClientBuilder, Option<StoreMode>) {
        let endpoint_poll = self
            .service_endpoints
            .as_ref()
            .and_then(|e| e.polling.as_deref());
        if let Some(s) = &self.streaming {
            if let Some(uri) = first_uri([s.base_uri.as_deref(), endpoint_stream]) {
                b = b.stream_uri(uri);
            }
            if let Some(ms) = s.initial_retry_delay_ms {
                b = b.initial_reconnect_delay(millis(ms));
            }
            if let Some(filter) = &s.filter {
                b = b.payload_filter(filter.clone());
            }
        } else if let Some(p) = &self.polling {
            b = b.polling(true);
            if let Some(uri) = first_uri([p.base_uri.as_deref(), endpoint_poll]) {
                b = b.polling_uri(uri);
            }
            if let Some(ms) = p.poll_interval_ms {
                b = b.poll_interval(millis(ms));
            }
            if let Some(filter) = &p.filter {
                b = b.payload_filter(filter.clone());
            }
        } else if endpoint_stream.is_none() && self.persistent_data_store.is_some() {
            // Neither data source nor a streaming endpoint, but a store: daemon mode, as
            // the reference services read it.
            return (b, None);
        }
        (b, Some(StoreMode::ReadWrite))
    }
}

impl DataSystem {
    /// The FDv2 data system these settings describe, on `b`, and the mode of a
    /// persistent store (`None`: daemon mode, no data source at all).
    fn apply(
        &self,
        b: ClientBuilder,
        endpoint_stream: Option<&str>,
        endpoint_poll: Option<&str>,
    ) -> Result<(ClientBuilder, Option<StoreMode>), Refusal> {
        if self.connection_mode_config.is_some() {
            return Err(refuse(
                400,
                "connection modes are client-side; this is a server-side SDK",
            ));
        }
        let fdv2 = self.fdv2_config(endpoint_stream, endpoint_poll);
        let mode = match self.store_mode {
            None | Some(0) => StoreMode::ReadOnly,
            Some(1) => StoreMode::ReadWrite,
            Some(other) => return Err(refuse(400, format!("unknown storeMode {other}"))),
        };
        let mode = if fdv2.has_no_sources() {
            None
        } else {
            Some(mode)
        };
        Ok((b.fdv2(fdv2), mode))
    }

    /// The sources as an [`Fdv2Config`]; an empty base URI takes the service
    /// endpoint's (else the client's default).
    pub fn fdv2_config(
        &self,
        endpoint_stream: Option<&str>,
        endpoint_poll: Option<&str>,
    ) -> Fdv2Config {
        let poll_uri =
            |p: &Polling| first_uri([p.base_uri.as_deref(), endpoint_poll]).map(str::to_owned);
        let polling = |p: &Polling| SourceSpec::Polling {
            base_uri: poll_uri(p),
            interval: p.poll_interval_ms.map(millis),
        };
        let listed = self.initializers.as_ref().is_some_and(|l| !l.is_empty())
            || self.synchronizers.as_ref().is_some_and(|l| !l.is_empty());
        let mut fdv2 = if self.use_default_data_system == Some(true) && !listed {
            Fdv2Config::default()
        } else {
            let initializers = self.initializers.iter().flatten();
            let synchronizers = self.synchronizers.iter().flatten();
            Fdv2Config::custom()
                .initializers(initializers.filter_map(|i| i.polling.as_ref().map(polling)))
                .synchronizers(
                    synchronizers.filter_map(|s| match (&s.streaming, &s.polling) {
                        (Some(st), _) => Some(SourceSpec::Streaming {
                            base_uri: first_uri([st.base_uri.as_deref(), endpoint_stream])
                                .map(str::to_owned),
                            initial_retry_delay: st.initial_retry_delay_ms.map(millis),
                        }),
                        (None, p) => p.as_ref().map(polling),
                    }),
                )
        };
        if let Some(p) = &self.fdv1_fallback {
            fdv2 = fdv2.fdv1_fallback(Some(SourceSpec::Fdv1Polling {
                base_uri: poll_uri(p),
                interval: p.poll_interval_ms.map(millis),
            }));
        }
        fdv2
    }
}

/// The store and cache of `persistentDataStore`.
fn persistent_store(
    p: &PersistentDataStore,
) -> Result<(Arc<dyn flagsync::persist::PersistentStore>, CacheConfig), Refusal> {
    let cache = match p.cache.mode.as_str() {
        "off" => CacheConfig::disabled(),
        "infinite" => CacheConfig::infinite(),
        "ttl" => match p.cache.ttl {
            Some(secs) if secs > 0.0 => CacheConfig::ttl(Duration::from_secs_f64(secs)),
            // A TTL of zero caches nothing, as "off" does.
            _ => CacheConfig::disabled(),
        },
        other => return Err(refuse(400, format!("unknown cache mode {other:?}"))),
    };
    match p.store.kind.as_str() {
        "redis" => {
            let mut builder = RedisStore::builder(p.store.dsn.clone());
            if let Some(prefix) = p.store.prefix.as_deref().filter(|p| !p.is_empty()) {
                builder = builder.prefix(prefix);
            }
            let store = builder
                .build()
                .map_err(|e| refuse(400, format!("cannot use the Redis store: {e}")))?;
            Ok((Arc::new(store), cache))
        }
        other => Err(refuse(
            400,
            format!("no {other} persistent store in flagsync"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: serde_json::Value) -> SdkConfig {
        serde_json::from_value(json).expect("a configuration")
    }

    #[test]
    fn nulls_are_absent_properties() {
        let c = config(serde_json::json!({
            "credential": "k", "startWaitTimeMs": null, "streaming": null, "polling": null,
            "tags": {"applicationId": null}
        }));
        assert!(c.streaming.is_none() && c.polling.is_none());
        assert_eq!(c.start_wait(), Duration::from_secs(5));
    }

    #[test]
    fn big_segments_and_hooks_are_configured() {
        let rt = ServiceRuntime::Smol;
        let json = serde_json::json!({"credential": "k",
            "bigSegments": {"callbackUri": "http://127.0.0.1:1", "userCacheSize": 2,
                "userCacheTimeMs": 10, "statusPollIntervalMs": 10000, "staleAfterMs": 60000},
            "hooks": {"hooks": [{"name": "h", "callbackUri": "http://127.0.0.1:1"}]}});
        let client = config(json)
            .builder(&rt)
            .expect("accepted")
            .build()
            .expect("a client");
        // The callback store cannot be reached: the store is unavailable.
        assert_eq!(
            client.big_segment_store_status().map(|s| s.available),
            Some(false)
        );
    }

    #[test]
    fn events_are_sent_only_when_configured_and_client_side_settings_are_ignored() {
        let rt = ServiceRuntime::Smol;
        let build = |json: serde_json::Value| {
            config(json)
                .builder(&rt)
                .expect("accepted")
                .build()
                .expect("a client")
        };
        let none = build(serde_json::json!({"credential": "k",
            "streaming": {"baseUri": "http://127.0.0.1:1"}, "clientSide": {"initialContext": {}}}));
        assert!(!none.sends_events());
        let some = build(serde_json::json!({"credential": "k",
            "streaming": {"baseUri": "http://127.0.0.1:1"},
            "events": {"baseUri": "http://127.0.0.1:2", "capacity": 0, "flushIntervalMs": 0,
                       "enableGzip": true, "globalPrivateAttributes": ["email"]}}));
        assert!(some.sends_events());
        let via_endpoints = build(serde_json::json!({"credential": "k",
            "serviceEndpoints": {"streaming": "http://127.0.0.1:1", "events": "http://127.0.0.1:2"},
            "events": {}}));
        assert!(via_endpoints.sends_events());
    }

    #[test]
    fn an_unknown_store_type_is_refused() {
        let c = config(serde_json::json!({
            "credential": "k",
            "persistentDataStore": {"store": {"type": "consul", "dsn": "x"}, "cache": {"mode": "off"}}
        }));
        assert_eq!(
            c.builder(&ServiceRuntime::Smol).expect_err("consul").status,
            400
        );
    }

    fn data_system(json: serde_json::Value) -> DataSystem {
        serde_json::from_value(json).expect("a dataSystem")
    }

    #[test]
    fn v3_sources_become_the_fdv2_config_in_order() {
        let ds = data_system(serde_json::json!({
            "storeMode": 0,
            "initializers": [{"polling": {"baseUri": "http://poll", "pollIntervalMs": 1500}}],
            "synchronizers": [
                {"streaming": {"baseUri": "http://stream", "initialRetryDelayMs": 250}},
                {"polling": {"baseUri": "http://poll2"}}
            ],
            "fdv1Fallback": {"baseUri": "http://fdv1", "pollIntervalMs": 60000}
        }));
        let fdv2 = ds.fdv2_config(None, None);
        assert_eq!(
            fdv2.initializers,
            [SourceSpec::Polling {
                base_uri: Some("http://poll".into()),
                interval: Some(Duration::from_millis(1500)),
            }]
        );
        assert_eq!(
            fdv2.synchronizers,
            [
                SourceSpec::Streaming {
                    base_uri: Some("http://stream".into()),
                    initial_retry_delay: Some(Duration::from_millis(250)),
                },
                SourceSpec::Polling {
                    base_uri: Some("http://poll2".into()),
                    interval: None,
                },
            ]
        );
        assert_eq!(
            fdv2.fdv1_fallback,
            Some(SourceSpec::Fdv1Polling {
                base_uri: Some("http://fdv1".into()),
                interval: Some(Duration::from_secs(60)),
            })
        );
    }

    #[test]
    fn empty_base_uris_take_the_service_endpoints() {
        let ds = data_system(serde_json::json!({
            "initializers": [{"polling": {"baseUri": ""}}],
            "synchronizers": [{"streaming": {}}, {"polling": {}}],
            "fdv1Fallback": {}
        }));
        let fdv2 = ds.fdv2_config(Some("http://s"), Some("http://p"));
        let p = Some("http://p".to_owned());
        assert_eq!(
            fdv2.initializers,
            [SourceSpec::Polling {
                base_uri: p.clone(),
                interval: None
            }]
        );
        assert_eq!(
            fdv2.synchronizers[0],
            SourceSpec::Streaming {
                base_uri: Some("http://s".into()),
                initial_retry_delay: None,
            }
        );
        assert_eq!(
            fdv2.fdv1_fallback,
            Some(SourceSpec::Fdv1Polling {
                base_uri: p,
                interval: None
            })
        );
        // No endpoint either: the client's configured URIs (`None` here).
        let fdv2 = ds.fdv2_config(None, None);
        assert_eq!(fdv2.initializers, [SourceSpec::polling()]);
    }

    #[test]
    fn without_fdv1_fallback_the_directive_has_nothing_to_switch_to() {
        let ds = data_system(serde_json::json!({
            "storeMode": 0, "initializers": null, "synchronizers": [{"streaming": {}}]
        }));
        let fdv2 = ds.fdv2_config(None, None);
        assert!(fdv2.initializers.is_empty());
        assert_eq!(fdv2.synchronizers, [SourceSpec::streaming()]);
        assert_eq!(fdv2.fdv1_fallback, None);
    }

    #[test]
    fn use_default_data_system_is_the_default_preset() {
        let ds = data_system(serde_json::json!({"useDefaultDataSystem": true}));
        assert_eq!(ds.fdv2_config(None, None), Fdv2Config::default());
    }

    #[test]
    fn store_mode_and_daemon_mode() {
        let apply = |json| {
            data_system(json)
                .apply(Client::builder("k"), None, None)
                .map(|(_, mode)| mode)
        };
        let sync = serde_json::json!([{"streaming": {}}]);
        assert_eq!(
            apply(serde_json::json!({"storeMode": 0, "synchronizers": sync})),
            Ok(Some(StoreMode::ReadOnly))
        );
        assert_eq!(
            apply(serde_json::json!({"storeMode": 1, "synchronizers": sync})),
            Ok(Some(StoreMode::ReadWrite))
        );
        // No source at all: the store alone, read-only (daemon mode).
        assert_eq!(
            apply(serde_json::json!({"storeMode": 1, "synchronizers": []})),
            Ok(None)
        );
        assert_eq!(
            apply(serde_json::json!({"storeMode": 7, "synchronizers": sync}))
                .expect_err("mode 7")
                .status,
            400
        );
        assert_eq!(
            apply(
                serde_json::json!({"connectionModeConfig": {"initialConnectionMode": "streaming"}})
            )
            .expect_err("client-side")
            .status,
            400
        );
    }

    #[test]
    fn a_data_system_is_accepted_and_a_v2_configuration_still_is() {
        let rt = ServiceRuntime::Smol;
        let v3 = config(serde_json::json!({
            "credential": "k",
            "dataSystem": {"storeMode": 0, "initializers": [],
                "synchronizers": [{"streaming": {"baseUri": "http://127.0.0.1:1"}}],
                "store": {"persistentDataStore": {"store": {"type": "consul", "dsn": "x"},
                    "cache": {"mode": "off"}}}}
        }));
        // The dataSystem's store is read (and refused here: flagsync has no Consul).
        assert_eq!(v3.builder(&rt).expect_err("consul").status, 400);
        let v2 = config(serde_json::json!({
            "credential": "k", "polling": {"baseUri": "http://127.0.0.1:1"}
        }));
        assert!(v2.builder(&rt).is_ok());
    }

    #[test]
    fn the_first_non_empty_uri_wins() {
        assert_eq!(
            first_uri([Some(""), None, Some("http://a")]),
            Some("http://a")
        );
        assert_eq!(first_uri([Some(""), None]), None);
    }
}
