//! Where a store's Redis is: one server (a URL), a master that Redis Sentinel watches,
//! or a Redis Cluster; and the connections to it, async and blocking, which the store
//! uses alike whichever it is.

use std::fmt;
use std::time::Duration;

use flagsync::persist::StoreError;
use redis::{RedisFuture, Value};

use crate::cluster;
use crate::errors::{map_error, redact_url};
use crate::sentinel::Sentinels;
use crate::tls::{self, TlsSettings};

/// Where a store's Redis is, as its builder was told.
#[derive(Clone)]
pub(crate) enum Target {
    /// One server: `redis://…` or `rediss://…`.
    Url(String),
    /// The master named `master`, as the `sentinels` say.
    Sentinel {
        master: String,
        sentinels: Vec<String>,
        /// The master's username (ACL) and password.
        credentials: Option<(Option<String>, String)>,
        db: i64,
    },
    /// A cluster, found through its seed `nodes`.
    Cluster { nodes: Vec<String> },
}

impl Target {
    /// The master named `master_name`, found through `sentinels`; no master
    /// credentials, database 0 (the builders set them).
    pub(crate) fn sentinel(
        master_name: impl Into<String>,
        sentinels: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self::Sentinel {
            master: master_name.into(),
            sentinels: sentinels.into_iter().map(Into::into).collect(),
            credentials: None,
            db: 0,
        }
    }

    /// A cluster found through its seed `nodes`.
    pub(crate) fn cluster(nodes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self::Cluster {
            nodes: nodes.into_iter().map(Into::into).collect(),
        }
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted = |urls: &[String]| urls.iter().map(|u| redact_url(u)).collect::<Vec<_>>();
        match self {
            Self::Url(url) => f.debug_tuple("Url").field(&redact_url(url)).finish(),
            Self::Sentinel {
                master,
                sentinels,
                credentials,
                db,
            } => f
                .debug_struct("Sentinel")
                .field("master", master)
                .field("sentinels", &redacted(sentinels))
                .field(
                    "username",
                    &credentials.as_ref().and_then(|(u, _)| u.as_deref()),
                )
                .field("password", &credentials.as_ref().map(|_| "***"))
                .field("db", db)
                .finish(),
            Self::Cluster { nodes } => f
                .debug_struct("Cluster")
                .field("nodes", &redacted(nodes))
                .finish(),
        }
    }
}

impl Target {
    /// True for a cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Self::Cluster { .. })
    }

    /// Behind Sentinel: the master's credentials. Elsewhere, the name of the setting,
    /// which the builder refuses (a URL carries its own credentials).
    pub(crate) fn set_master_credentials(
        &mut self,
        username: Option<&str>,
        password: &str,
    ) -> Option<&'static str> {
        match self {
            Self::Sentinel { credentials, .. } => {
                *credentials = Some((username.map(str::to_owned), password.to_owned()));
                None
            }
            _ => Some("master_credentials"),
        }
    }

    /// Behind Sentinel: the master's database. Elsewhere, the name of the setting.
    pub(crate) fn set_database(&mut self, database: u32) -> Option<&'static str> {
        match self {
            Self::Sentinel { db, .. } => {
                *db = i64::from(database);
                None
            }
            _ => Some("database"),
        }
    }
}

/// `setting`, given to a builder that is not behind Sentinel: a configuration error.
pub(crate) fn sentinel_only(setting: &str) -> StoreError {
    StoreError::Config(format!(
        "{setting} is a setting of a store behind Redis Sentinel (builder_sentinel); a URL \
         carries its own credentials and database, and Redis Cluster has database 0 only"
    ))
}

/// The timeouts of every connection: opening one, and each answer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    pub(crate) connect: Duration,
    pub(crate) response: Duration,
}

