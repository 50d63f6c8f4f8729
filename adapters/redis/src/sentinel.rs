//! Redis Sentinel: which server is the master now.
//!
//! The store asks the sentinels itself (`SENTINEL get-master-addr-by-name`) rather than
//! through the redis crate's `sentinel` feature, so that every step is bounded by the
//! store's own timeouts (a sentinel that accepts a connection and never answers costs
//! one response timeout, not a hung store), the blocking connection resolves the master
//! the same way as the pooled ones, and the master is reached with the store's TLS
//! settings (a private CA, a client certificate). It follows Redis's guidelines for
//! Sentinel clients:
//!
//! 1. Ask the sentinels in order (the one that led to the master last time first).
//! 2. Connect to the address a sentinel names and check with `ROLE` that it is a
//!    master; if it cannot be reached or is not one (a sentinel cut off from the others
//!    may still name the old master, down, or a replica after a failover), ask the next
//!    sentinel.
//! 3. Resolve again whenever a new connection is opened: the store opens one after any
//!    connection failure, and after a `READONLY` answer (a master demoted under an open
//!    connection), so after a failover the next operation reaches the new master.

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use flagsync::persist::StoreError;

use crate::errors::map_error;
use crate::tls::{self, TlsSettings};

/// The sentinels of one master, and how to reach that master once they name it.
pub(crate) struct Sentinels {
    master_name: String,
    /// The sentinels (each with its place in the order given), the one that answered
    /// last first.
    sentinels: Mutex<Vec<(usize, redis::Client)>>,
    /// The master's settings but its address: database, credentials, TLS or not.
    master: redis::ConnectionInfo,
    tls: TlsSettings,
    connect_timeout: Duration,
    response_timeout: Duration,
    /// The master last named, for logs.
    last: Mutex<Option<(String, u16)>>,
}

impl fmt::Debug for Sentinels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sentinels")
            .field("master_name", &self.master_name)
            .field("sentinels", &self.lock_sentinels().len())
            .finish_non_exhaustive()
    }
}

/// One walk over the sentinels for a connection to the master: which addresses were
/// tried, and the last reason none worked. The async and blocking connections walk
/// alike; only their I/O differs.
struct Walk<'a> {
    master: &'a str,
    tried: Vec<(String, u16)>,
    failure: Option<StoreError>,
}

impl<'a> Walk<'a> {
    fn new(master: &'a str) -> Self {
        Self {
            master,
            tried: Vec::new(),
            failure: None,
        }
    }

    /// What a sentinel answered: the address to try now, or `None` when it named none
    /// (the failure is kept) or one already tried (it failed).
    fn named(&mut self, answer: Result<(String, u16), StoreError>) -> Option<(String, u16)> {
        match answer {
            Ok(addr) if !self.tried.contains(&addr) => {
                self.tried.push(addr.clone());
                Some(addr)
            }
            Ok(_) => None,
            Err(e) => {
                tracing::debug!(master = %self.master, error = %e, "redis sentinel did not name the master");
                self.failure = Some(e);
                None
            }
        }
    }

    /// The master a sentinel named could not be reached, or is no master: ask the next.
    fn failed(&mut self, e: StoreError) {
        self.failure = Some(e);
    }
}

