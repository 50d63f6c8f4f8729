//! [`ClientBuilder`]: a client's settings, checked by [`ClientBuilder::build`].

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flagsync_core::config::Fdv2Config;
use flagsync_core::fdv2::PayloadLimits;
use flagsync_core::source::UnrecoverablePolicy;
use flagsync_core::{Config, DataSystem, Mode, PersistenceConfig};

use crate::client::{Client, Inner, Life};
use crate::driver::Finished;
use crate::error::Error;
use crate::external::DataSource;
use crate::file_source::{FileDataSource, FileOptions};
use crate::persist::{self, CacheConfig, CachingStore, PersistentStore, StoreMode};
use crate::publish::{Clock, DEFAULT_SUBSCRIPTION_CAPACITY, Published};
use crate::transport::{Transport, transport_methods};
#[cfg(feature = "eval")]
use crate::{bigseg, eval, events, hooks, transport};

/// Messages the driver's inbox holds: reads of up to 64 KiB from connection tasks, and
/// commands. A connection reading faster than the driver handles what it read waits
/// once this many are queued, so a read-ahead holds at most 128 KiB; the socket's own
/// buffer holds the rest. Every read held is memory a patch flood needs beyond the
/// store (more reads here did not raise the rate, BENCHMARKS.md).
const INBOX_CAPACITY: usize = 2;

/// Settings for a [`Client`]; made by [`Client::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ClientBuilder {
    config: Config,
    transport: Transport,
    close_timeout: Duration,
    seed: Option<u64>,
    persistent: Option<(Arc<dyn PersistentStore>, CacheConfig)>,
    #[cfg(feature = "eval")]
    events: events::EventsOptions,
    subscription_capacity: usize,
    #[cfg(feature = "eval")]
    hooks: Vec<Arc<dyn hooks::Hook>>,
    #[cfg(feature = "eval")]
    big_segments: Option<bigseg::BigSegmentsOptions>,
    external: Option<DataSource>,
    offline: bool,
}

impl ClientBuilder {
    /// Offline mode (the official SDKs' `offline`): connect to nothing, ever — no
    /// stream, no poll, no analytics or diagnostic events, no persistent or
    /// big-segment store. [`Client::initialized`] and
    /// [`Client::wait_for_initialization`] answer true at once and
    /// [`Client::is_offline`] tells the mode. Every evaluation returns the
    /// application's default with reason `ERROR` / `CLIENT_NOT_READY` and
    /// [`Client::all_flags_state`] an invalid state, as LaunchDarkly's Go, Python and
    /// Rust SDKs answer offline (they ignore a configured store too). It overrides the
    /// data source, store and events settings.
    ///
    /// ```
    /// use flagsync::eval::{ContextBuilder, EvalError, Reason};
    ///
    /// let client = flagsync::Client::builder("sdk-key").offline(true).build()?;
    /// assert!(client.initialized() && client.is_offline() && !client.sends_events());
    /// let context = ContextBuilder::new("user-1").build().expect("valid");
    /// let detail = client.bool_variation_detail("any-flag", &context, true);
    /// assert_eq!(detail.value, Some(true));
    /// assert_eq!(detail.reason, Reason::error(EvalError::ClientNotReady));
    /// # Ok::<(), flagsync::Error>(())
    /// ```
    pub fn offline(mut self, offline: bool) -> Self {
        self.offline = offline;
        self
    }

    /// Take the flags from an in-process source instead of a flag service: a
    /// [`TestData`](crate::test_data::TestData) (flags set by the test, updated with
    /// [`TestData::update`](crate::test_data::TestData::update)) or a
    /// [`FileDataSource`]. No connection is made for data; the source's first data set
    /// initializes the client (status VALID, data availability REFRESHED) and its
    /// updates reach [`Client::flag_changes`] and the value-change listeners as a
    /// stream's would. It overrides [`ClientBuilder::mode`] and the FDv1/FDv2
    /// settings. Analytics events still go to the events service unless
    /// [`send_events(false)`](ClientBuilder::send_events).
    ///
    /// ```
    /// use flagsync::test_data::TestData;
    ///
    /// let td = TestData::new();
    /// td.update(td.flag("banner").variation_for_all(true));
    /// let client = flagsync::Client::builder("sdk-key")
    ///     .data_source(td.clone())
    ///     .build()?;
    /// # Ok::<(), flagsync::Error>(())
    /// ```
    pub fn data_source(mut self, source: impl Into<DataSource>) -> Self {
        self.config.mode = Mode::External;
        self.external = Some(source.into());
        self
    }

