//! A scripted HTTP/1.1 server on std threads, bound to 127.0.0.1: connection `n` gets
//! reply `n` of the scenario script.

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

#[derive(Debug)]
struct Shared {
    replies: Vec<Live>,
    requests: Mutex<Vec<ObservedRequest>>,
    accepted: AtomicUsize,
    open: AtomicUsize,
    stop: AtomicBool,
    origin: Mutex<Instant>,
}

/// The server; dropping it stops accepting.
#[derive(Debug)]
pub struct ScriptServer {
    port: u16,
    shared: Arc<Shared>,
}

impl ScriptServer {
    /// Serve `script` with delays multiplied by `scale`.
    pub fn start(script: &[ReplySpec], scale: f64) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let base = format!("http://127.0.0.1:{port}");
        let replies = script
            .iter()
            .map(|r| match r {
                ReplySpec::Respond(r) => Live::Respond(r.prepare(&base, scale)),
                ReplySpec::Refuse => Live::Refuse,
                ReplySpec::Hang => Live::Hang,
            })
            .collect();
        let shared = Arc::new(Shared {
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
        Ok(Self { port, shared })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
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
    let Ok(request) = read_request(&stream, s) else {
        return;
    };
    if s.stop.load(Ordering::SeqCst) {
        return;
    }
    lock(&s.requests).push(request);
    let reply = s.replies.get(index).cloned().unwrap_or(Live::Hang);
    match reply {
        Live::Refuse => reset(stream),
        Live::Hang => hold(&stream, s),
        Live::Respond(p) => {
            let mut w = &stream;
            if w.write_all(&p.head()).is_err() {
                return;
            }
            for (delay, bytes) in &p.chunks {
                if !delay.is_zero() {
                    thread::sleep(*delay);
                }
                if w.write_all(bytes).and_then(|()| w.flush()).is_err() {
                    return;
                }
            }
            match p.end {
                EndSpec::Close => {
                    let _ = stream.shutdown(Shutdown::Write);
                    // Let the client close its side first.
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                    drain(&stream);
                }
                EndSpec::Reset => reset(stream),
                EndSpec::Hang => hold(&stream, s),
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
fn hold(stream: &TcpStream, s: &Shared) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = [0u8; 512];
    let mut r = stream;
    loop {
        match r.read(&mut buf) {
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

fn drain(stream: &TcpStream) {
    let mut buf = [0u8; 512];
    let mut r = stream;
    while matches!(r.read(&mut buf), Ok(n) if n > 0) {}
}

fn read_request(stream: &TcpStream, s: &Shared) -> io::Result<ObservedRequest> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    let mut r = stream;
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
