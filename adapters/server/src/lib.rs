//! A local LaunchDarkly-compatible flag server (FDv1 and FDv2), for offline development
//! and tests.
//!
//! It uses only the standard library's blocking sockets and one thread per connection,
//! so it works whatever async runtime (if any) the rest of the program uses. It binds
//! `127.0.0.1` only.
//!
//! | Request | Answer |
//! | --- | --- |
//! | `GET …/all` | FDv1 `text/event-stream`: an `event: put` with every flag and segment, then a `patch` or `delete` for every change, and a `:` comment heartbeat every [`ServerBuilder::heartbeat`] |
//! | `GET …/sdk/latest-all` | FDv1 `{"flags":{…},"segments":{…}}` with an `ETag`; `If-None-Match` → `304`; gzip when accepted |
//! | `GET …/sdk/stream[?basis=S]` | FDv2 `text/event-stream`: `server-intent` (`xfer-full`, or `none` when `basis` is the current selector state), a `put-object` per flag and segment, `payload-transferred {state, version}`; then each change as an `xfer-changes` payload (`put-object` or `delete-object`, `payload-transferred`), a replaced data set as a new `xfer-full` payload, and a `heart-beat` event every heartbeat interval |
//! | `GET …/sdk/poll[?basis=S]` | FDv2 `{"events":[{"event":…,"data":{…}},…]}`: the same first payload as the stream, with an `ETag` naming the selector state; `If-None-Match` → `304`; gzip when accepted |
//! | `POST …/bulk` | analytics events, a JSON array (optionally `Content-Encoding: gzip`): `202 Accepted`, empty body |
//! | `POST …/diagnostic` | one diagnostic event object (optionally gzip): `202 Accepted`, empty body |
//!
//! Every change raises the payload version by one; the selector state is
//! `<server epoch>-<version>` ([`ServerHandle::fdv2_state`]), so a client's `basis`
//! from an older version (or another server run) gets a full transfer. Any path prefix
//! is accepted (so a base URI with a path works) and a `?filter=` query is accepted and
//! ignored. When an SDK key is configured, a request whose `Authorization` header
//! differs gets `401`. Every response carries a `Date` header (SDKs compare
//! `debugEventsUntilDate` with the `Date` of an events response).
//!
//! Streams are answered as LaunchDarkly's streaming service answers them, so the
//! official SDKs read them unchanged: `Content-Type: text/event-stream; charset=utf-8`,
//! `Cache-Control: no-cache`, and `Transfer-Encoding: chunked` with every write (the
//! first payload, each change, each heartbeat) one chunk, so a reader that waits for
//! framed data (urllib3 in the Python SDK) sees each event when it is sent. A stream
//! that the server ends (a `goodbye`, [`ServerHandle::drop_streams`], shutdown) ends
//! with the last chunk, then the connection closes. (An HTTP/1.0 request, which knows
//! no chunks, gets the events unframed, ended by the connection's end.)
//!
//! # Events
//! The events endpoints answer as LaunchDarkly's events service does: `202 Accepted`
//! with an empty body; `400` for a body that is not JSON of the endpoint's shape (an
//! array for `/bulk`, an object for `/diagnostic`), `401` for a wrong SDK key, `413`
//! for a body longer than [`ServerBuilder::max_body`] (as sent, or once gunzipped),
//! `415` for a `Content-Encoding` other than gzip, `411` for a chunked body. Accepted
//! payloads go to every [`EventSubscription`] ([`ServerHandle::subscribe_events`]) as
//! [`EventPayload`]s; a subscription that is full drops and counts, so a slow reader
//! never holds up a request. The faults apply to [`Endpoint::Bulk`] and
//! [`Endpoint::Diagnostic`] too.
//!
//! # Faults
//! For testing clients, [`ServerHandle`] scripts faults; each takes effect with the next
//! request: [`fail_next`](ServerHandle::fail_next) and
//! [`fail_endpoint`](ServerHandle::fail_endpoint) (answer with an HTTP status),
//! [`hang`](ServerHandle::hang) and [`hang_endpoint`](ServerHandle::hang_endpoint)
//! (accept, never answer), [`drop_streams`](ServerHandle::drop_streams), and for FDv2
//! [`fdv1_fallback`](ServerHandle::fdv1_fallback) (`X-LD-FD-Fallback: true` on every
//! FDv2 response), [`goodbye_next`](ServerHandle::goodbye_next) (a `goodbye` after a
//! stream's first payload, then the stream closes) and
//! [`payload_error_next`](ServerHandle::payload_error_next) (an `error` event half-way
//! through a full payload, which is then sent again).
//!
//! ```no_run
//! use flagsync_server::{Endpoint, Server};
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
//! server.fail_endpoint(Endpoint::Fdv2Stream, Some(401)); // FDv2 streams are refused
//! server.shutdown();
//! # Ok::<(), flagsync_server::ServerError>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(unreachable_pub, clippy::use_self, elided_lifetimes_in_paths)]

