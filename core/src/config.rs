//! Settings of the data system. Every constant of PROTOCOL.md A.5 is here, as a
//! duration the caller may change.

use std::time::Duration;

use crate::backoff::BackoffConfig;
use crate::endpoint::{Url, UrlError};
use crate::http1;
use crate::source::{RequestIdentity, UnrecoverablePolicy};
use crate::sse;

/// LaunchDarkly's streaming service.
pub const DEFAULT_STREAM_URI: &str = "https://stream.launchdarkly.com";
/// LaunchDarkly's polling service.
pub const DEFAULT_POLLING_URI: &str = "https://app.launchdarkly.com";

/// Stream or poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// One FDv1 stream (`/all`). The default.
    #[default]
    Streaming,
    /// FDv1 polling (`/sdk/latest-all`).
    Polling,
}

/// Buffer limits (every buffer has one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// SSE line and event limits.
    pub sse: sse::Config,
    /// HTTP head limits, for streams.
    pub http: http1::Config,
    /// Largest decoded polling body (default 512 MiB).
    pub max_poll_body: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            sse: sse::Config::default(),
            http: http1::Config::default(),
            max_poll_body: 512 << 20,
        }
    }
}

/// Everything the data system needs to know.
#[derive(Debug, Clone)]
pub struct Config {
    /// SDK key and identification headers.
    pub identity: RequestIdentity,
    /// Streaming base URI (trailing slashes are ignored).
    pub stream_uri: String,
    /// Polling base URI.
    pub polling_uri: String,
    /// Streaming or polling.
    pub mode: Mode,
    /// Payload filter key, sent as `filter=`.
    pub payload_filter: Option<String>,
    /// Connect timeout (default 10 s).
    pub connect_timeout: Duration,
    /// Polling read timeout (default 15 s).
    pub read_timeout: Duration,
    /// Stream read timeout (default 300 s).
    pub stream_read_timeout: Duration,
    /// Reconnect backoff.
    pub backoff: BackoffConfig,
    /// Poll interval (default 30 s; raised to `min_poll_interval`).
    pub poll_interval: Duration,
    /// Lowest allowed poll interval (default 30 s; tests may lower it).
    pub min_poll_interval: Duration,
    /// What an unrecoverable HTTP status does (default: retry in the extended regime).
    pub unrecoverable: UnrecoverablePolicy,
    /// Buffer limits.
    pub limits: Limits,
}

impl Config {
    /// Defaults for `sdk_key`.
    pub fn new(sdk_key: impl Into<String>) -> Self {
        Self {
            identity: RequestIdentity {
                sdk_key: sdk_key.into(),
                ..RequestIdentity::default()
            },
            stream_uri: DEFAULT_STREAM_URI.to_owned(),
            polling_uri: DEFAULT_POLLING_URI.to_owned(),
            mode: Mode::Streaming,
            payload_filter: None,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(15),
            stream_read_timeout: Duration::from_secs(300),
            backoff: BackoffConfig::default(),
            poll_interval: Duration::from_secs(30),
            min_poll_interval: Duration::from_secs(30),
            unrecoverable: UnrecoverablePolicy::Retry,
            limits: Limits::default(),
        }
    }

    /// Check the URIs.
    pub fn validate(&self) -> Result<(), ConfigError> {
        Url::parse(&self.stream_uri).map_err(ConfigError::StreamUri)?;
        Url::parse(&self.polling_uri).map_err(ConfigError::PollingUri)?;
        Ok(())
    }
}

/// A setting that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The streaming base URI is not an http(s) URL.
    #[error("invalid stream URI: {0}")]
    StreamUri(UrlError),
    /// The polling base URI is not an http(s) URL.
    #[error("invalid polling URI: {0}")]
    PollingUri(UrlError),
}
