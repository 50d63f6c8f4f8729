//! The client's events: built with the client, started and closed with it (the
//! `track`, `identify` and `flush` methods are in `client_api.rs`).

use std::sync::{Arc, Mutex};
use std::time::Instant;

use flagsync_core::Config;
use flagsync_core::events::{DiagnosticInfo, EventProcessor, EventsConfig};
use serde_json::{Value, json};

use super::{Command, DEFAULT_EVENTS_URI, EventsMachine, EventsOptions, EventsSink, Recorder};
use crate::conn::ConnConfig;
use crate::driver::{self, Msg, TaskGuard};
use crate::runtime::Runtime;

type Pending = (EventProcessor, async_channel::Receiver<Msg<Command>>);

/// A client's event processor: waiting to start, then running on its own driver.
#[derive(Debug)]
pub(crate) struct ClientEvents {
    pub(crate) recorder: Arc<Recorder>,
    tx: async_channel::Sender<Msg<Command>>,
    pending: Mutex<Option<Pending>>,
}

/// Mixed into the client's seed for the event processor (payload ids, sampling).
const EVENTS_STREAM: u64 = 0x5eed_e7e7_0000_0002;

impl ClientEvents {
    /// The events of a client with `config` (its identity already has the instance
    /// id), or `None` when events are off.
    pub(crate) fn build(
        options: &EventsOptions,
        config: &Config,
        uses_proxy: bool,
        seed: u64,
        now: Instant,
    ) -> Option<Self> {
        if !options.send_events {
            return None;
        }
        let defaults = Config::new("");
        let events_uri = match &options.events_uri {
            Some(uri) => uri.clone(),
            None if config.stream_uri == defaults.stream_uri
                && config.polling_uri == defaults.polling_uri =>
            {
                DEFAULT_EVENTS_URI.to_owned()
            }
            None => {
                tracing::warn!(
                    "custom stream or polling URIs without an events URI: analytics events are not sent (set one with ClientBuilder::events_uri)"
                );
                return None;
            }
        };
        let mut events = EventsConfig::new("");
        events.identity = config.identity.clone();
        events.capacity = options.capacity.max(1);
        events.flush_interval = options.flush_interval;
        events.context_keys_capacity = options.context_keys_capacity;
        events.context_keys_flush_interval = options.context_keys_flush_interval;
        events.all_attributes_private = options.all_attributes_private;
        events.private_attributes = options.private_attributes.clone();
        events.omit_anonymous_contexts = options.omit_anonymous_contexts;
        events.gzip = options.gzip;
        events.diagnostic_recording_interval = options.diagnostic_recording_interval;
        events.connect_timeout = config.connect_timeout;
        events.read_timeout = config.read_timeout;
        events.diagnostics = (!options.diagnostic_opt_out).then(|| DiagnosticInfo {
            configuration: diagnostic_configuration(options, config, &events_uri, uses_proxy),
            sdk: json!({
                "name": "flagsync",
                "version": env!("CARGO_PKG_VERSION"),
                "wrapperName": config.identity.wrapper.as_ref().map(|w| w.0.clone()),
                "wrapperVersion": config.identity.wrapper.as_ref().and_then(|w| w.1.clone()),
            }),
            platform: json!({
                "name": "rust",
                "osName": std::env::consts::OS,
                "osArch": std::env::consts::ARCH,
            }),
        });
        events.events_uri = events_uri;
        let processor =
            EventProcessor::new(events, seed ^ EVENTS_STREAM, now, super::clock::unix_ms());
        // Unbounded: the recorder bounds the records in it (a flush or close always
        // gets in behind them).
        let (tx, rx) = async_channel::unbounded();
        let recorder = Arc::new(Recorder::new(
            tx.clone(),
            options.capacity.clamp(1, 1 << 20),
            options.context_keys_capacity,
        ));
        Some(Self {
            recorder,
            tx,
            pending: Mutex::new(Some((processor, rx))),
        })
    }

    /// Run the processor on `rt` (once).
    pub(crate) fn start(
        &self,
        rt: &Arc<dyn Runtime>,
        conn_config: Arc<ConnConfig>,
        guard: Arc<TaskGuard>,
    ) {
        let pending = self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some((processor, rx)) = pending else {
            return;
        };
        driver::spawn(
            rt.clone(),
            conn_config,
            EventsMachine::new(processor, self.recorder.clone()),
            EventsSink {
                tx: self.tx.clone(),
            },
            self.tx.clone(),
            rx,
            guard,
        );
    }

    /// Send what is queued, then stop (the driver ends once the posts have ended).
    pub(crate) fn close(&self) {
        let _ = self.tx.force_send(Msg::Command(Command::Close));
    }

    /// Stop now, whatever is in flight.
    pub(crate) fn abort(&self) {
        let _ = self.tx.force_send(Msg::Shutdown);
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The `configuration` object of the `diagnostic-init` event.
fn diagnostic_configuration(
    options: &EventsOptions,
    config: &Config,
    events_uri: &str,
    uses_proxy: bool,
) -> Value {
    let defaults = Config::new("");
    json!({
        "customBaseURI": config.polling_uri != defaults.polling_uri,
        "customStreamURI": config.stream_uri != defaults.stream_uri,
        "customEventsURI": events_uri != DEFAULT_EVENTS_URI,
        "eventsCapacity": options.capacity,
        "connectTimeoutMillis": millis(config.connect_timeout),
        "socketTimeoutMillis": millis(config.read_timeout),
        "eventsFlushIntervalMillis": millis(options.flush_interval),
        "usingProxy": uses_proxy,
        "streamingDisabled": config.mode == flagsync_core::Mode::Polling,
        "usingRelayDaemon": config.persistence.as_ref().is_some_and(|p| p.mode == flagsync_core::StoreMode::ReadOnly),
        "allAttributesPrivate": options.all_attributes_private,
        "pollingIntervalMillis": millis(config.poll_interval),
        "userKeysCapacity": options.context_keys_capacity,
        "userKeysFlushIntervalMillis": millis(options.context_keys_flush_interval),
        "diagnosticRecordingIntervalMillis": millis(options.diagnostic_recording_interval),
        "dataStoreType": if config.persistence.is_some() { "custom" } else { "memory" },
    })
}
