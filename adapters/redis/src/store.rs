//! A Redis persistent store with the LaunchDarkly key layout.
//!
//! Layout (PROTOCOL.md A.1, B §4.4), shared with every LaunchDarkly server SDK and the
//! Relay Proxy:
//!
//! | key | type | content |
//! | --- | --- | --- |
//! | `<prefix>:features` | hash | flag key → flag JSON |
//! | `<prefix>:segments` | hash | segment key → segment JSON |
//! | `<prefix>:$inited` | string | present once a full data set was written |
//! | `<prefix>:$flagsync:<id>` | string | flagsync only: how many writes the writing process `<id>` made (expires after 7 days) |
//!
//! The last key is flagsync's own: each writing process counts its writes there, in
//! the same transaction as each write, so it can tell that the store lost some of them
//! (a Redis restarted from an older save still holds `$inited`). Other SDKs never read
//! it.
//!
//! The default prefix is `launchdarkly`. Tombstones are written in the Go SDK's shape
//! (`{"key":"$deleted","version":N,"deleted":true}`); all three shapes are read.
//! `init` is one `MULTI`/`EXEC` transaction sent as a single pipeline; `upsert` is
//! `WATCH` + `HGET` + version compare + `MULTI`/`HSET`/`EXEC`, retried when another
//! writer got in between (at most [`MAX_UPSERT_ATTEMPTS`] times).
//!
//! Connections come from a small pool, each used by one operation at a time (a
//! `WATCH` belongs to its connection). A connection that fails is dropped and the next
//! operation opens a new one, so an outage ends as soon as the server answers again.
//! The redis crate runs on tokio inside a tokio runtime and on async-io (smol,
//! async-std) elsewhere; nothing of either appears in this API.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use flagsync_core::Kind;
use redis::AsyncCommands;

use flagsync::persist::{
    Item, MAX_UPSERT_ATTEMPTS, PersistentStore, StoreError, Upserted, decode_stored, stored_json,
};
use flagsync::runtime::BoxFuture;

use crate::builder::{Connected, Settings, constructors, shared_setters};
use crate::endpoint::SyncConn;
use crate::pool::{BlockingConn, Pool};

/// How long a writer's count of its writes lives after its last write.
const MARKER_TTL_SECS: u64 = 7 * 24 * 3600;

/// Fields per `HSET` in an init: large enough to keep the command count low, small
/// enough that no single command is huge.
const HSET_BATCH: usize = 500;

/// Settings for a [`RedisStore`]; made by [`RedisStore::builder`] (one server),
/// [`RedisStore::builder_sentinel`] (a master that Redis Sentinel watches) or
/// [`RedisStore::builder_cluster`] (Redis Cluster).
#[derive(Debug, Clone)]
#[must_use]
pub struct RedisStoreBuilder {
    settings: Settings,
    pool_size: usize,
}

impl RedisStoreBuilder {
    fn with_settings(settings: Settings) -> Self {
        Self {
            settings,
            pool_size: 4,
        }
    }

    shared_setters!("10 s; an init of a large data set is one pipeline");

    /// At most this many connections (default 4; at least 1).
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size.max(1);
        self
    }

    /// Check the settings and make the store. No connection is opened until the
    /// first operation.
    ///
    /// Settings that cannot work are [`StoreError::Config`]: a URL that does not
    /// parse, TLS settings without `rediss://`, a Sentinel setting without Sentinel,
    /// and on Redis Cluster a prefix without a hash tag.
    pub fn build(self) -> Result<RedisStore, StoreError> {
        let Connected {
            prefix,
            endpoint,
            config,
        } = self.settings.connect()?;
        Ok(RedisStore {
            marker: format!("{prefix}:$flagsync:{:016x}", fastrand::u64(..)),
            writes: AtomicU64::new(0),
            skipped: [AtomicU64::new(0), AtomicU64::new(0)],
            server_run: std::sync::Mutex::new(None),
            blocking: BlockingConn::new(endpoint.clone()),
            keys: Keys::new(&prefix),
            prefix,
            target: endpoint.describe(),
            pool: Pool::new(endpoint, config, self.pool_size),
        })
    }
}