    /// Take the flags from LaunchDarkly's flag data files (JSON, or YAML with the
    /// `yaml` feature), merged, reloaded as `options` says:
    /// [`ClientBuilder::data_source`] with a [`FileDataSource`].
    pub fn file_data_source<P: Into<std::path::PathBuf>>(
        self,
        paths: impl IntoIterator<Item = P>,
        options: FileOptions,
    ) -> Self {
        self.data_source(FileDataSource::new(paths, options))
    }

    /// The streaming service base URI (default LaunchDarkly's; trailing slashes are fine).
    pub fn stream_uri(mut self, uri: impl Into<String>) -> Self {
        self.config.stream_uri = uri.into();
        self
    }

    /// The polling service base URI (default LaunchDarkly's).
    pub fn polling_uri(mut self, uri: impl Into<String>) -> Self {
        self.config.polling_uri = uri.into();
        self
    }

    /// Poll instead of streaming.
    pub fn polling(mut self, polling: bool) -> Self {
        self.config.mode = if polling {
            Mode::Polling
        } else {
            Mode::Streaming
        };
        self
    }

    /// FDv1 streaming or polling; [`Mode::Fdv2`] keeps the current FDv2 settings (see
    /// [`ClientBuilder::fdv2`]).
    pub fn mode(mut self, mode: Mode) -> Self {
        self.config.mode = mode;
        self
    }

    /// Use the FDv2 data system (PROTOCOL.md B §5): `fdv2`'s initializers run in
    /// order until one yields a payload with a selector, then its synchronizers keep
    /// the store current, one at a time, falling back and recovering by its
    /// [`CoordinatorTiming`](crate::CoordinatorTiming). A server's `X-LD-FD-Fallback: true` moves the client to
    /// `fdv2.fdv1_fallback` for good.
    ///
    /// Start from a preset ([`Fdv2Config::default`]: a polling initializer, then the
    /// stream with polling as its fallback; [`Fdv2Config::streaming`];
    /// [`Fdv2Config::polling`]; [`Fdv2Config::daemon`]) or list the sources with
    /// [`Fdv2Config::custom`]. A later [`ClientBuilder::polling`] or
    /// [`ClientBuilder::mode`] switches back to FDv1.
    ///
    /// ```
    /// use std::time::Duration;
    /// use flagsync::{Client, DataAvailability, Fdv2Config, SourceSpec};
    ///
    /// // The stream first; polling every 10 s if the stream stays interrupted.
    /// let fdv2 = Fdv2Config::custom()
    ///     .synchronizers([
    ///         SourceSpec::streaming(),
    ///         SourceSpec::Polling { base_uri: None, interval: Some(Duration::from_secs(10)) },
    ///     ])
    ///     .fdv1_fallback(Some(SourceSpec::fdv1_polling()));
    /// let client = Client::builder("sdk-key").fdv2(fdv2).build()?;
    /// assert_eq!(client.data_availability(), DataAvailability::Defaults);
    /// assert_eq!(client.target_availability(), DataAvailability::Refreshed);
    /// # Ok::<(), flagsync::Error>(())
    /// ```
    pub fn fdv2(mut self, fdv2: Fdv2Config) -> Self {
        self.config.mode = Mode::Fdv2;
        self.config.fdv2 = fdv2;
        self
    }

