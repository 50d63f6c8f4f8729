//! A local LaunchDarkly-compatible FDv1 flag server, for offline development and tests.
//!
//! It uses only the standard library's blocking sockets and one thread per connection,
//! so it works whatever async runtime (if any) the rest of the program uses. It binds
//! `127.0.0.1` only.
//!
//! | Request | Answer |
//! | --- | --- |
//! | `GET …/all` | `text/event-stream`: an `event: put` with every flag and segment, then a `patch` or `delete` for every change, and a `:` comment heartbeat every [`ServerBuilder::heartbeat`] |
//! | `GET …/sdk/latest-all` | `{"flags":{…},"segments":{…}}` with an `ETag`; `If-None-Match` → `304`; gzip when accepted |
//!
//! Any path prefix is accepted (so a base URI with a path works) and a `?filter=` query
//! is accepted and ignored. When an SDK key is configured, a request whose
//! `Authorization` header differs gets `401`.
//!
//! ```no_run
//! use flagsync::server::Server;
//! use serde_json::json;
//!
//! let server = Server::builder()
//!     .sdk_key(Some("sdk-test".into()))
//!     .data(json!({"flags": {"dark-mode": {"on": true, "variations": [false, true],
//!                  "fallthrough": {"variation": 1}, "offVariation": 0}}}))
//!     .start()?;
//! println!("stream and poll URI: {}", server.url());
//! server.set_flag("dark-mode", json!({"on": false, "variations": [false, true],
//!                  "fallthrough": {"variation": 1}, "offVariation": 0}))?; // version 2, pushed as a patch
//! server.fail_next(2, 503); // the next two requests get 503
//! server.shutdown();
//! # Ok::<(), flagsync::server::ServerError>(())
//! ```

mod data;
mod http;

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::Value;

use data::{Data, ItemKind};
use http::{ReadError, Request, RequestReader, write_response};

/// How long an idle keep-alive connection is kept open.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a write to a slow client may block before the connection is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`ServerHandle::shutdown`] waits for connection threads.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How many requests [`ServerHandle::requests`] remembers.
const MAX_RECORDED: usize = 1000;

/// An error from starting or updating the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The listening socket could not be bound.
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind {
        /// The port asked for (0 = any).
        port: u16,
        /// The cause.
        source: io::Error,
    },
    /// The flag data was not in the expected shape.
    #[error("invalid flag data: {0}")]
    InvalidData(String),
    /// A thread could not be started.
    #[error("cannot start a server thread: {0}")]
    Thread(io::Error),
}

/// Entry point: see [`Server::builder`].
#[derive(Debug)]
pub struct Server(());

impl Server {
    /// Start configuring a server. Defaults: any free port, no SDK key check, no data,
    /// heartbeat every 15 s.
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            port: 0,
            sdk_key: None,
            env_id: None,
            heartbeat: Duration::from_secs(15),
            data: Value::Object(serde_json::Map::new()),
        }
    }
}

/// Configuration of a [`Server`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ServerBuilder {
    port: u16,
    sdk_key: Option<String>,
    env_id: Option<String>,
    heartbeat: Duration,
    data: Value,
}

impl ServerBuilder {
    /// The port on 127.0.0.1 to listen on; 0 (the default) picks a free one.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Require this SDK key in the `Authorization` header (raw, or after `api_key `).
    /// `None` (the default) accepts any request.
    pub fn sdk_key(mut self, key: Option<String>) -> Self {
        self.sdk_key = key;
        self
    }

    /// Send this value in an `X-LD-EnvID` header on successful responses.
    pub fn env_id(mut self, env_id: Option<String>) -> Self {
        self.env_id = env_id;
        self
    }

