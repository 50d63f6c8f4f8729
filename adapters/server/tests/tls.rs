//! TLS on the listening port: HTTPS polls and streams, a plaintext request refused in
//! plaintext, a certificate rotated without a restart, mutual TLS, and unusable files
//! refused at start.
//! Needs a crypto provider (feature `ring`, the default, or `aws-lc-rs`).
#![cfg(any(feature = "ring", feature = "aws-lc-rs"))]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flagsync_server::{Server, ServerError, ServerHandle, TlsSettings};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use serde_json::json;

const T: Duration = Duration::from_secs(5);

/// A test CA and what it signs.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        Self { cert, key }
    }

    /// A certificate for 127.0.0.1 (or a client, with no name) named `cn`: (cert PEM, key PEM).
    fn leaf(&self, cn: &str) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = vec![SanType::IpAddress([127, 0, 0, 1].into())];
        params.distinguished_name.push(DnType::CommonName, cn);
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// A folder of its own for a test's files.
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("flagsync-tls-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// A server with TLS from `cert`/`key` written into `d`.
fn start(d: &Path, (cert, key): &(String, String), client_ca: Option<&str>) -> ServerHandle {
    write(&d.join("cert.pem"), cert);
    write(&d.join("key.pem"), key);
    let mut tls = TlsSettings::new(d.join("cert.pem"), d.join("key.pem"));
    if let Some(ca) = client_ca {
        write(&d.join("clients.pem"), ca);
        tls = tls.client_ca(d.join("clients.pem"));
    }
    Server::builder()
        .sdk_key(Some("sdk-tls".into()))
        .data(json!({"flagValues": {"a": 1}}))
        .tls(tls)
        .start()
        .unwrap()
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

/// A TLS connection trusting `ca`, presenting `client` if given.
fn connect(addr: SocketAddr, ca: &Ca, client: Option<&(String, String)>) -> Tls {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from(ca.cert.der().to_vec()))
        .unwrap();
    // The client uses the provider the server was built with (aws-lc-rs alone, in CI's
    // aws-lc-rs run).
    #[cfg(feature = "aws-lc-rs")]
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    #[cfg(not(feature = "aws-lc-rs"))]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match client {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    let name = ServerName::IpAddress(addr.ip().into());
    let conn = ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(T)).unwrap();
    StreamOwned::new(conn, tcp)
}

/// Poll over `tls`: the status line and the body.
fn poll(mut tls: Tls) -> std::io::Result<(String, String)> {
    write!(
        tls,
        "GET /sdk/latest-all HTTP/1.1\r\nAuthorization: sdk-tls\r\nConnection: close\r\n\r\n"
    )?;
    let mut all = Vec::new();
    match tls.read_to_end(&mut all) {
        Ok(_) => {}
        // The server closed after its answer without a close_notify read yet.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !all.is_empty() => {}
        Err(e) => return Err(e),
    }
    let text = String::from_utf8_lossy(&all).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Ok((
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    ))
}

/// The certificate the server presents to a new connection.
fn presented(addr: SocketAddr, ca: &Ca) -> Vec<u8> {
    let mut tls = connect(addr, ca, None);
    tls.conn.complete_io(&mut tls.sock).unwrap();
    tls.conn.peer_certificates().unwrap()[0].to_vec()
}

