//! The redis client of a store: its URL, and for `rediss://` the certificates it
//! trusts and presents (with the `rustls` feature).

use std::fmt;

use flagsync::persist::StoreError;

#[cfg(feature = "tls")]
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
#[cfg(not(feature = "tls"))]
const NO_TLS: &str =
    "redis over TLS (rediss://) needs flagsync-redis's `rustls` (ring) or `aws-lc-rs` feature";

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
    #[cfg(not(feature = "tls"))]
    if secure || !tls.is_default() {
        return Err(StoreError::Config(NO_TLS.into()));
    }
    if !secure && !tls.is_default() {
        return Err(StoreError::Config(
            "TLS certificates were given for a redis:// URL: use rediss:// for TLS".into(),
        ));
    }
    #[cfg(feature = "tls")]
    if secure {
        check_pem(tls)?;
        use_crypto_provider()?;
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
    #[cfg(feature = "tls")]
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
#[cfg(feature = "tls")]
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
#[cfg(feature = "tls")]
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

#[cfg(all(feature = "tls", not(any(feature = "ring", feature = "aws-lc-rs"))))]
compile_error!(
    "flagsync-redis's TLS needs a crypto provider: enable its `rustls` (ring), `ring` or `aws-lc-rs` feature"
);

/// The crypto provider of this build: aws-lc-rs with the `aws-lc-rs` feature (also
/// with `ring`: cargo unifies features, and asking for aws-lc-rs is deliberate), else
/// ring.
#[cfg(feature = "tls")]
fn provider() -> rustls::crypto::CryptoProvider {
    #[cfg(feature = "aws-lc-rs")]
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    #[cfg(all(feature = "ring", not(feature = "aws-lc-rs")))]
    let provider = rustls::crypto::ring::default_provider();
    provider
}

/// The name of the rustls crypto provider of `rediss://` connections: `"aws-lc-rs"`
/// with the `aws-lc-rs` feature (whether or not `ring` is also enabled), else `"ring"`;
/// `"aws-lc-rs (FIPS)"` in a build with rustls' `fips` feature. The redis crate uses
/// rustls' process-wide default provider (it takes no other): the first `rediss://`
/// store installs this one as that default when none is, and a store is refused
/// ([`StoreError::Config`]) when the default is another provider.
#[cfg(feature = "tls")]
pub fn crypto_provider_name() -> &'static str {
    name_of(&provider())
}

/// The name of `provider`, as [`crypto_provider_name`] gives it, or `"other"` for one
/// that is neither ring's nor aws-lc-rs'. Told by its key provider (rustls names its
/// types `Ring` and `AwsLcRs`), so it names the provider really installed.
#[cfg(feature = "tls")]
pub(crate) fn name_of(provider: &rustls::crypto::CryptoProvider) -> &'static str {
    match format!("{:?}", provider.key_provider).as_str() {
        "AwsLcRs" if provider.fips() => "aws-lc-rs (FIPS)",
        "AwsLcRs" => "aws-lc-rs",
        "Ring" => "ring",
        _ => "other",
    }
}

/// The redis crate (1.x) builds its rustls configuration with
/// `rustls::ClientConfig::builder()`, that is with rustls' process-wide default
/// provider, and has no way to be given a provider or a configuration. So before a
/// `rediss://` client is made, this crate's provider is installed as that default when
/// none is installed yet; when another provider is the default (installed by the
/// application or another library), the store is refused rather than connecting with a
/// provider other than the one chosen (a FIPS build must not fall back to ring).
#[cfg(feature = "tls")]
fn use_crypto_provider() -> Result<(), StoreError> {
    let chosen = provider();
    let name = name_of(&chosen);
    // Another thread may install one between the two calls: the comparison sees it.
    let _ = chosen.install_default();
    let installed = rustls::crypto::CryptoProvider::get_default().map(|p| name_of(p));
    match installed {
        Some(installed) if installed == name => Ok(()),
        installed => Err(StoreError::Config(format!(
            "redis TLS: the redis crate uses rustls' process-wide default crypto provider, \
             which is {} in this process, but flagsync-redis is built for {name}: install \
             {name} as the default (or none), or build flagsync-redis with the matching \
             `ring` or `aws-lc-rs` feature",
            installed.unwrap_or("none")
        ))),
    }
}
