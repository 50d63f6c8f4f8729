//! The Redis option group of `watch`, `snapshot` and `serve` (data from Redis, and the
//! relay's write-through): where Redis is — one server (`--redis`), a master behind
//! Sentinel (`--redis-sentinel`, `--redis-master`, its credentials and database) or a
//! cluster (`--redis-cluster`) —, the key prefix and the TLS files. Each option has a
//! `FLAGSYNC_*` variable; passwords are never echoed (`hide_env_values`).

use std::path::PathBuf;

use clap::Args;

use crate::client::{RedisOptions, RedisTarget, RedisTls};
use crate::error::CliError;

/// Where Redis is, its key prefix and its certificates. The three ways to name it
/// (`--redis`, `--redis-sentinel`, `--redis-cluster`) form the group `redis_target`,
/// which the options needing Redis require.
#[derive(Debug, Args)]
pub(crate) struct RedisArgs {
    /// Redis at URL (redis://[user:password@]host[:port][/db]; rediss://… for TLS),
    /// in the key layout of the LaunchDarkly SDKs and Relay Proxy.
    #[arg(
        long,
        value_name = "URL",
        env = "FLAGSYNC_REDIS",
        hide_env_values = true,
        group = "redis_target"
    )]
    pub(crate) redis: Option<String>,
    /// Instead of --redis: the master that Redis Sentinel knows as --redis-master,
    /// found through this sentinel (repeatable; a comma-separated list in the
    /// variable): HOST:PORT, redis://[user:password@]HOST:PORT when the sentinels
    /// require a password, rediss://… when they speak TLS (then the master is reached
    /// over TLS too). Failovers are followed.
    #[arg(
        long = "redis-sentinel",
        value_name = "HOST:PORT",
        env = "FLAGSYNC_REDIS_SENTINELS",
        value_delimiter = ',',
        hide_env_values = true,
        group = "redis_target",
        requires = "redis_master"
    )]
    pub(crate) redis_sentinel: Vec<String>,
    /// With --redis-sentinel: the master's name, as the sentinels know it.
    #[arg(
        long,
        value_name = "NAME",
        env = "FLAGSYNC_REDIS_MASTER",
        requires = "redis_sentinel"
    )]
    pub(crate) redis_master: Option<String>,
    /// With --redis-sentinel: the master's ACL username (default: the `default`
    /// user); with --redis-master-password.
    #[arg(
        long,
        value_name = "USER",
        env = "FLAGSYNC_REDIS_MASTER_USERNAME",
        requires = "redis_master_password"
    )]
    pub(crate) redis_master_username: Option<String>,
    /// With --redis-sentinel: the master's password (the sentinels' own go in their
    /// URLs). A command-line argument is visible to every user of this machine
    /// (`ps`): set FLAGSYNC_REDIS_MASTER_PASSWORD instead.
    #[arg(
        long,
        value_name = "PASSWORD",
        env = "FLAGSYNC_REDIS_MASTER_PASSWORD",
        hide_env_values = true,
        requires = "redis_sentinel"
    )]
    pub(crate) redis_master_password: Option<String>,
    /// With --redis-sentinel: the master's database number [default: 0].
    #[arg(
        long,
        value_name = "N",
        env = "FLAGSYNC_REDIS_DB",
        requires = "redis_sentinel"
    )]
    pub(crate) redis_db: Option<u32>,
    /// Instead of --redis: Redis Cluster, found through this seed node (repeatable; a
    /// comma-separated list in the variable): HOST:PORT, redis://[user:password@]…
    /// or rediss://… (the first one's credentials and scheme hold for all). The
    /// --prefix must then hold a hash tag, e.g. --prefix '{launchdarkly}'.
    #[arg(
        long = "redis-cluster",
        value_name = "URL",
        env = "FLAGSYNC_REDIS_CLUSTER",
        value_delimiter = ',',
        hide_env_values = true,
        group = "redis_target"
    )]
    pub(crate) redis_cluster: Vec<String>,
    /// The Redis key prefix [default: launchdarkly].
    #[arg(
        long,
        value_name = "PREFIX",
        env = "FLAGSYNC_REDIS_PREFIX",
        requires = "redis_target"
    )]
    pub(crate) prefix: Option<String>,
    #[command(flatten)]
    pub(crate) tls: RedisTlsArgs,
}

impl RedisArgs {
    /// Whether Redis was named at all.
    pub(crate) fn given(&self) -> bool {
        self.redis.is_some() || !self.redis_sentinel.is_empty() || !self.redis_cluster.is_empty()
    }

    /// The Redis these options name, if any, checked (a setting the store refuses is
    /// a usage error saying what is expected). `daemon`: only read from it.
    pub(crate) fn options(&self, daemon: bool) -> Result<Option<RedisOptions>, CliError> {
        let target = if let Some(url) = &self.redis {
            RedisTarget::Url(url.clone())
        } else if !self.redis_sentinel.is_empty() {
            RedisTarget::Sentinel {
                master: self.redis_master.clone().unwrap_or_default(),
                sentinels: self.redis_sentinel.clone(),
                username: self.redis_master_username.clone(),
                password: self.redis_master_password.clone(),
                db: self.redis_db,
            }
        } else if !self.redis_cluster.is_empty() {
            RedisTarget::Cluster(self.redis_cluster.clone())
        } else {
            return Ok(None);
        };
        let opts = RedisOptions {
            target,
            prefix: self.prefix.clone(),
            daemon,
            tls: self.tls.read()?,
        };
        opts.store().map_err(CliError::usage)?;
        Ok(Some(opts))
    }
}

/// The certificates of a `rediss://…` connection.
#[derive(Debug, Args)]
pub(crate) struct RedisTlsArgs {
    /// For rediss://…: trust the CA certificate(s) in this PEM file instead of the
    /// webpki roots (a Redis whose certificate a private CA signed).
    #[arg(
        long,
        value_name = "PEM",
        env = "FLAGSYNC_REDIS_CA_FILE",
        requires = "redis_target"
    )]
    pub(crate) redis_ca_file: Option<PathBuf>,
    /// For rediss://…: present this client certificate (PEM) to a Redis that
    /// requires one (mutual TLS); with --redis-client-key.
    #[arg(long, value_name = "PEM", env = "FLAGSYNC_REDIS_CLIENT_CERT", requires_all = ["redis_target", "redis_client_key"])]
    pub(crate) redis_client_cert: Option<PathBuf>,
    /// The private key (PEM) of --redis-client-cert.
    #[arg(
        long,
        value_name = "PEM",
        env = "FLAGSYNC_REDIS_CLIENT_KEY",
        requires = "redis_client_cert"
    )]
    pub(crate) redis_client_key: Option<PathBuf>,
}

impl RedisTlsArgs {
    /// The files' contents.
    pub(crate) fn read(&self) -> Result<RedisTls, CliError> {
        let read = |flag: &str, path: &PathBuf| {
            std::fs::read(path).map_err(|e| {
                CliError::usage(format!("cannot read --{flag} {}: {e}", path.display()))
            })
        };
        let ca_pem = match &self.redis_ca_file {
            Some(path) => Some(read("redis-ca-file", path)?),
            None => None,
        };
        let client_cert = match (&self.redis_client_cert, &self.redis_client_key) {
            (Some(cert), Some(key)) => Some((
                read("redis-client-cert", cert)?,
                read("redis-client-key", key)?,
            )),
            _ => None,
        };
        Ok(RedisTls {
            ca_pem,
            client_cert,
        })
    }
}
