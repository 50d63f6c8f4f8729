//! The events endpoints, as LaunchDarkly's events service answers them: `POST …/bulk`
//! (a JSON array of analytics events) and `POST …/diagnostic` (one diagnostic event),
//! and the bounded subscriptions through which received payloads are observed.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::http::Request;

/// Which events endpoint a payload was posted to.
///
/// ```
/// use flagsync_server::PayloadKind;
///
/// assert_eq!(PayloadKind::Bulk.path(), "/bulk");
/// assert_eq!(PayloadKind::Diagnostic.path(), "/diagnostic");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PayloadKind {
    /// Analytics events (`POST …/bulk`): the body is a JSON array of events
    /// (`feature`, `summary`, `index`, `identify`, `custom`, `migration_op`, …).
    Bulk,
    /// A diagnostic event (`POST …/diagnostic`): the body is one object whose `kind` is
    /// `diagnostic-init` or `diagnostic`.
    Diagnostic,
}

impl PayloadKind {
    /// The endpoint's path without a base path: `/bulk` or `/diagnostic`.
    pub fn path(self) -> &'static str {
        match self {
            Self::Bulk => "/bulk",
            Self::Diagnostic => "/diagnostic",
        }
    }
}

/// One accepted `POST` to an events endpoint: the headers an events service reads and
/// the parsed body. The `Authorization` header is never kept.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct EventPayload {
    /// The endpoint posted to.
    pub kind: PayloadKind,
    /// The request path as sent, base path included (e.g. `/relay/bulk`), without the
    /// query.
    pub path: String,
    /// `X-LaunchDarkly-Event-Schema` (server-side SDKs send `4`).
    pub schema: Option<String>,
    /// `X-LaunchDarkly-Payload-ID`: the same on a retried bulk payload.
    pub payload_id: Option<String>,
    /// `User-Agent`, e.g. `RustServerClient/2.4.0`.
    pub user_agent: Option<String>,
    /// `X-LaunchDarkly-Wrapper`: `name[/version]` of a wrapper library, if any.
    pub wrapper: Option<String>,
    /// `X-LaunchDarkly-Tags`: the SDK's application tags (`application-id/…`).
    pub tags: Option<String>,
    /// `X-LaunchDarkly-Instance-Id`: the SDK instance's id, if it sends one.
    pub instance_id: Option<String>,
    /// Whether the body came `Content-Encoding: gzip`.
    pub gzip: bool,
    /// When the server accepted it (wall-clock time, as in the `Date` it answered with).
    pub received: SystemTime,
    /// The decoded body: a JSON array for [`PayloadKind::Bulk`], an object for
    /// [`PayloadKind::Diagnostic`].
    pub body: Value,
    /// The body's bytes as the SDK sent them, once gunzipped (what a relay forwards).
    pub raw: Arc<[u8]>,
    /// The [`Environment`](crate::Environment) it was posted to, by name; `None` for
    /// the default environment.
    pub environment: Option<String>,
    /// Which kind of SDK posted it, and so where a relay forwards it.
    pub origin: EventOrigin,
}

/// Which kind of SDK posted an [`EventPayload`]: a relay forwards each to the matching
/// endpoint of its events service.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventOrigin {
    /// A server-side SDK (`POST …/bulk`, `…/diagnostic`, with the SDK key).
    #[default]
    ServerSide,
    /// A client-side (JavaScript) SDK: `POST /events/bulk/{envId}`,
    /// `/events/diagnostic/{envId}` or `GET /a/{envId}.gif`.
    ClientSide {
        /// The client-side ID (environment ID) in the path.
        env_id: String,
    },
    /// A mobile SDK: `POST /mobile/events/bulk` (or `/mobile`, `/mobile/events`) and
    /// `/mobile/events/diagnostic`, with the mobile key.
    Mobile,
}

impl EventPayload {
    /// The events it carries: a bulk payload's elements, or the one diagnostic event.
    pub fn events(&self) -> &[Value] {
        match &self.body {
            Value::Array(events) => events,
            other => std::slice::from_ref(other),
        }
    }
}

/// Why an events request was refused: the status and a short JSON-safe message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    pub(super) status: u16,
    pub(super) message: &'static str,
}

impl Refusal {
    fn new(status: u16, message: &'static str) -> Self {
        Self { status, message }
    }
}

