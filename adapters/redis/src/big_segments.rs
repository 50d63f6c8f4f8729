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
use std::time::Duration;

use flagsync::bigseg::{BigSegmentStore, Membership, StoreError, StoreMetadata};
use flagsync::runtime::BoxFuture;

use crate::builder::{Connected, Settings, constructors, shared_setters};
use crate::endpoint::SyncConn;
use crate::pool::{BlockingConn, Pool};

/// Settings for a [`RedisBigSegmentStore`]; made by [`RedisBigSegmentStore::builder`],
/// [`RedisBigSegmentStore::builder_sentinel`] or [`RedisBigSegmentStore::builder_cluster`].
#[derive(Debug, Clone)]
#[must_use]
pub struct RedisBigSegmentStoreBuilder {
    settings: Settings,
}

impl RedisBigSegmentStoreBuilder {
    fn with_settings(settings: Settings) -> Self {
        Self { settings }
    }

    shared_setters!("2 s");

    /// Check the settings and make the store (it connects on first use). Settings
    /// that cannot work are [`StoreError::Config`], as for
    /// [`crate::RedisStoreBuilder::build`].
    pub fn build(self) -> Result<RedisBigSegmentStore, StoreError> {
        let (connect_timeout, response_timeout) = (
            self.settings.connect_timeout,
            self.settings.response_timeout,
        );
        let Connected {
            prefix,
            endpoint,
            config,
        } = self.settings.connect()?;
        Ok(RedisBigSegmentStore {
            target: endpoint.describe(),
            synchronized_on: format!("{prefix}:big_segments_synchronized_on"),
            include: format!("{prefix}:big_segment_include:"),
            exclude: format!("{prefix}:big_segment_exclude:"),
            connect_timeout,
            response_timeout,
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
    constructors!(RedisBigSegmentStoreBuilder, 2);

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
