//! TLS on the listening ports: the certificate chain and key from PEM files, reloaded
//! when the files change (a certificate rotated without a restart), TLS 1.2 minimum,
//! and optionally a client CA whose certificates every client must present (mutual
//! TLS). rustls with the crypto provider of the `ring` or `aws-lc-rs` feature
//! (`crate::crypto`), chosen explicitly (never the process's default provider).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};

use crate::error::ServerError;

/// How often the files are looked at for a change.
const RELOAD_CHECK: Duration = Duration::from_secs(1);

/// TLS for the listening ports ([`ServerBuilder::tls`](crate::ServerBuilder::tls)).
///
/// ```no_run
/// use flagsync_server::{Server, TlsSettings};
///
/// let server = Server::builder()
///     .listen("0.0.0.0:8443".parse()?)
///     .tls(TlsSettings::new("/etc/flagsync/cert.pem", "/etc/flagsync/key.pem")
///         .client_ca("/etc/flagsync/clients-ca.pem")) // mutual TLS: optional
///     .start()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct TlsSettings {
    cert_chain: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
}

impl TlsSettings {
    /// Serve the certificate chain in `cert_chain` (PEM, leaf first) with the private
    /// key in `key` (PEM: PKCS#8, PKCS#1 or SEC1). Both are read at start (an unusable
    /// file fails the start) and again within a second of either changing; a change
    /// that cannot be used is logged and the previous certificate kept.
    pub fn new(cert_chain: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        Self {
            cert_chain: cert_chain.into(),
            key: key.into(),
            client_ca: None,
        }
    }

    /// Require every client to present a certificate signed by a CA in this PEM file
    /// (mutual TLS); a client without one fails the handshake.
    pub fn client_ca(mut self, path: impl Into<PathBuf>) -> Self {
        self.client_ca = Some(path.into());
        self
    }

    fn files(&self) -> impl Iterator<Item = &Path> {
        [
            Some(&self.cert_chain),
            Some(&self.key),
            self.client_ca.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(PathBuf::as_path)
    }
}

/// A file's modification time and length: what a change is noticed by.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// The sessions of new connections, from the settings' current files.
#[derive(Debug)]
pub(crate) struct TlsAcceptor {
    settings: TlsSettings,
    config: Arc<ServerConfig>,
    stamps: Vec<Stamp>,
    next_check: Instant,
}

impl TlsAcceptor {
    /// Read the files; an unusable one is an error naming it.
    pub(crate) fn new(settings: TlsSettings) -> Result<Self, ServerError> {
        let stamps = settings.files().map(stamp).collect();
        let config = Arc::new(load(&settings).map_err(ServerError::Tls)?);
        Ok(Self {
            settings,
            config,
            stamps,
            next_check: Instant::now() + RELOAD_CHECK,
        })
    }

    /// A session for a new connection.
    pub(crate) fn session(&self) -> Result<ServerConnection, rustls::Error> {
        ServerConnection::new(self.config.clone())
    }

    /// Reload the files if they changed since they were last read (looked at once a
    /// second at most). New connections use the new certificate; open ones keep theirs.
    pub(crate) fn reload_if_changed(&mut self, now: Instant) {
        if now < self.next_check {
            return;
        }
        self.next_check = now + RELOAD_CHECK;
        let stamps: Vec<Stamp> = self.settings.files().map(stamp).collect();
        if stamps == self.stamps {
            return;
        }
        match load(&self.settings) {
            Ok(config) => {
                self.config = Arc::new(config);
                self.stamps = stamps;
                tracing::info!("TLS: certificate reloaded");
            }
            // Keep serving the previous certificate; a half-written rotation is read
            // again once a file changes again (the stamps are kept as they were).
            Err(e) => tracing::warn!(
                "TLS: the changed files cannot be used ({e}); the previous certificate is kept"
            ),
        }
    }
}

/// The rustls configuration of `settings`' files.
fn load(settings: &TlsSettings) -> Result<ServerConfig, String> {
    let chain = read_certs(&settings.cert_chain, "certificate chain")?;
    let key = std::fs::read(&settings.key)
        .map_err(|e| {
            format!(
                "cannot read the private key {}: {e}",
                settings.key.display()
            )
        })
        .and_then(|pem| {
            PrivateKeyDer::from_pem_slice(&pem).map_err(|_| {
                format!(
                    "{}: no PEM private key (PKCS#8, PKCS#1 or SEC1) in it",
                    settings.key.display()
                )
            })
        })?;
    let provider = crate::crypto::provider()?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| e.to_string())?;
    let builder = match &settings.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for cert in read_certs(path, "client CA")? {
                roots
                    .add(cert)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("client CA {}: {e}", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        format!(
            "the certificate {} and key {} cannot be used together: {e}",
            settings.cert_chain.display(),
            settings.key.display()
        )
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

fn read_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path)
        .map_err(|e| format!("cannot read the {what} {}: {e}", path.display()))?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The configuration holds the provider the features choose (aws-lc-rs when
    /// enabled, else ring), not rustls' process default: with both compiled in, ring is
    /// installed as the process default first, and it must still hold aws-lc-rs. With
    /// mutual TLS too (the client verifier is built with the same provider).
    #[test]
    fn the_configuration_uses_the_chosen_crypto_provider() {
        #[cfg(all(feature = "ring", feature = "aws-lc-rs"))]
        let _ = rustls::crypto::ring::default_provider().install_default();
        let expected = if cfg!(feature = "aws-lc-rs") {
            "aws-lc-rs"
        } else if cfg!(feature = "ring") {
            "ring"
        } else {
            "none"
        };
        assert!(crate::crypto_provider_name().starts_with(expected));
        let dir = std::env::temp_dir().join(format!(
            "flagsync-server-crypto-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
        std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
        let settings = TlsSettings::new(dir.join("cert.pem"), dir.join("key.pem"));
        for settings in [settings.clone(), settings.client_ca(dir.join("cert.pem"))] {
            match load(&settings) {
                Ok(config) => assert_eq!(
                    crate::crypto::name_of(config.crypto_provider()),
                    crate::crypto_provider_name()
                ),
                Err(e) => assert!(expected == "none" && e.contains("crypto provider"), "{e}"),
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
