//! Connections: a small pool of async connections, each lent to one operation at a
//! time (a `WATCH` belongs to its connection), and one blocking connection for calls
//! that must answer on the calling thread.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use std::sync::Arc;

use flagsync::persist::StoreError;

use crate::endpoint::{AsyncConn, Endpoint, SyncConn};
use crate::errors::map_error;

/// At most `pool_size` connections; each is lent to one operation at a time.
pub(crate) struct Pool {
    endpoint: Arc<Endpoint>,
    config: redis::AsyncConnectionConfig,
    /// Slots: a connection, or `None` for one not opened yet (or dropped after a failure).
    tx: async_channel::Sender<Option<Pooled>>,
    rx: async_channel::Receiver<Option<Pooled>>,
    /// Bumped when a connection fails to reach the server: every connection opened
    /// before is dropped instead of reused (they all went to the same server).
    epoch: AtomicU64,
}

/// One blocking (synchronous) Redis connection, for calls that must answer on the
/// calling thread without an async runtime: opened on first use, dropped after any
/// failure (a broken or timed-out connection may hold a late answer).
pub(crate) struct BlockingConn {
    endpoint: Arc<Endpoint>,
    conn: std::sync::Mutex<Option<SyncConn>>,
}

impl BlockingConn {
    pub(crate) fn new(endpoint: Arc<Endpoint>) -> Self {
        Self {
            endpoint,
            conn: std::sync::Mutex::new(None),
        }
    }

    /// Run `op` on the connection, opened within `connect` if needed, each command
    /// bounded by `response` (the redis crate refuses zero: at least 1 ms each).
    pub(crate) fn run<T>(
        &self,
        connect: Duration,
        response: Duration,
        op: impl FnOnce(&mut SyncConn) -> redis::RedisResult<T>,
    ) -> Result<T, StoreError> {
        let at_least = |d: Duration| d.max(Duration::from_millis(1));
        let response = at_least(response);
        let mut slot = self.conn.lock().unwrap_or_else(|e| e.into_inner());
        let conn = match slot.as_mut() {
            Some(conn) => conn,
            None => {
                let conn = self
                    .endpoint
                    .connect_blocking(at_least(connect), response)?;
                slot.insert(conn)
            }
        };
        let result = conn.set_timeout(response).and_then(|()| op(conn));
        if result.is_err() {
            *slot = None;
        }
        result.map_err(map_error)
    }
}

impl fmt::Debug for BlockingConn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockingConn").finish_non_exhaustive()
    }
}

/// An open connection in its slot.
struct Pooled {
    conn: AsyncConn,
    epoch: u64,
    /// When it last answered.
    used: std::time::Instant,
}

/// A connection idle this long is checked with a `PING` before it is reused: after a
/// restart of Redis each pooled connection is dead, and without the check each would
/// fail one operation (each reported as an outage).
const IDLE_CHECK: Duration = Duration::from_millis(500);

impl Pool {
    /// A pool of at most `size` connections to `endpoint`, opened with `config`
    /// when first needed.
    pub(crate) fn new(
        endpoint: Arc<Endpoint>,
        config: redis::AsyncConnectionConfig,
        size: usize,
    ) -> Self {
        let (tx, rx) = async_channel::bounded(size);
        for _ in 0..size {
            // The channel has room for every slot.
            let _ = tx.try_send(None);
        }
        Self {
            endpoint,
            config,
            tx,
            rx,
            epoch: AtomicU64::new(0),
        }
    }

    pub(crate) async fn get(&self) -> Result<Lent<'_>, StoreError> {
        let slot = self
            .rx
            .recv()
            .await
            .map_err(|_| StoreError::Unreachable("connection pool closed".into()))?;
        let mut lent = Lent {
            conn: None,
            pool: self,
        };
        if let Some(mut pooled) = slot {
            let current = pooled.epoch == self.epoch.load(Ordering::Acquire);
            let alive = current
                && (pooled.used.elapsed() < IDLE_CHECK
                    || redis::cmd("PING")
                        .query_async::<()>(&mut pooled.conn)
                        .await
                        .is_ok());
            if alive {
                lent.conn = Some(pooled);
            } else {
                tracing::debug!("redis: a pooled connection is stale; opening a new one");
            }
        }
        if lent.conn.is_none() {
            let epoch = self.epoch.load(Ordering::Acquire);
            let conn = self
                .endpoint
                .connect(&self.config)
                .await
                .map_err(|e| self.failed(e))?;
            lent.conn = Some(Pooled {
                conn,
                epoch,
                used: std::time::Instant::now(),
            });
        }
        Ok(lent)
    }

    /// A connection failed with `error`: if the server is unreachable (or no longer the
    /// master: a failover demoted it), no pooled connection is reused (the next one
    /// opened goes to the master the sentinels name then).
    fn failed(&self, error: StoreError) -> StoreError {
        if matches!(error, StoreError::Unreachable(_)) {
            self.epoch.fetch_add(1, Ordering::AcqRel);
        }
        error
    }
}

/// A connection lent by the [`Pool`]; it goes back when dropped (or its slot does,
/// empty, after a failure).
pub(crate) struct Lent<'a> {
    conn: Option<Pooled>,
    pool: &'a Pool,
}

impl Lent<'_> {
    pub(crate) fn get(&mut self) -> &mut AsyncConn {
        &mut self
            .conn
            .as_mut()
            .expect("a lent connection is open until dropped")
            .conn
    }

    /// Pass `result` on; after a failure the connection is not reused (it may be
    /// broken, or hold a `WATCH`).
    pub(crate) fn check<T>(&mut self, result: redis::RedisResult<T>) -> Result<T, StoreError> {
        match result {
            Ok(v) => {
                if let Some(p) = self.conn.as_mut() {
                    p.used = std::time::Instant::now();
                }
                Ok(v)
            }
            Err(e) => {
                self.conn = None;
                Err(self.pool.failed(map_error(e)))
            }
        }
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        // The channel has a place for every slot.
        let _ = self.pool.tx.try_send(self.conn.take());
    }
}
