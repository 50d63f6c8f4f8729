//! TLS with rustls (the crypto provider of `crate::crypto`) over any `futures-io` stream: one implementation for
//! every runtime. Host names are always verified unless the user explicitly opts out
//! with `danger_accept_invalid_certs`.
//!
//! # Server certificates without a subjectAltName
//!
//! Certificates are verified by rustls's webpki verifier, which matches the host name
//! against the certificate's subjectAltName extension only, as RFC 6125 asks. Some
//! private test infrastructure still issues certificates that name their host only in
//! the subject's Common Name: LaunchDarkly's sdk-test-harness serves `https` with a leaf
//! certificate that has no subjectAltName, only `CN=localhost`. OpenSSL, and so the SDKs
//! built on it, accept such a certificate through the legacy rule of RFC 6125 §6.4.4:
//! with no DNS subjectAltName, the Common Name is matched instead.
//!
//! flagsync applies the same rule, narrowly. Only when the webpki verifier rejects a
//! certificate for its name, the host is a DNS name (never an IP address), and the
//! certificate has no subjectAltName extension, or one without any DNS or IP address
//! entry, is each Common Name of the subject compared with the host: ASCII
//! case-insensitively, with a wildcard allowed only as the whole left-most label
//! (`*.example.com` matches `a.example.com`, not `example.com` nor `a.b.example.com`).
//! A certificate with any DNS or IP subjectAltName is judged by its subjectAltName
//! alone. A Common Name match never skips the other checks: the chain must still lead
//! to a trusted root, within its validity period, with the server-authentication key
//! usage, and the handshake signatures are verified as usual. Because webpki applies a
//! CA's name constraints to subjectAltNames only, the fallback is refused whenever the
//! chain may involve a name-constrained CA (any intermediate sent with one, and roots
//! that have them are not used for it).

use std::io;
use std::sync::Arc;

use futures_rustls::rustls::{self, ClientConfig, RootCertStore};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, DistinguishedName, SignatureScheme};
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::X509Certificate;

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
        let config = Self::config(options)?;
        Ok(Self(futures_rustls::TlsConnector::from(Arc::new(config))))
    }

    /// The rustls configuration of `options`, with the crypto provider of
    /// `crate::crypto`.
    fn config(options: &TlsOptions) -> Result<ClientConfig, String> {
        let provider = crate::crypto::provider();
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
            let roots = roots(options)?;
            if roots.is_empty() {
                // Nothing can be verified (every handshake fails); rustls's verifier
                // builder refuses an empty store, so keep the plain configuration.
                builder.with_root_certificates(roots).with_no_client_auth()
            } else {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(CommonNameFallback::new(
                        roots, &provider,
                    )?))
                    .with_no_client_auth()
            }
        };
        Ok(config)
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

/// rustls's webpki server verifier, plus the legacy subject Common Name rule of
/// RFC 6125 §6.4.4 for certificates without a DNS or IP subjectAltName, as OpenSSL does
/// (see the module docs). Everything else is delegated to the webpki verifier.
#[derive(Debug)]
struct CommonNameFallback {
    /// The verifier for every certificate, built from all the trusted roots.
    inner: Arc<WebPkiServerVerifier>,
    /// The trusted roots without name constraints: the only ones a certificate accepted
    /// by its Common Name may chain to, since webpki checks name constraints against
    /// subjectAltNames only.
    unconstrained_roots: RootCertStore,
    /// The signature algorithms for the chain check of the fallback.
    algorithms: WebPkiSupportedAlgorithms,
}

impl CommonNameFallback {
    /// A verifier trusting `roots`, with the algorithms of `provider`.
    fn new(
        roots: RootCertStore,
        provider: &Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Self, String> {
        let mut unconstrained_roots = RootCertStore::empty();
        unconstrained_roots.roots = roots
            .roots
            .iter()
            .filter(|anchor| anchor.name_constraints.is_none())
            .cloned()
            .collect();
        let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Self {
            inner,
            unconstrained_roots,
            algorithms: provider.signature_verification_algorithms,
        })
    }

