//! [`ServerHandle`]: the running server, its shared state and what a test changes
//! through it (data, faults, events, shutdown).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::data::{FlagData, ItemKind};
use crate::env::{self, EnvironmentHandle};
use crate::error::ServerError;
use crate::events::EventSubscription;
use crate::fault::Endpoint;
use crate::health::{ConnectionState, UpstreamError};
use crate::recorded::RecordedRequest;
use crate::state::Shared;

/// A running server. Dropping it shuts it down.
#[derive(Debug)]
pub struct ServerHandle {
    pub(crate) shared: Arc<Shared>,
    pub(crate) requests: Mutex<Option<JoinHandle<()>>>,
}

impl ServerHandle {
    /// The first bound address (`127.0.0.1:PORT` unless other addresses were given
    /// with [`ServerBuilder::listen`](crate::ServerBuilder::listen)).
    pub fn addr(&self) -> SocketAddr {
        self.shared.addrs[0]
    }

    /// Every bound address, in the order given.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.shared.addrs
    }

    /// `http://ADDR` (`https://ADDR` with TLS) of the first bound address: use it as
    /// both the stream and the polling base URI. An unspecified address (`0.0.0.0`,
    /// `[::]`) is named as the loopback address of its family.
    pub fn url(&self) -> String {
        let mut addr = self.addr();
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let scheme = if self.shared.tls { "https" } else { "http" };
        format!("{scheme}://{addr}")
    }

    /// The most connections it serves at once (see
    /// [`ServerBuilder::max_connections`](crate::ServerBuilder::max_connections)).
    pub fn max_connections(&self) -> usize {
        self.shared.max_connections
    }

    /// Report the default environment's upstream connection for `GET /status` and
    /// `GET /metrics` (as [`EnvironmentHandle::report_upstream`] does for an added one).
    pub fn report_upstream(&self, state: ConnectionState, error: Option<UpstreamError>) {
        self.shared.lock().envs[0]
            .health
            .report(state, error, SystemTime::now());
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

    /// Replace all data (same shape as [`ServerBuilder::data`](crate::ServerBuilder::data)) and send the streams
    /// what changed: each item added or changed as a `patch` and each item gone as a
    /// `delete` (FDv2: one `xfer-changes` payload); past 64 changes, every FDv1 stream a
    /// new `put` and every FDv2 stream a new `xfer-full` payload instead. Nothing
    /// changed: nothing is sent, and the payload version stays.
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
    pub fn replace_all(&self, data: impl Into<FlagData>) -> Result<(), ServerError> {
        env::replace_all(&self.shared, 0, data.into())
    }

    /// An environment added with
    /// [`ServerBuilder::environment`](crate::ServerBuilder::environment), by its name.
    pub fn environment(&self, name: &str) -> Option<EnvironmentHandle> {
        let index = self
            .shared
            .lock()
            .envs
            .iter()
            .skip(1)
            .position(|e| e.name == name)?
            + 1;
        Some(EnvironmentHandle {
            shared: self.shared.clone(),
            index,
        })
    }

    /// A flag as currently served, if it exists.
    pub fn flag(&self, key: &str) -> Option<Value> {
        let raw = self.shared.lock().envs[0]
            .data
            .get(ItemKind::Flag, key)
            .cloned()?;
        serde_json::from_slice(&raw).ok()
    }

    /// How many flags and segments are served now.
    pub fn item_counts(&self) -> (usize, usize) {
        let inner = self.shared.lock();
        let data = &inner.envs[0].data;
        (data.count(ItemKind::Flag), data.count(ItemKind::Segment))
    }

    /// The keys of the flags currently served, sorted.
    pub fn flag_keys(&self) -> Vec<String> {
        self.shared.lock().envs[0].data.keys(ItemKind::Flag)
    }

    /// The current data as `{"flags":{…},"segments":{…}}`, exactly as polling serves it.
    pub fn data_json(&self) -> String {
        self.shared.lock().envs[0].data.rendered().text()
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
        self.shared.lock().envs[0].data.state()
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
        self.shared.lock().envs[0].data.version()
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
        let done = self.shared.hub.close_all();
        let _ = done.recv_timeout(Duration::from_secs(5));
    }

    /// Fault: while `true`, accept connections and read requests but never answer them
    /// (clients see a timeout). Setting it back to `false` closes the held connections.
    pub fn hang(&self, hang: bool) {
        self.shared.lock().faults.set_hang(hang);
        self.shared.wake_requests();
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
        self.shared.wake_requests();
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
        self.shared.hub.open()
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

    /// Stop: close the listeners and every connection, and join the threads.
    /// Idempotent; also done on drop.
    pub fn shutdown(&self) {
        let Some(requests) = self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        else {
            return;
        };
        self.shared.shutting_down.store(true, Ordering::SeqCst);
        self.shared.hub.shutdown();
        crate::ofrep::flusher::shutdown(&self.shared);
        self.shared.lock().event_subs.close();
        self.shared.wake_requests();
        let _ = requests.join();
    }

    pub(crate) fn upsert(
        &self,
        kind: ItemKind,
        key: &str,
        item: Value,
    ) -> Result<u64, ServerError> {
        env::upsert(&self.shared, 0, kind, key, env::NewItem::Value(item))
    }

    pub(crate) fn delete(&self, kind: ItemKind, key: &str, version: Option<u64>) -> u64 {
        env::delete(&self.shared, 0, kind, key, version)
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}