/// The Redis keys of one prefix.
#[derive(Debug, Clone)]
struct Keys {
    segments: String,
    features: String,
    inited: String,
}

impl Keys {
    fn new(prefix: &str) -> Self {
        Self {
            segments: format!("{prefix}:{}", Kind::Segment.namespace()),
            features: format!("{prefix}:{}", Kind::Flag.namespace()),
            inited: format!("{prefix}:$inited"),
        }
    }

    fn of(&self, kind: Kind) -> &str {
        match kind {
            Kind::Segment => &self.segments,
            Kind::Flag => &self.features,
        }
    }
}

/// A [`PersistentStore`] in Redis, readable and writable by other LaunchDarkly SDKs and
/// the Relay Proxy (see the module docs for the layout).
///
/// ```no_run
/// # fn demo() -> Result<(), flagsync::persist::StoreError> {
/// let store = flagsync_redis::RedisStore::builder("redis://127.0.0.1:6379/0")
///     .prefix("my-env")
///     .build()?;
/// # Ok(()) }
/// ```
///
/// Its `Debug` output and its errors never contain the URL's password.
pub struct RedisStore {
    prefix: String,
    /// `host:port/db` (or `sentinel:…`, `cluster:…`), for logs.
    target: String,
    keys: Keys,
    pool: Pool,
    /// This store's count of its writes (`<prefix>:$flagsync:<id>`).
    marker: String,
    /// Writes made through this store; 0 before the first.
    writes: AtomicU64,
    /// Undecodable items skipped in the latest whole read of segments and flags.
    skipped: [AtomicU64; 2],
    /// The `run_id` of the Redis server process this store last wrote to: a new one
    /// means Redis restarted (empty, or from an older save).
    server_run: std::sync::Mutex<Option<String>>,
    /// The one blocking connection, for reads that must answer on the calling thread
    /// (`get_now`, `initialized_now`).
    blocking: BlockingConn,
}

