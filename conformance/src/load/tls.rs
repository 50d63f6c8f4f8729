//! The transport of one `sse-load` connection: a non-blocking socket, plain or with a
//! rustls [`ClientConnection`] driven by hand on it (`read_tls`,
//! `process_new_packets` and the plaintext reader to read; the plaintext writer and
//! `write_tls` to write), so that the one-thread loop holds TLS streams as it holds
//! plain ones.
//!
//! Session resumption is off: every connection makes a full handshake, as a fleet of
//! separate SDK processes would.

use std::fs;
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use mio::net::TcpStream;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore};

/// What every TLS connection of a run shares: the client configuration and the name
/// the server's certificate must carry.
#[derive(Debug, Clone)]
pub struct TlsClient {
    /// rustls (ring provider), trusting only the CA of `--tls-ca`, no resumption.
    pub config: Arc<ClientConfig>,
    /// The URL's host: a DNS name or an IP address.
    pub name: ServerName<'static>,
}

impl TlsClient {
    /// A client that trusts the certificates in the PEM file `ca` and checks the
    /// server's certificate for `host`.
    pub fn new(ca: &Path, host: &str) -> Result<Self, String> {
        let pem = fs::read(ca).map_err(|e| format!("--tls-ca {}: {e}", ca.display()))?;
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| format!("--tls-ca {}: {e}", ca.display()))?;
            roots
                .add(cert)
                .map_err(|e| format!("--tls-ca {}: {e}", ca.display()))?;
        }
        if roots.is_empty() {
            return Err(format!("--tls-ca {}: no certificate", ca.display()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.resumption = rustls::client::Resumption::disabled();
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| format!("--url: host {host}: {e}"))?;
        Ok(Self {
            config: Arc::new(config),
            name,
        })
    }

    /// A new client session (its ClientHello queued).
    pub fn session(&self) -> io::Result<ClientConnection> {
        ClientConnection::new(self.config.clone(), self.name.clone()).map_err(io::Error::other)
    }
}

/// The message of a TLS failure carried by `e` (from [`Transport`]'s reads and writes).
pub fn tls_error(e: &io::Error) -> Option<String> {
    let inner = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    Some(inner.to_string())
}

/// A connection's bytes: plain, or through TLS. Reads and writes never block: both
/// end in [`io::ErrorKind::WouldBlock`] when the socket has no more to give or take.
#[derive(Debug)]
pub enum Transport {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(TcpStream, Box<ClientConnection>),
}

impl Transport {
    /// Start connecting to `addr`, with TLS if `tls` is given.
    pub fn connect(addr: SocketAddr, tls: Option<&TlsClient>) -> io::Result<Self> {
        let socket = TcpStream::connect(addr)?;
        Ok(match tls {
            None => Self::Plain(socket),
            Some(tls) => Self::Tls(socket, Box::new(tls.session()?)),
        })
    }

    /// The socket, to register with a poll and to ask for its state.
    pub fn socket(&mut self) -> &mut TcpStream {
        match self {
            Self::Plain(socket) | Self::Tls(socket, _) => socket,
        }
    }

    /// Send what TLS has queued (handshake records, encrypted requests) until the
    /// socket would block.
    fn send_queued(socket: &mut TcpStream, tls: &mut ClientConnection) -> io::Result<()> {
        while tls.wants_write() {
            match tls.write_tls(socket) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Read for Transport {
    /// Plaintext: what TLS has decrypted, else what the socket brings. `Ok(0)` when
    /// the server closed (with or without `close_notify`).
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (socket, tls) = match self {
            Self::Plain(socket) => return socket.read(buf),
            Self::Tls(socket, tls) => (socket, tls),
        };
        loop {
            match tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            match tls.read_tls(socket) {
                // The reader reports the end on the next pass.
                Ok(0) => {}
                Ok(_) => {
                    let processed = tls.process_new_packets();
                    // Handshake replies, or the alert of a failure.
                    let sent = Self::send_queued(socket, tls);
                    processed.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    sent?;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl Write for Transport {
    /// Plain: the socket's write. TLS: the bytes are queued whole (sent once the
    /// handshake is done) and as much as the socket takes is sent.
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        match self {
            Self::Plain(socket) => socket.write(data),
            Self::Tls(socket, tls) => {
                let n = tls.writer().write(data)?;
                Self::send_queued(socket, tls)?;
                Ok(n)
            }
        }
    }

    /// Send what TLS still has queued, as far as the socket takes it.
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Plain(_) => Ok(()),
            Self::Tls(socket, tls) => Self::send_queued(socket, tls),
        }
    }
}
