//! The CLI's view of a [`flagsync::Client`]: one stream of [`Update`]s.

use std::sync::Arc;
use std::time::Duration;

use flagsync::persist::{CacheConfig, StoreMode, StoreStatus};
use flagsync::{
    Client, DataAvailability, DataSourceStatus, ErrorKind, Fdv2Config, FlagChange, Snapshot, State,
    Subscription,
};
use flagsync_redis::{RedisBigSegmentStore, RedisStore, RedisStoreBuilder};

/// How often an FDv2 session looks for a new data availability or active source.
const SOURCE_CHECK: Duration = Duration::from_millis(100);

/// How to connect.
#[derive(Debug, Clone)]
pub struct Options {
    pub sdk_key: String,
    pub stream_uri: String,
    pub polling_uri: String,
    pub polling: bool,
    pub filter: Option<String>,
    /// Use the FDv2 data system with this preset (instead of FDv1).
    pub fdv2: Option<Fdv2Preset>,
    /// Also keep the flags in Redis (write-through), or with `daemon`, only read them
    /// from there.
    pub redis: Option<RedisOptions>,
    /// Where analytics events go; `None` sends none.
    pub events_uri: Option<String>,
    /// The largest SSE line and event accepted (default: the core's 64 MiB).
    pub max_event_bytes: Option<usize>,
    /// Extra trusted CA certificates (PEM).
    pub ca_pem: Option<Vec<u8>>,
    /// Evaluate big segments with the memberships kept in `redis` (same settings).
    pub big_segments: bool,
}

/// Where the flags are kept in Redis.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// Where Redis is (may hold passwords: never printed).
    pub target: RedisTarget,
    /// The key prefix (default `launchdarkly`).
    pub prefix: Option<String>,
    /// Connect to no flag service: serve what another process keeps in Redis.
    pub daemon: bool,
    /// For `rediss://`: a private CA and a client certificate.
    pub tls: RedisTls,
}

/// Where Redis is: one server, a master behind Sentinel, or a cluster.
#[derive(Clone)]
pub enum RedisTarget {
    /// `redis://…` or `rediss://…`.
    Url(String),
    /// The master named `master`, found through `sentinels`, with its credentials
    /// and database.
    Sentinel {
        master: String,
        sentinels: Vec<String>,
        username: Option<String>,
        password: Option<String>,
        db: Option<u32>,
    },
    /// A cluster, found through its seed nodes.
    Cluster(Vec<String>),
}

impl std::fmt::Debug for RedisTarget {
    /// Never a URL (it may hold a password) nor the master's password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Url(_) => f.write_str("Url(..)"),
            Self::Sentinel { master, db, .. } => f
                .debug_struct("Sentinel")
                .field("master", master)
                .field("db", db)
                .finish_non_exhaustive(),
            Self::Cluster(nodes) => write!(f, "Cluster({} nodes)", nodes.len()),
        }
    }
}

/// `$ty`'s builder (`RedisStore` or `RedisBigSegmentStore`: their setters are the
/// same) for `$opts`.
macro_rules! redis_builder {
    ($ty:ty, $opts:expr) => {{
        let opts: &RedisOptions = $opts;
        let mut builder = match &opts.target {
            RedisTarget::Url(url) => <$ty>::builder(url.clone()),
            RedisTarget::Sentinel {
                master,
                sentinels,
                username,
                password,
                db,
            } => {
                let mut b = <$ty>::builder_sentinel(master.clone(), sentinels.clone());
                if let Some(password) = password {
                    b = b.master_credentials(username.as_deref(), password);
                }
                if let Some(db) = db {
                    b = b.database(*db);
                }
                b
            }
            RedisTarget::Cluster(nodes) => <$ty>::builder_cluster(nodes.clone()),
        };
        if let Some(p) = &opts.prefix {
            builder = builder.prefix(p.clone());
        }
        if let Some(ca) = &opts.tls.ca_pem {
            builder = builder.tls_ca_pem(ca.clone());
        }
        if let Some((cert, key)) = &opts.tls.client_cert {
            builder = builder.tls_client_cert(cert.clone(), key.clone());
        }
        builder
    }};
}

/// What the Redis options expect, for messages.
const REDIS_EXPECTED: &str = "Expected --redis redis://[user:password@]host[:port][/db] or rediss://… (TLS, with --redis-ca-file PEM for a private CA), e.g. redis://127.0.0.1:6379; or --redis-sentinel HOST:PORT with --redis-master NAME; or --redis-cluster URL with a --prefix holding a hash tag, e.g. '{launchdarkly}'";

/// The certificates of a `rediss://` connection, read from the files named on the
/// command line (PEM).
#[derive(Clone, Default)]
pub struct RedisTls {
    /// The CA certificates trusted instead of the webpki roots (`--redis-ca-file`).
    pub ca_pem: Option<Vec<u8>>,
    /// The client certificate chain and its key, for mutual TLS
    /// (`--redis-client-cert`, `--redis-client-key`).
    pub client_cert: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for RedisTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTls")
            .field("ca_pem", &self.ca_pem.is_some())
            .field("client_cert", &self.client_cert.is_some())
            .finish()
    }
}