    /// Whether `end_entity`, rejected by the webpki verifier for its name only, is
    /// acceptable for `server_name` by the Common Name rule, its chain checked again.
    fn accepts_by_common_name(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> bool {
        // Never for IP addresses.
        let ServerName::DnsName(name) = server_name else {
            return false;
        };
        let Ok((_, cert)) = x509_parser::parse_x509_certificate(end_entity.as_ref()) else {
            return false;
        };
        if !has_no_dns_or_ip_subject_alt_name(&cert) {
            return false;
        }
        let matched = cert
            .subject()
            .iter_common_name()
            .filter_map(|cn| cn.as_str().ok())
            .any(|cn| common_name_matches(cn, name.as_ref()));
        if !matched
            || intermediates
                .iter()
                .any(|i| !is_without_name_constraints(i))
        {
            return false;
        }
        // The chain, validity and key usage checks, independently of the webpki
        // verifier's run (which the name check followed).
        let Ok(parsed) = ParsedCertificate::try_from(end_entity) else {
            return false;
        };
        rustls::client::verify_server_cert_signed_by_trust_anchor(
            &parsed,
            &self.unconstrained_roots,
            intermediates,
            now,
            self.algorithms.all,
        )
        .is_ok()
    }
}

impl ServerCertVerifier for CommonNameFallback {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let err = match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => return Ok(verified),
            Err(err) => err,
        };
        let name_error = matches!(
            err,
            rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
            )
        );
        if name_error && self.accepts_by_common_name(end_entity, intermediates, server_name, now) {
            tracing::debug!(
                server_name = server_name.to_str().as_ref(),
                "accepted a server certificate without subjectAltName by its subject common name"
            );
            return Ok(ServerCertVerified::assertion());
        }
        Err(err)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.inner.requires_raw_public_keys()
    }

    fn root_hint_subjects(&self) -> Option<&[DistinguishedName]> {
        self.inner.root_hint_subjects()
    }
}

/// Whether `cert` has no subjectAltName extension, or one without any DNS name or IP
/// address entry (nor any entry that cannot be parsed). A subjectAltName that cannot be
/// read counts as present.
fn has_no_dns_or_ip_subject_alt_name(cert: &X509Certificate<'_>) -> bool {
    match cert.subject_alternative_name() {
        Ok(None) => true,
        Ok(Some(san)) => !san.value.general_names.iter().any(|name| {
            matches!(
                name,
                GeneralName::DNSName(_) | GeneralName::IPAddress(_) | GeneralName::Invalid(..)
            )
        }),
        Err(_) => false,
    }
}

/// Whether the CA certificate `der` parses and has no name constraints extension.
fn is_without_name_constraints(der: &CertificateDer<'_>) -> bool {
    x509_parser::parse_x509_certificate(der.as_ref())
        .is_ok_and(|(_, cert)| matches!(cert.name_constraints(), Ok(None)))
}

/// Whether the Common Name `cn` matches the DNS name `reference` (RFC 6125 §6.4): ASCII
/// case-insensitively, `cn` being a valid DNS name, or one whose whole left-most label is
/// the wildcard `*`, matching exactly one non-empty label, followed by at least two
/// labels. A trailing dot on `reference` (an absolute name) is ignored.
fn common_name_matches(cn: &str, reference: &str) -> bool {
    let reference = reference.strip_suffix('.').unwrap_or(reference);
    if !is_presented_dns_name(cn) {
        return false;
    }
    match cn.strip_prefix("*.") {
        Some(suffix) => reference
            .split_once('.')
            .is_some_and(|(first, rest)| !first.is_empty() && rest.eq_ignore_ascii_case(suffix)),
        None => cn.eq_ignore_ascii_case(reference),
    }
}