    /// How often to poll (default and minimum 30 s).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.config.poll_interval = interval;
        self
    }

    /// Ask for a filtered payload (`filter=` key).
    ///
    /// A filtered environment's key is a letter or digit, then letters, digits, `.`, `_`
    /// and `-`. Any other key names no filtered environment: it is ignored (logged at
    /// `warn`) and the whole environment is requested, as LaunchDarkly's Go SDK does.
    pub fn payload_filter(mut self, filter: impl Into<String>) -> Self {
        let filter = filter.into();
        if valid_payload_filter(&filter) {
            self.config.payload_filter = Some(filter);
        } else {
            tracing::warn!(filter = %filter, "ignoring an invalid payload filter key");
            self.config.payload_filter = None;
        }
        self
    }

    /// Identify the application in `X-LaunchDarkly-Tags`.
    pub fn application(mut self, id: impl Into<String>, version: impl Into<String>) -> Self {
        self.config.identity.application_id = Some(id.into());
        self.config.identity.application_version = Some(version.into());
        self
    }

    /// Identify the application by id alone in `X-LaunchDarkly-Tags` (the official SDK's
    /// `ApplicationInfo::application_identifier`).
    pub fn application_id(mut self, id: impl Into<String>) -> Self {
        self.config.identity.application_id = Some(id.into());
        self
    }

    /// The application's version in `X-LaunchDarkly-Tags` (the official SDK's
    /// `ApplicationInfo::application_version`).
    pub fn application_version(mut self, version: impl Into<String>) -> Self {
        self.config.identity.application_version = Some(version.into());
        self
    }

    /// Name the library or framework that wraps flagsync, sent as
    /// `X-LaunchDarkly-Wrapper: name/version` (just `name` when `version` is empty; no
    /// header when `name` is empty).
    pub fn wrapper(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        let version = version.into();
        self.config.identity.wrapper = Some((name.into(), Some(version).filter(|v| !v.is_empty())));
        self
    }

    /// What a 401, 403 or other unrecoverable HTTP status does (default: keep retrying,
    /// slowly).
    pub fn unrecoverable(mut self, policy: UnrecoverablePolicy) -> Self {
        self.config.unrecoverable = policy;
        self
    }

    /// Connect timeout (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// Polling read timeout (default 15 s).
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.config.read_timeout = timeout;
        self
    }

    /// Stream read timeout: silence longer than this reconnects (default 300 s).
    pub fn stream_read_timeout(mut self, timeout: Duration) -> Self {
        self.config.stream_read_timeout = timeout;
        self
    }

    /// A poll's whole response (redirects included) must arrive within this time of
    /// the poll's start, however steadily its bytes trickle in (default 60 s); else the
    /// poll fails with NETWORK_ERROR and the next follows as after any failed poll.
    pub fn poll_response_timeout(mut self, timeout: Duration) -> Self {
        self.config.poll_response_timeout = timeout;
        self
    }

    /// A stream's response head (redirects included) must arrive within this time of
    /// the attempt's start (default 30 s); else NETWORK_ERROR and a reconnect with
    /// backoff. The body is bounded by [`ClientBuilder::stream_read_timeout`].
    pub fn stream_head_timeout(mut self, timeout: Duration) -> Self {
        self.config.stream_head_timeout = timeout;
        self
    }

    /// First reconnect delay (default 1 s; doubles up to 30 s, with jitter).
    pub fn initial_reconnect_delay(mut self, delay: Duration) -> Self {
        self.config.backoff.initial = delay;
        self
    }

    /// How long `close()` waits for every connection to end (default 5 s).
    pub fn close_timeout(mut self, timeout: Duration) -> Self {
        self.close_timeout = timeout;
        self
    }

    /// Keep the flags in a persistent store shared with other processes as well
    /// (PROTOCOL.md B §4, §5.8–5.9), behind a read cache configured by `cache`.
    ///
    /// - Until the first full data set arrives, reads are served from the store (a warm
    ///   start: the last known flags at once), reloaded every cache TTL; from then on
    ///   memory serves them and the cache is switched off.
    /// - [`StoreMode::ReadWrite`]: every applied change is written through (a full data
    ///   set in init order, then upserts); [`StoreMode::ReadOnly`]: nothing is written.
    /// - A failed store operation marks the store unavailable
    ///   ([`Client::store_status_changes`]) and the data-source status STORE_ERROR; the
    ///   store is asked every 0.5 s whether it is back, and then given the whole
    ///   in-memory data set again, so no update made during the outage is lost.
    ///
    /// For a process that only reads a store another process keeps current, see
    /// [`ClientBuilder::daemon`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flagsync::persist::{CacheConfig, InMemoryStore, StoreMode};
    ///
    /// let store = Arc::new(InMemoryStore::new()); // or a flagsync_redis::RedisStore
    /// let client = flagsync::Client::builder("sdk-key")
    ///     .persistent_store(store, StoreMode::ReadWrite, CacheConfig::default())
    ///     .build()?;
    /// assert_eq!(client.store_status().map(|s| s.available), Some(true));
    /// # Ok::<(), flagsync::Error>(())
    /// ```
    pub fn persistent_store(
        mut self,
        store: Arc<dyn PersistentStore>,
        mode: StoreMode,
        cache: CacheConfig,
    ) -> Self {
        let poll = self.config.persistence.map_or_else(
            || PersistenceConfig::default().availability_poll,
            |p| p.availability_poll,
        );
        self.config.persistence = Some(PersistenceConfig {
            mode,
            availability_poll: poll,
        });
        self.persistent = Some((store, cache));
        self
    }

    /// Daemon mode: connect to no flag service and serve the flags another process
    /// (a Relay Proxy, another SDK, a `flagsync watch --redis`) keeps in `store`,
    /// read-only, reloaded every cache TTL. The FDv2 data system without sources
    /// ([`Fdv2Config::daemon`]) with a read-only [`ClientBuilder::persistent_store`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flagsync::DataAvailability;
    /// use flagsync::persist::{CacheConfig, InMemoryStore};
    ///
    /// let store = Arc::new(InMemoryStore::new());
    /// let client = flagsync::Client::builder("sdk-key")
    ///     .daemon(store, CacheConfig::default())
    ///     .build()?;
    /// assert_eq!(client.target_availability(), DataAvailability::Cached);
    /// # Ok::<(), flagsync::Error>(())
    /// ```
    pub fn daemon(self, store: Arc<dyn PersistentStore>, cache: CacheConfig) -> Self {
        self.fdv2(Fdv2Config::daemon())
            .persistent_store(store, StoreMode::ReadOnly, cache)
    }

    /// Seed the reconnect jitter (default: random), for reproducible runs.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// How many unread items each subscription ([`Client::flag_changes`],
    /// [`Client::status_changes`], [`Client::store_status_changes`]) holds at most
    /// (default [`DEFAULT_SUBSCRIPTION_CAPACITY`]): beyond it the oldest is
    /// dropped and counted ([`Subscription::lagged`](crate::Subscription::lagged)); changes of one flag merge.
    pub fn subscription_capacity(mut self, capacity: usize) -> Self {
        self.subscription_capacity = capacity.max(1);
        self
    }

    /// How much of an FDv2 payload may be held before its `payload-transferred`
    /// (default [`PayloadLimits::default`]: 64 MiB of raw JSON and keys, as the SSE
    /// event limit that bounds an FDv1 `put`, and 524,288 objects). A stream, or a poll
    /// response, whose payload goes past it is dropped: the status reports INVALID_DATA
    /// naming the limit, the stream reconnects with backoff (a poll waits for its next
    /// turn), and the flags already held stay. Raise it with the SSE limits
    /// ([`ClientBuilder::core_config`], `limits.sse`) for a larger environment.
    ///
    /// ```
    /// use flagsync::{Client, Fdv2Config, PayloadLimits};
    ///
    /// let client = Client::builder("sdk-key")
    ///     .fdv2(Fdv2Config::streaming())
    ///     .fdv2_payload_limits(PayloadLimits::for_bytes(16 << 20))
    ///     .build()?;
    /// # Ok::<(), flagsync::Error>(())
    /// ```
    pub fn fdv2_payload_limits(mut self, limits: PayloadLimits) -> Self {
        self.config.limits.fdv2_payload = limits;
        self
    }

    /// Change any setting of the protocol core directly (limits, backoff, the minimum
    /// poll interval, …).
    pub fn core_config(mut self, change: impl FnOnce(&mut Config)) -> Self {
        change(&mut self.config);
        self
    }

    transport_methods!();

    /// The analytics events settings (see [`events`]): where events go, how many are
    /// kept, how often they are sent, which context attributes are private.
    #[cfg(feature = "eval")]
    pub fn events(mut self, options: events::EventsOptions) -> Self {
        self.events = options;
        self
    }

    /// The events service base URI (default LaunchDarkly's while the stream and polling
    /// URIs are LaunchDarkly's; see [`events::EventsOptions::events_uri`]).
    #[cfg(feature = "eval")]
    pub fn events_uri(mut self, uri: impl Into<String>) -> Self {
        self.events.events_uri = Some(uri.into());
        self
    }

    /// Send everything through a LaunchDarkly Relay Proxy (or another service that
    /// serves all three) at `uri`: the stream, polling and events base URIs at once (the
    /// official SDK's `ServiceEndpointsBuilder::relay_proxy`).
    #[cfg(feature = "eval")]
    pub fn relay_proxy(self, uri: impl Into<String>) -> Self {
        let uri = uri.into();
        self.stream_uri(uri.clone())
            .polling_uri(uri.clone())
            .events_uri(uri)
    }

    /// Send analytics events (default true); false sends none.
    #[cfg(feature = "eval")]
    pub fn send_events(mut self, send: bool) -> Self {
        self.events.send_events = send;
        self
    }

    /// Register `hooks` (in this order, after any registered before): user code run
    /// around every evaluation and `track` (see [`hooks`]).
    #[cfg(feature = "eval")]
    pub fn hooks(mut self, hooks: impl IntoIterator<Item = Arc<dyn hooks::Hook>>) -> Self {
        self.hooks.extend(hooks);
        self
    }

    /// Evaluate big segments with the store and settings of `options` (see
    /// [`bigseg`]). Without it, a big segment never matches by membership and
    /// evaluations report `NOT_CONFIGURED`.
    #[cfg(feature = "eval")]
    pub fn big_segments(mut self, options: bigseg::BigSegmentsOptions) -> Self {
        self.big_segments = Some(options);
        self
    }

    /// Check the settings and make a stopped client.
    pub fn build(self) -> Result<Client, Error> {
        let conn_config = Arc::new(self.transport.conn_config()?);
        #[cfg(feature = "eval")]
        let secure_mode = eval::SecureModeKey::new(&self.config.identity.sdk_key);
        let now = Instant::now();
        let seed = self.seed.unwrap_or_else(|| fastrand::u64(..));
        let mut config = self.config;
        let mut external = self.external;
        let mut persistent = self.persistent;
        #[cfg(feature = "eval")]
        let mut events_options = self.events;
        #[cfg(feature = "eval")]
        let mut big_segments = self.big_segments;
        if self.offline {
            // No source and no store: the core's external mode with nothing feeding it.
            external = None;
            persistent = None;
            config.persistence = None;
            config.mode = Mode::External;
            #[cfg(feature = "eval")]
            {
                events_options.send_events = false;
                big_segments = None;
            }
        }
        if external.is_some() {
            config.mode = Mode::External;
        }
        // One id per client, from the client's own seed: reproducible with `seed`.
        let instance_id = flagsync_core::events::uuid_v4(&mut fastrand::Rng::with_seed(
            seed ^ INSTANCE_ID_STREAM,
        ));
        config.identity.instance_id = Some(instance_id.clone());
        // FDv2 hands reads over to memory once it holds a full data set; FDv1 keeps
        // reading the persistent store, which is then the SDK's store.
        let hands_over = config.mode == Mode::Fdv2;
        #[cfg(feature = "eval")]
        let events = {
            config.validate()?;
            let uses_proxy = !matches!(self.transport.proxy, transport::ProxyChoice::None);
            events::client::ClientEvents::build(&events_options, &config, uses_proxy, seed, now)
        };
        // A client that never writes lists what the store holds, `$inited` or not.
        let reader = config
            .persistence
            .is_some_and(|p| p.mode == flagsync_core::StoreMode::ReadOnly);
        let system = DataSystem::new(config, seed, now)?;
        let (store, view) = match persistent {
            Some((store, cache)) => {
                let (view, fetches) = persist::view::StoreView::new(cache, reader);
                let store = Arc::new(CachingStore::new(store, cache));
                (Some((store, fetches)), Some(view))
            }
            None => (None, None),
        };
        let published = Arc::new(Published::new(
            &system,
            Clock::new(now),
            view.clone(),
            hands_over,
            self.subscription_capacity,
        ));
        let (tx, rx) = async_channel::bounded(INBOX_CAPACITY);
        // Big segments' status poller runs on the client's runtime: from now when it is
        // known now (given, or the default one from here), else from `start`.
        #[cfg(feature = "eval")]
        let big_segments = big_segments.as_ref().map(|o| {
            let handle = bigseg::BigSegmentsHandle::new(o, self.subscription_capacity);
            if let Ok(rt) = self.transport.runtime() {
                handle.run_on(&rt);
            }
            handle
        });
        Ok(Client {
            inner: Arc::new(Inner {
                published,
                finished: Finished::new(),
                tx,
                close_timeout: self.close_timeout,
                instance_id,
                life: Mutex::new(Life::Built {
                    system: Box::new(system),
                    rx,
                    transport: self.transport,
                    conn_config,
                    store,
                    external,
                }),
                offline: self.offline,
                #[cfg(feature = "eval")]
                models: eval::ModelCache::default(),
                #[cfg(feature = "eval")]
                secure_mode,
                #[cfg(feature = "eval")]
                events,
                #[cfg(feature = "eval")]
                hooks: hooks::HookRunner::new(self.hooks),
                #[cfg(feature = "eval")]
                big_segments,
            }),
        })
    }
}

