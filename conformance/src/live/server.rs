//! A scripted HTTP/1.1 server on std threads, bound to 127.0.0.1: connection `n` gets
//! reply `n` of the scenario script. With TLS it serves `https://localhost:<port>` with
//! a certificate from a test CA made for the run ([`ScriptServer::ca_pem`]).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::check::ObservedRequest;
use crate::scenario::{EndSpec, Prepared, ReplySpec};

/// A reply with placeholders filled and delays scaled.
#[derive(Debug, Clone)]
enum Live {
    Respond(Prepared),
    Refuse,
    Hang,
}

struct Shared {
    /// TLS settings when the server speaks https.
    tls: Option<Arc<rustls::ServerConfig>>,
    replies: Vec<Live>,
    requests: Mutex<Vec<ObservedRequest>>,
    accepted: AtomicUsize,
    open: AtomicUsize,
    stop: AtomicBool,
    origin: Mutex<Instant>,
}

/// The server; dropping it stops accepting.
pub struct ScriptServer {
    port: u16,
    shared: Arc<Shared>,
    /// The CA that signed the server's certificate, with TLS.
    ca_pem: Option<String>,
}

impl std::fmt::Debug for ScriptServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptServer")
            .field("port", &self.port)
            .field("tls", &self.ca_pem.is_some())
            .finish_non_exhaustive()
    }
}

/// A test CA and a server certificate it signed for `localhost`.
fn test_certificate() -> io::Result<(Arc<rustls::ServerConfig>, String)> {
    let fail = |e: &dyn std::fmt::Display| io::Error::other(e.to_string());
    let ca_key = rcgen::KeyPair::generate().map_err(|e| fail(&e))?;
    let mut ca_params =
        rcgen::CertificateParams::new(Vec::<String>::new()).map_err(|e| fail(&e))?;
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "flagsync conformance CA");
    let ca = ca_params.self_signed(&ca_key).map_err(|e| fail(&e))?;
    let key = rcgen::KeyPair::generate().map_err(|e| fail(&e))?;
    let params =
        rcgen::CertificateParams::new(vec!["localhost".to_owned()]).map_err(|e| fail(&e))?;
    let cert = params.signed_by(&key, &ca, &ca_key).map_err(|e| fail(&e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(&e))?
        .with_no_client_auth()
        .with_single_cert(
            vec![rustls::pki_types::CertificateDer::from(cert.der().to_vec())],
            rustls::pki_types::PrivateKeyDer::Pkcs8(rustls::pki_types::PrivatePkcs8KeyDer::from(
                key.serialize_der(),
            )),
        )
        .map_err(|e| fail(&e))?;
    Ok((Arc::new(config), ca.pem()))
}

/// What a connection reads and writes through: the socket, or TLS over it.
trait Wire: Read + Write + Send {}
impl<T: Read + Write + Send> Wire for T {}