/// The `run_id` line of `INFO server`.
fn run_id(info: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .map(|id| id.trim().to_owned())
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("target", &self.target)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    constructors!(RedisStoreBuilder, 10);

    /// Where the store is, for people and logs (never a password): `host:port/db`,
    /// `sentinel:<master name>/<db>`, or `cluster:<first seed node>`.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The hash key holding items of `kind` (`<prefix>:features`, `<prefix>:segments`).
    pub fn hash_key(&self, kind: Kind) -> &str {
        self.keys.of(kind)
    }

    /// The key of the initialization marker (`<prefix>:$inited`).
    pub fn inited_key(&self) -> &str {
        &self.keys.inited
    }

    async fn init_items(&self, items: &[(Kind, String, Item)]) -> Result<(), StoreError> {
        let mut conn = self.pool.get().await?;
        // MULTI and EXEC by hand rather than `pipe.atomic()`: the redis crate (1.8)
        // panics in its connection task when the server refuses MULTI itself (an ACL
        // user without `@transaction`); by hand, the refusal is the pipeline's error.
        let mut pipe = redis::pipe();
        pipe.cmd("MULTI").ignore();
        pipe.del(&self.keys.segments).ignore();
        pipe.del(&self.keys.features).ignore();
        // Keep the given order (segments first, prerequisites first): consecutive items
        // of one kind share an HSET.
        let values: Vec<Bytes> = items.iter().map(|(_, _, item)| stored_json(item)).collect();
        let mut batch: Vec<(&str, &[u8])> = Vec::with_capacity(HSET_BATCH);
        let mut batch_kind = None;
        for ((kind, key, _), value) in items.iter().zip(&values) {
            if batch.len() == HSET_BATCH || batch_kind.is_some_and(|k| k != *kind) {
                if let Some(k) = batch_kind {
                    pipe.hset_multiple(self.keys.of(k), &batch).ignore();
                }
                batch.clear();
            }
            batch_kind = Some(*kind);
            batch.push((key.as_str(), value.as_ref()));
        }
        if let Some(k) = batch_kind
            && !batch.is_empty()
        {
            pipe.hset_multiple(self.keys.of(k), &batch).ignore();
        }
        pipe.set(&self.keys.inited, "").ignore();
        let n = self.writes.load(Ordering::Acquire) + 1;
        pipe.set_ex(&self.marker, n, MARKER_TTL_SECS).ignore();
        pipe.cmd("EXEC");
        // A command refused when queued aborts the transaction: EXEC answers EXECABORT.
        let result: Result<(redis::Value,), _> = pipe.query_async(conn.get()).await;
        conn.check(result)?;
        self.writes.store(n, Ordering::Release);
        // Which Redis process holds the data set now (a failed look-up is found out by
        // the next check). Beside a command on a key, so that a cluster asks the node
        // holding the prefix's slot.
        let info: Result<(String,), _> = redis::pipe()
            .cmd("INFO")
            .arg("server")
            .exists(&self.keys.inited)
            .ignore()
            .query_async(conn.get())
            .await;
        if let Ok((info,)) = info {
            *self.server_run.lock().unwrap_or_else(|e| e.into_inner()) = run_id(&info);
        }
        tracing::debug!(target_db = %self.target, items = items.len(), "redis init");
        Ok(())
    }

    async fn get_item(&self, kind: Kind, key: &str) -> Result<Option<Item>, StoreError> {
        let mut conn = self.pool.get().await?;
        let result: Result<Option<Bytes>, _> = conn.get().hget(self.keys.of(kind), key).await;
        Ok(conn
            .check(result)?
            .and_then(|raw| decode_stored(kind, key, raw)))
    }

    async fn all_items(&self, kind: Kind) -> Result<Vec<(String, Item)>, StoreError> {
        let mut conn = self.pool.get().await?;
        let result: Result<Vec<(String, Bytes)>, _> = conn.get().hgetall(self.keys.of(kind)).await;
        let stored = conn.check(result)?;
        let total = stored.len();
        let items: Vec<(String, Item)> = stored
            .into_iter()
            .filter_map(|(key, raw)| decode_stored(kind, &key, raw).map(|item| (key, item)))
            .collect();
        let skipped = (total - items.len()) as u64;
        let slot = match kind {
            Kind::Segment => 0,
            Kind::Flag => 1,
        };
        self.skipped[slot].store(skipped, Ordering::Relaxed);
        if skipped > 0 {
            tracing::warn!(%kind, skipped, total, "undecodable items in redis were skipped");
        }
        Ok(items)
    }

    async fn upsert_item(
        &self,
        kind: Kind,
        key: &str,
        item: &Item,
    ) -> Result<Upserted, StoreError> {
        let hash = self.keys.of(kind);
        let json = stored_json(item);
        for attempt in 1..=MAX_UPSERT_ATTEMPTS {
            let mut conn = self.pool.get().await?;
            let watched: Result<(), _> =
                redis::cmd("WATCH").arg(hash).query_async(conn.get()).await;
            conn.check(watched)?;
            let old: Result<Option<Bytes>, _> = conn.get().hget(hash, key).await;
            let old = conn
                .check(old)?
                .and_then(|raw| decode_stored(kind, key, raw));
            if let Some(stored) = old
                && stored.version >= item.version
            {
                // Beside a command on the hash, so that a cluster sends it to the node
                // (and the connection) holding the WATCH.
                let unwatched: Result<(), _> = redis::pipe()
                    .cmd("UNWATCH")
                    .ignore()
                    .exists(hash)
                    .ignore()
                    .query_async(conn.get())
                    .await;
                conn.check(unwatched)?;
                return Ok(Upserted::Rejected { stored });
            }
            let n = self.writes.load(Ordering::Acquire) + 1;
            let mut pipe = redis::pipe();
            pipe.atomic()
                .hset(hash, key, json.as_ref())
                .ignore()
                .set_ex(&self.marker, n, MARKER_TTL_SECS)
                .ignore();
            // `None`: EXEC answered nil, a watched key changed. Try again.
            let exec: Result<Option<()>, _> = pipe.query_async(conn.get()).await;
            if conn.check(exec)?.is_some() {
                self.writes.store(n, Ordering::Release);
                return Ok(Upserted::Written);
            }
            tracing::debug!(%kind, key, attempt, "redis upsert raced another writer; retrying");
        }
        Err(StoreError::Contended {
            attempts: MAX_UPSERT_ATTEMPTS,
        })
    }

    /// Run `op` on the blocking connection, each command bounded by `timeout`.
    fn blocking<T>(
        &self,
        timeout: Duration,
        op: impl FnOnce(&mut SyncConn, &Keys) -> redis::RedisResult<T>,
    ) -> Result<T, StoreError> {
        self.blocking
            .run(timeout, timeout, |conn| op(conn, &self.keys))
    }

    async fn inited(&self) -> Result<bool, StoreError> {
        let mut conn = self.pool.get().await?;
        let result: Result<bool, _> = conn.get().exists(&self.keys.inited).await;
        conn.check(result)
    }

    /// `$inited` is there and this store's count of its writes is the last one made.
    async fn holds_own_writes(&self) -> Result<bool, StoreError> {
        let made = self.writes.load(Ordering::Acquire);
        if made == 0 {
            return self.inited().await;
        }
        let mut conn = self.pool.get().await?;
        let mut pipe = redis::pipe();
        pipe.cmd("INFO")
            .arg("server")
            .exists(&self.keys.inited)
            .get(&self.marker);
        let result: Result<(String, bool, Option<u64>), _> = pipe.query_async(conn.get()).await;
        let (info, inited, counted) = conn.check(result)?;
        // The same Redis process as at the last write: what it holds is what it was
        // given, by this process or another (as LaunchDarkly's SDKs, a store whose data
        // someone removed is read as it is, not written over). A restarted one (empty,
        // or from an older save) must still hold this store's writes.
        let current = run_id(&info);
        let mut last = self.server_run.lock().unwrap_or_else(|e| e.into_inner());
        if current.is_some() && *last == current {
            return Ok(true);
        }
        *last = current;
        Ok(inited && counted.is_some_and(|c| c >= made))
    }
}

