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
//! The default prefix is `launchdarkly`. The store only reads. It keeps one blocking
//! connection (see [`flagsync::bigseg`] for why the store is synchronous), opened with a connect
//! timeout and used with read and write timeouts, so every call is bounded; a failed
//! call drops the connection and the next call opens a new one.

use std::fmt;
use std::time::Duration;

use flagsync::bigseg::{BigSegmentStore, Membership, StoreError, StoreMetadata};

use crate::DEFAULT_PREFIX;
use crate::errors::redact_url;
use crate::pool::BlockingConn;
use crate::tls::{self, TlsSettings};

/// Settings for a [`RedisBigSegmentStore`]; made by [`RedisBigSegmentStore::builder`].
#[derive(Clone)]
#[must_use]
pub struct RedisBigSegmentStoreBuilder {
    url: String,
    prefix: String,
    connect_timeout: Duration,
    response_timeout: Duration,
    tls: TlsSettings,
}

impl fmt::Debug for RedisBigSegmentStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisBigSegmentStoreBuilder")
            .field("url", &redact_url(&self.url))
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

    /// Check the URL and make the store (it connects on first use).
    pub fn build(self) -> Result<RedisBigSegmentStore, StoreError> {
        let client = tls::client(&self.url, &self.tls)?;
        let prefix = if self.prefix.is_empty() {
            DEFAULT_PREFIX.to_owned()
        } else {
            self.prefix
        };
        Ok(RedisBigSegmentStore {
            target: redact_url(&self.url),
            synchronized_on: format!("{prefix}:big_segments_synchronized_on"),
            include: format!("{prefix}:big_segment_include:"),
            exclude: format!("{prefix}:big_segment_exclude:"),
            connect_timeout: self.connect_timeout,
            response_timeout: self.response_timeout,
            conn: BlockingConn::new(client),
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
    /// The URL without its password, for logs.
    target: String,
    synchronized_on: String,
    /// `<prefix>:big_segment_include:` (the context hash follows).
    include: String,
    exclude: String,
    connect_timeout: Duration,
    response_timeout: Duration,
    conn: BlockingConn,
}

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
        RedisBigSegmentStoreBuilder {
            url: url.into(),
            prefix: DEFAULT_PREFIX.to_owned(),
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(2),
            tls: TlsSettings::default(),
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

    /// Run `f` on the blocking connection (opened if needed); a failure drops it.
    fn with_conn<T>(
        &self,
        f: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T, StoreError> {
        self.conn
            .run(self.connect_timeout, self.response_timeout, f)
            .inspect_err(|error| {
                tracing::debug!(target_db = %self.target, %error, "redis big-segment query failed");
            })
    }
}

impl BigSegmentStore for RedisBigSegmentStore {
    fn metadata(&self) -> Result<StoreMetadata, StoreError> {
        let value: Option<String> =
            self.with_conn(|c| redis::cmd("GET").arg(&self.synchronized_on).query(c))?;
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

    fn membership(&self, context_hash: &str) -> Result<Option<Membership>, StoreError> {
        let (included, excluded): (Vec<String>, Vec<String>) = self.with_conn(|c| {
            redis::pipe()
                .cmd("SMEMBERS")
                .arg(format!("{}{context_hash}", self.include))
                .cmd("SMEMBERS")
                .arg(format!("{}{context_hash}", self.exclude))
                .query(c)
        })?;
        if included.is_empty() && excluded.is_empty() {
            return Ok(None);
        }
        Ok(Some(Membership::from_refs(included, excluded)))
    }
}