/// A [`Target`] made ready to connect.
pub(crate) enum Endpoint {
    Direct(redis::Client),
    Sentinel(Sentinels),
    /// The client, and `cluster:<first seed node>` for logs.
    Cluster(redis::cluster::ClusterClient, String),
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl Endpoint {
    /// `target` with `tls`, checked: settings that cannot work are
    /// [`StoreError::Config`]. Nothing is connected yet.
    pub(crate) fn new(
        target: &Target,
        tls: &TlsSettings,
        timeouts: Timeouts,
    ) -> Result<Self, StoreError> {
        Ok(match target {
            Target::Url(url) => Self::Direct(tls::client(url, tls)?),
            Target::Sentinel {
                master,
                sentinels,
                credentials,
                db,
            } => Self::Sentinel(Sentinels::new(
                master,
                sentinels,
                credentials.as_ref(),
                *db,
                tls,
                timeouts.connect,
                timeouts.response,
            )?),
            Target::Cluster { nodes } => {
                let client = cluster::client(nodes, tls, timeouts.connect, timeouts.response)?;
                let first = nodes.first().map(|n| redact_url(n)).unwrap_or_default();
                let first = first.rsplit_once('@').map_or(first.as_str(), |(_, h)| h);
                let first = first.rsplit_once("://").map_or(first, |(_, h)| h);
                Self::Cluster(client, format!("cluster:{first}"))
            }
        })
    }

    /// Where it is, for people and logs (never a password): `host:port/db`,
    /// `sentinel:<master name>/<db>`, or `cluster:<first seed node>`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Direct(client) => {
                let info = client.get_connection_info();
                format!("{}/{}", info.addr(), info.redis_settings().db())
            }
            Self::Sentinel(s) => s.describe(),
            Self::Cluster(_, seed) => seed.clone(),
        }
    }

    /// Open an async connection with `config` (for a master behind sentinels: the one
    /// they name now).
    pub(crate) async fn connect(
        &self,
        config: &redis::AsyncConnectionConfig,
    ) -> Result<AsyncConn, StoreError> {
        match self {
            Self::Direct(client) => client
                .get_multiplexed_async_connection_with_config(config)
                .await
                .map(AsyncConn::Single)
                .map_err(map_error),
            Self::Sentinel(s) => s.connect(config).await.map(AsyncConn::Single),
            Self::Cluster(client, _) => client
                .get_async_connection()
                .await
                .map(AsyncConn::Cluster)
                .map_err(map_error),
        }
    }

    /// Open a blocking connection within `connect`, each answer bounded by `response`.
    pub(crate) fn connect_blocking(
        &self,
        connect: Duration,
        response: Duration,
    ) -> Result<SyncConn, StoreError> {
        let conn = match self {
            Self::Direct(client) => client
                .get_connection_with_timeout(connect)
                .map(SyncConn::Single)
                .map_err(map_error)?,
            Self::Sentinel(s) => SyncConn::Single(s.connect_blocking(connect, response)?),
            Self::Cluster(client, _) => client
                .get_connection()
                .map(|c| SyncConn::Cluster(Box::new(c)))
                .map_err(map_error)?,
        };
        conn.set_timeout(response).map_err(map_error)?;
        Ok(conn)
    }
}

/// An async connection: to one server, or to a cluster (which routes each command,
/// and each pipeline, to the node of its keys' slot).
pub(crate) enum AsyncConn {
    Single(redis::aio::MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl redis::aio::ConnectionLike for AsyncConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Self::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }
}

/// A blocking connection, as [`AsyncConn`].
pub(crate) enum SyncConn {
    Single(redis::Connection),
    /// Boxed: far larger than one connection, and there is one per store.
    Cluster(Box<redis::cluster::ClusterConnection>),
}

impl SyncConn {
    /// Bound each read and write by `timeout`.
    pub(crate) fn set_timeout(&self, timeout: Duration) -> redis::RedisResult<()> {
        let t = Some(timeout);
        match self {
            Self::Single(c) => c.set_read_timeout(t).and_then(|()| c.set_write_timeout(t)),
            Self::Cluster(c) => c.set_read_timeout(t).and_then(|()| c.set_write_timeout(t)),
        }
    }
}

impl redis::ConnectionLike for SyncConn {
    fn req_packed_command(&mut self, cmd: &[u8]) -> redis::RedisResult<Value> {
        match self {
            Self::Single(c) => c.req_packed_command(cmd),
            Self::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> redis::RedisResult<Vec<Value>> {
        match self {
            Self::Single(c) => c.req_packed_commands(cmd, offset, count),
            // The cluster sends a pipeline to the node of its first command's key: the
            // store's pipelines keep to one slot (the prefix's hash tag).
            Self::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn req_command(&mut self, cmd: &redis::Cmd) -> redis::RedisResult<Value> {
        match self {
            Self::Single(c) => c.req_command(cmd),
            Self::Cluster(c) => c.req_command(cmd),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(c) => c.get_db(),
            Self::Cluster(c) => c.get_db(),
        }
    }

    fn check_connection(&mut self) -> bool {
        match self {
            Self::Single(c) => c.check_connection(),
            Self::Cluster(c) => c.check_connection(),
        }
    }

    fn is_open(&self) -> bool {
        match self {
            Self::Single(c) => c.is_open(),
            Self::Cluster(c) => c.is_open(),
        }
    }
}