impl RedisOptions {
    /// The settings of the store these options describe (not checked yet).
    pub fn builder(&self) -> RedisStoreBuilder {
        redis_builder!(RedisStore, self)
    }

    /// The store these options describe; errors as a message.
    pub fn store(&self) -> Result<RedisStore, String> {
        self.builder()
            .build()
            .map_err(|e| format!("{e}. {REDIS_EXPECTED}"))
    }

    /// The big-segment store in the same Redis, with the same prefix; errors as a
    /// message.
    pub fn big_segment_store(&self) -> Result<RedisBigSegmentStore, String> {
        redis_builder!(RedisBigSegmentStore, self)
            .build()
            .map_err(|e| format!("{e}. {REDIS_EXPECTED}"))
    }
}

/// An FDv2 data-system preset (PROTOCOL.md B §5.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fdv2Preset {
    /// A polling initializer, then the stream with polling as its fallback.
    Default,
    /// The stream alone.
    Streaming,
    /// Polling alone.
    Polling,
}

impl Fdv2Preset {
    pub fn config(self) -> Fdv2Config {
        match self {
            Self::Default => Fdv2Config::default(),
            Self::Streaming => Fdv2Config::streaming(),
            Self::Polling => Fdv2Config::polling(),
        }
    }

    /// What it runs, for people.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Default => "FDv2: a poll, then streaming with polling as fallback",
            Self::Streaming => "FDv2: streaming",
            Self::Polling => "FDv2: polling",
        }
    }
}

/// A data-source error as the CLI shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorSummary {
    pub kind: ErrorKind,
    /// The HTTP status, or 0.
    pub status_code: u16,
    pub message: String,
    /// A persistent-store failure that waiting will not clear (a wrong password, a
    /// missing database).
    pub permanent_store_fault: bool,
}

impl ErrorSummary {
    /// The service could not be reached at all.
    pub fn unreachable(&self) -> bool {
        self.status_code == 0
            && (self.message.starts_with("connection failed")
                || self.message.starts_with("connect timed out"))
    }

    /// The service rejected the SDK key.
    pub fn key_rejected(&self) -> bool {
        matches!(self.status_code, 401 | 403)
    }
}

/// A data-source status as the CLI shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusSummary {
    pub state: State,
    pub error: Option<ErrorSummary>,
    /// FDv2 only: where the data comes from, as the status arrived.
    pub source: Option<SourceSummary>,
}

/// FDv2: how fresh the data is and which source runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourceSummary {
    pub availability: DataAvailability,
    pub active: Option<&'static str>,
}

/// Something the client reported.
#[derive(Debug, Clone)]
pub enum Update {
    Status(StatusSummary),
    /// This flag's data changed (directly or through a prerequisite or segment).
    FlagChanged(String),
    /// The first full data set arrived.
    Ready,
    /// FDv2: the data availability or the active source changed (without a status
    /// change saying so).
    Source(SourceSummary),
    /// The persistent store (Redis) became unavailable or available again; while
    /// unavailable, why (the store's failure, never its password).
    Store(StoreStatus, Option<String>),
}

/// A running client.
pub struct Session {
    client: Client,
    /// The Redis store, if any: how many undecodable items it skipped.
    store: Option<Arc<RedisStore>>,
    statuses: Subscription<DataSourceStatus>,
    flags: Subscription<FlagChange>,
    store_statuses: Subscription<StoreStatus>,
    waiting_ready: bool,
    fdv2: bool,
    /// FDv2: the source summary last reported.
    last_source: Option<SourceSummary>,
}

impl Session {
    /// How many undecodable items the Redis store skipped in its latest listing.
    pub fn skipped_items(&self) -> u64 {
        use flagsync::persist::PersistentStore;
        self.store.as_ref().map_or(0, |s| s.skipped_items())
    }

