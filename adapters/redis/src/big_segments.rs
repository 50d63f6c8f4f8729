//! A big-segment store in Redis, in LaunchDarkly's layout.
//!
//! The layout the Relay Proxy writes and every LaunchDarkly server SDK reads:
//!
//! | key | type | content |
//! | --- | --- | --- |
//! | `<prefix>:big_segments_synchronized_on` | string | when the store was last brought up to date (unix ms) |
//! | `<prefix>:big_segment_include:<context hash>` | set | segment references (`key.gN`) including the context |
//! | `<prefix>:big_segment_exclude:<context hash>` | set | segment references excluding it |
//!
//! The default prefix is `launchdarkly`. The store only reads, on async connections
//! from a small pool (the status poller, and evaluations on a runtime) and on one
//! blocking connection for the calls that must answer on the evaluating thread
//! ([`BigSegmentStore::membership_now`], [`BigSegmentStore::metadata_now`]; see
//! [`flagsync::bigseg`] for which calls wait). Every connection is opened with a
//! connect timeout and each answer waited for with a response timeout (2 s and 2 s by
//! default), so every call is bounded; a failed call drops its connection and the next
//! call opens a new one. One server, a master behind Redis Sentinel and Redis Cluster
//! are reached as by [`crate::RedisStore`] (on a cluster the prefix needs a hash tag).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use flagsync::bigseg::{BigSegmentStore, Membership, StoreError, StoreMetadata};
use flagsync::runtime::BoxFuture;

use crate::DEFAULT_PREFIX;
use crate::cluster;
use crate::endpoint::{Endpoint, SyncConn, Target, Timeouts, sentinel_only};
use crate::pool::{BlockingConn, Pool};
use crate::tls::TlsSettings;

/// Settings for a [`RedisBigSegmentStore`]; made by [`RedisBigSegmentStore::builder`],
/// [`RedisBigSegmentStore::builder_sentinel`] or [`RedisBigSegmentStore::builder_cluster`].
#[derive(Clone)]
#[must_use]
pub struct RedisBigSegmentStoreBuilder {
    target: Target,
    prefix: String,
    connect_timeout: Duration,
    response_timeout: Duration,
    tls: TlsSettings,
    /// A Sentinel-only setting given to another target: refused by `build`.
    misapplied: Option<&'static str>,
}

impl fmt::Debug for RedisBigSegmentStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBigSegmentStoreBuilder")
            .field("target", &self.target)
            .field("prefix", &self.prefix)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .field("tls", &self.tls)
            .finish()
    }
}

impl RedisBigSegmentStoreBuilder {
    /// The key prefix (default `launchdarkly`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How long opening a connection may take (default 2 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long one command may wait for its answer (default 2 s).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// For a `rediss://` URL: trust the CA certificates in `pem` (PEM) instead of the
    /// webpki roots, as for a server whose certificate a private CA signed.
    pub fn tls_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.ca_pem = Some(pem.into());
        self
    }

    /// For a `rediss://` URL: present this client certificate chain with its private
    /// key (both PEM) to a server that asks for one (mutual TLS,
    /// `tls-auth-clients yes`). The key never appears in `Debug` output.
    pub fn tls_client_cert(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls.client = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// Behind Redis Sentinel: the master's username and password, as
    /// [`RedisStoreBuilder::master_credentials`](crate::RedisStoreBuilder::master_credentials).
    pub fn master_credentials(mut self, username: Option<&str>, password: &str) -> Self {
        if let Some(setting) = self.target.set_master_credentials(username, password) {
            self.misapplied = Some(setting);
        }
        self
    }

    /// Behind Redis Sentinel: the master's database number, as
    /// [`RedisStoreBuilder::database`](crate::RedisStoreBuilder::database).
    pub fn database(mut self, db: u32) -> Self {
        if let Some(setting) = self.target.set_database(db) {
            self.misapplied = Some(setting);
        }
        self
    }

    /// Check the settings and make the store (it connects on first use). On Redis
    /// Cluster a prefix without a hash tag is [`StoreError::Config`], as for
    /// [`crate::RedisStore::builder_cluster`].
    pub fn build(self) -> Result<RedisBigSegmentStore, StoreError> {
        if let Some(setting) = self.misapplied {
            return Err(sentinel_only(setting));
        }
        let prefix = if self.prefix.is_empty() {
            DEFAULT_PREFIX.to_owned()
        } else {
            self.prefix
        };
        if self.target.is_cluster() {
            cluster::check_prefix(&prefix)?;
        }
        let timeouts = Timeouts {
            connect: self.connect_timeout,
            response: self.response_timeout,
        };
        let endpoint = Arc::new(Endpoint::new(&self.target, &self.tls, timeouts)?);
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout));
        Ok(RedisBigSegmentStore {
            target: endpoint.describe(),
            synchronized_on: format!("{prefix}:big_segments_synchronized_on"),
            include: format!("{prefix}:big_segment_include:"),
            exclude: format!("{prefix}:big_segment_exclude:"),
            connect_timeout: self.connect_timeout,
            response_timeout: self.response_timeout,
            conn: BlockingConn::new(endpoint.clone()),
            pool: Pool::new(endpoint, config, POOL_SIZE),
        })
    }
}