    /// The interval between comment heartbeats on streams (default 15 s).
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every.max(Duration::from_millis(1));
        self
    }

    /// The initial data: `{"flags":{key: flag…},"segments":{key: segment…}}`. Either map
    /// may be missing; a `flagValues` map of `key → value` adds flags that serve that
    /// value to everyone. Items without `key`/`version` get the map key and version 1.
    pub fn data(mut self, data: Value) -> Self {
        self.data = data;
        self
    }

    /// Validate the data, bind the socket and start serving.
    pub fn start(self) -> Result<ServerHandle, ServerError> {
        let data = Data::from_json(self.data).map_err(ServerError::InvalidData)?;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, self.port)).map_err(|source| {
            ServerError::Bind {
                port: self.port,
                source,
            }
        })?;
        let addr = listener.local_addr().map_err(|source| ServerError::Bind {
            port: self.port,
            source,
        })?;
        let shared = Arc::new(Shared {
            addr,
            sdk_key: self.sdk_key,
            env_id: self.env_id,
            heartbeat: self.heartbeat,
            shutting_down: AtomicBool::new(false),
            inner: Mutex::new(Inner {
                data,
                streams: Vec::new(),
                conns: HashMap::new(),
                threads: Vec::new(),
                next_id: 0,
                fail: None,
                hang: false,
                requests: VecDeque::new(),
                request_count: 0,
            }),
            unhang: Condvar::new(),
        });
        let accept_shared = shared.clone();
        let accept = thread::Builder::new()
            .name("flagsync-server-accept".into())
            .spawn(move || accept_loop(&accept_shared, &listener))
            .map_err(ServerError::Thread)?;
        Ok(ServerHandle {
            shared,
            accept: Mutex::new(Some(accept)),
        })
    }
}

/// A request the server received, for assertions in tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// The method, e.g. `GET`.
    pub method: String,
    /// The path and query as sent, e.g. `/all?filter=x`.
    pub target: String,
    /// Every header, in order.
    pub headers: Vec<(String, String)>,
}

impl RecordedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A running server. Dropping it shuts it down.
#[derive(Debug)]
pub struct ServerHandle {
    shared: Arc<Shared>,
    accept: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Shared {
    addr: SocketAddr,
    sdk_key: Option<String>,
    env_id: Option<String>,
    heartbeat: Duration,
    shutting_down: AtomicBool,
    inner: Mutex<Inner>,
    unhang: Condvar,
}

#[derive(Debug)]
struct Inner {
    data: Data,
    /// Open streams: connection id and the channel to its thread.
    streams: Vec<(u64, Sender<StreamMsg>)>,
    /// Every open connection, to close them at shutdown.
    conns: HashMap<u64, TcpStream>,
    threads: Vec<JoinHandle<()>>,
    next_id: u64,
    /// Answer the next `n` requests with this status.
    fail: Option<(u16, usize)>,
    hang: bool,
    requests: VecDeque<RecordedRequest>,
    request_count: u64,
}

#[derive(Debug)]
enum StreamMsg {
    Event(Arc<str>),
    Close,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }
}

impl Inner {
    fn broadcast(&mut self, event: &str) {
        let event: Arc<str> = event.into();
        self.streams
            .retain(|(_, tx)| tx.send(StreamMsg::Event(event.clone())).is_ok());
    }
}

fn sse_event(name: &str, data: &str) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

impl ServerHandle {
    /// The bound address (always on 127.0.0.1).
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// `http://127.0.0.1:PORT`: use it as both the stream and the polling base URI.
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// Insert or replace a flag and push a `patch` to every stream. Without a `version`
    /// field the flag gets the previous version plus one (1 for a new flag); `key` is
    /// filled in. Returns the version stored.
    pub fn set_flag(&self, key: &str, flag: Value) -> Result<u64, ServerError> {
        self.upsert(ItemKind::Flag, key, flag)
    }

    /// Insert or replace a segment and push a `patch`, as [`set_flag`](Self::set_flag).
    pub fn set_segment(&self, key: &str, segment: Value) -> Result<u64, ServerError> {
        self.upsert(ItemKind::Segment, key, segment)
    }