/// `^[a-zA-Z0-9][._\-a-zA-Z0-9]*$`: the keys of filtered environments.
fn valid_payload_filter(key: &str) -> bool {
    let mut bytes = key.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphanumeric())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Mixed into the client's seed for its instance id, so that the id and the reconnect
/// jitter are independent draws.
const INSTANCE_ID_STREAM: u64 = 0x1d5e_a7c0_ffee_0001;

impl Client {
    /// Settings for a client using `sdk_key`.
    pub fn builder(sdk_key: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            config: Config::new(sdk_key),
            transport: Transport::default(),
            close_timeout: Duration::from_secs(5),
            seed: None,
            persistent: None,
            #[cfg(feature = "eval")]
            events: events::EventsOptions::default(),
            subscription_capacity: DEFAULT_SUBSCRIPTION_CAPACITY,
            #[cfg(feature = "eval")]
            hooks: Vec::new(),
            #[cfg(feature = "eval")]
            big_segments: None,
            external: None,
            offline: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instance_id_is_a_v4_uuid_from_the_seed() {
        let a = Client::builder("k").seed(7).build().expect("client");
        let b = Client::builder("k").seed(7).build().expect("client");
        let c = Client::builder("k").seed(8).build().expect("client");
        let id = a.instance_id();
        assert_eq!(id, b.instance_id());
        assert_ne!(id, c.instance_id());
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(
            id.bytes()
                .all(|b| b == b'-' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(parts[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'));
    }

    #[test]
    #[cfg(feature = "eval")]
    fn the_official_sdk_s_endpoint_and_application_settings() {
        let b = Client::builder("k").relay_proxy("http://relay:8030");
        assert_eq!(b.config.stream_uri, "http://relay:8030");
        assert_eq!(b.config.polling_uri, "http://relay:8030");
        assert_eq!(b.events.events_uri.as_deref(), Some("http://relay:8030"));
        let b = Client::builder("k")
            .application_id("app")
            .application_version("1.2");
        assert_eq!(b.config.identity.application_id.as_deref(), Some("app"));
        assert_eq!(
            b.config.identity.application_version.as_deref(),
            Some("1.2")
        );
        let b = Client::builder("k").application_version("2");
        assert_eq!(b.config.identity.application_id, None);
    }

    #[test]
    fn payload_filter_keys_are_checked() {
        for ok in ["a", "microservice-1", "encoding_not_necessary", "A.b-c_9"] {
            assert!(valid_payload_filter(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            ".a",
            "my filter",
            "encoding necessary +! %& ( )",
            "é",
        ] {
            assert!(!valid_payload_filter(bad), "{bad}");
        }
        let b = Client::builder("k").payload_filter("mobile");
        assert_eq!(b.config.payload_filter.as_deref(), Some("mobile"));
        let b = b.payload_filter("not valid");
        assert_eq!(b.config.payload_filter, None);
    }

    #[test]
    fn a_client_debug_output_never_shows_the_sdk_key() {
        for mode in [Mode::Streaming, Mode::Polling, Mode::Fdv2] {
            let client = Client::builder("sdk-very-secret-key")
                .mode(mode)
                .proxy("http://user:proxy-pass@127.0.0.1:3128")
                .build()
                .expect("client");
            let shown = format!("{client:?}");
            assert!(!shown.contains("sdk-very-secret-key"), "{mode:?}: {shown}");
            assert!(!shown.contains("proxy-pass"), "{mode:?}: {shown}");
        }
    }

    #[test]
    fn unseeded_clients_have_different_instance_ids() {
        let a = Client::builder("k").build().expect("client");
        let b = Client::builder("k").build().expect("client");
        assert_ne!(a.instance_id(), b.instance_id());
    }
}
