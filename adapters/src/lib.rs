//! Keep a feature-flag store in sync with a LaunchDarkly-compatible flag delivery
//! service, on tokio, smol or async-std.
//!
//! The protocol lives in [`flagsync_core`], a sans-I/O state machine. This crate is the
//! thin shell around it: one driver loop written against a small [`runtime::Runtime`]
//! trait, connection tasks that pump bytes (through a proxy and TLS when needed), and
//! the published snapshot, status and change streams.
//!
//! ```no_run
//! # async fn demo() -> Result<(), flagsync::Error> {
//! use std::time::Duration;
//!
//! let client = flagsync::Client::builder("sdk-key").build()?;
//! client.start()?;
//! if client.wait_for_initialization(Duration::from_secs(5)).await {
//!     if let Some(flag) = client.flag("my-flag") {
//!         println!("{} is on: {}", flag.key, flag.on);
//!     }
//! }
//! client.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! # Data systems
//! By default the client speaks FDv1: one stream (`/all`), or polling
//! ([`ClientBuilder::polling`]). [`ClientBuilder::fdv2`] chooses the FDv2 data system
//! (`/sdk/stream`, `/sdk/poll`): initializers, then synchronizers with fallback and
//! recovery, and the server-directed FDv1 fallback. [`Client::data_availability`] and
//! [`Client::active_source`] show where the data comes from.
//!
//! # Persistent stores
//! [`ClientBuilder::persistent_store`] also keeps the flags in a database shared by
//! many processes ([`persist`]): one writer keeps it fresh, a restarted service serves
//! the last known flags at once (warm start), and [`ClientBuilder::daemon`] serves
//! what another process wrote without connecting anywhere. [`Client::store_status`]
//! shows outages; after one, the store is given the whole in-memory data again.
//!
//! # Features
//! - `tokio` (default): run on tokio. `start()` must then be called inside a tokio
//!   runtime with its I/O and time drivers enabled.
//! - `smol`: run on smol. `async-std`: run on async-std, which is discontinued upstream
//!   in favour of smol; it is kept working through the async-io path it shares with smol.
//! - `rustls` (default): `https` with rustls and the webpki roots; `native-roots` also
//!   trusts the platform's certificates.
//! - `server`: `flagsync::server`, the local LaunchDarkly-compatible flag server of the
//!   `flagsync-server` crate, for offline development and tests (std threads only, any
//!   runtime).
//! - `eval` (default): flag evaluation (the `eval` module, `Client::bool_variation` and
//!   friends) with flagsync's own engine and context types (crate `flagsync-eval`,
//!   re-exported as `eval::engine` and `eval::context`, the official crate's API), the
//!   `migration` module, evaluation and track hooks (the `hooks` module), and big
//!   segments (the `bigseg` module).
//!
//! Elsewhere: Redis stores in LaunchDarkly's layout are the `flagsync-redis` crate
//! (`RedisStore`, `RedisBigSegmentStore`); the `flagsync` command-line tool (`serve`,
//! `demo`, `watch`, `snapshot`) is `flagsync-cli`.
//!
//! Nothing is logged above `debug`, and the SDK key is never logged.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(unreachable_pub, clippy::use_self, elided_lifetimes_in_paths)]

#[cfg(feature = "eval")]
pub mod bigseg;
mod conn;
mod driver;
#[cfg(feature = "eval")]
pub mod eval;
#[cfg(feature = "eval")]
pub mod events;
mod flag;
#[cfg(feature = "eval")]
pub mod hooks;
#[cfg(feature = "eval")]
mod listeners;
#[cfg(feature = "eval")]
pub mod migration;
pub mod persist;
mod proxy;
mod publish;
pub mod runtime;
/// The local flag server of crate `flagsync-server` (feature `server`), for tests.
#[cfg(feature = "server")]
pub use flagsync_server as server;
pub mod sse_client;
#[cfg(feature = "rustls")]
mod tls;
mod transport;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flagsync_core::{Command, Config, DataSystem, PersistenceConfig};