    /// Delete a flag with the next version and push a `delete`. Returns that version.
    pub fn delete_flag(&self, key: &str) -> u64 {
        self.delete(ItemKind::Flag, key, None)
    }

    /// Delete a segment with the next version and push a `delete`.
    pub fn delete_segment(&self, key: &str) -> u64 {
        self.delete(ItemKind::Segment, key, None)
    }

    /// Delete a flag with an explicit tombstone version (which may be stale, to test
    /// that clients ignore it).
    pub fn delete_flag_version(&self, key: &str, version: u64) -> u64 {
        self.delete(ItemKind::Flag, key, Some(version))
    }

    /// Replace all data (same shape as [`ServerBuilder::data`]) and send every stream a
    /// new `put`.
    pub fn replace_all(&self, data: Value) -> Result<(), ServerError> {
        let data = Data::from_json(data).map_err(ServerError::InvalidData)?;
        let mut inner = self.shared.lock();
        inner.data = data;
        let body = inner.data.rendered();
        let event = sse_event("put", &format!("{{\"path\":\"/\",\"data\":{}}}", body.body));
        inner.broadcast(&event);
        Ok(())
    }

    /// A flag as currently served, if it exists.
    pub fn flag(&self, key: &str) -> Option<Value> {
        self.shared.lock().data.get(ItemKind::Flag, key).cloned()
    }

    /// The keys of the flags currently served, sorted.
    pub fn flag_keys(&self) -> Vec<String> {
        self.shared.lock().data.keys(ItemKind::Flag)
    }

    /// The current data as `{"flags":{…},"segments":{…}}`, exactly as polling serves it.
    pub fn data_json(&self) -> String {
        self.shared.lock().data.rendered().body.clone()
    }

    /// Fault: answer the next `count` requests (streaming or polling) with `status` and a
    /// small JSON body, before any other check. `count = 0` cancels.
    pub fn fail_next(&self, count: usize, status: u16) {
        self.shared.lock().fail = (count > 0).then_some((status, count));
    }

    /// Fault: close every open stream now (clients see the connection end).
    pub fn drop_streams(&self) {
        let mut inner = self.shared.lock();
        for (_, tx) in inner.streams.drain(..) {
            let _ = tx.send(StreamMsg::Close);
        }
    }

    /// Fault: while `true`, accept connections and read requests but never answer them
    /// (clients see a timeout). Setting it back to `false` closes the held connections.
    pub fn hang(&self, hang: bool) {
        self.shared.lock().hang = hang;
        self.shared.unhang.notify_all();
    }

    /// The number of streams currently open.
    pub fn open_streams(&self) -> usize {
        self.shared.lock().streams.len()
    }

    /// Wait until at least `n` streams are open; `false` on timeout.
    pub fn wait_for_streams(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.open_streams() < n {
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// The total number of requests received.
    pub fn request_count(&self) -> u64 {
        self.shared.lock().request_count
    }

    /// The most recent requests received (up to 1000), oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.iter().cloned().collect()
    }

    /// Stop: close the listener and every connection, and join the threads (waiting at
    /// most a few seconds). Idempotent; also done on drop.
    pub fn shutdown(&self) {
        let Some(accept) = self.accept.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        self.shared.shutting_down.store(true, Ordering::SeqCst);
        {
            let mut inner = self.shared.lock();
            for (_, tx) in inner.streams.drain(..) {
                let _ = tx.send(StreamMsg::Close);
            }
            for (_, conn) in inner.conns.drain() {
                let _ = conn.shutdown(std::net::Shutdown::Both);
            }
        }
        self.shared.unhang.notify_all();
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.shared.addr, Duration::from_secs(1));
        let _ = accept.join();
        let threads = std::mem::take(&mut self.shared.lock().threads);
        let deadline = Instant::now() + SHUTDOWN_GRACE;
        for t in threads {
            while !t.is_finished() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(2));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }

    fn upsert(&self, kind: ItemKind, key: &str, item: Value) -> Result<u64, ServerError> {
        let mut inner = self.shared.lock();
        let item = inner
            .data
            .upsert(kind, key, item)
            .map_err(ServerError::InvalidData)?;
        let version = item.get("version").and_then(Value::as_u64).unwrap_or(0);
        let path = format!("{}{key}", kind.path_prefix());
        let payload = serde_json::json!({ "path": path, "data": item });
        inner.broadcast(&sse_event("patch", &payload.to_string()));
        Ok(version)
    }

    fn delete(&self, kind: ItemKind, key: &str, version: Option<u64>) -> u64 {
        let mut inner = self.shared.lock();
        let version = inner.data.delete(kind, key, version);
        let path = format!("{}{key}", kind.path_prefix());
        let payload = serde_json::json!({ "path": path, "version": version });
        inner.broadcast(&sse_event("delete", &payload.to_string()));
        version
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener) {
    loop {
        let conn = listener.accept();
        if shared.is_shutting_down() {
            return;
        }
        let (stream, _) = match conn {
            Ok(c) => c,
            Err(_) => {
                // E.g. out of file descriptors: back off briefly.
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let mut inner = shared.lock();
        if shared.is_shutting_down() {
            return;
        }
        inner.threads.retain(|t| !t.is_finished());
        let id = inner.next_id;
        inner.next_id += 1;
        if let Ok(clone) = stream.try_clone() {
            inner.conns.insert(id, clone);
        }
        let conn_shared = shared.clone();
        let spawned = thread::Builder::new()
            .name("flagsync-server-conn".into())
            .spawn(move || {
                handle_connection(&conn_shared, id, stream);
                conn_shared.lock().conns.remove(&id);
            });
        match spawned {
            Ok(t) => inner.threads.push(t),
            Err(_) => {
                if let Some(c) = inner.conns.remove(&id) {
                    let _ = c.shutdown(std::net::Shutdown::Both);
                }
            }
        }
    }
}

fn handle_connection(shared: &Arc<Shared>, id: u64, mut stream: TcpStream) {
    let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let _ = stream.set_nodelay(true);
    let mut reader = RequestReader::default();
    loop {
        let req = match reader.read(&mut stream) {
            Ok(r) => r,
            Err(ReadError::Bad(status)) => {
                let _ = write_response(&mut stream, status, &[], b"", true);
                break;
            }
            Err(ReadError::Eof | ReadError::Io) => break,
        };
        if shared.is_shutting_down() {
            break;
        }
        let fault = {
            let mut inner = shared.lock();
            inner.request_count += 1;
            if inner.requests.len() >= MAX_RECORDED {
                inner.requests.pop_front();
            }
            inner.requests.push_back(RecordedRequest {
                method: req.method.clone(),
                target: req.target.clone(),
                headers: req.headers.clone(),
            });
            if inner.hang {
                // Hold the connection unanswered until unhung or shut down.
                while inner.hang && !shared.is_shutting_down() {
                    inner = shared.unhang.wait(inner).unwrap_or_else(|e| e.into_inner());
                }
                break;
            }
            match &mut inner.fail {
                Some((status, n)) => {
                    let status = *status;
                    *n -= 1;
                    if *n == 0 {
                        inner.fail = None;
                    }
                    Some(status)
                }
                None => None,
            }
        };
        let keep = match fault {
            Some(status) => {
                let body = format!("{{\"message\":\"injected fault: HTTP {status}\"}}");
                write_response(
                    &mut stream,
                    status,
                    &[("Content-Type", "application/json")],
                    body.as_bytes(),
                    req.close,
                )
                .is_ok()
            }
            None => match route(shared, id, &req, &mut stream) {
                Routed::Done(ok) => ok,
                Routed::Streamed => false,
            },
        };
        if !keep || req.close {
            break;
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

enum Routed {
    /// A plain response was written; `true` if the connection may be reused.
    Done(bool),
    /// A stream was served until it ended.
    Streamed,
}

fn authorized(shared: &Shared, req: &Request) -> bool {
    let Some(key) = &shared.sdk_key else {
        return true;
    };
    match req.header("authorization") {
        Some(v) => v == key || v.strip_prefix("api_key ") == Some(key.as_str()),
        None => false,
    }
}

fn route(shared: &Arc<Shared>, id: u64, req: &Request, stream: &mut TcpStream) -> Routed {
    let path = req.path();
    let json = [("Content-Type", "application/json")];
    let is_stream = path.ends_with("/all");
    let is_poll = path.ends_with("/sdk/latest-all");
    if !is_stream && !is_poll {
        let body = format!(
            "{{\"message\":\"not found: {} (this server serves /all and /sdk/latest-all)\"}}",
            path.replace(['"', '\\'], "")
        );
        return Routed::Done(
            write_response(stream, 404, &json, body.as_bytes(), req.close).is_ok(),
        );
    }
    if req.method != "GET" {
        return Routed::Done(
            write_response(
                stream,
                405,
                &[("Allow", "GET"), json[0]],
                b"{\"message\":\"method not allowed\"}",
                req.close,
            )
            .is_ok(),
        );
    }
    if !authorized(shared, req) {
        return Routed::Done(
            write_response(
                stream,
                401,
                &json,
                b"{\"message\":\"invalid SDK key\"}",
                req.close,
            )
            .is_ok(),
        );
    }
    if is_poll {
        Routed::Done(serve_poll(shared, req, stream).is_ok())
    } else {
        let _ = serve_stream(shared, id, stream);
        Routed::Streamed
    }
}

fn serve_poll(shared: &Shared, req: &Request, stream: &mut TcpStream) -> io::Result<()> {
    let rendered = shared.lock().data.rendered();
    let mut headers: Vec<(&str, &str)> = vec![("ETag", &rendered.etag)];
    if let Some(env) = &shared.env_id {
        headers.push(("X-LD-EnvID", env));
    }
    let matches = req.header("if-none-match").is_some_and(|v| {
        v.split(',')
            .any(|t| t.trim() == rendered.etag || t.trim() == "*")
    });
    if matches {
        return write_response(stream, 304, &headers, b"", req.close);
    }
    headers.push(("Content-Type", "application/json"));
    headers.push(("Vary", "Accept-Encoding"));
    if req.accepts_gzip() {
        headers.push(("Content-Encoding", "gzip"));
        write_response(stream, 200, &headers, rendered.gzipped(), req.close)
    } else {
        write_response(stream, 200, &headers, rendered.body.as_bytes(), req.close)
    }
}

fn serve_stream(shared: &Arc<Shared>, id: u64, stream: &mut TcpStream) -> io::Result<()> {
    let (tx, rx) = mpsc::channel();
    // Register and render under one lock, so no change falls between the put and the
    // first patch.
    let put = {
        let mut inner = shared.lock();
        inner.streams.push((id, tx));
        let body = inner.data.rendered();
        sse_event("put", &format!("{{\"path\":\"/\",\"data\":{}}}", body.body))
    };
    let result = (|| {
        let mut head = String::from(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\nConnection: close\r\n",
        );
        if let Some(env) = &shared.env_id {
            head.push_str("X-LD-EnvID: ");
            head.push_str(env);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes())?;
        stream.write_all(put.as_bytes())?;
        stream.flush()?;
        let mut next_heartbeat = Instant::now() + shared.heartbeat;
        loop {
            let wait = next_heartbeat.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(StreamMsg::Event(e)) => {
                    stream.write_all(e.as_bytes())?;
                    stream.flush()?;
                }
                Ok(StreamMsg::Close) | Err(RecvTimeoutError::Disconnected) => return Ok(()),
                Err(RecvTimeoutError::Timeout) => {
                    stream.write_all(b":\n")?;
                    stream.flush()?;
                    next_heartbeat = Instant::now() + shared.heartbeat;
                }
            }
        }
    })();
    shared.lock().streams.retain(|(sid, _)| *sid != id);
    result
}
