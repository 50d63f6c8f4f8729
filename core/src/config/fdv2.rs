//! Settings of the FDv2 data system: its initializers, synchronizers, FDv1 fallback and
//! coordinator timing, with the presets of PROTOCOL.md B §5.7.

use std::time::Duration;

/// One FDv2 data source and its overrides. `None` overrides take the data system's
/// [`super::Config`] value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceSpec {
    /// The FDv2 stream, `GET <stream>/sdk/stream` (a synchronizer only).
    Streaming {
        /// Base URI instead of [`super::Config::stream_uri`].
        base_uri: Option<String>,
        /// Initial reconnect delay instead of the configured backoff's.
        initial_retry_delay: Option<Duration>,
    },
    /// FDv2 polling, `GET <base>/sdk/poll` (an initializer or a synchronizer).
    Polling {
        /// Base URI instead of [`super::Config::polling_uri`].
        base_uri: Option<String>,
        /// Poll interval instead of [`super::Config::poll_interval`]; either is raised to
        /// [`super::Config::min_poll_interval`] (30 s unless a test lowers it).
        interval: Option<Duration>,
    },
    /// FDv1 polling, `GET <base>/sdk/latest-all`, read as FDv2 full transfers with the
    /// empty selector (PROTOCOL.md B §5.6): the FDv1 fallback, or an initializer.
    Fdv1Polling {
        /// Base URI instead of [`super::Config::polling_uri`].
        base_uri: Option<String>,
        /// Poll interval, as for [`SourceSpec::Polling`].
        interval: Option<Duration>,
    },
}

impl SourceSpec {
    /// The FDv2 stream with the data system's settings.
    pub const fn streaming() -> Self {
        Self::Streaming {
            base_uri: None,
            initial_retry_delay: None,
        }
    }

    /// FDv2 polling with the data system's settings.
    pub const fn polling() -> Self {
        Self::Polling {
            base_uri: None,
            interval: None,
        }
    }

    /// FDv1 polling with the data system's settings.
    pub const fn fdv1_polling() -> Self {
        Self::Fdv1Polling {
            base_uri: None,
            interval: None,
        }
    }

    /// A short name for logs and status reports.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Streaming { .. } => "streaming",
            Self::Polling { .. } => "polling",
            Self::Fdv1Polling { .. } => "fdv1-polling",
        }
    }
}

/// When the coordinator falls back to the next synchronizer and recovers to the first
/// (PROTOCOL.md B §5.7, A.5). Every duration is measured from the later of the status's
/// last state change and the current synchronizer's start (PROTOCOL.md A.4.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoordinatorTiming {
    /// How often the conditions are checked; the first check is one interval after a
    /// synchronizer starts (default 10 s).
    pub check_interval: Duration,
    /// Fall back when INITIALIZING for at least this long at a check (default 10 s): a
    /// synchronizer that has produced nothing by its first check is replaced.
    pub initializing_fallback: Duration,
    /// Fall back when INTERRUPTED for at least this long at a check (default 60 s).
    pub interrupted_fallback: Duration,
    /// Return to the first synchronizer when another has been VALID for at least this
    /// long at a check (default 300 s).
    pub recovery: Duration,
}

impl Default for CoordinatorTiming {
    fn default() -> Self {
        Self {
            check_interval: Duration::from_secs(10),
            initializing_fallback: Duration::from_secs(10),
            interrupted_fallback: Duration::from_secs(60),
            recovery: Duration::from_secs(300),
        }
    }
}

/// The FDv2 data system: initializers run in order until one yields a payload with a
/// selector, then synchronizers keep the store current, falling back and recovering by
/// [`CoordinatorTiming`]; a server's `X-LD-FD-Fallback: true` moves to `fdv1_fallback`
/// for good.
///
/// ```
/// use flagsync_core::config::{Fdv2Config, SourceSpec};
///
/// let default = Fdv2Config::default();
/// assert_eq!(default.initializers, [SourceSpec::polling()]);
/// assert_eq!(default.synchronizers, [SourceSpec::streaming(), SourceSpec::polling()]);
/// assert_eq!(default.fdv1_fallback, Some(SourceSpec::fdv1_polling()));
///
/// // A custom list: stream only, no FDv1 fallback.
/// let custom = Fdv2Config::custom().synchronizers([SourceSpec::streaming()]);
/// assert!(custom.fdv1_fallback.is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fdv2Config {
    /// Run once, in order, before the synchronizers.
    pub initializers: Vec<SourceSpec>,
    /// Run one at a time, in order of preference.
    pub synchronizers: Vec<SourceSpec>,
    /// What runs after the server directs FDv1 fallback; `None`: the data system stops
    /// (OFF).
    pub fdv1_fallback: Option<SourceSpec>,
    /// Fallback and recovery timing.
    pub timing: CoordinatorTiming,
}

impl Default for Fdv2Config {
    /// The `default` preset: a polling initializer, then streaming with polling as its
    /// fallback, and FDv1 polling if the server directs it.
    fn default() -> Self {
        Self {
            initializers: vec![SourceSpec::polling()],
            synchronizers: vec![SourceSpec::streaming(), SourceSpec::polling()],
            fdv1_fallback: Some(SourceSpec::fdv1_polling()),
            timing: CoordinatorTiming::default(),
        }
    }
}

impl Fdv2Config {
    /// The `streaming` preset: the stream alone, FDv1 polling as directed fallback.
    pub fn streaming() -> Self {
        Self {
            initializers: Vec::new(),
            synchronizers: vec![SourceSpec::streaming()],
            ..Self::default()
        }
    }

    /// The `polling` preset: FDv2 polling alone, FDv1 polling as directed fallback.
    pub fn polling() -> Self {
        Self {
            initializers: Vec::new(),
            synchronizers: vec![SourceSpec::polling()],
            ..Self::default()
        }
    }

    /// The `custom` preset: nothing configured; add sources with the builder methods.
    pub fn custom() -> Self {
        Self {
            initializers: Vec::new(),
            synchronizers: Vec::new(),
            fdv1_fallback: None,
            timing: CoordinatorTiming::default(),
        }
    }

    /// The `daemon` preset: no data source at all. Another process (a Relay Proxy)
    /// keeps a persistent store current; the data system is ready at once and its data
    /// availability is CACHED (PROTOCOL.md B §5.10).
    pub fn daemon() -> Self {
        Self::custom()
    }

    /// Replace the initializers.
    pub fn initializers(mut self, list: impl IntoIterator<Item = SourceSpec>) -> Self {
        self.initializers = list.into_iter().collect();
        self
    }

    /// Replace the synchronizers.
    pub fn synchronizers(mut self, list: impl IntoIterator<Item = SourceSpec>) -> Self {
        self.synchronizers = list.into_iter().collect();
        self
    }

    /// Set or clear the FDv1 fallback.
    pub fn fdv1_fallback(mut self, fallback: Option<SourceSpec>) -> Self {
        self.fdv1_fallback = fallback;
        self
    }

    /// True if no data source is configured (daemon mode).
    pub fn has_no_sources(&self) -> bool {
        self.initializers.is_empty() && self.synchronizers.is_empty()
    }
}