impl PersistentStore for RedisStore {
    fn init<'a>(
        &'a self,
        items: &'a [(Kind, String, Item)],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.init_items(items))
    }

    fn get<'a>(
        &'a self,
        kind: Kind,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Item>, StoreError>> {
        Box::pin(self.get_item(kind, key))
    }

    fn all(&self, kind: Kind) -> BoxFuture<'_, Result<Vec<(String, Item)>, StoreError>> {
        Box::pin(self.all_items(kind))
    }

    fn upsert<'a>(
        &'a self,
        kind: Kind,
        key: &'a str,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<Upserted, StoreError>> {
        Box::pin(self.upsert_item(kind, key, item))
    }

    fn initialized(&self) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(self.inited())
    }

    fn holds_writes(&self) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(self.holds_own_writes())
    }

    fn get_now(
        &self,
        kind: Kind,
        key: &str,
        timeout: Duration,
    ) -> Option<Result<Option<Item>, StoreError>> {
        let raw = self.blocking(timeout, |conn, keys| {
            redis::cmd("HGET")
                .arg(keys.of(kind))
                .arg(key)
                .query::<Option<Vec<u8>>>(conn)
        });
        Some(raw.map(|raw| raw.and_then(|raw| decode_stored(kind, key, Bytes::from(raw)))))
    }

    fn initialized_now(&self, timeout: Duration) -> Option<Result<bool, StoreError>> {
        Some(self.blocking(timeout, |conn, keys| {
            redis::cmd("EXISTS").arg(&keys.inited).query::<bool>(conn)
        }))
    }

    fn skipped_items(&self) -> u64 {
        self.skipped.iter().map(|n| n.load(Ordering::Relaxed)).sum()
    }

    fn is_available(&self) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            let available = self.inited().await.is_ok();
            tracing::trace!(target_db = %self.target, available, "redis availability");
            available
        })
    }
}