impl Sentinels {
    /// The sentinels at `urls` (`redis://[user:password@]host:port`, `rediss://` for
    /// TLS, or `host:port`) watching `master_name`; the master is reached over TLS if
    /// the sentinels are, with `credentials` and `db`. Nothing is connected yet.
    pub(crate) fn new(
        master_name: &str,
        urls: &[String],
        credentials: Option<&(Option<String>, String)>,
        db: i64,
        tls: &TlsSettings,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<Self, StoreError> {
        if master_name.is_empty() {
            return Err(StoreError::Config(
                "redis sentinel: the master name is empty".into(),
            ));
        }
        if urls.is_empty() {
            return Err(StoreError::Config(
                "redis sentinel: no sentinel address was given".into(),
            ));
        }
        let urls: Vec<String> = urls.iter().map(|u| tls::node_url(u)).collect();
        let secure = tls::is_secure(&urls[0]);
        if urls.iter().any(|u| tls::is_secure(u) != secure) {
            return Err(StoreError::Config(
                "redis sentinel: the sentinels' URLs mix redis:// and rediss://".into(),
            ));
        }
        tls::check(secure, tls)?;
        let sentinels = urls
            .iter()
            .map(|u| {
                let info = tls::connection_info(u)?;
                if info.redis_settings().db() != 0 {
                    return Err(StoreError::Config(
                        "redis sentinel: a sentinel URL names a database (give the master's with `database`)"
                            .into(),
                    ));
                }
                tls::client_for(info, tls)
            })
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .enumerate()
            .collect();
        let scheme = if secure { "rediss" } else { "redis" };
        let template = tls::connection_info(&format!("{scheme}://127.0.0.1:6379/{db}"))?;
        let mut redis = template.redis_settings().clone();
        if let Some((user, password)) = credentials {
            if let Some(user) = user {
                redis = redis.set_username(user);
            }
            redis = redis.set_password(password);
        }
        Ok(Self {
            master_name: master_name.to_owned(),
            sentinels: Mutex::new(sentinels),
            master: template.set_redis_settings(redis),
            tls: tls.clone(),
            connect_timeout,
            response_timeout,
            last: Mutex::new(None),
        })
    }

    /// For logs: `sentinel:<master name>/<db>`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "sentinel:{}/{}",
            self.master_name,
            self.master.redis_settings().db()
        )
    }

    fn lock_sentinels(&self) -> std::sync::MutexGuard<'_, Vec<(usize, redis::Client)>> {
        self.sentinels.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The sentinels to ask, in order.
    fn sentinels(&self) -> Vec<(usize, redis::Client)> {
        self.lock_sentinels().clone()
    }

    /// Sentinel `id` led to the master: ask it first next time.
    fn answered(&self, id: usize) {
        let mut sentinels = self.lock_sentinels();
        if let Some(at) = sentinels.iter().position(|(i, _)| *i == id)
            && at > 0
        {
            let s = sentinels.remove(at);
            sentinels.insert(0, s);
        }
    }

    /// A client for the master at `host:port`.
    fn master_client(&self, host: String, port: u16) -> Result<redis::Client, StoreError> {
        let addr = match self.master.addr() {
            redis::ConnectionAddr::TcpTls { .. } => redis::ConnectionAddr::TcpTls {
                host: host.clone(),
                port,
                insecure: false,
                tls_params: None,
            },
            _ => redis::ConnectionAddr::Tcp(host.clone(), port),
        };
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.as_ref() != Some(&(host.clone(), port)) {
            tracing::info!(master = %self.master_name, %host, port, "redis sentinel: the master is at this address");
            *last = Some((host, port));
        }
        tls::client_for(self.master.clone().set_addr(addr), &self.tls)
    }

    /// An async connection to the current master, opened with `config`.
    pub(crate) async fn connect(
        &self,
        config: &redis::AsyncConnectionConfig,
    ) -> Result<redis::aio::MultiplexedConnection, StoreError> {
        let sentinel_config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout));
        let mut walk = Walk::new(&self.master_name);
        for (id, sentinel) in self.sentinels() {
            let answer = async {
                let mut conn = sentinel
                    .get_multiplexed_async_connection_with_config(&sentinel_config)
                    .await
                    .map_err(map_error)?;
                let addr: Option<(String, u16)> = get_master_addr(&self.master_name)
                    .query_async(&mut conn)
                    .await
                    .map_err(map_error)?;
                addr.ok_or_else(|| self.unknown())
            }
            .await;
            let Some((host, port)) = walk.named(answer) else {
                continue;
            };
            // A master that cannot be reached, or is no master (a sentinel cut off from
            // the others may name the old one): ask the next sentinel.
            let client = self.master_client(host, port)?;
            let mut conn = match client
                .get_multiplexed_async_connection_with_config(config)
                .await
            {
                Ok(conn) => conn,
                Err(e) => {
                    walk.failed(map_error(e));
                    continue;
                }
            };
            let role: redis::RedisResult<redis::Value> =
                redis::cmd("ROLE").query_async(&mut conn).await;
            match check_role(role) {
                Ok(()) => {
                    self.answered(id);
                    return Ok(conn);
                }
                Err(e) => walk.failed(e),
            }
        }
        Err(self.unreachable(walk.failure))
    }

    /// A blocking connection to the current master, opened within `connect`.
    pub(crate) fn connect_blocking(
        &self,
        connect: Duration,
        response: Duration,
    ) -> Result<redis::Connection, StoreError> {
        let mut walk = Walk::new(&self.master_name);
        for (id, sentinel) in self.sentinels() {
            let answer = (|| {
                let mut conn = sentinel
                    .get_connection_with_timeout(connect.min(self.connect_timeout))
                    .map_err(map_error)?;
                let bound = Some(response.min(self.response_timeout));
                conn.set_read_timeout(bound)
                    .and_then(|()| conn.set_write_timeout(bound))
                    .map_err(map_error)?;
                let addr: Option<(String, u16)> = get_master_addr(&self.master_name)
                    .query(&mut conn)
                    .map_err(map_error)?;
                addr.ok_or_else(|| self.unknown())
            })();
            let Some((host, port)) = walk.named(answer) else {
                continue;
            };
            let client = self.master_client(host, port)?;
            let conn = client.get_connection_with_timeout(connect).and_then(|c| {
                c.set_read_timeout(Some(response))?;
                c.set_write_timeout(Some(response))?;
                Ok(c)
            });
            let mut conn = match conn {
                Ok(conn) => conn,
                Err(e) => {
                    walk.failed(map_error(e));
                    continue;
                }
            };
            match check_role(redis::cmd("ROLE").query(&mut conn)) {
                Ok(()) => {
                    self.answered(id);
                    return Ok(conn);
                }
                Err(e) => walk.failed(e),
            }
        }
        Err(self.unreachable(walk.failure))
    }

    /// A sentinel that answered does not know the master name.
    fn unknown(&self) -> StoreError {
        StoreError::Unreachable(format!(
            "the sentinel does not know a master named {:?}",
            self.master_name
        ))
    }

    /// No sentinel led to the master; `failure` is the last reason. One that will not
    /// clear by asking again (credentials or settings refused) is passed on as it is.
    fn unreachable(&self, failure: Option<StoreError>) -> StoreError {
        match failure {
            Some(e) if e.is_permanent() => e,
            Some(e) => StoreError::Unreachable(format!(
                "no sentinel named a reachable master {:?}: {e}",
                self.master_name
            )),
            None => StoreError::Unreachable(format!(
                "no sentinel named a reachable master {:?}",
                self.master_name
            )),
        }
    }
}

