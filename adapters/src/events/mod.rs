//! Analytics events: what the client evaluated, tracked and identified, delivered to
//! the events service (`POST {events}/bulk`) as LaunchDarkly's SDKs deliver it.
//!
//! The decisions are the core's [`flagsync_core::events::EventProcessor`]; this module
//! runs it through the one driver (its posts use the client's runtime, proxy and TLS
//! settings) and keeps the evaluation path cheap:
//!
//! ```text
//!  variation() ── a repeat (same flag version, variation, kind, last context, a flag
//!      │           that needs only counts): this thread's own cell, a plain store, no
//!      │           lock (counts.rs)
//!      │  else ── shard of this thread: spin lock<Summarizer + contexts seen>  (no shared
//!      │           lock, no allocation for a flag/variation already counted, the
//!      │           coarse wall clock: clock.rs)
//!      │ only for a tracked or debugged flag, or a context the shard has not seen:
//!      ▼
//!  the records' queue (lock-free, in order with `track`, `identify` and migration
//!      │ operations; the context shared, not copied; at most `capacity`) ── taken by
//!      ▼ the driver at half the capacity and before each flush or close: no wake-up
//!  driver ──► EventProcessor (core) ──► POST /bulk, /diagnostic
//!    ▲ before each flush, the shards' summaries and what the cells added are merged in
//! ```
//!
//! Configure it with [`crate::ClientBuilder::events`]; the defaults are LaunchDarkly's
//! (capacity 10,000, flush every 5 s, 1,000 context keys forgotten every 5 minutes,
//! diagnostics on). [`crate::Client::flush`] sends at once; [`crate::Client::close`]
//! sends what is queued within the close timeout.

pub(crate) mod client;
mod client_api;
pub(crate) mod clock;
mod command;
mod counts;
mod machine;
mod recorder;
mod stream_inits;

use std::time::Duration;

pub use flagsync_core::events::{Event as DeliveryEvent, EventContext};

pub(crate) use command::{Command, FlushWaiter};
pub(crate) use machine::{EventsMachine, EventsSink};
pub(crate) use recorder::{EvalRecord, Recorder, event_context};
pub(crate) use stream_inits::StreamInits;

/// The events section of a client's settings. `Default` gives LaunchDarkly's defaults.
///
/// ```
/// use std::time::Duration;
/// use flagsync::events::EventsOptions;
///
/// let mut options = EventsOptions::default();
/// options.events_uri = Some("https://events.example.com".into());
/// options.flush_interval = Duration::from_secs(10);
/// options.private_attributes = vec!["email".into()];
/// let client = flagsync::Client::builder("sdk-key").events(options).build();
/// assert!(client.is_ok());
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EventsOptions {
    /// Send events at all (`false`: none are sent, as the SDKs' `send_events` off).
    pub send_events: bool,
    /// The events service's base URI. `None` is LaunchDarkly's, but only while the
    /// stream and polling URIs are LaunchDarkly's too: a client pointed at another
    /// flag service sends no events unless it is told where to (the SDK key is never
    /// sent to a service the application did not name).
    pub events_uri: Option<String>,
    /// At most this many events wait for a flush; later ones are dropped (and counted
    /// in diagnostics). Default 10,000.
    pub capacity: usize,
    /// How often events are sent. Default 5 s.
    pub flush_interval: Duration,
    /// Redact every context attribute but `key`, `kind` and `anonymous`.
    pub all_attributes_private: bool,
    /// Attribute references redacted in every context (`email`, `/address/street`).
    pub private_attributes: Vec<String>,
    /// Send no diagnostic events.
    pub diagnostic_opt_out: bool,
    /// How often a diagnostic event is sent. Default 15 minutes (at least 1 minute).
    pub diagnostic_recording_interval: Duration,
    /// How many contexts are remembered (no index event for them). Default 1,000.
    pub context_keys_capacity: usize,
    /// How often the remembered contexts are forgotten. Default 5 minutes.
    pub context_keys_flush_interval: Duration,
    /// Compress event payloads with gzip.
    pub gzip: bool,
    /// Leave anonymous contexts out of index and identify events.
    pub omit_anonymous_contexts: bool,
}

impl Default for EventsOptions {
    fn default() -> Self {
        Self {
            send_events: true,
            events_uri: None,
            capacity: 10_000,
            flush_interval: Duration::from_secs(5),
            all_attributes_private: false,
            private_attributes: Vec::new(),
            diagnostic_opt_out: false,
            diagnostic_recording_interval: Duration::from_secs(900),
            context_keys_capacity: 1_000,
            context_keys_flush_interval: Duration::from_secs(300),
            gzip: false,
            omit_anonymous_contexts: false,
        }
    }
}

/// LaunchDarkly's events service.
pub const DEFAULT_EVENTS_URI: &str = "https://events.launchdarkly.com";