/// Decode and check the body of a `POST` to an events endpoint: gzip if the request
/// says so (the decoded body too must fit in `max_body`), then JSON of the shape the
/// endpoint takes. The request's SDK key has already been checked.
pub(super) fn accept(
    kind: PayloadKind,
    req: &Request,
    max_body: usize,
    received: SystemTime,
) -> Result<EventPayload, Refusal> {
    let gzip = match req.header("content-encoding").map(str::trim) {
        None | Some("") => false,
        Some(c) if c.eq_ignore_ascii_case("identity") => false,
        Some(c) if c.eq_ignore_ascii_case("gzip") || c.eq_ignore_ascii_case("x-gzip") => true,
        Some(_) => {
            return Err(Refusal::new(
                415,
                "unsupported Content-Encoding (gzip and identity are accepted)",
            ));
        }
    };
    let decoded;
    let bytes = if gzip {
        decoded = gunzip(&req.body, max_body)?;
        decoded.as_slice()
    } else {
        req.body.as_slice()
    };
    let body: Value = serde_json::from_slice(bytes)
        .map_err(|_| Refusal::new(400, "the body is not valid JSON"))?;
    match (kind, &body) {
        (PayloadKind::Bulk, Value::Array(_)) | (PayloadKind::Diagnostic, Value::Object(_)) => {}
        (PayloadKind::Bulk, _) => {
            return Err(Refusal::new(
                400,
                "a /bulk body must be a JSON array of events",
            ));
        }
        (PayloadKind::Diagnostic, _) => {
            return Err(Refusal::new(
                400,
                "a /diagnostic body must be one JSON event object",
            ));
        }
    }
    let header = |name: &str| req.header(name).map(str::to_owned);
    Ok(EventPayload {
        kind,
        path: req.path().to_owned(),
        schema: header("x-launchdarkly-event-schema"),
        payload_id: header("x-launchdarkly-payload-id"),
        user_agent: header("user-agent"),
        wrapper: header("x-launchdarkly-wrapper"),
        tags: header("x-launchdarkly-tags"),
        instance_id: header("x-launchdarkly-instance-id"),
        gzip,
        received,
        body,
        raw: Arc::from(bytes),
        environment: None,
        origin: EventOrigin::ServerSide,
    })
}

/// Gunzip `body` (one or more members), refusing output longer than `max` bytes
/// without producing more than `max + 1` of it.
fn gunzip(body: &[u8], max: usize) -> Result<Vec<u8>, Refusal> {
    let mut out = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    flate2::read::MultiGzDecoder::new(body)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|_| Refusal::new(400, "the body is not valid gzip"))?;
    if out.len() > max {
        return Err(Refusal::new(413, "the decompressed body is too large"));
    }
    Ok(out)
}

/// The open event subscriptions of a server.
#[derive(Debug, Default)]
pub(super) struct Subscribers {
    subs: Vec<Subscriber>,
    /// Payloads dropped by any subscription since the start.
    pub(super) dropped_total: u64,
}

#[derive(Debug)]
struct Subscriber {
    tx: SyncSender<EventPayload>,
    dropped: Arc<AtomicU64>,
}

impl Subscribers {
    /// Add a subscription holding at most `capacity` (at least 1) unreceived payloads.
    pub(super) fn subscribe(&mut self, capacity: usize) -> EventSubscription {
        let (tx, rx) = mpsc::sync_channel(capacity.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        self.subs.push(Subscriber {
            tx,
            dropped: dropped.clone(),
        });
        EventSubscription { rx, dropped }
    }

    /// Offer `payload` to every subscription without waiting: a full one counts it as
    /// dropped, a dropped one is forgotten.
    pub(super) fn publish(&mut self, payload: &EventPayload) {
        let mut dropped = 0;
        self.subs.retain(|s| match s.tx.try_send(payload.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                s.dropped.fetch_add(1, Ordering::Relaxed);
                dropped += 1;
                true
            }
            Err(TrySendError::Disconnected(_)) => false,
        });
        self.dropped_total += dropped;
    }

    /// End every subscription: their receivers get the payloads already queued, then
    /// `None`.
    pub(super) fn close(&mut self) {
        self.subs.clear();
    }
}

/// Receives the event payloads a server accepts, from when it was made (see
/// [`ServerHandle::subscribe_events`](super::ServerHandle::subscribe_events)).
///
/// It is bounded: while it holds `capacity` unreceived payloads, the server drops new
/// ones for it and counts them ([`dropped`](Self::dropped)) rather than wait. Receiving
/// blocks the calling thread; from async code, receive on a blocking thread (e.g.
/// `tokio::task::spawn_blocking`) or poll [`try_recv`](Self::try_recv). After the
/// server shuts down, the payloads still queued are received, then `None`.
#[derive(Debug)]
pub struct EventSubscription {
    rx: mpsc::Receiver<EventPayload>,
    dropped: Arc<AtomicU64>,
}

impl EventSubscription {
    /// Wait for the next payload; `None` once the server has shut down and every queued
    /// payload has been received.
    pub fn recv(&self) -> Option<EventPayload> {
        self.rx.recv().ok()
    }