pub use flag::{Flag, Segment};
pub use flagsync_core::config::{CoordinatorTiming, Fdv2Config, SourceSpec};
pub use flagsync_core::fdv2::PayloadLimits;
pub use flagsync_core::source::UnrecoverablePolicy;
pub use flagsync_core::{DataAvailability, ErrorKind, Kind, Mode, Selector, Snapshot, State};
#[cfg(feature = "eval")]
pub use listeners::{FlagValueChange, FlagValueChanges};
pub use proxy::ProxyError;
pub use publish::{
    DEFAULT_SUBSCRIPTION_CAPACITY, DataSourceError, DataSourceStatus, FlagChange, Subscription,
};

use driver::{Finished, Msg, Sink, TaskGuard};
use persist::{CacheConfig, CachingStore, PersistentStore, StoreMode, StoreStatus};
use publish::{Clock, DataSink, Published, StoreLink};
use runtime::Runtime;
use transport::{Transport, transport_methods};

/// Messages the driver's inbox holds: reads of up to 64 KiB from connection tasks, and
/// commands. A connection reading faster than the driver handles what it read waits
/// once this many are queued, so a read-ahead holds at most 128 KiB; the socket's own
/// buffer holds the rest. Every read held is memory a patch flood needs beyond the
/// store (more reads here did not raise the rate, BENCHMARKS.md).
const INBOX_CAPACITY: usize = 2;

/// Why a client could not be built or started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A URI or another setting cannot work.
    #[error(transparent)]
    Config(#[from] flagsync_core::ConfigError),
    /// The proxy URL cannot be used.
    #[error(transparent)]
    Proxy(#[from] ProxyError),
    /// The TLS settings cannot be used (for example, unreadable PEM data).
    #[error("invalid TLS settings: {0}")]
    Tls(String),
    /// No runtime to run on: with the `tokio` feature alone, call `start()` inside a
    /// tokio runtime (or give one with the builder's `runtime`).
    #[error("no async runtime: call start() inside a tokio runtime, or enable the `smol` feature")]
    NoRuntime,
}

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
}

impl ClientBuilder {
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
    /// [`CoordinatorTiming`]. A server's `X-LD-FD-Fallback: true` moves the client to
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
    /// dropped and counted ([`Subscription::lagged`]); changes of one flag merge.
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
            events::client::ClientEvents::build(&self.events, &config, uses_proxy, seed, now)
        };
        let system = DataSystem::new(config, seed, now)?;
        let (store, view) = match self.persistent {
            Some((store, cache)) => {
                let (view, fetches) = persist::view::StoreView::new(cache);
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
                }),
                #[cfg(feature = "eval")]
                models: eval::ModelCache::default(),
                #[cfg(feature = "eval")]
                secure_mode,
                #[cfg(feature = "eval")]
                events,
                #[cfg(feature = "eval")]
                hooks: hooks::HookRunner::new(self.hooks),
                #[cfg(feature = "eval")]
                big_segments: self
                    .big_segments
                    .as_ref()
                    .map(|o| bigseg::BigSegmentsHandle::start(o, self.subscription_capacity)),
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

/// A flag-delivery client: keeps an in-memory copy of the flags up to date.
///
/// Cheap to clone; clones share one connection. Dropping the last clone stops it (call
/// [`Client::close`] to wait until every socket is closed).
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    published: Arc<Published>,
    finished: Arc<Finished>,
    tx: async_channel::Sender<Msg<Command>>,
    close_timeout: Duration,
    instance_id: String,
    life: Mutex<Life>,
    #[cfg(feature = "eval")]
    models: eval::ModelCache,
    /// The SDK key's HMAC, for `secure_mode_hash` (its `Debug` is redacted).
    #[cfg(feature = "eval")]
    secure_mode: eval::SecureModeKey,
    /// The analytics event processor, if events are on.
    #[cfg(feature = "eval")]
    events: Option<events::client::ClientEvents>,
    /// The evaluation and track hooks.
    #[cfg(feature = "eval")]
    hooks: hooks::HookRunner,
    /// Big segments and their status poller, if configured.
    #[cfg(feature = "eval")]
    big_segments: Option<bigseg::BigSegmentsHandle>,
}

