//! The event processor's settings.

use std::time::Duration;

use serde_json::Value;

use crate::source::RequestIdentity;

/// Where and how analytics events are delivered. Defaults are LaunchDarkly's.
#[derive(Debug, Clone, PartialEq)]
pub struct EventsConfig {
    /// The events service's base URI (`/bulk` and `/diagnostic` are appended).
    pub events_uri: String,
    /// The SDK key and identification headers sent with every request.
    pub identity: RequestIdentity,
    /// At most this many events wait for a flush (the summary is not counted); later
    /// ones are dropped and counted. Default 10,000.
    pub capacity: usize,
    /// How often queued events are sent. Default 5 s.
    pub flush_interval: Duration,
    /// How many recently seen contexts are remembered (no index event for them).
    /// Default 1,000.
    pub context_keys_capacity: usize,
    /// How often the remembered contexts are forgotten. Default 5 minutes.
    pub context_keys_flush_interval: Duration,
    /// Redact every attribute of every context (but `key`, `kind`, `anonymous`).
    pub all_attributes_private: bool,
    /// Attribute references redacted in every context (`name`, `/address/street`).
    pub private_attributes: Vec<String>,
    /// Leave anonymous contexts out of index and identify events.
    pub omit_anonymous_contexts: bool,
    /// Compress analytics payloads with gzip.
    pub gzip: bool,
    /// Diagnostic events, or `None` to send none (the SDKs' `diagnosticOptOut`).
    pub diagnostics: Option<DiagnosticInfo>,
    /// How often a periodic diagnostic event is sent. Default 15 minutes, at least 1.
    pub diagnostic_recording_interval: Duration,
    /// How long a connection may take. Default 10 s.
    pub connect_timeout: Duration,
    /// How long the response may stay silent. Default 10 s.
    pub read_timeout: Duration,
    /// The wait before the one retry of a failed post. Default 1 s.
    pub retry_delay: Duration,
    /// At most this many analytics posts at once; a flush beyond it keeps its events
    /// for the next one. Default 5.
    pub max_concurrent_posts: usize,
}

/// What a `diagnostic-init` event says about the SDK, its configuration and platform
/// (JSON objects the caller builds; the processor sends them as they are).
#[derive(Debug, Clone, PartialEq)]
pub struct DiagnosticInfo {
    /// The `configuration` object.
    pub configuration: Value,
    /// The `sdk` object (`name`, `version`, `wrapperName`, `wrapperVersion`).
    pub sdk: Value,
    /// The `platform` object.
    pub platform: Value,
}

impl EventsConfig {
    /// LaunchDarkly's defaults for SDK key `sdk_key`.
    pub fn new(sdk_key: impl Into<String>) -> Self {
        Self {
            events_uri: "https://events.launchdarkly.com".into(),
            identity: RequestIdentity {
                sdk_key: sdk_key.into(),
                ..RequestIdentity::default()
            },
            capacity: 10_000,
            flush_interval: Duration::from_secs(5),
            context_keys_capacity: 1_000,
            context_keys_flush_interval: Duration::from_secs(300),
            all_attributes_private: false,
            private_attributes: Vec::new(),
            omit_anonymous_contexts: false,
            gzip: false,
            diagnostics: None,
            diagnostic_recording_interval: Duration::from_secs(900),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(10),
            retry_delay: Duration::from_secs(1),
            max_concurrent_posts: 5,
        }
    }
}