    /// Wait at most `timeout` for the next payload. `Err(Timeout)`: none came in time;
    /// `Err(Disconnected)`: the server has shut down and none is left.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<EventPayload, RecvTimeoutError> {
        self.rx.recv_timeout(timeout)
    }

    /// The next payload if one is queued, without waiting.
    pub fn try_recv(&self) -> Option<EventPayload> {
        self.rx.try_recv().ok()
    }

    /// How many payloads were dropped for this subscription because it was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn post(path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Request {
        Request {
            method: "POST".into(),
            target: path.into(),
            headers: headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
            body,
            ..Request::default()
        }
    }

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(bytes).unwrap();
        enc.finish().unwrap()
    }

    fn payload() -> EventPayload {
        let req = post("/bulk", &[], b"[]".to_vec());
        accept(PayloadKind::Bulk, &req, 10, SystemTime::UNIX_EPOCH).unwrap()
    }

    #[test]
    fn reads_the_headers_that_matter_and_never_the_key() {
        let req = post(
            "/relay/bulk?x=1",
            &[
                ("Authorization", "sdk-secret"),
                ("X-LaunchDarkly-Event-Schema", "4"),
                ("X-LaunchDarkly-Payload-ID", "p-1"),
                ("User-Agent", "RustServerClient/2.4.0"),
                ("X-LaunchDarkly-Wrapper", "w/1"),
                ("X-LaunchDarkly-Tags", "application-id/app"),
                ("X-LaunchDarkly-Instance-Id", "i-1"),
            ],
            br#"[{"kind":"identify"},{"kind":"custom"}]"#.to_vec(),
        );
        let p = accept(PayloadKind::Bulk, &req, 1000, SystemTime::UNIX_EPOCH).unwrap();
        assert_eq!(p.path, "/relay/bulk");
        assert_eq!(p.schema.as_deref(), Some("4"));
        assert_eq!(p.payload_id.as_deref(), Some("p-1"));
        assert_eq!(p.user_agent.as_deref(), Some("RustServerClient/2.4.0"));
        assert_eq!(p.wrapper.as_deref(), Some("w/1"));
        assert_eq!(p.tags.as_deref(), Some("application-id/app"));
        assert_eq!(p.instance_id.as_deref(), Some("i-1"));
        assert!(!p.gzip);
        assert_eq!(p.events().len(), 2);
        assert!(!format!("{p:?}").contains("sdk-secret"));
    }

    #[test]
    fn gzip_bodies_are_decoded_within_the_limit() {
        let json = br#"{"kind":"diagnostic-init","id":{}}"#;
        let req = post("/diagnostic", &[("Content-Encoding", "gzip")], gzip(json));
        let p = accept(PayloadKind::Diagnostic, &req, json.len(), SystemTime::now()).unwrap();
        assert!(p.gzip);
        assert_eq!(
            p.events(),
            [serde_json::json!({"kind": "diagnostic-init", "id": {}})]
        );
        // A small body that inflates past the limit.
        let bomb = post(
            "/bulk",
            &[("Content-Encoding", "gzip")],
            gzip(&[b' '; 100_000]),
        );
        let err = accept(PayloadKind::Bulk, &bomb, 1000, SystemTime::now()).unwrap_err();
        assert_eq!(err.status, 413);
        let bad = post("/bulk", &[("Content-Encoding", "gzip")], b"[]".to_vec());
        assert_eq!(
            accept(PayloadKind::Bulk, &bad, 1000, SystemTime::now())
                .unwrap_err()
                .status,
            400
        );
        let br = post("/bulk", &[("Content-Encoding", "br")], b"[]".to_vec());
        assert_eq!(
            accept(PayloadKind::Bulk, &br, 1000, SystemTime::now())
                .unwrap_err()
                .status,
            415
        );
    }

    #[test]
    fn malformed_or_misshapen_json_is_400() {
        for (kind, body) in [
            (PayloadKind::Bulk, &b"[{"[..]),
            (PayloadKind::Bulk, b""),
            (PayloadKind::Bulk, br#"{"kind":"custom"}"#),
            (PayloadKind::Diagnostic, b"[]"),
        ] {
            let req = post(kind.path(), &[], body.to_vec());
            let err = accept(kind, &req, 1000, SystemTime::now()).unwrap_err();
            assert_eq!(err.status, 400, "{kind:?} {body:?}");
        }
    }

    #[test]
    fn a_full_subscription_drops_and_counts_and_a_gone_one_is_forgotten() {
        let mut subs = Subscribers::default();
        let a = subs.subscribe(2);
        let b = subs.subscribe(0);
        for _ in 0..3 {
            subs.publish(&payload());
        }
        assert_eq!((a.dropped(), b.dropped()), (1, 2));
        assert!(a.try_recv().is_some() && a.try_recv().is_some() && a.try_recv().is_none());
        drop(b);
        subs.publish(&payload());
        assert_eq!(subs.subs.len(), 1);
        subs.close();
        assert!(a.recv().is_some());
        assert_eq!(a.recv(), None);
        assert_eq!(
            a.recv_timeout(Duration::from_millis(1)),
            Err(RecvTimeoutError::Disconnected)
        );
    }
}