impl ScriptServer {
    /// Serve `script` with delays multiplied by `scale`, over TLS if `tls`.
    pub fn start(script: &[ReplySpec], scale: f64, tls: bool) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let (tls, ca_pem) = match tls {
            true => {
                let (config, ca) = test_certificate()?;
                (Some(config), Some(ca))
            }
            false => (None, None),
        };
        let base = match tls {
            Some(_) => format!("https://localhost:{port}"),
            None => format!("http://127.0.0.1:{port}"),
        };
        let replies = script
            .iter()
            .map(|r| match r {
                ReplySpec::Respond(r) => Live::Respond(r.prepare(&base, scale)),
                ReplySpec::Refuse => Live::Refuse,
                ReplySpec::Hang => Live::Hang,
            })
            .collect();
        let shared = Arc::new(Shared {
            tls,
            replies,
            requests: Mutex::new(Vec::new()),
            accepted: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            origin: Mutex::new(Instant::now()),
        });
        let s = shared.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let index = s.accepted.fetch_add(1, Ordering::SeqCst);
                s.open.fetch_add(1, Ordering::SeqCst);
                let s = s.clone();
                thread::spawn(move || {
                    serve(stream, index, &s);
                    s.open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Ok(Self {
            port,
            shared,
            ca_pem,
        })
    }

    /// `http://127.0.0.1:<port>`, or with TLS `https://localhost:<port>`.
    pub fn base(&self) -> String {
        match self.ca_pem {
            Some(_) => format!("https://localhost:{}", self.port),
            None => format!("http://127.0.0.1:{}", self.port),
        }
    }

    /// With TLS, the CA certificate (PEM) the client must trust.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// Request times count from now.
    pub fn set_origin(&self, origin: Instant) {
        *lock(&self.shared.origin) = origin;
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<ObservedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// How many requests so far.
    pub fn request_count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    /// Connections the client has not closed.
    pub fn open_connections(&self) -> usize {
        self.shared.open.load(Ordering::SeqCst)
    }
}

impl Drop for ScriptServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn serve(stream: TcpStream, index: usize, s: &Shared) {
    let _ = stream.set_nodelay(true);
    // `stream` stays for socket control (timeouts, shutdown, reset); `wire` carries the
    // bytes, through TLS when the server speaks it.
    let Ok(socket) = stream.try_clone() else {
        return;
    };
    let mut wire: Box<dyn Wire> = match &s.tls {
        Some(config) => match rustls::ServerConnection::new(config.clone()) {
            Ok(conn) => Box::new(rustls::StreamOwned::new(conn, socket)),
            Err(_) => return,
        },
        None => Box::new(socket),
    };
    let Ok(request) = read_request(&mut *wire, s) else {
        return;
    };
    if s.stop.load(Ordering::SeqCst) {
        return;
    }
    lock(&s.requests).push(request);
    let reply = s.replies.get(index).cloned().unwrap_or(Live::Hang);
    match reply {
        Live::Refuse => reset(stream),
        Live::Hang => hold(&stream, &mut *wire, s),
        Live::Respond(p) => {
            if wire
                .write_all(&p.head())
                .and_then(|()| wire.flush())
                .is_err()
            {
                return;
            }
            for (delay, bytes) in &p.chunks {
                if !delay.is_zero() {
                    thread::sleep(*delay);
                }
                if wire.write_all(bytes).and_then(|()| wire.flush()).is_err() {
                    return;
                }
            }
            match p.end {
                EndSpec::Close => {
                    let _ = stream.shutdown(Shutdown::Write);
                    // Let the client close its side first.
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                    drain(&mut *wire);
                }
                EndSpec::Reset => reset(stream),
                EndSpec::Hang => hold(&stream, &mut *wire, s),
            }
        }
    }
}

/// Close with a TCP reset (linger 0).
fn reset(stream: TcpStream) {
    let sock = socket2::Socket::from(stream);
    let _ = sock.set_linger(Some(Duration::ZERO));
    drop(sock);
}

/// Keep the connection open until the client closes it or the server stops.
fn hold(stream: &TcpStream, wire: &mut dyn Wire, s: &Shared) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = [0u8; 512];
    loop {
        match wire.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                if s.stop.load(Ordering::SeqCst) {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

fn drain(wire: &mut dyn Wire) {
    let mut buf = [0u8; 512];
    while matches!(wire.read(&mut buf), Ok(n) if n > 0) {}
}

fn read_request(r: &mut dyn Wire, s: &Shared) -> io::Result<ObservedRequest> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        let n = r.read(&mut buf)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&buf[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        if let Ok(httparse::Status::Complete(len)) = req.parse(&head) {
            let at = lock(&s.origin).elapsed();
            let headers = req
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_owned(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect::<Vec<_>>();
            // Read (and ignore) a body, so the client's write completes.
            let body_len = headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.parse::<usize>().ok())
                .unwrap_or(0);
            let mut have = head.len() - len;
            while have < body_len {
                let n = r.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                have += n;
            }
            return Ok(ObservedRequest {
                at,
                method: req.method.unwrap_or("").to_owned(),
                target: req.path.unwrap_or("").to_owned(),
                headers,
            });
        }
        if head.len() > 64 * 1024 {
            return Err(io::ErrorKind::InvalidData.into());
        }
    }
}