#[test]
fn polls_and_streams_over_tls() {
    let ca = Ca::new("flagsync server test CA");
    let d = dir("serve");
    let server = start(&d, &ca.leaf("server"), None);
    assert!(
        server.url().starts_with("https://127.0.0.1:"),
        "{}",
        server.url()
    );
    let (status, body) = poll(connect(server.addr(), &ca, None)).unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(body.contains("\"a\""), "{body}");

    // A stream: the first payload, then a change, over TLS through the hub.
    let mut stream = connect(server.addr(), &ca, None);
    write!(
        stream,
        "GET /all HTTP/1.1\r\nAuthorization: sdk-tls\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(stream);
    let mut seen = String::new();
    let deadline = Instant::now() + T;
    while !seen.contains("event: put") && Instant::now() < deadline {
        r.read_line(&mut seen).unwrap();
    }
    assert!(
        seen.contains("200 OK") && seen.contains("event: put"),
        "{seen}"
    );
    assert!(server.wait_for_streams(1, T));
    server
        .set_flag("b", json!({"on": true, "variations": [true]}))
        .unwrap();
    while !seen.contains("/flags/b") && Instant::now() < deadline {
        r.read_line(&mut seen).unwrap();
    }
    assert!(seen.contains("\"path\":\"/flags/b\""), "{seen}");
}

#[test]
fn a_plaintext_request_to_the_tls_port_is_told_so_in_plaintext() {
    let ca = Ca::new("flagsync server test CA");
    let server = start(&dir("plain"), &ca.leaf("server"), None);
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    write!(s, "GET /sdk/latest-all HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut all = String::new();
    let _ = s.read_to_string(&mut all);
    assert!(all.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{all}");
    assert!(all.contains("https://"), "{all}");
}

#[test]
fn a_rotated_certificate_is_served_without_a_restart() {
    let ca = Ca::new("flagsync server test CA");
    let d = dir("rotate");
    let first = ca.leaf("first");
    let server = start(&d, &first, None);
    let before = presented(server.addr(), &ca);
    // A rotation: the key, then the certificate (between them, a pair that does not
    // match: the first certificate is kept until both are in).
    let second = ca.leaf("second");
    write(&d.join("key.pem"), &second.1);
    std::thread::sleep(Duration::from_millis(1300));
    assert_eq!(
        presented(server.addr(), &ca),
        before,
        "a mismatched pair is not used"
    );
    write(&d.join("cert.pem"), &second.0);
    let deadline = Instant::now() + T;
    let mut now = presented(server.addr(), &ca);
    while now == before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        now = presented(server.addr(), &ca);
    }
    assert_ne!(now, before, "the new certificate is served");
    let (status, _) = poll(connect(server.addr(), &ca, None)).unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
}

#[test]
fn mutual_tls_requires_a_client_certificate_from_the_client_ca() {
    let ca = Ca::new("flagsync server test CA");
    let clients = Ca::new("flagsync clients CA");
    let strangers = Ca::new("another CA");
    let server = start(&dir("mtls"), &ca.leaf("server"), Some(&clients.cert.pem()));
    let (status, _) = poll(connect(server.addr(), &ca, Some(&clients.leaf("sdk")))).unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    assert!(
        poll(connect(server.addr(), &ca, None)).is_err(),
        "no client certificate"
    );
    let other = strangers.leaf("stranger");
    assert!(
        poll(connect(server.addr(), &ca, Some(&other))).is_err(),
        "another CA's"
    );
}

#[test]
fn unusable_files_fail_the_start_naming_the_file() {
    let ca = Ca::new("flagsync server test CA");
    let d = dir("bad");
    let (cert, key) = ca.leaf("server");
    write(&d.join("cert.pem"), &cert);
    write(&d.join("key.pem"), "not a key");
    write(&d.join("other-key.pem"), &ca.leaf("other").1);
    let start = |cert: &str, key: &str| {
        Server::builder()
            .tls(TlsSettings::new(d.join(cert), d.join(key)))
            .start()
            .map(drop)
    };
    for (c, k, why) in [
        ("cert.pem", "key.pem", "key.pem"),
        ("missing.pem", "key.pem", "missing.pem"),
        ("cert.pem", "other-key.pem", "cannot be used together"),
        ("key.pem", "other-key.pem", "no PEM certificate"),
    ] {
        match start(c, k) {
            Err(ServerError::Tls(msg)) => assert!(msg.contains(why), "{msg}"),
            other => panic!("{c}/{k}: {other:?}"),
        }
    }
    assert!(!key.is_empty());
}
