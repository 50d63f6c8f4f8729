//! TLS with rustls (ring provider) over any `futures-io` stream: one implementation for
//! every runtime. Host names are always verified unless the user explicitly opts out
//! with `danger_accept_invalid_certs`.

use std::io;
use std::sync::Arc;

use futures_rustls::rustls::{self, ClientConfig, RootCertStore};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::runtime::BoxIo;

/// TLS settings, as given to the builder.
#[derive(Debug, Clone)]
pub(crate) struct TlsOptions {
    /// Trust the webpki root certificates (and the platform's, with `native-roots`).
    pub(crate) built_in_roots: bool,
    /// Extra trusted certificates, PEM.
    pub(crate) extra_roots_pem: Vec<Vec<u8>>,
    /// Accept any certificate for any host name. Dangerous.
    pub(crate) accept_invalid_certs: bool,
}

impl Default for TlsOptions {
    fn default() -> Self {
        Self {
            built_in_roots: true,
            extra_roots_pem: Vec::new(),
            accept_invalid_certs: false,
        }
    }
}

/// A configured TLS client.
#[derive(Clone)]
pub(crate) struct TlsConnector(futures_rustls::TlsConnector);

impl std::fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsConnector")
    }
}

impl TlsConnector {
    /// Build the rustls configuration; fails on an unreadable PEM.
    pub(crate) fn new(options: &TlsOptions) -> Result<Self, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?;
        let config = if options.accept_invalid_certs {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(
                    provider.signature_verification_algorithms,
                )))
                .with_no_client_auth()
        } else {
            builder
                .with_root_certificates(roots(options)?)
                .with_no_client_auth()
        };
        Ok(Self(futures_rustls::TlsConnector::from(Arc::new(config))))
    }

    /// Run the handshake for `host` over `io`.
    pub(crate) async fn connect(&self, host: &str, io: BoxIo) -> io::Result<BoxIo> {
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let stream = self.0.connect(name, io).await?;
        Ok(Box::new(stream))
    }
}

fn roots(options: &TlsOptions) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    if options.built_in_roots {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        #[cfg(feature = "native-roots")]
        {
            let native = rustls_native_certs::load_native_certs();
            for e in &native.errors {
                tracing::debug!(error = %e, "skipping a native root certificate source");
            }
            let (_added, _ignored) = roots.add_parsable_certificates(native.certs);
        }
    }
    for pem in &options.extra_roots_pem {
        let mut found = false;
        for cert in CertificateDer::pem_slice_iter(pem) {
            let cert = cert.map_err(|e| format!("bad PEM certificate: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("unusable root certificate: {e}"))?;
            found = true;
        }
        if !found {
            return Err("no certificate found in the PEM data".into());
        }
    }
    Ok(roots)
}

/// The verifier behind `danger_accept_invalid_certs`: any certificate, any name; the
/// handshake signatures are still checked.
#[derive(Debug)]
struct AcceptAnyCert(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}