#[derive(Debug)]
enum Life {
    Built {
        system: Box<DataSystem>,
        rx: async_channel::Receiver<Msg<Command>>,
        transport: Transport,
        conn_config: Arc<conn::ConnConfig>,
        store: Option<(
            Arc<CachingStore>,
            async_channel::Receiver<persist::view::Fetch>,
        )>,
    },
    Running(Arc<dyn Runtime>),
    Closed(Option<Arc<dyn Runtime>>),
}

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
        }
    }

    /// Start connecting in the background. Calling it again, or after
    /// [`Client::close`], does nothing.
    ///
    /// With tokio, call it inside a tokio runtime.
    pub fn start(&self) -> Result<(), Error> {
        let mut life = self.inner.lock();
        let Life::Built { transport, .. } = &*life else {
            return Ok(());
        };
        let rt = transport.runtime()?;
        let Life::Built {
            system,
            rx,
            conn_config,
            store,
            ..
        } = std::mem::replace(&mut *life, Life::Running(rt.clone()))
        else {
            unreachable!("checked above")
        };
        tracing::debug!(runtime = ?rt, "starting");
        // Every task holds the guard: `close()` waits for the store tasks too.
        let guard = Arc::new(TaskGuard(self.inner.finished.clone()));
        let link =
            store.map(|(store, fetches)| self.start_store_tasks(&rt, store, fetches, &guard));
        // The inbox is empty: this cannot fail.
        let _ = self.inner.tx.try_send(Msg::Command(Command::Start));
        #[cfg(feature = "eval")]
        if let Some(events) = &self.inner.events {
            events.start(&rt, conn_config.clone(), guard.clone());
        }
        let sink = DataSink::new(self.inner.published.clone(), link);
        #[cfg(feature = "eval")]
        if let Some(events) = &self.inner.events {
            // Stream attempts are counted for diagnostic events.
            let sink = events::StreamInits::new(sink, events.recorder.clone());
            driver::spawn(
                rt,
                conn_config,
                *system,
                sink,
                self.inner.tx.clone(),
                rx,
                guard,
            );
            return Ok(());
        }
        driver::spawn(
            rt,
            conn_config,
            *system,
            sink,
            self.inner.tx.clone(),
            rx,
            guard,
        );
        Ok(())
    }

    /// Spawn the store task (the core's requests, in order), the store reader (watches
    /// `$inited` while reads come from the store) and the view's fetch task (reads
    /// items key by key meanwhile).
    fn start_store_tasks(
        &self,
        rt: &Arc<dyn Runtime>,
        store: Arc<CachingStore>,
        fetches: async_channel::Receiver<persist::view::Fetch>,
        guard: &Arc<TaskGuard>,
    ) -> StoreLink {
        let (requests, requests_rx) = persist::writer::queue();
        let (stop_reader, stop_rx) = async_channel::bounded(1);
        let check_pending = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let view = self.inner.published.store_view();
        if let Some(view) = &view {
            view.started(store.clone(), Arc::downgrade(&self.inner.published));
            rt.spawn(Box::pin(persist::view::run(
                view.clone(),
                fetches,
                store.clone(),
                self.inner.published.clone(),
                stop_rx.clone(),
                self.inner.tx.clone(),
                guard.clone(),
            )));
        }
        rt.spawn(Box::pin(persist::writer::run(
            rt.clone(),
            store.clone(),
            view,
            requests_rx,
            self.inner.tx.clone(),
            check_pending.clone(),
            guard.clone(),
        )));
        rt.spawn(Box::pin(persist::reader::run(
            rt.clone(),
            store.clone(),
            self.inner.published.clone(),
            stop_rx,
            self.inner.tx.clone(),
            guard.clone(),
        )));
        StoreLink {
            store,
            requests,
            stop_reader: Some(stop_reader),
            check_pending,
        }
    }

    /// Wait until the client has a full data set (true), the source gives up for good,
    /// or `timeout` passes (false). With a persistent store it also waits for the
    /// first read of the store, and returns true as soon as that read found an
    /// initialized store (a warm start, see [`Client::initialized`]).
    pub async fn wait_for_initialization(&self, timeout: Duration) -> bool {
        if self.initialized() {
            return true;
        }
        let rt = match &*self.inner.lock() {
            Life::Running(rt) => rt.clone(),
            _ => return false,
        };
        let deadline = rt.now() + timeout;
        let published = &self.inner.published;
        // With a persistent store, also the first successful read of it (daemon mode
        // is ready at once, before any data is read; a failed read is not a load),
        // unless memory holds a full data set that was written to the store or while
        // the store is down (memory serves then); or that read alone if it found a
        // full data set (a warm start).
        let source_ready = async {
            published.ready().await;
            let memory_serves = || {
                published.memory_initialized()
                    && (published.store_status().is_some_and(|s| !s.available)
                        || published.store_view().is_some_and(|v| v.has_written()))
            };
            while !memory_serves() {
                let tick = rt.sleep_until(rt.now() + Duration::from_millis(50));
                if runtime::race(published.store_loaded(), tick).await.is_ok() {
                    break;
                }
            }
        };
        let store_ready = async {
            published.store_loaded().await;
            if !published.initialized() {
                std::future::pending::<()>().await;
            }
        };
        let ready = runtime::race(source_ready, store_ready);
        let _ = runtime::race(ready, rt.sleep_until(deadline)).await;
        self.initialized()
    }

    /// True once a full data set has been received, or, with a persistent store, while
    /// reads come from a store that is initialized (warm start, daemon mode).
    ///
    /// The reference SDKs' `is_initialized()` is
    /// `data_availability().at_least(DataAvailability::Cached)` instead, which also
    /// holds for data without a selector and in FDv2 daemon mode (PROTOCOL.md B §4.6).
    pub fn initialized(&self) -> bool {
        self.inner.published.initialized()
    }

    /// How fresh the flag data is (PROTOCOL.md B §4.6, §5.10): `Defaults` (no data:
    /// evaluate to the application's defaults), `Cached` (data not vouched for by the
    /// service: FDv2 data after the FDv1 fallback, or FDv2 daemon mode) or `Refreshed`
    /// (FDv1: a full data set arrived; FDv2: the store holds the service's selector).
    /// Published by the client after each input it handles, together with the
    /// snapshot and the status.
    ///
    /// ```
    /// use flagsync::{Client, DataAvailability, Fdv2Config};
    ///
    /// // Daemon mode: another process keeps the data current; no data source runs.
    /// let client = Client::builder("sdk-key").fdv2(Fdv2Config::daemon()).build()?;
    /// let ready = client.data_availability().at_least(DataAvailability::Cached);
    /// assert!(ready);
    /// # Ok::<(), flagsync::Error>(())
    /// ```
    pub fn data_availability(&self) -> DataAvailability {
        self.inner.published.data_availability()
    }

    /// The best [`Client::data_availability`] this configuration can reach:
    /// `Refreshed` with a data source, `Cached` without one (FDv2 daemon mode).
    ///
    /// ```
    /// use flagsync::{Client, DataAvailability, Fdv2Config};
    ///
    /// let client = Client::builder("sdk-key").fdv2(Fdv2Config::streaming()).build()?;
    /// assert_eq!(client.target_availability(), DataAvailability::Refreshed);
    /// // Not there yet: the client has not started.
    /// assert!(client.data_availability() < client.target_availability());
    /// # Ok::<(), flagsync::Error>(())
    /// ```
    pub fn target_availability(&self) -> DataAvailability {
        self.inner.published.target_availability()
    }

    /// FDv2: the source running now (`"streaming"`, `"polling"` or `"fdv1-polling"`,
    /// as [`SourceSpec::name`]), if any. Always `None` under FDv1 and once closed.
    ///
    /// ```
    /// use flagsync::{Client, Fdv2Config};
    ///
    /// let client = Client::builder("sdk-key").fdv2(Fdv2Config::default()).build()?;
    /// assert_eq!(client.active_source(), None); // not started
    /// # Ok::<(), flagsync::Error>(())
    /// ```
    pub fn active_source(&self) -> Option<&'static str> {
        self.inner.published.active_source()
    }

    /// FDv2: the selector (`state`, `version`) of the payload the client holds, as the
    /// service sent it with `payload-transferred` (PROTOCOL.md B §5.2). Read-only.
    ///
    /// `None` under FDv1, before the first FDv2 payload, and after the fallback to FDv1
    /// (its data has no selector, B §5.6); kept after [`Client::close`]. Its `state` is
    /// what the client sends as `basis` when it reconnects or polls (B §5.4, §5.5).
    ///
    /// Use it to debug which payload a client is on (compare it with the service's),
    /// or to record alongside data you persist yourself which payload that copy is.
    /// Published with the snapshot after each input the client handles, like
    /// [`Client::data_availability`].
    ///
    /// ```
    /// use flagsync::{Client, Fdv2Config};
    ///
    /// let client = Client::builder("sdk-key").fdv2(Fdv2Config::default()).build()?;
    /// assert_eq!(client.fdv2_selector(), None); // no payload yet
    /// # Ok::<(), flagsync::Error>(())
    /// ```
    pub fn fdv2_selector(&self) -> Option<Selector> {
        self.inner.published.selector()
    }

    /// Bytes received so far on data-source connections (HTTP heads and bodies, after
    /// TLS, before gzip decoding), over every connection since [`Client::start`]. A
    /// cheap counter, e.g. for showing the progress of a large initial payload.
    pub fn bytes_received(&self) -> u64 {
        self.inner.published.bytes_received()
    }

    /// The flag `key`, unless it is unknown or deleted.
    ///
    /// While reads come from a persistent store (see
    /// [`ClientBuilder::persistent_store`]), a flag not read within the cache TTL is
    /// read from the store in the background: this call answers with what the client
    /// holds, and a later one with the store's answer.
    pub fn flag(&self, key: &str) -> Option<Flag> {
        if let Some(view) = self.inner.published.view() {
            view.touch(Kind::Flag, key);
        }
        let snapshot = self.inner.published.read();
        snapshot
            .get(Kind::Flag, key)
            .map(|item| Flag::from_item(key, item))
    }

    /// The segment `key`, unless it is unknown or deleted (read as [`Client::flag`]).
    pub fn segment(&self, key: &str) -> Option<Segment> {
        if let Some(view) = self.inner.published.view() {
            view.touch(Kind::Segment, key);
        }
        let snapshot = self.inner.published.read();
        snapshot
            .get(Kind::Segment, key)
            .map(|item| Segment::from_item(key, item))
    }

    /// Every flag, by key.
    pub fn all_flags(&self) -> BTreeMap<String, Flag> {
        let snapshot = self.snapshot();
        snapshot
            .iter(Kind::Flag)
            .map(|(key, item)| (key.to_owned(), Flag::from_item(key, item)))
            .collect()
    }

    /// An immutable view of the whole store (cheap: it shares structure): what the
    /// data source delivered, tombstones included.
    ///
    /// Before memory holds a full data set, with a persistent store (a warm start,
    /// daemon mode), this is every item of the store as last read whole: first before
    /// the client is ready, then again (asked for by this call, in the background) at
    /// most once per cache TTL.
    pub fn snapshot(&self) -> Snapshot {
        let published = &self.inner.published;
        match published.view() {
            Some(view) if !published.memory_initialized() => {
                view.touch_all(Kind::Segment);
                view.touch_all(Kind::Flag);
                view.listing()
            }
            _ => published.memory_snapshot(),
        }
    }

    /// The data-source status.
    pub fn status(&self) -> DataSourceStatus {
        self.inner.published.status()
    }

    /// Every later status change.
    pub fn status_changes(&self) -> Subscription<DataSourceStatus> {
        self.inner.published.status_subs.subscribe()
    }

    /// Every later change of a flag's data (one item per changed flag).
    pub fn flag_changes(&self) -> Subscription<FlagChange> {
        self.inner.published.flag_subs.subscribe()
    }

    /// The persistent store's status (`available`, `stale`), if one is configured. It
    /// turns unavailable when a store operation fails and available again once the
    /// store answers and has been given the in-memory data (PROTOCOL.md B §4.5, A.4.8).
    pub fn store_status(&self) -> Option<StoreStatus> {
        self.inner.published.store_status()
    }

    /// Every later change of [`Client::store_status`].
    pub fn store_status_changes(&self) -> Subscription<StoreStatus> {
        self.inner.published.store_status_subs.subscribe()
    }

    /// This client's instance id: a random UUID made when it was built (from the
    /// builder's [`seed`](ClientBuilder::seed) when one is given), sent with every request
    /// as `X-LaunchDarkly-Instance-Id` so the service can tell SDK instances apart.
    pub fn instance_id(&self) -> &str {
        &self.inner.instance_id
    }

    /// The environment id the service reported, if any.
    pub fn environment_id(&self) -> Option<String> {
        self.inner.published.environment_id()
    }

    /// Stop: close every connection, report OFF, end the subscriptions, and wait (at
    /// most the close timeout) until every socket is closed. Idempotent.
    pub async fn close(&self) {
        if let Some(rt) = self.inner.begin_close() {
            let deadline = rt.now() + self.inner.close_timeout;
            let _ = runtime::race(self.inner.finished.wait(), rt.sleep_until(deadline)).await;
            self.inner.abort_events();
        }
    }

    /// [`Client::close`] for synchronous code: blocks the thread (at most the close
    /// timeout). Do not call it on a thread that runs the client's runtime.
    pub fn close_blocking(&self) {
        if self.inner.begin_close().is_some() {
            self.inner.finished.wait_blocking(self.inner.close_timeout);
            self.inner.abort_events();
        }
    }

    /// True once [`Client::close`] finished closing every connection.
    pub fn is_closed(&self) -> bool {
        self.inner.finished.is_done()
    }
}

