//! A tiny scripted HTTP/1.1 server: std threads and `TcpListener`. Each connection runs
//! the test's handler, which writes whatever bytes it likes.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// A received request.
#[derive(Debug, Clone)]
pub struct Request {
    /// The connection's index (0 for the first connection).
    pub index: usize,
    pub method: String,
    pub target: String,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What the server does once the handler returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Close the connection.
    Close,
    /// Keep it open until the client closes it.
    Hold,
}

pub trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// Writes the response.
pub struct Responder<'a> {
    stream: &'a mut dyn Stream,
}

impl Responder<'_> {
    pub fn send(&mut self, bytes: impl AsRef<[u8]>) {
        let _ = self.stream.write_all(bytes.as_ref());
        let _ = self.stream.flush();
    }

    pub fn pause(&mut self, ms: u64) {
        thread::sleep(Duration::from_millis(ms));
    }
}

type Handler = dyn Fn(&Request, &mut Responder<'_>) -> After + Send + Sync;
type Wrap = dyn Fn(TcpStream) -> Option<Box<dyn Stream>> + Send + Sync;

/// The server; it runs until the test process ends.
pub struct Server {
    pub port: u16,
    requests: Arc<Mutex<Vec<Request>>>,
    open: Arc<AtomicUsize>,
    accepted: Arc<AtomicUsize>,
}

impl Server {
    /// Serve plain HTTP with `handler`.
    pub fn start(
        handler: impl Fn(&Request, &mut Responder<'_>) -> After + Send + Sync + 'static,
    ) -> Self {
        Self::start_wrapped(
            Arc::new(|s: TcpStream| Some(Box::new(s) as Box<dyn Stream>)),
            handler,
        )
    }

    /// Serve with every accepted stream wrapped by `wrap` (e.g. in TLS).
    pub fn start_wrapped(
        wrap: Arc<Wrap>,
        handler: impl Fn(&Request, &mut Responder<'_>) -> After + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let open = Arc::new(AtomicUsize::new(0));
        let accepted = Arc::new(AtomicUsize::new(0));
        let handler: Arc<Handler> = Arc::new(handler);
        {
            let (requests, open, accepted) = (requests.clone(), open.clone(), accepted.clone());
            thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(stream) = stream else { continue };
                    let index = accepted.fetch_add(1, Ordering::SeqCst);
                    open.fetch_add(1, Ordering::SeqCst);
                    let (requests, open, handler, wrap) = (
                        requests.clone(),
                        open.clone(),
                        handler.clone(),
                        wrap.clone(),
                    );
                    thread::spawn(move || {
                        serve(stream, index, &requests, &*handler, &*wrap);
                        open.fetch_sub(1, Ordering::SeqCst);
                    });
                }
            });
        }
        Self {
            port,
            requests,
            open,
            accepted,
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// Connections the client has not closed yet.
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    pub fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

fn serve(
    tcp: TcpStream,
    index: usize,
    requests: &Mutex<Vec<Request>>,
    handler: &Handler,
    wrap: &Wrap,
) {
    let raw = tcp.try_clone().unwrap();
    let Some(mut stream) = wrap(tcp) else { return };
    let Ok(request) = read_request(&mut *stream, index) else {
        return;
    };
    requests.lock().unwrap().push(request.clone());
    let after = handler(
        &request,
        &mut Responder {
            stream: &mut *stream,
        },
    );
    if after == After::Hold {
        // Until the client closes (EOF or error).
        let mut buf = [0u8; 1024];
        while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
    }
    let _ = raw.shutdown(Shutdown::Both);
}

fn read_request(stream: &mut dyn Stream, index: usize) -> io::Result<Request> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body)?;
    Ok(Request {
        index,
        method,
        target,
        headers,
        body,
    })
}