/// Whether `name` is a DNS name as a certificate may present it (webpki's rules):
/// letters, digits, `-` and `_` in labels of 1 to 63 characters that neither start nor
/// end with `-`, a last label not all digits (so no IPv4 address), at most 253
/// characters, not absolute; a left-most label `*` must be followed by at least two
/// labels.
fn is_presented_dns_name(name: &str) -> bool {
    if name.len() > 253 {
        return false;
    }
    let (wildcard, rest) = match name.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, name),
    };
    let labels: Vec<&str> = rest.split('.').collect();
    let label_ok = |label: &&str| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let last_not_numeric = labels
        .last()
        .is_some_and(|last| !last.bytes().all(|b| b.is_ascii_digit()));
    (!wildcard || labels.len() >= 2) && labels.iter().all(label_ok) && last_not_numeric
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
        GeneralSubtree, IsCa, KeyPair, NameConstraints, SanType,
    };

    use super::*;

    /// Every configuration holds the provider the features choose (aws-lc-rs when
    /// enabled, else ring), not rustls' process default: with both compiled in, ring is
    /// installed as the process default first, and the configurations must still hold
    /// aws-lc-rs.
    #[test]
    fn configurations_use_the_chosen_crypto_provider() {
        #[cfg(all(feature = "ring", feature = "aws-lc-rs"))]
        let _ = rustls::crypto::ring::default_provider().install_default();
        let expected = if cfg!(feature = "aws-lc-rs") {
            "aws-lc-rs"
        } else {
            "ring"
        };
        assert!(crate::crypto_provider_name().starts_with(expected));
        for options in [
            TlsOptions::default(),
            TlsOptions {
                accept_invalid_certs: true,
                ..TlsOptions::default()
            },
            TlsOptions {
                built_in_roots: false,
                ..TlsOptions::default()
            },
        ] {
            let config = TlsConnector::config(&options).unwrap();
            let name = crate::crypto::name_of(config.crypto_provider());
            assert_eq!(name, crate::crypto_provider_name());
        }
    }

    /// A test CA, optionally name-constrained to DNS names under `permitted`.
    struct Ca {
        cert: rcgen::Certificate,
        key: KeyPair,
    }

    impl Ca {
        fn new(permitted: Option<&str>) -> Self {
            Self::signed(permitted, None)
        }

        /// A CA signed by `issuer` (an intermediate), or self-signed (a root).
        fn signed(permitted: Option<&str>, issuer: Option<&Self>) -> Self {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params
                .distinguished_name
                .push(DnType::CommonName, "flagsync unit test CA");
            params.name_constraints = permitted.map(|p| NameConstraints {
                permitted_subtrees: vec![GeneralSubtree::DnsName(p.into())],
                excluded_subtrees: Vec::new(),
            });
            let cert = match issuer {
                Some(issuer) => params.signed_by(&key, &issuer.cert, &issuer.key),
                None => params.self_signed(&key),
            }
            .unwrap();
            Self { cert, key }
        }

        fn der(&self) -> CertificateDer<'static> {
            CertificateDer::from(self.cert.der().to_vec())
        }

        /// A leaf certificate it signs, with these subjectAltNames and subject Common
        /// Names, `edit` applied last.
        fn leaf(
            &self,
            sans: Vec<SanType>,
            common_names: &[&str],
            edit: impl FnOnce(&mut CertificateParams),
        ) -> CertificateDer<'static> {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.subject_alt_names = sans;
            params.distinguished_name = DistinguishedName::new();
            for cn in common_names {
                params.distinguished_name.push(DnType::CommonName, *cn);
            }
            edit(&mut params);
            let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
            CertificateDer::from(cert.der().to_vec())
        }

        /// A leaf with only these Common Names: no subjectAltName extension.
        fn cn_only(&self, common_names: &[&str]) -> CertificateDer<'static> {
            self.leaf(Vec::new(), common_names, |_| {})
        }
    }

    fn verifier(roots: &[CertificateDer<'static>]) -> CommonNameFallback {
        let mut store = RootCertStore::empty();
        for root in roots {
            store.add(root.clone()).unwrap();
        }
        let provider = crate::crypto::provider();
        CommonNameFallback::new(store, &provider).unwrap()
    }

    fn verify_at(
        verifier: &CommonNameFallback,
        leaf: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        name: &str,
        now: UnixTime,
    ) -> Result<(), rustls::Error> {
        let name = ServerName::try_from(name.to_owned()).unwrap();
        verifier
            .verify_server_cert(leaf, intermediates, &name, &[], now)
            .map(|_| ())
    }

    fn verify(
        verifier: &CommonNameFallback,
        leaf: &CertificateDer<'_>,
        name: &str,
    ) -> Result<(), rustls::Error> {
        verify_at(verifier, leaf, &[], name, UnixTime::now())
    }

    fn is_name_error(result: Result<(), rustls::Error>) -> bool {
        matches!(
            result,
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
            ))
        )
    }

    #[test]
    fn common_name_matching_follows_rfc_6125() {
        for (cn, reference, expected) in [
            ("localhost", "localhost", true),
            ("LocalHost", "localhost", true),
            ("localhost", "LOCALHOST", true),
            ("localhost", "localhost.", true),
            ("example.com", "example.com", true),
            ("example.com", "www.example.com", false),
            ("www.example.com", "example.com", false),
            ("localhost", "other.example", false),
            // A wildcard is only ever the whole left-most label, for one label.
            ("*.example.com", "a.example.com", true),
            ("*.EXAMPLE.com", "A.example.COM", true),
            ("*.example.com", "example.com", false),
            ("*.example.com", "a.b.example.com", false),
            ("*.example.com", ".example.com", false),
            ("*.com", "example.com", false),
            ("*", "localhost", false),
            ("f*.example.com", "foo.example.com", false),
            ("*a.example.com", "ba.example.com", false),
            ("a.*.example.com", "a.b.example.com", false),
            ("*.*.example.com", "a.b.example.com", false),
            // Not DNS names.
            ("", "localhost", false),
            ("localhost.", "localhost", false),
            ("local host", "local host", false),
            ("127.0.0.1", "127.0.0.1", false),
            ("-localhost", "-localhost", false),
            ("flagsync test CA", "flagsync test CA", false),
        ] {
            assert_eq!(
                common_name_matches(cn, reference),
                expected,
                "{cn:?} for {reference:?}"
            );
        }
    }

    #[test]
    fn a_common_name_only_certificate_is_accepted_for_its_name() {
        let ca = Ca::new(None);
        let v = verifier(&[ca.der()]);
        let leaf = ca.cn_only(&["localhost"]);
        verify(&v, &leaf, "localhost").unwrap();
        verify(&v, &leaf, "LOCALHOST").unwrap();
        assert!(is_name_error(verify(&v, &leaf, "other.example")));
        assert!(is_name_error(verify(&v, &leaf, "localhost.example")));
        // A wildcard Common Name.
        let leaf = ca.cn_only(&["*.flagsync.test"]);
        verify(&v, &leaf, "api.flagsync.test").unwrap();
        assert!(is_name_error(verify(&v, &leaf, "flagsync.test")));
        assert!(is_name_error(verify(&v, &leaf, "a.api.flagsync.test")));
    }

    #[test]
    fn the_common_name_is_never_matched_to_an_ip_address() {
        let ca = Ca::new(None);
        let v = verifier(&[ca.der()]);
        let leaf = ca.cn_only(&["127.0.0.1"]);
        assert!(is_name_error(verify(&v, &leaf, "127.0.0.1")));
        let leaf = ca.cn_only(&["localhost"]);
        assert!(is_name_error(verify(&v, &leaf, "127.0.0.1")));
    }

    #[test]
    fn a_dns_or_ip_subject_alt_name_rules_out_the_common_name() {
        let ca = Ca::new(None);
        let v = verifier(&[ca.der()]);
        let dns = SanType::DnsName("other.example".try_into().unwrap());
        let leaf = ca.leaf(vec![dns], &["localhost"], |_| {});
        assert!(is_name_error(verify(&v, &leaf, "localhost")));
        verify(&v, &leaf, "other.example").unwrap();
        let ip = SanType::IpAddress("127.0.0.1".parse().unwrap());
        let leaf = ca.leaf(vec![ip], &["localhost"], |_| {});
        assert!(is_name_error(verify(&v, &leaf, "localhost")));
        // A subjectAltName with no DNS or IP entry is no DNS-ID: the Common Name counts.
        let uri = SanType::URI("spiffe://flagsync.test/server".try_into().unwrap());
        let leaf = ca.leaf(vec![uri], &["localhost"], |_| {});
        verify(&v, &leaf, "localhost").unwrap();
        assert!(is_name_error(verify(&v, &leaf, "other.example")));
    }

    #[test]
    fn the_common_name_never_skips_the_chain_checks() {
        let ca = Ca::new(None);
        let untrusted = Ca::new(None);
        let v = verifier(&[ca.der()]);
        // Signed by an untrusted CA (with the same name as the trusted one).
        let leaf = untrusted.cn_only(&["localhost"]);
        assert!(matches!(
            verify(&v, &leaf, "localhost"),
            Err(rustls::Error::InvalidCertificate(
                CertificateError::BadSignature
            ))
        ));
        // Self-signed.
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        let leaf = CertificateDer::from(params.self_signed(&key).unwrap().der().to_vec());
        assert!(matches!(
            verify(&v, &leaf, "localhost"),
            Err(rustls::Error::InvalidCertificate(
                CertificateError::UnknownIssuer
            ))
        ));
        // Expired.
        let leaf = ca.leaf(Vec::new(), &["localhost"], |p| {
            p.not_before = rcgen::date_time_ymd(2000, 1, 1);
            p.not_after = rcgen::date_time_ymd(2001, 1, 1);
        });
        assert!(matches!(
            verify(&v, &leaf, "localhost"),
            Err(rustls::Error::InvalidCertificate(
                CertificateError::Expired | CertificateError::ExpiredContext { .. }
            ))
        ));
        // Not for server authentication.
        let leaf = ca.leaf(Vec::new(), &["localhost"], |p| {
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        });
        let result = verify(&v, &leaf, "localhost");
        assert!(
            result.is_err() && !is_name_error(result.clone()),
            "{result:?}"
        );
    }

    #[test]
    fn no_common_name_fallback_under_name_constraints() {
        // webpki checks name constraints against subjectAltNames only: a CA constrained
        // to flagsync.test must not vouch for `CN=localhost` through the fallback.
        let constrained = Ca::new(Some("flagsync.test"));
        let v = verifier(&[constrained.der()]);
        let leaf = constrained.cn_only(&["localhost"]);
        assert!(is_name_error(verify(&v, &leaf, "localhost")));
        // Even for a name inside the constraint: the fallback stays out of the way.
        let leaf = constrained.cn_only(&["api.flagsync.test"]);
        assert!(is_name_error(verify(&v, &leaf, "api.flagsync.test")));
        // A constrained intermediate under an unconstrained root.
        let root = Ca::new(None);
        let intermediate = Ca::signed(Some("flagsync.test"), Some(&root));
        let v = verifier(&[root.der()]);
        let leaf = intermediate.cn_only(&["localhost"]);
        let now = UnixTime::now();
        let chain = [intermediate.der()];
        assert!(is_name_error(verify_at(
            &v,
            &leaf,
            &chain,
            "localhost",
            now
        )));
        // An unconstrained intermediate is fine.
        let intermediate = Ca::signed(None, Some(&root));
        let leaf = intermediate.cn_only(&["localhost"]);
        let chain = [intermediate.der()];
        verify_at(&v, &leaf, &chain, "localhost", now).unwrap();
        // Without the intermediate, no chain.
        let result = verify_at(&v, &leaf, &[], "localhost", now);
        assert!(
            result.is_err() && !is_name_error(result.clone()),
            "{result:?}"
        );
    }

    /// The certificates LaunchDarkly's sdk-test-harness serves (see
    /// tests/data/sdk-test-harness/README.md), at a time they are valid.
    #[test]
    fn the_sdk_test_harness_certificate_is_accepted_for_localhost() {
        let pem = |name| {
            let path = format!(
                "{}/tests/data/sdk-test-harness/{name}",
                env!("CARGO_MANIFEST_DIR")
            );
            CertificateDer::from_pem_file(path).unwrap()
        };
        let (ca, leaf) = (pem("ca_public.pem"), pem("leaf_public.pem"));
        let v = verifier(&[ca]);
        // 2025-06-15.
        let now = UnixTime::since_unix_epoch(Duration::from_secs(1_750_000_000));
        verify_at(&v, &leaf, &[], "localhost", now).unwrap();
        assert!(is_name_error(verify_at(&v, &leaf, &[], "example.com", now)));
        assert!(is_name_error(verify_at(&v, &leaf, &[], "127.0.0.1", now)));
        // Through the whole connector configuration as well.
        let options = TlsOptions {
            built_in_roots: false,
            extra_roots_pem: vec![
                std::fs::read(format!(
                    "{}/tests/data/sdk-test-harness/ca_public.pem",
                    env!("CARGO_MANIFEST_DIR")
                ))
                .unwrap(),
            ],
            accept_invalid_certs: false,
        };
        TlsConnector::new(&options).unwrap();
    }

    #[test]
    fn no_roots_still_builds() {
        let options = TlsOptions {
            built_in_roots: false,
            ..TlsOptions::default()
        };
        TlsConnector::new(&options).unwrap();
    }
}