fn get_master_addr(name: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("SENTINEL");
    cmd.arg("get-master-addr-by-name").arg(name);
    cmd
}

/// `ROLE`'s answer says `master`.
fn check_role(role: redis::RedisResult<redis::Value>) -> Result<(), StoreError> {
    let role = role.map_err(map_error)?;
    let first = match role {
        redis::Value::Array(items) => items.into_iter().next(),
        _ => None,
    };
    let name: Option<String> = first.and_then(|v| redis::from_redis_value(v).ok());
    match name.as_deref() {
        Some("master") => Ok(()),
        other => Err(StoreError::Unreachable(format!(
            "the server the sentinel named is not a master (role {}): a failover is under way",
            other.unwrap_or("unknown")
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_other_than_master_are_refused() {
        let master = redis::Value::Array(vec![
            redis::Value::BulkString(b"master".to_vec()),
            redis::Value::Int(0),
            redis::Value::Array(vec![]),
        ]);
        assert!(check_role(Ok(master)).is_ok());
        let replica = redis::Value::Array(vec![redis::Value::BulkString(b"slave".to_vec())]);
        assert!(matches!(
            check_role(Ok(replica)),
            Err(StoreError::Unreachable(_))
        ));
    }

    #[test]
    fn settings_that_cannot_work_are_config_errors() {
        let tls = TlsSettings::default();
        let s = Duration::from_secs(1);
        let new = |name: &str, urls: &[&str]| {
            let urls: Vec<String> = urls.iter().map(|u| (*u).to_owned()).collect();
            Sentinels::new(name, &urls, None, 0, &tls, s, s)
        };
        assert!(matches!(
            new("", &["127.0.0.1:1"]),
            Err(StoreError::Config(_))
        ));
        assert!(matches!(new("m", &[]), Err(StoreError::Config(_))));
        assert!(matches!(
            new("m", &["redis://127.0.0.1:1", "rediss://127.0.0.1:2"]),
            Err(StoreError::Config(_))
        ));
        assert!(matches!(
            new("m", &["redis://127.0.0.1:1/3"]),
            Err(StoreError::Config(_))
        ));
        let ok = new("m", &["127.0.0.1:1", "redis://:pw@127.0.0.1:2"]).unwrap();
        assert_eq!(ok.describe(), "sentinel:m/0");
        assert_eq!(ok.sentinels().len(), 2);
    }

    #[test]
    fn sentinel_settings_elsewhere_are_refused_and_passwords_never_show() {
        use crate::{RedisBigSegmentStore, RedisStore};
        let url = "redis://127.0.0.1:1/0";
        for e in [
            RedisStore::builder(url).database(2).build().err(),
            RedisStore::builder(url)
                .master_credentials(None, "pw")
                .build()
                .err(),
            RedisStore::builder_cluster(["127.0.0.1:1"])
                .prefix("{p}")
                .database(1)
                .build()
                .err(),
            RedisBigSegmentStore::builder(url).database(2).build().err(),
        ] {
            assert!(matches!(e, Some(StoreError::Config(_))), "{e:?}");
        }
        let b = RedisStore::builder_sentinel("m", ["redis://:sentinel-pw-1@127.0.0.1:1"])
            .master_credentials(Some("app"), "master-pw-2")
            .database(3);
        let store = b.clone().build().unwrap();
        let big =
            RedisBigSegmentStore::builder_sentinel("m", ["redis://:sentinel-pw-1@127.0.0.1:1"])
                .master_credentials(Some("app"), "master-pw-2");
        let debug = format!("{b:?} {store:?} {big:?} {:?}", big.clone().build().unwrap());
        for secret in ["sentinel-pw-1", "master-pw-2"] {
            assert!(!debug.contains(secret), "{debug}");
        }
        assert_eq!(store.target(), "sentinel:m/3");
    }
}
