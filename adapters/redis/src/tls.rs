//! The redis client of a store: its URL, and for `rediss://` the certificates it
//! trusts and presents (with the `rustls` feature).

use std::fmt;

use flagsync::persist::StoreError;

#[cfg(feature = "rustls")]
use crate::errors::map_error;

/// TLS settings of a store, beyond the `rediss://` scheme: a private CA instead of
/// the webpki roots, and a client certificate for mutual TLS. All in PEM.
#[derive(Clone, Default)]
pub(crate) struct TlsSettings {
    /// The CA certificates (PEM) trusted instead of the webpki roots.
    pub(crate) ca_pem: Option<Vec<u8>>,
    /// The client certificate chain and its private key (PEM), for mutual TLS.
    pub(crate) client: Option<(Vec<u8>, Vec<u8>)>,
}

impl TlsSettings {
    /// Nothing beyond the scheme: a `rediss://` URL verifies the server against the
    /// webpki roots and presents no certificate.
    pub(crate) fn is_default(&self) -> bool {
        self.ca_pem.is_none() && self.client.is_none()
    }
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key; the certificates are public but long.
        f.debug_struct("TlsSettings")
            .field("ca_pem", &self.ca_pem.as_ref().map(|_| "<set>"))
            .field("client_cert", &self.client.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// Without the `rustls` feature, what a `rediss://` URL or a TLS setting gets.
#[cfg(not(feature = "rustls"))]
const NO_TLS: &str = "redis over TLS (rediss://) needs flagsync-redis's `rustls` feature";

/// A sentinel's or cluster node's URL: `host:port` alone is `redis://host:port`.
pub(crate) fn node_url(node: &str) -> String {
    if node.contains("://") {
        node.to_owned()
    } else {
        format!("redis://{node}")
    }
}

/// True for a `rediss://` URL (Redis over TLS).
pub(crate) fn is_secure(url: &str) -> bool {
    url.trim_start()
        .to_ascii_lowercase()
        .starts_with("rediss://")
}

/// `url` parsed; a URL that does not parse is [`StoreError::Config`] (naming the
/// problem's category, never the URL, which may hold a password).
pub(crate) fn connection_info(url: &str) -> Result<redis::ConnectionInfo, StoreError> {
    redis::IntoConnectionInfo::into_connection_info(url)
        .map_err(|e| StoreError::Config(format!("redis URL: {}", e.category())))
}

/// Refuse TLS settings that cannot work: any without the `rustls` feature, and
/// certificates given for plaintext connections (`secure` false).
pub(crate) fn check(secure: bool, tls: &TlsSettings) -> Result<(), StoreError> {
    #[cfg(not(feature = "rustls"))]
    if secure || !tls.is_default() {
        return Err(StoreError::Config(NO_TLS.into()));
    }
    if !secure && !tls.is_default() {
        return Err(StoreError::Config(
            "TLS certificates were given for a redis:// URL: use rediss:// for TLS".into(),
        ));
    }
    #[cfg(feature = "rustls")]
    if secure {
        check_pem(tls)?;
        install_crypto_provider();
    }
    Ok(())
}

/// A redis client for `url` with `tls`; a URL that does not parse, or TLS settings
/// that cannot work (a `redis://` URL, PEM that does not parse, a build without TLS),
/// are [`StoreError::Config`].
pub(crate) fn client(url: &str, tls: &TlsSettings) -> Result<redis::Client, StoreError> {
    check(is_secure(url), tls)?;
    client_for(connection_info(url)?, tls)
}

/// A redis client for `info` (already checked with [`check`]), with the certificates
/// of `tls` when it connects over TLS.
pub(crate) fn client_for(
    info: redis::ConnectionInfo,
    tls: &TlsSettings,
) -> Result<redis::Client, StoreError> {
    #[cfg(feature = "rustls")]
    if !tls.is_default() {
        return redis::Client::build_with_tls(info, certificates(tls)).map_err(
            |e| match map_error(e) {
                StoreError::Config(m) => StoreError::Config(m),
                other => StoreError::Config(format!("redis TLS settings: {other}")),
            },
        );
    }
    let _ = tls;
    redis::Client::open(info)
        .map_err(|e| StoreError::Config(format!("redis URL: {}", e.category())))
}

/// The certificates of `tls` as the redis crate takes them.
#[cfg(feature = "rustls")]
pub(crate) fn certificates(tls: &TlsSettings) -> redis::TlsCertificates {
    redis::TlsCertificates {
        client_tls: tls
            .client
            .as_ref()
            .map(|(cert, key)| redis::ClientTlsConfig {
                client_cert: cert.clone(),
                client_key: key.clone(),
            }),
        root_cert: tls.ca_pem.clone(),
    }
}

/// Each PEM given holds what it should (the redis crate takes PEM without a
/// certificate as an empty list).
#[cfg(feature = "rustls")]
fn check_pem(tls: &TlsSettings) -> Result<(), StoreError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certificates = |pem: &[u8], what: &str| {
        let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(pem).collect();
        match certs {
            Ok(certs) if !certs.is_empty() => Ok(()),
            Ok(_) => Err(StoreError::Config(format!(
                "redis TLS: the {what} holds no PEM certificate"
            ))),
            Err(e) => Err(StoreError::Config(format!(
                "redis TLS: the {what} does not parse as PEM: {e}"
            ))),
        }
    };
    if let Some(pem) = &tls.ca_pem {
        certificates(pem, "CA certificate")?;
    }
    if let Some((cert, key)) = &tls.client {
        certificates(cert, "client certificate")?;
        // The error names the PEM problem, never the key's bytes.
        PrivateKeyDer::from_pem_slice(key).map_err(|e| {
            StoreError::Config(format!(
                "redis TLS: the client key does not parse as PEM: {e}"
            ))
        })?;
    }
    Ok(())
}

/// rustls picks its crypto provider from its features; with more than one enabled in
/// the process (ring and aws-lc-rs) and none chosen, it would panic: choose ring, which
/// flagsync uses.
#[cfg(feature = "rustls")]
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may have installed one meanwhile: either will do.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