    /// Build and start a client; call inside the tokio runtime. Errors are
    /// configuration errors, as a message.
    pub fn start(opts: &Options) -> Result<Self, String> {
        let mut builder = Client::builder(opts.sdk_key.clone())
            .stream_uri(opts.stream_uri.clone())
            .polling_uri(opts.polling_uri.clone())
            .polling(opts.polling);
        if let Some(f) = &opts.filter {
            builder = builder.payload_filter(f.clone());
        }
        if let Some(preset) = opts.fdv2 {
            builder = builder.fdv2(preset.config());
        }
        builder = match &opts.events_uri {
            Some(uri) => builder.events_uri(uri.clone()),
            None => builder.send_events(false),
        };
        if let Some(max) = opts.max_event_bytes {
            builder = builder.core_config(|c| {
                c.limits.sse.max_line_len = max;
                c.limits.sse.max_event_len = max;
                c.limits.max_poll_body = c.limits.max_poll_body.max(max);
                c.limits.fdv2_payload = flagsync::PayloadLimits::for_bytes(max);
            });
        }
        if let Some(pem) = &opts.ca_pem {
            builder = builder.add_root_certificate_pem(pem.clone());
        }
        let mut redis_store = None;
        if let Some(redis) = &opts.redis {
            let store = Arc::new(redis.store()?);
            redis_store = Some(store.clone());
            builder = if redis.daemon {
                builder.daemon(store, CacheConfig::default())
            } else {
                builder.persistent_store(store, StoreMode::ReadWrite, CacheConfig::default())
            };
            if opts.big_segments {
                let store = Arc::new(redis.big_segment_store()?);
                builder = builder.big_segments(flagsync::bigseg::BigSegmentsOptions::new(store));
            }
        }
        let client = builder.build().map_err(|e| e.to_string())?;
        // Subscribe before starting, so nothing is missed.
        let statuses = client.status_changes();
        let flags = client.flag_changes();
        let store_statuses = client.store_status_changes();
        client.start().map_err(|e| e.to_string())?;
        let mut session = Self {
            client,
            store: redis_store,
            statuses,
            flags,
            store_statuses,
            waiting_ready: true,
            fdv2: opts.fdv2.is_some() || opts.redis.as_ref().is_some_and(|r| r.daemon),
            last_source: None,
        };
        // Report changes from here on (no data, no source yet), not the starting point.
        session.last_source = session.source();
        Ok(session)
    }

    /// Evaluate flag `key` for `context` as JSON (the default is `null`) and send the
    /// evaluation's analytics events at once.
    pub fn evaluate(
        &self,
        key: &str,
        context: &flagsync::eval::Context,
    ) -> flagsync::eval::Detail<serde_json::Value> {
        let detail = self
            .client
            .json_variation_detail(key, context, serde_json::Value::Null);
        self.client.flush();
        detail
    }

    /// The next update, or `None` once the client stopped.
    pub async fn next(&mut self) -> Option<Update> {
        loop {
            // A status first: it carries the source summary with it.
            if let Some(s) = self.statuses.try_recv() {
                return Some(Update::Status(self.summarize(&s)));
            }
            if let Some(source) = self.source_changed() {
                return Some(Update::Source(source));
            }
            tokio::select! {
                biased;
                s = self.statuses.recv() => return s.map(|s| Update::Status(self.summarize(&s))),
                Some(st) = self.store_statuses.recv() => {
                    let why = (!st.available).then(|| self.client.status().error).flatten()
                        .filter(|e| e.kind == ErrorKind::StoreError)
                        .map(|e| e.message);
                    return Some(Update::Store(st, why));
                }
                // Flag changes before readiness: the initial data's changes come out first.
                f = self.flags.recv() => return f.map(|f| Update::FlagChanged(f.key)),
                ready = self.client.wait_for_initialization(Duration::from_secs(365 * 86400)),
                    if self.waiting_ready => {
                    self.waiting_ready = false;
                    return if ready {
                        // Every change event of the initial data is buffered by now (the
                        // client publishes them before it reports initialized): they are
                        // part of what Ready reports, not news.
                        while self.flags.try_recv().is_some() {}
                        Some(Update::Ready)
                    } else {
                        // The source gave up: the status update says why.
                        let s = self.statuses.recv().await;
                        s.map(|s| Update::Status(self.summarize(&s)))
                    };
                }
                // FDv2: the availability and the active source can change without a
                // status change (e.g. the FDv1 fallback taking over while VALID).
                () = tokio::time::sleep(SOURCE_CHECK), if self.fdv2 => {}
            }
        }
    }

    /// FDv2: the current source summary, if it differs from the last one reported.
    fn source_changed(&mut self) -> Option<SourceSummary> {
        let current = self.source()?;
        if self.last_source == Some(current) {
            return None;
        }
        self.last_source = Some(current);
        Some(current)
    }

    /// FDv2: the current source summary.
    fn source(&self) -> Option<SourceSummary> {
        self.fdv2.then(|| SourceSummary {
            availability: self.client.data_availability(),
            active: self.client.active_source(),
        })
    }

    fn summarize(&mut self, status: &DataSourceStatus) -> StatusSummary {
        let source = self.source();
        if source.is_some() {
            self.last_source = source;
        }
        StatusSummary {
            state: status.state,
            error: status.error.as_ref().map(|e| ErrorSummary {
                kind: e.kind,
                status_code: e.status_code,
                message: e.message.clone(),
                permanent_store_fault: e.store_fault.is_some_and(|k| k.is_permanent()),
            }),
            source,
        }
    }

    /// Bytes received so far on the data-source connections.
    pub fn bytes_received(&self) -> u64 {
        self.client.bytes_received()
    }

    /// The latest data.
    pub fn snapshot(&self) -> Snapshot {
        self.client.snapshot()
    }

    /// Stop the client and wait (briefly) for its sockets to close.
    pub async fn close(self) {
        self.client.close().await;
    }
}
