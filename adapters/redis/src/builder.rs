//! What both stores' builders hold and set — where Redis is, the key prefix, the
//! timeouts, TLS — and the one step that checks it all and makes the endpoint.
//!
//! The public setters and constructors are written once, in the macros below, and
//! stamped onto [`crate::RedisStoreBuilder`] and [`crate::RedisBigSegmentStoreBuilder`]
//! (and their stores), so the two builders cannot drift apart.

use std::sync::Arc;
use std::time::Duration;

use flagsync::persist::StoreError;

use crate::DEFAULT_PREFIX;
use crate::cluster;
use crate::endpoint::{Endpoint, Target, Timeouts, sentinel_only};
use crate::tls::TlsSettings;

/// A builder's connection settings.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) target: Target,
    pub(crate) prefix: String,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) tls: TlsSettings,
    /// A Sentinel-only setting given to another target: refused by `connect`.
    pub(crate) misapplied: Option<&'static str>,
}

/// What a builder's settings become: the checked prefix and where to connect.
pub(crate) struct Connected {
    /// The key prefix ([`DEFAULT_PREFIX`] when none was given).
    pub(crate) prefix: String,
    pub(crate) endpoint: Arc<Endpoint>,
    /// The async connections' timeouts.
    pub(crate) config: redis::AsyncConnectionConfig,
}

impl Settings {
    /// `target` with the default prefix, a 2 s connect timeout and `response_timeout`.
    pub(crate) fn new(target: Target, response_timeout: Duration) -> Self {
        Self {
            target,
            prefix: DEFAULT_PREFIX.to_owned(),
            connect_timeout: Duration::from_secs(2),
            response_timeout,
            tls: TlsSettings::default(),
            misapplied: None,
        }
    }

    /// Behind Sentinel: the master's credentials; elsewhere remembered as misapplied.
    pub(crate) fn set_master_credentials(&mut self, username: Option<&str>, password: &str) {
        if let Some(setting) = self.target.set_master_credentials(username, password) {
            self.misapplied = Some(setting);
        }
    }

    /// Behind Sentinel: the master's database; elsewhere remembered as misapplied.
    pub(crate) fn set_database(&mut self, db: u32) {
        if let Some(setting) = self.target.set_database(db) {
            self.misapplied = Some(setting);
        }
    }

    /// Check the settings ([`StoreError::Config`]: a Sentinel setting without
    /// Sentinel, a cluster prefix without a hash tag, a URL that does not parse, TLS
    /// settings without `rediss://`) and make the endpoint. Opens no connection.
    pub(crate) fn connect(self) -> Result<Connected, StoreError> {
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
        Ok(Connected {
            prefix,
            endpoint,
            config,
        })
    }
}

/// The setters both builders have, on a builder with a `settings: Settings` field.
/// `$response_default` is the default response timeout, for its doc.
macro_rules! shared_setters {
    ($response_default:literal) => {
        /// The key prefix (default `launchdarkly`; an empty one is the default). Stores
        /// with different prefixes in one Redis database never see each other's data;
        /// on Redis Cluster it must hold a hash tag (see the crate docs).
        pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
            self.settings.prefix = prefix.into();
            self
        }

        /// How long opening a connection may take (default 2 s).
        pub fn connect_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.connect_timeout = timeout;
            self
        }

        /// How long one command or pipeline may wait for its answer.
        ///
        #[doc = concat!("Default: ", $response_default, ".")]
        pub fn response_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.settings.response_timeout = timeout;
            self
        }

        /// For a `rediss://` URL (or TLS sentinels and cluster nodes): trust the CA
        /// certificates in `pem` (PEM) instead of the webpki roots, as for a server
        /// whose certificate a private CA signed.
        pub fn tls_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
            self.settings.tls.ca_pem = Some(pem.into());
            self
        }

        /// For a `rediss://` URL: present this client certificate chain with its
        /// private key (both PEM) to a server that asks for one (mutual TLS,
        /// `tls-auth-clients yes`). The key never appears in `Debug` output.
        pub fn tls_client_cert(
            mut self,
            cert_pem: impl Into<Vec<u8>>,
            key_pem: impl Into<Vec<u8>>,
        ) -> Self {
            self.settings.tls.client = Some((cert_pem.into(), key_pem.into()));
            self
        }

        /// Behind Redis Sentinel: the master's username (an ACL user; `None` for the
        /// `default` user) and password. The sentinels' own credentials go in their
        /// URLs. Elsewhere `build` refuses it: a URL carries its credentials.
        pub fn master_credentials(mut self, username: Option<&str>, password: &str) -> Self {
            self.settings.set_master_credentials(username, password);
            self
        }

        /// Behind Redis Sentinel: the master's database number (default 0). Elsewhere
        /// `build` refuses it: a URL carries its database, and Redis Cluster has
        /// database 0 only.
        pub fn database(mut self, db: u32) -> Self {
            self.settings.set_database(db);
            self
        }
    };
}

/// The constructors both stores have: `builder`, `builder_sentinel`,
/// `builder_cluster` and `new`, making a builder by `$builder::with_settings` whose
/// response timeout defaults to `$response_secs` seconds.
macro_rules! constructors {
    ($builder:ident, $response_secs:literal) => {
        /// Settings for a store at `url`: `redis://[user:password@]host[:port][/db]`,
        /// or `rediss://…` for Redis over TLS (feature `rustls`; the server is
        /// verified against the webpki roots unless `tls_ca_pem` names its CA).
        pub fn builder(url: impl Into<String>) -> $builder {
            Self::builder_for($crate::endpoint::Target::Url(url.into()))
        }

        /// Settings for a store on the master that Redis Sentinel knows as
        /// `master_name`, found through `sentinels`: each `host:port`, or
        /// `redis://[user:password@]host:port` when the sentinels require a password,
        /// or `rediss://…` when they speak TLS (then the master is reached over TLS
        /// too). See the crate docs, "Where Redis is", for how failovers are followed.
        pub fn builder_sentinel(
            master_name: impl Into<String>,
            sentinels: impl IntoIterator<Item = impl Into<String>>,
        ) -> $builder {
            Self::builder_for($crate::endpoint::Target::sentinel(master_name, sentinels))
        }

        /// Settings for a store on Redis Cluster, found through the seed `nodes` (each
        /// `host:port`, `redis://[user:password@]host:port`, or `rediss://…`; the
        /// first one's credentials and scheme hold for all). The prefix must hold a
        /// non-empty hash tag, as in `{launchdarkly}`: `build` refuses any other with
        /// [`StoreError::Config`](flagsync::persist::StoreError::Config). See the crate
        /// docs, "Where Redis is", for why.
        pub fn builder_cluster(nodes: impl IntoIterator<Item = impl Into<String>>) -> $builder {
            Self::builder_for($crate::endpoint::Target::cluster(nodes))
        }

        fn builder_for(target: $crate::endpoint::Target) -> $builder {
            $builder::with_settings($crate::builder::Settings::new(
                target,
                std::time::Duration::from_secs($response_secs),
            ))
        }

        /// A store at `url` with the default prefix and settings.
        pub fn new(url: impl Into<String>) -> Result<Self, flagsync::persist::StoreError> {
            Self::builder(url).build()
        }
    };
}

pub(crate) use {constructors, shared_setters};
