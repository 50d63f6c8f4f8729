//! Settings of the data system. Every constant of PROTOCOL.md A.5 is here, as a
//! duration the caller may change.

use std::time::Duration;

mod fdv2;

pub use fdv2::{CoordinatorTiming, Fdv2Config, SourceSpec};

use crate::backoff::BackoffConfig;
use crate::endpoint::{Url, UrlError};
use crate::fdv2::PayloadLimits;
use crate::http1;
use crate::source::{RequestIdentity, UnrecoverablePolicy};
use crate::sse;

/// LaunchDarkly's streaming service.
pub const DEFAULT_STREAM_URI: &str = "https://stream.launchdarkly.com";
/// LaunchDarkly's polling service.
pub const DEFAULT_POLLING_URI: &str = "https://app.launchdarkly.com";

/// Whether `key` can be an SDK key: at most 8 KiB of ASCII letters, digits, `.`, `_`
/// and `-` (what LaunchDarkly issues), so it is safe in an `Authorization` header.
/// The empty key passes (a local server may accept any).
///
/// ```
/// use flagsync_core::config::sdk_key_is_well_formed;
///
/// assert!(sdk_key_is_well_formed("sdk-1234abcd-ef"));
/// assert!(!sdk_key_is_well_formed("sdk key\r\n"));
/// ```
pub fn sdk_key_is_well_formed(key: &str) -> bool {
    key.is_empty() || crate::source::is_token(key, 8192)
}

/// Which data system runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Mode {
    /// One FDv1 stream (`/all`). The default.
    #[default]
    Streaming,
    /// FDv1 polling (`/sdk/latest-all`).
    Polling,
    /// The FDv2 data system described by [`Config::fdv2`].
    Fdv2,
    /// No network source: the data comes from an in-process source outside the core
    /// (the SDK's `TestData` or file data source), fed as [`crate::Input::SourceData`]
    /// and [`crate::Input::SourceFailed`]. The core applies it to its store and runs the
    /// status rules as for a stream: INITIALIZING until the first full data set, then
    /// VALID; a failure reports INTERRUPTED and keeps the data; stopping reports OFF.
    External,
}

/// Buffer limits (every buffer has one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// SSE line and event limits.
    pub sse: sse::Config,
    /// HTTP head limits, for streams.
    pub http: http1::Config,
    /// Largest decoded polling body (default 64 MiB, as the SSE line limit): what is
    /// kept of a poll's body, gzip or not, never exceeds it.
    pub max_poll_body: usize,
    /// How much of an FDv2 payload a stream or a poll may hold before its
    /// `payload-transferred` (default 64 MiB of raw JSON and keys, as the SSE event
    /// limit that bounds an FDv1 `put`, and 524,288 objects). Past it the partial
    /// payload is dropped, the status reports INVALID_DATA naming the limit, and the
    /// stream reconnects with backoff (a poll waits for its next turn); the store keeps
    /// what it had. See [`PayloadLimits`].
    pub fdv2_payload: PayloadLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            sse: sse::Config::default(),
            http: http1::Config::default(),
            max_poll_body: 64 << 20,
            fdv2_payload: PayloadLimits::default(),
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
    /// Which data system runs.
    pub mode: Mode,
    /// The FDv2 sources and timing, used when `mode` is [`Mode::Fdv2`].
    pub fdv2: Fdv2Config,
    /// Payload filter key, sent as `filter=`.
    pub payload_filter: Option<String>,
    /// Connect timeout (default 10 s).
    pub connect_timeout: Duration,
    /// Polling read timeout (default 15 s).
    pub read_timeout: Duration,
    /// Stream read timeout (default 300 s).
    pub stream_read_timeout: Duration,
    /// A poll's whole response must arrive within this time (default 60 s), however
    /// steadily its bytes trickle in; else NETWORK_ERROR and the next poll as usual.
    pub poll_response_timeout: Duration,
    /// A stream's response head must arrive within this time of the attempt's start
    /// (default 30 s); else NETWORK_ERROR and a reconnect with backoff.
    pub stream_head_timeout: Duration,
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
    /// A persistent store behind the in-memory one (`None`: memory only). The driver
    /// performs the [`crate::Output::Persist`] requests against it.
    pub persistence: Option<crate::PersistenceConfig>,
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
            fdv2: Fdv2Config::default(),
            payload_filter: None,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(15),
            stream_read_timeout: Duration::from_secs(300),
            poll_response_timeout: Duration::from_secs(60),
            stream_head_timeout: Duration::from_secs(30),
            backoff: BackoffConfig::default(),
            poll_interval: Duration::from_secs(30),
            min_poll_interval: Duration::from_secs(30),
            unrecoverable: UnrecoverablePolicy::Retry,
            limits: Limits::default(),
            persistence: None,
        }
    }

    /// Check the URIs and, in FDv2 mode, the source lists.
    pub fn validate(&self) -> Result<(), ConfigError> {
        Url::parse(&self.stream_uri).map_err(ConfigError::StreamUri)?;
        Url::parse(&self.polling_uri).map_err(ConfigError::PollingUri)?;
        if self.mode != Mode::Fdv2 {
            return Ok(());
        }
        let uri = |spec: &SourceSpec| match spec {
            SourceSpec::Streaming { base_uri, .. } => base_uri.as_deref().map_or(Ok(()), |u| {
                Url::parse(u).map(drop).map_err(ConfigError::StreamUri)
            }),
            SourceSpec::Polling { base_uri, .. } | SourceSpec::Fdv1Polling { base_uri, .. } => {
                base_uri.as_deref().map_or(Ok(()), |u| {
                    Url::parse(u).map(drop).map_err(ConfigError::PollingUri)
                })
            }
        };
        for spec in &self.fdv2.initializers {
            if matches!(spec, SourceSpec::Streaming { .. }) {
                return Err(ConfigError::StreamingInitializer);
            }
            uri(spec)?;
        }
        for spec in self
            .fdv2
            .synchronizers
            .iter()
            .chain(&self.fdv2.fdv1_fallback)
        {
            uri(spec)?;
        }
        if self.fdv2.timing.check_interval.is_zero() {
            return Err(ConfigError::CheckInterval);
        }
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
    /// A stream cannot be an FDv2 initializer (initializers fetch once).
    #[error("a streaming source cannot be an FDv2 initializer")]
    StreamingInitializer,
    /// The FDv2 condition check interval must be positive.
    #[error("the FDv2 check interval must be positive")]
    CheckInterval,
}
