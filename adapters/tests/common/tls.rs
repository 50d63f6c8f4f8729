//! Certificates made with rcgen, and a rustls server wrapper for [`super::Server`].

use std::net::TcpStream;
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A CA and a server certificate it signed for `names`.
pub struct Certs {
    pub ca_pem: String,
    pub server: Arc<rustls::ServerConfig>,
}

/// A server certificate with `names` as DNS subjectAltNames (and rcgen's default
/// subject), signed by a new test CA.
pub fn certs(names: &[&str]) -> Certs {
    certs_with(names, None)
}

/// A server certificate signed by a new test CA, with `names` as DNS subjectAltNames
/// (none: no subjectAltName extension at all) and, when given, `common_name` as the
/// only attribute of its subject (otherwise rcgen's default subject).
pub fn certs_with(names: &[&str], common_name: Option<&str>) -> Certs {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "flagsync test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
    if let Some(cn) = common_name {
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
    }
    let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
    // The test server uses the provider the SDK was built with (aws-lc-rs alone, in
    // CI's aws-lc-rs run).
    #[cfg(feature = "aws-lc-rs")]
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    #[cfg(not(feature = "aws-lc-rs"))]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    Certs {
        ca_pem: ca.pem(),
        server: Arc::new(server),
    }
}

/// Wrap accepted sockets in TLS with `config`.
pub fn wrap(
    config: Arc<rustls::ServerConfig>,
) -> Arc<dyn Fn(TcpStream) -> Option<Box<dyn super::server::Stream>> + Send + Sync> {
    Arc::new(move |tcp| {
        let conn = rustls::ServerConnection::new(config.clone()).ok()?;
        Some(Box::new(rustls::StreamOwned::new(conn, tcp)) as Box<dyn super::server::Stream>)
    })
}