mod data;
mod events;
mod fault;
mod fdv2;
mod http;

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use data::{Data, ItemKind};
use events::Subscribers;
use fault::Faults;
use http::{ReadError, Request, RequestReader, write_response};

pub use events::{EventPayload, EventSubscription, PayloadKind};
pub use fault::{Endpoint, UnknownEndpoint};

/// How long an idle keep-alive connection is kept open.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a write to a slow client may block before the connection is dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`ServerHandle::shutdown`] waits for connection threads.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// How many requests [`ServerHandle::requests`] remembers.
const MAX_RECORDED: usize = 1000;
/// How long a refused request's unread body is read and discarded before closing.
const LINGER: Duration = Duration::from_secs(2);

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
    /// heartbeat every 15 s, request bodies up to 8 MiB.
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            port: 0,
            sdk_key: None,
            env_id: None,
            heartbeat: Duration::from_secs(15),
            data: Value::Object(serde_json::Map::new()),
            max_body: http::DEFAULT_MAX_BODY,
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
    max_body: usize,
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

    /// The longest request body accepted, in bytes (default 8 MiB): as sent, and again
    /// once gunzipped. A longer body gets `413` without being buffered: a
    /// `Content-Length` above it is refused before the body is read.
    ///
    /// ```
    /// let server = flagsync_server::Server::builder().max_body(64 * 1024).start()?;
    /// # Ok::<(), flagsync_server::ServerError>(())
    /// ```
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// Validate the data, bind the socket and start serving.
    pub fn start(self) -> Result<ServerHandle, ServerError> {
        let mut data = Data::from_json(self.data).map_err(ServerError::InvalidData)?;
        data.set_epoch(format!("{:08x}", fastrand::u32(..)));
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
            max_body: self.max_body,
            shutting_down: AtomicBool::new(false),
            inner: Mutex::new(Inner {
                data,
                streams: Vec::new(),
                conns: HashMap::new(),
                threads: Vec::new(),
                next_id: 0,
                faults: Faults::default(),
                requests: VecDeque::new(),
                request_count: 0,
                event_subs: Subscribers::default(),
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
    ///
    /// ```
    /// use flagsync_server::RecordedRequest;
    ///
    /// let req = RecordedRequest {
    ///     method: "GET".into(),
    ///     target: "/sdk/stream".into(),
    ///     headers: vec![("Authorization".into(), "sdk-key".into())],
    /// };
    /// assert_eq!(req.header("authorization"), Some("sdk-key"));
    /// ```
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The endpoint the path names, if any.
    ///
    /// ```
    /// use flagsync_server::{Endpoint, RecordedRequest};
    ///
    /// let req = RecordedRequest {
    ///     method: "GET".into(),
    ///     target: "/sdk/poll?basis=abc-1".into(),
    ///     headers: vec![],
    /// };
    /// assert_eq!(req.endpoint(), Some(Endpoint::Fdv2Poll));
    /// ```
    pub fn endpoint(&self) -> Option<Endpoint> {
        Endpoint::of_path(self.target.split(['?', '#']).next().unwrap_or(""))
    }

    /// The first value of query parameter `name`, percent-decoded (e.g. FDv2's
    /// `basis`).
    ///
    /// ```
    /// use flagsync_server::RecordedRequest;
    ///
    /// let req = RecordedRequest {
    ///     method: "GET".into(),
    ///     target: "/sdk/stream?filter=f&basis=abc-1".into(),
    ///     headers: vec![],
    /// };
    /// assert_eq!(req.query("basis").as_deref(), Some("abc-1"));
    /// assert_eq!(req.query("other"), None);
    /// ```
    pub fn query(&self, name: &str) -> Option<String> {
        http::query_param(&self.target, name)
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
    max_body: usize,
    shutting_down: AtomicBool,
    inner: Mutex<Inner>,
    unhang: Condvar,
}

#[derive(Debug)]
struct Inner {
    data: Data,
    /// Open streams (FDv1 and FDv2).
    streams: Vec<StreamSub>,
    /// Every open connection, to close them at shutdown.
    conns: HashMap<u64, TcpStream>,
    threads: Vec<JoinHandle<()>>,
    next_id: u64,
    faults: Faults,
    requests: VecDeque<RecordedRequest>,
    request_count: u64,
    event_subs: Subscribers,
}

/// An open stream: its connection id, protocol, and the channel to its thread.
#[derive(Debug)]
struct StreamSub {
    id: u64,
    fdv2: bool,
    tx: Sender<StreamMsg>,
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
    /// Send every FDv1 stream `fdv1` and every FDv2 stream `fdv2` (both SSE text).
    fn broadcast(&mut self, fdv1: &str, fdv2: &str) {
        let (fdv1, fdv2): (Arc<str>, Arc<str>) = (fdv1.into(), fdv2.into());
        self.streams.retain(|s| {
            let text = if s.fdv2 { &fdv2 } else { &fdv1 };
            s.tx.send(StreamMsg::Event(text.clone())).is_ok()
        });
    }

    /// Close every stream.
    fn close_streams(&mut self) {
        for s in self.streams.drain(..) {
            let _ = s.tx.send(StreamMsg::Close);
        }
    }

    /// The current data as one FDv2 payload of changes on an open stream.
    fn fdv2_changes(&self, change: fdv2::Event) -> String {
        let done = fdv2::payload_transferred(&self.data.state(), self.data.version());
        fdv2::to_sse(&[change, done])
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

    /// Replace all data (same shape as [`ServerBuilder::data`]) and send every FDv1
    /// stream a new `put`, every FDv2 stream a new `xfer-full` payload.
    ///
    /// Item versions never go back, as LaunchDarkly's never do (the SDKs tell changes
    /// by them): an item whose content changed is served with at least the version
    /// served before plus one, an unchanged one with at least the version served
    /// before; a higher version in `data` is kept.
    ///
    /// ```
    /// use flagsync_server::Server;
    /// use serde_json::json;
    ///
    /// let server = Server::builder().data(json!({"flags": {"f": {"on": true}}})).start()?;
    /// server.replace_all(json!({"flags": {"f": {"on": false}}}))?;
    /// assert_eq!(server.flag("f").unwrap()["version"], 2);
    /// # Ok::<(), flagsync_server::ServerError>(())
    /// ```
    pub fn replace_all(&self, data: Value) -> Result<(), ServerError> {
        let data = Data::from_json(data).map_err(ServerError::InvalidData)?;
        let mut inner = self.shared.lock();
        inner.data.replace(data);
        let body = inner.data.rendered();
        let put = sse_event("put", &format!("{{\"path\":\"/\",\"data\":{}}}", body.body));
        let full = fdv2::to_sse(&fdv2::full_transfer(&inner.data.fdv2_objects()));
        inner.broadcast(&put, &full);
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

    /// The selector state of the current data, `<epoch>-<payload version>`: a client
    /// that sends it as `basis` is up to date (FDv2 intent `none`).
    ///
    /// ```
    /// use flagsync_server::Server;
    /// use serde_json::json;
    ///
    /// let server = Server::builder().start()?;
    /// let before = server.fdv2_state();
    /// server.set_flag("f", json!({"on": true}))?;
    /// assert_ne!(server.fdv2_state(), before); // clients sending `before` get everything
    /// # Ok::<(), flagsync_server::ServerError>(())
    /// ```
    pub fn fdv2_state(&self) -> String {
        self.shared.lock().data.state()
    }

    /// The payload version: 1 for the initial data, plus one per change.
    ///
    /// ```
    /// use flagsync_server::Server;
    ///
    /// let server = Server::builder().start()?;
    /// assert_eq!(server.payload_version(), 1);
    /// server.delete_flag("gone");
    /// assert_eq!(server.payload_version(), 2);
    /// # Ok::<(), flagsync_server::ServerError>(())
    /// ```
    pub fn payload_version(&self) -> u64 {
        self.shared.lock().data.version()
    }

    /// Fault: answer the next `count` requests (any endpoint, any path) with `status`
    /// and a small JSON body, before any other check. `count = 0` cancels.
    pub fn fail_next(&self, count: usize, status: u16) {
        self.shared.lock().faults.set_fail_next(count, status);
    }

    /// Fault: answer every request to `endpoint` with `status` and a small JSON body,
    /// before any other check (after [`fail_next`](Self::fail_next)), until called
    /// again with `None`.
    ///
    /// ```
    /// use flagsync_server::{Endpoint, Server};
    ///
    /// let server = Server::builder().start()?;
    /// // FDv2 clients lose their stream for good and fall back to polling.
    /// server.fail_endpoint(Endpoint::Fdv2Stream, Some(401));
    /// # Ok::<(), flagsync_server::ServerError>(())
    /// ```
    pub fn fail_endpoint(&self, endpoint: Endpoint, status: Option<u16>) {
        self.shared.lock().faults.set_fail(endpoint, status);
    }

    /// Fault: close every open stream now: its body ends (the last chunk) and the
    /// connection closes, so clients see the stream end and reconnect.
    pub fn drop_streams(&self) {
        self.shared.lock().close_streams();
    }

    /// Fault: while `true`, accept connections and read requests but never answer them
    /// (clients see a timeout). Setting it back to `false` closes the held connections.
    pub fn hang(&self, hang: bool) {
        self.shared.lock().faults.set_hang(hang);
        self.shared.unhang.notify_all();
    }

    /// Fault: [`hang`](Self::hang) for requests to `endpoint` only.
    ///
    /// ```
    /// use flagsync_server::{Endpoint, Server};
    ///
    /// let server = Server::builder().start()?;
    /// // FDv2 streams never get a response: clients fall back after their timeout.
    /// server.hang_endpoint(Endpoint::Fdv2Stream, true);
    /// server.hang_endpoint(Endpoint::Fdv2Stream, false); // closes the held connections
    /// # Ok::<(), flagsync_server::ServerError>(())
    /// ```
    pub fn hang_endpoint(&self, endpoint: Endpoint, hang: bool) {
        self.shared.lock().faults.set_hang_endpoint(endpoint, hang);
        self.shared.unhang.notify_all();
    }

    /// Fault: while `true`, every FDv2 response (`/sdk/stream`, `/sdk/poll`; successes
    /// and errors alike, injected ones included) carries `X-LD-FD-Fallback: true`,
    /// which directs FDv2 clients to FDv1 (`/sdk/latest-all`) for good. Streams opened
    /// before keep running.
    ///
    /// ```
    /// use flagsync_server::Server;
    ///
    /// let server = Server::builder().start()?;
    /// server.fdv1_fallback(true);
    /// # Ok::<(), flagsync_server::ServerError>(())
    /// ```
    pub fn fdv1_fallback(&self, on: bool) {
        self.shared.lock().faults.fdv1_fallback = on;
    }

    /// Fault: the next `count` FDv2 streams send a `goodbye` event after their first
    /// payload (a full transfer, or intent `none`) and close; clients reconnect with
    /// their `basis`. `usize::MAX`: every stream; 0 cancels.
    ///
    /// ```
    /// use flagsync_server::Server;
    ///
    /// let server = Server::builder().start()?;
    /// server.goodbye_next(1);
    /// # Ok::<(), flagsync_server::ServerError>(())
    /// ```
    pub fn goodbye_next(&self, count: usize) {
        self.shared.lock().faults.set_goodbye(count);
    }

    /// Fault: the next `count` FDv2 full payloads (the first payload of a stream, or a
    /// poll response) are interrupted half-way by an `error` event, after which every
    /// object is sent again and the payload completes; clients must drop the partial
    /// changes and keep going. `usize::MAX`: every one; 0 cancels.
    ///
    /// ```
    /// use flagsync_server::Server;
    ///
    /// let server = Server::builder().start()?;
    /// server.payload_error_next(1);
    /// # Ok::<(), flagsync_server::ServerError>(())
    /// ```
    pub fn payload_error_next(&self, count: usize) {
        self.shared.lock().faults.set_payload_error(count);
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

    /// Receive every event payload accepted from now on (`POST …/bulk`,
    /// `POST …/diagnostic`), holding at most `capacity` unreceived ones: beyond that,
    /// payloads are dropped for this subscription and counted
    /// ([`EventSubscription::dropped`]), never waited for. Dropping the subscription
    /// ends it; shutting the server down ends every one.
    ///
    /// ```
    /// use std::io::Write;
    /// use std::time::Duration;
    ///
    /// use flagsync_server::{PayloadKind, Server};
    ///
    /// let server = Server::builder().sdk_key(Some("sdk-key".into())).start()?;
    /// let events = server.subscribe_events(100);
    /// let body = r#"[{"kind":"custom","key":"clicked","creationDate":1,"contextKeys":{"user":"u"}}]"#;
    /// let mut conn = std::net::TcpStream::connect(server.addr())?;
    /// write!(
    ///     conn,
    ///     "POST /bulk HTTP/1.1\r\nAuthorization: sdk-key\r\nX-LaunchDarkly-Payload-ID: p1\r\n\
    ///      Content-Length: {}\r\n\r\n{body}",
    ///     body.len()
    /// )?;
    /// let payload = events.recv_timeout(Duration::from_secs(5)).expect("a payload");
    /// assert_eq!(payload.kind, PayloadKind::Bulk);
    /// assert_eq!(payload.payload_id.as_deref(), Some("p1"));
    /// assert_eq!(payload.events()[0]["key"], "clicked");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn subscribe_events(&self, capacity: usize) -> EventSubscription {
        self.shared.lock().event_subs.subscribe(capacity)
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
            inner.close_streams();
            inner.event_subs.close();
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
        let patch = sse_event("patch", &payload.to_string());
        let put = fdv2::put(data::put_object(kind, key, version, &item));
        let changes = inner.fdv2_changes(put);
        inner.broadcast(&patch, &changes);
        Ok(version)
    }

    fn delete(&self, kind: ItemKind, key: &str, version: Option<u64>) -> u64 {
        let mut inner = self.shared.lock();
        let version = inner.data.delete(kind, key, version);
        let path = format!("{}{key}", kind.path_prefix());
        let payload = serde_json::json!({ "path": path, "version": version });
        let delete = sse_event("delete", &payload.to_string());
        let changes = inner.fdv2_changes(fdv2::delete_object(kind, key, version));
        inner.broadcast(&delete, &changes);
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
    let mut reader = RequestReader::new(shared.max_body);
    loop {
        let req = match reader.read(&mut stream) {
            Ok(r) => r,
            Err(ReadError::Bad(status)) => {
                if write_response(&mut stream, status, &[], b"", true).is_ok() {
                    // The client may still be sending a body too long to read.
                    http::linger(&mut stream, LINGER);
                }
                break;
            }
            Err(ReadError::Eof | ReadError::Io) => break,
        };
        if shared.is_shutting_down() {
            break;
        }
        let endpoint = Endpoint::of_path(req.path());
        let (fault, fallback) = {
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
            if inner.faults.hangs(endpoint) {
                // Hold the connection unanswered until unhung or shut down.
                while inner.faults.hangs(endpoint) && !shared.is_shutting_down() {
                    inner = shared.unhang.wait(inner).unwrap_or_else(|e| e.into_inner());
                }
                break;
            }
            let fallback = inner.faults.fdv1_fallback && endpoint.is_some_and(Endpoint::is_fdv2);
            (inner.faults.take_failure(endpoint), fallback)
        };
        let mut headers = vec![("Content-Type", "application/json")];
        if fallback {
            headers.push(FALLBACK_HEADER);
        }
        let keep = match fault {
            Some(status) => {
                let body = format!("{{\"message\":\"injected fault: HTTP {status}\"}}");
                write_response(&mut stream, status, &headers, body.as_bytes(), req.close).is_ok()
            }
            None => match route(shared, id, &req, endpoint, &headers, &mut stream) {
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

/// Directs FDv2 clients to FDv1 for good (PROTOCOL.md B §5.4, §5.5).
const FALLBACK_HEADER: (&str, &str) = ("X-LD-FD-Fallback", "true");

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

/// Serve `req`. `error_headers` go on error responses (`Content-Type`, and the FDv1
/// fallback directive when it applies).
fn route(
    shared: &Arc<Shared>,
    id: u64,
    req: &Request,
    endpoint: Option<Endpoint>,
    error_headers: &[(&str, &str)],
    stream: &mut TcpStream,
) -> Routed {
    let Some(endpoint) = endpoint else {
        let body = format!(
            "{{\"message\":\"not found: {} (this server serves GET /all, /sdk/latest-all, /sdk/stream and /sdk/poll, and POST /bulk and /diagnostic)\"}}",
            req.path().replace(['"', '\\'], "")
        );
        return Routed::Done(
            write_response(stream, 404, error_headers, body.as_bytes(), req.close).is_ok(),
        );
    };
    let method = if endpoint.is_events() { "POST" } else { "GET" };
    if req.method != method {
        let mut headers = vec![("Allow", method)];
        headers.extend_from_slice(error_headers);
        return Routed::Done(
            write_response(
                stream,
                405,
                &headers,
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
                error_headers,
                b"{\"message\":\"invalid SDK key\"}",
                req.close,
            )
            .is_ok(),
        );
    }
    let fallback = error_headers.contains(&FALLBACK_HEADER);
    match endpoint {
        Endpoint::Fdv1Poll => Routed::Done(serve_poll(shared, req, stream).is_ok()),
        Endpoint::Fdv2Poll => Routed::Done(serve_fdv2_poll(shared, req, fallback, stream).is_ok()),
        Endpoint::Fdv1Stream | Endpoint::Fdv2Stream => {
            let _ = serve_stream(shared, id, req, endpoint, fallback, stream);
            Routed::Streamed
        }
        Endpoint::Bulk => {
            Routed::Done(serve_events(shared, PayloadKind::Bulk, req, stream).is_ok())
        }
        Endpoint::Diagnostic => {
            Routed::Done(serve_events(shared, PayloadKind::Diagnostic, req, stream).is_ok())
        }
    }
}

/// `POST …/bulk`, `POST …/diagnostic`: decode and check the body, hand it to the
/// subscriptions (never waiting for them), answer `202` with no body.
fn serve_events(
    shared: &Shared,
    kind: PayloadKind,
    req: &Request,
    stream: &mut TcpStream,
) -> io::Result<()> {
    match events::accept(kind, req, shared.max_body, SystemTime::now()) {
        Ok(payload) => {
            shared.lock().event_subs.publish(&payload);
            write_response(stream, 202, &[], b"", req.close)
        }
        Err(refusal) => {
            let body = format!("{{\"message\":\"{}\"}}", refusal.message);
            let headers = [("Content-Type", "application/json")];
            write_response(stream, refusal.status, &headers, body.as_bytes(), req.close)
        }
    }
}

fn serve_poll(shared: &Shared, req: &Request, stream: &mut TcpStream) -> io::Result<()> {
    let rendered = shared.lock().data.rendered();
    let mut headers: Vec<(&str, &str)> = vec![("ETag", &rendered.etag)];
    if let Some(env) = &shared.env_id {
        headers.push(("X-LD-EnvID", env));
    }
    if etag_matches(req, &rendered.etag) {
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

/// Whether an `If-None-Match` header names `etag` (or is `*`).
fn etag_matches(req: &Request, etag: &str) -> bool {
    req.header("if-none-match")
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"))
}

/// `/sdk/poll`: the first payload for the request's `basis` as one JSON body, with an
/// `ETag` naming the selector state it brings the client to: `If-None-Match` with the
/// current one gets `304` (the client already holds this state).
fn serve_fdv2_poll(
    shared: &Shared,
    req: &Request,
    fallback: bool,
    stream: &mut TcpStream,
) -> io::Result<()> {
    let basis = req.query("basis");
    let (etag, events) = {
        let mut inner = shared.lock();
        let objects = inner.data.fdv2_objects();
        let etag = format!("\"fdv2-{}\"", objects.state);
        if etag_matches(req, &etag) {
            (etag, None)
        } else {
            let error = basis.as_deref() != Some(objects.state.as_str())
                && inner.faults.take_payload_error();
            let events = fdv2::initial_payload(&objects, basis.as_deref(), error);
            (etag, Some(events))
        }
    };
    let mut headers: Vec<(&str, &str)> = vec![("ETag", &etag)];
    if let Some(env) = &shared.env_id {
        headers.push(("X-LD-EnvID", env));
    }
    if fallback {
        headers.push(FALLBACK_HEADER);
    }
    let Some(events) = events else {
        return write_response(stream, 304, &headers, b"", req.close);
    };
    let body = fdv2::to_poll_body(&events);
    headers.push(("Content-Type", "application/json"));
    headers.push(("Vary", "Accept-Encoding"));
    if req.accepts_gzip() {
        headers.push(("Content-Encoding", "gzip"));
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(body.as_bytes())?;
        write_response(stream, 200, &headers, &enc.finish()?, req.close)
    } else {
        write_response(stream, 200, &headers, body.as_bytes(), req.close)
    }
}

/// What a new stream sends first, and whether it then stays open.
struct Opening {
    text: String,
    /// Registered for later changes; `false`: close after `text` (FDv2 `goodbye`).
    stays_open: bool,
}

/// Register the stream and render its first events under one lock, so that no change
/// falls between them and the first change sent.
fn open_stream(
    shared: &Shared,
    id: u64,
    req: &Request,
    endpoint: Endpoint,
    tx: Sender<StreamMsg>,
) -> Opening {
    let mut inner = shared.lock();
    if endpoint != Endpoint::Fdv2Stream {
        inner.streams.push(StreamSub {
            id,
            fdv2: false,
            tx,
        });
        let body = inner.data.rendered();
        return Opening {
            text: sse_event("put", &format!("{{\"path\":\"/\",\"data\":{}}}", body.body)),
            stays_open: true,
        };
    }
    let basis = req.query("basis");
    let objects = inner.data.fdv2_objects();
    let error =
        basis.as_deref() != Some(objects.state.as_str()) && inner.faults.take_payload_error();
    let mut events = fdv2::initial_payload(&objects, basis.as_deref(), error);
    let goodbye = inner.faults.take_goodbye();
    if goodbye {
        events.push(fdv2::goodbye("injected fault: goodbye"));
    } else {
        inner.streams.push(StreamSub { id, fdv2: true, tx });
    }
    Opening {
        text: fdv2::to_sse(&events),
        stays_open: !goodbye,
    }
}

fn serve_stream(
    shared: &Arc<Shared>,
    id: u64,
    req: &Request,
    endpoint: Endpoint,
    fallback: bool,
    stream: &mut TcpStream,
) -> io::Result<()> {
    let (tx, rx) = mpsc::channel();
    let opening = open_stream(shared, id, req, endpoint, tx);
    let heartbeat: Arc<str> = if endpoint == Endpoint::Fdv2Stream {
        fdv2::to_sse(&[fdv2::heartbeat()]).into()
    } else {
        ":\n".into()
    };
    let result = (|| {
        let mut headers: Vec<(&str, &str)> = Vec::new();
        if let Some(env) = &shared.env_id {
            headers.push(("X-LD-EnvID", env));
        }
        if fallback {
            headers.push(FALLBACK_HEADER);
        }
        // Each write is one chunk (HTTP/1.0 clients get the bare events): the head and
        // the first payload go out together.
        let chunked = !req.http10;
        let end = if chunked { http::LAST_CHUNK } else { b"" };
        let mut out = http::stream_head(chunked, &headers);
        http::push_chunk(&mut out, opening.text.as_bytes(), chunked);
        if !opening.stays_open {
            out.extend_from_slice(end);
        }
        stream.write_all(&out)?;
        stream.flush()?;
        if !opening.stays_open {
            return Ok(());
        }
        let mut next_heartbeat = Instant::now() + shared.heartbeat;
        loop {
            let wait = next_heartbeat.saturating_duration_since(Instant::now());
            let text = match rx.recv_timeout(wait) {
                Ok(StreamMsg::Event(e)) => e,
                Ok(StreamMsg::Close) | Err(RecvTimeoutError::Disconnected) => {
                    // End the body cleanly; the connection closes after it.
                    stream.write_all(end)?;
                    return stream.flush();
                }
                Err(RecvTimeoutError::Timeout) => {
                    next_heartbeat = Instant::now() + shared.heartbeat;
                    heartbeat.clone()
                }
            };
            out.clear();
            http::push_chunk(&mut out, text.as_bytes(), chunked);
            stream.write_all(&out)?;
            stream.flush()?;
        }
    })();
    shared.lock().streams.retain(|s| s.id != id);
    result
}