/// A read-only [`BigSegmentStore`] in Redis, in LaunchDarkly's layout (see the module
/// docs), as the Relay Proxy writes it.
///
/// ```no_run
/// use std::sync::Arc;
/// use flagsync::bigseg::BigSegmentsOptions;
/// use flagsync_redis::RedisBigSegmentStore;
///
/// let store = RedisBigSegmentStore::builder("redis://127.0.0.1:6379").prefix("my-env").build()?;
/// let client = flagsync::Client::builder("sdk-key")
///     .big_segments(BigSegmentsOptions::new(Arc::new(store)))
///     .build()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedisBigSegmentStore {
    /// Where the store is, without a password, for logs.
    target: String,
    synchronized_on: String,
    /// `<prefix>:big_segment_include:` (the context hash follows).
    include: String,
    exclude: String,
    connect_timeout: Duration,
    response_timeout: Duration,
    /// For the calls that answer on the calling thread.
    conn: BlockingConn,
    pool: Pool,
}

/// Async connections at most: each is lent to one call at a time, and a call is one
/// round trip.
const POOL_SIZE: usize = 2;

impl fmt::Debug for RedisBigSegmentStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBigSegmentStore")
            .field("target", &self.target)
            .field("synchronized_on", &self.synchronized_on)
            .finish_non_exhaustive()
    }
}

impl RedisBigSegmentStore {
    /// Settings for a store at `url` (`redis://[user:password@]host:port[/db]`, or
    /// `rediss://…` over TLS with the `rustls` feature; see
    /// [`RedisBigSegmentStoreBuilder::tls_ca_pem`]).
    pub fn builder(url: impl Into<String>) -> RedisBigSegmentStoreBuilder {
        Self::builder_for(Target::Url(url.into()))
    }

    /// Settings for a store on the master that Redis Sentinel knows as `master_name`,
    /// found through `sentinels`, as [`crate::RedisStore::builder_sentinel`].
    pub fn builder_sentinel(
        master_name: impl Into<String>,
        sentinels: impl IntoIterator<Item = impl Into<String>>,
    ) -> RedisBigSegmentStoreBuilder {
        Self::builder_for(Target::sentinel(master_name, sentinels))
    }

    /// Settings for a store on Redis Cluster, found through the seed `nodes`, as
    /// [`crate::RedisStore::builder_cluster`]: the prefix must hold a hash tag
    /// (`{launchdarkly}`), so that a context's include and exclude sets are read
    /// from one node in one round trip.
    pub fn builder_cluster(
        nodes: impl IntoIterator<Item = impl Into<String>>,
    ) -> RedisBigSegmentStoreBuilder {
        Self::builder_for(Target::cluster(nodes))
    }

    fn builder_for(target: Target) -> RedisBigSegmentStoreBuilder {
        RedisBigSegmentStoreBuilder {
            target,
            prefix: DEFAULT_PREFIX.to_owned(),
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(2),
            tls: TlsSettings::default(),
            misapplied: None,
        }
    }

    /// A store at `url` with the default prefix and timeouts.
    pub fn new(url: impl Into<String>) -> Result<Self, StoreError> {
        Self::builder(url).build()
    }