impl Inner {
    /// End the event processor's driver now (after the close timeout).
    fn abort_events(&self) {
        #[cfg(feature = "eval")]
        if let Some(events) = &self.events {
            events.abort();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Life> {
        self.life.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Move to `Closed`; the runtime to wait on if the driver ran.
    fn begin_close(&self) -> Option<Arc<dyn Runtime>> {
        #[cfg(feature = "eval")]
        if let Some(big_segments) = &self.big_segments {
            big_segments.stop();
        }
        let mut life = self.lock();
        match std::mem::replace(&mut *life, Life::Closed(None)) {
            Life::Built { system, .. } => {
                tracing::debug!("closed before start");
                DataSink::new(self.published.clone(), None).finish(&system);
                drop(driver::TaskGuard(self.finished.clone()));
                None
            }
            Life::Running(rt) => {
                tracing::debug!("closing");
                // Never blocks; the driver stops at the next message.
                let _ = self.tx.force_send(Msg::Shutdown);
                // The events go out first, within the close timeout.
                #[cfg(feature = "eval")]
                if let Some(events) = &self.events {
                    events.close();
                }
                *life = Life::Closed(Some(rt.clone()));
                Some(rt)
            }
            Life::Closed(rt) => {
                *life = Life::Closed(rt.clone());
                rt
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Life::Running(_) = &*self.lock() {
            let _ = self.tx.force_send(Msg::Shutdown);
            self.abort_events();
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