    /// The key holding the last synchronization time.
    pub fn synchronized_on_key(&self) -> &str {
        &self.synchronized_on
    }

    /// Run `f` on the blocking connection (opened if needed), within `timeout` as well
    /// as the store's timeouts; a failure drops it.
    fn with_conn<T>(
        &self,
        timeout: Duration,
        f: impl FnOnce(&mut SyncConn) -> redis::RedisResult<T>,
    ) -> Result<T, StoreError> {
        self.conn
            .run(
                self.connect_timeout.min(timeout),
                self.response_timeout.min(timeout),
                f,
            )
            .inspect_err(|error| {
                tracing::debug!(target_db = %self.target, %error, "redis big-segment query failed");
            })
    }

    /// `GET <prefix>:big_segments_synchronized_on`.
    fn synchronized_on_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("GET");
        cmd.arg(&self.synchronized_on);
        cmd
    }

    /// Both sets of `context_hash`, in one round trip (on a cluster, to the node of the
    /// prefix's slot).
    fn membership_pipe(&self, context_hash: &str) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        pipe.cmd("SMEMBERS")
            .arg(format!("{}{context_hash}", self.include))
            .cmd("SMEMBERS")
            .arg(format!("{}{context_hash}", self.exclude));
        pipe
    }

    /// The metadata in `value` (the synchronization time, unix ms).
    fn metadata_of(&self, value: Option<String>) -> Result<StoreMetadata, StoreError> {
        match value {
            None => Ok(StoreMetadata::new(None)),
            Some(text) => text
                .trim()
                .parse::<u64>()
                .map(|ms| StoreMetadata::new(Some(ms)))
                .map_err(|_| {
                    StoreError::Backend(format!(
                        "{} is not a unix time in milliseconds",
                        self.synchronized_on
                    ))
                }),
        }
    }

    async fn read_metadata(&self) -> Result<StoreMetadata, StoreError> {
        let mut conn = self.pool.get().await?;
        let value: redis::RedisResult<Option<String>> =
            self.synchronized_on_cmd().query_async(conn.get()).await;
        let value = conn.check(value).inspect_err(|error| {
            tracing::debug!(target_db = %self.target, %error, "redis big-segment query failed");
        })?;
        self.metadata_of(value)
    }

    async fn read_membership(&self, context_hash: &str) -> Result<Option<Membership>, StoreError> {
        let mut conn = self.pool.get().await?;
        let sets: redis::RedisResult<(Vec<String>, Vec<String>)> = self
            .membership_pipe(context_hash)
            .query_async(conn.get())
            .await;
        let sets = conn.check(sets).inspect_err(|error| {
            tracing::debug!(target_db = %self.target, %error, "redis big-segment query failed");
        })?;
        Ok(membership_of(sets))
    }
}

/// A membership from the include and exclude sets; `None` when both are empty.
fn membership_of((included, excluded): (Vec<String>, Vec<String>)) -> Option<Membership> {
    if included.is_empty() && excluded.is_empty() {
        return None;
    }
    Some(Membership::from_refs(included, excluded))
}

impl BigSegmentStore for RedisBigSegmentStore {
    fn metadata(&self) -> BoxFuture<'_, Result<StoreMetadata, StoreError>> {
        Box::pin(self.read_metadata())
    }

    fn membership<'a>(
        &'a self,
        context_hash: &'a str,
    ) -> BoxFuture<'a, Result<Option<Membership>, StoreError>> {
        Box::pin(self.read_membership(context_hash))
    }

    fn membership_now(
        &self,
        context_hash: &str,
        timeout: Duration,
    ) -> Option<Result<Option<Membership>, StoreError>> {
        let pipe = self.membership_pipe(context_hash);
        Some(
            self.with_conn(timeout, |c| pipe.query(c))
                .map(membership_of),
        )
    }

    fn metadata_now(&self, timeout: Duration) -> Option<Result<StoreMetadata, StoreError>> {
        let cmd = self.synchronized_on_cmd();
        Some(
            self.with_conn(timeout, |c| cmd.query(c))
                .and_then(|value| self.metadata_of(value)),
        )
    }
}
