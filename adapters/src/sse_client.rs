//! A general server-sent-events client (`EventSource`-like) on the same driver and
//! connection tasks as [`crate::Client`], around [`flagsync_core::source::EventStream`].
//!
//! GET, POST or REPORT with custom headers and a body; `Last-Event-ID` on reconnect;
//! reconnects with backoff (a server `retry:` sets the base delay, at least 100 ms and
//! at most the maximum delay, and never resets the failure streak); a read timeout and
//! a deadline for the response head; redirects (at most 3, on the same origin only:
//! the request's headers never go to another scheme, host or port); HTTP 204 stops the
//! stream for good.
//!
//! ```no_run
//! # async fn demo() -> Result<(), flagsync::Error> {
//! use flagsync::sse_client::{EventSource, SseEvent};
//!
//! let mut source = EventSource::builder("http://127.0.0.1:8080/stream")
//!     .header("X-Custom", "1")
//!     .start()?;
//! while let Some(event) = source.next().await {
//!     if let SseEvent::Event { event_type, data, .. } = event {
//!         println!("{event_type}: {data}");
//!     }
//! }
//! # Ok(())
//! # }
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use flagsync_core::endpoint::Url;
use flagsync_core::source::{EventStream, EventStreamConfig, StreamOutput};
use flagsync_core::sse;

pub use flagsync_core::http1::Method;
pub use flagsync_core::source::UnrecoverablePolicy;

use crate::Error;
use crate::driver::{self, Finished, Msg, Sink, StreamCommand};
use crate::publish::Subscription;
use crate::runtime::{self, Runtime};
use crate::transport::{Transport, transport_methods};

/// What an [`EventSource`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SseEvent {
    /// A connection was accepted: its status and response headers.
    Open {
        /// The HTTP status.
        status: u16,
        /// The response headers, in order.
        headers: Vec<(String, String)>,
    },
    /// An event.
    Event {
        /// The event type (`message` by default).
        event_type: String,
        /// The data lines joined with LF.
        data: String,
        /// The last event id (`""` if none).
        id: String,
    },
    /// A comment line, without its colon.
    Comment(String),
    /// The connection failed or ended.
    Error {
        /// A description.
        message: String,
        /// The HTTP status, or 0.
        status_code: u16,
        /// When the next attempt starts; `None` if the stream stopped for good.
        retry_in: Option<Duration>,
    },
}

/// Settings for an [`EventSource`]; made by [`EventSource::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct EventSourceBuilder {
    url: String,
    method: Method,
    headers: Vec<(String, String)>,
    body: Option<Bytes>,
    last_event_id: Option<String>,
    read_timeout: Option<Duration>,
    head_timeout: Option<Duration>,
    connect_timeout: Option<Duration>,
    initial_retry_delay: Option<Duration>,
    max_retry_delay: Option<Duration>,
    unrecoverable: UnrecoverablePolicy,
    transport: Transport,
}

impl EventSourceBuilder {
    /// The request method (default GET).
    pub fn method(mut self, method: Method) -> Self {
        self.method = method;
        self
    }

    /// Add a request header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// A request body, sent with every attempt.
    pub fn body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// The `Last-Event-ID` of the first attempt.
    pub fn last_event_id(mut self, id: impl Into<String>) -> Self {
        self.last_event_id = Some(id.into());
        self
    }

    /// Reconnect when nothing arrives for this long (default 300 s).
    pub fn read_timeout(mut self, timeout: Duration) -> Self {
        self.read_timeout = Some(timeout);
        self
    }

    /// The response head (redirects included) must arrive within this time of each
    /// attempt's start, however steadily its bytes trickle in (default 30 s).
    pub fn head_timeout(mut self, timeout: Duration) -> Self {
        self.head_timeout = Some(timeout);
        self
    }

    /// Connect timeout (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// First reconnect delay (default 1 s).
    pub fn initial_retry_delay(mut self, delay: Duration) -> Self {
        self.initial_retry_delay = Some(delay);
        self
    }

    /// Longest reconnect delay (default 30 s).
    pub fn max_retry_delay(mut self, delay: Duration) -> Self {
        self.max_retry_delay = Some(delay);
        self
    }

    /// What a 401, 403 or other unrecoverable status does (default: retry slowly).
    pub fn unrecoverable(mut self, policy: UnrecoverablePolicy) -> Self {
        self.unrecoverable = policy;
        self
    }

    transport_methods!();

    /// Check the settings and connect in the background.
    pub fn start(self) -> Result<EventSource, Error> {
        let url = Url::parse(&self.url)
            .map_err(|e| Error::Config(flagsync_core::ConfigError::StreamUri(e)))?;
        let conn_config = Arc::new(self.transport.conn_config()?);
        let rt = self.transport.runtime()?;
        let mut config = EventStreamConfig::new(url);
        config.method = self.method;
        config.headers = self.headers;
        config.body = self.body;
        config.last_event_id = self.last_event_id;
        config.unrecoverable = self.unrecoverable;
        if let Some(t) = self.read_timeout {
            config.read_timeout = t;
        }
        if let Some(t) = self.connect_timeout {
            config.connect_timeout = t;
        }
        if let Some(t) = self.head_timeout {
            config.head_timeout = t;
        }
        if let Some(d) = self.initial_retry_delay {
            config.backoff.initial = d;
        }
        if let Some(d) = self.max_retry_delay {
            config.backoff.max = d;
        }
        let machine = EventStream::new(config, fastrand::u64(..), 0);
        let (tx, rx) = async_channel::bounded(64);
        let (events_tx, events_rx) = async_channel::unbounded();
        let finished = Finished::new();
        let _ = tx.try_send(Msg::Command(StreamCommand::Start));
        driver::spawn(
            rt.clone(),
            conn_config,
            machine,
            EventSink {
                tx: events_tx,
                rt: rt.clone(),
            },
            tx.clone(),
            rx,
            Arc::new(driver::TaskGuard(finished.clone())),
        );
        Ok(EventSource {
            events: Subscription::new(events_rx),
            control: EventSourceControl(Arc::new(Control { tx, finished, rt })),
        })
    }
}

/// A running SSE client. Read it as a [`futures_core::Stream`] of [`SseEvent`]s (or with
/// [`EventSource::next`]); control it through [`EventSource::control`].
#[derive(Debug)]
pub struct EventSource {
    events: Subscription<SseEvent>,
    control: EventSourceControl,
}

/// Restarts or closes an [`EventSource`]; cheap to clone.
#[derive(Debug, Clone)]
pub struct EventSourceControl(Arc<Control>);

#[derive(Debug)]
struct Control {
    tx: async_channel::Sender<Msg<StreamCommand>>,
    finished: Arc<Finished>,
    rt: Arc<dyn Runtime>,
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = self.tx.force_send(Msg::Shutdown);
    }
}

impl EventSource {
    /// Settings for a stream from `url`.
    pub fn builder(url: impl Into<String>) -> EventSourceBuilder {
        EventSourceBuilder {
            url: url.into(),
            method: Method::Get,
            headers: Vec::new(),
            body: None,
            last_event_id: None,
            read_timeout: None,
            head_timeout: None,
            connect_timeout: None,
            initial_retry_delay: None,
            max_retry_delay: None,
            unrecoverable: UnrecoverablePolicy::Retry,
            transport: Transport::default(),
        }
    }

    /// The next event; `None` once closed.
    pub async fn next(&mut self) -> Option<SseEvent> {
        self.events.recv().await
    }

    /// A handle to restart or close this stream from elsewhere.
    pub fn control(&self) -> EventSourceControl {
        self.control.clone()
    }

    /// Drop the connection and connect again at once.
    pub fn restart(&self) {
        self.control.restart();
    }

    /// Close the stream and wait (at most 5 s) until its socket is closed.
    pub async fn close(&self) {
        self.control.close().await;
    }
}

impl futures_core::Stream for EventSource {
    type Item = SseEvent;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<SseEvent>> {
        std::pin::Pin::new(&mut self.events).poll_next(cx)
    }
}

impl EventSourceControl {
    /// Drop the connection and connect again at once.
    pub fn restart(&self) {
        let _ = self.0.tx.force_send(Msg::Command(StreamCommand::Restart));
    }

    /// Close the stream and wait (at most 5 s) until its socket is closed. Idempotent.
    pub async fn close(&self) {
        let _ = self.0.tx.force_send(Msg::Shutdown);
        let deadline = self.0.rt.now() + Duration::from_secs(5);
        let _ = runtime::race(self.0.finished.wait(), self.0.rt.sleep_until(deadline)).await;
    }
}

struct EventSink {
    tx: async_channel::Sender<SseEvent>,
    rt: Arc<dyn Runtime>,
}

impl Sink<EventStream> for EventSink {
    fn publish(&mut self, _machine: &EventStream, event: StreamOutput) {
        let event = match event {
            StreamOutput::Opened(head) => SseEvent::Open {
                status: head.status,
                headers: head.headers,
            },
            StreamOutput::Item(sse::Item::Event(e)) => SseEvent::Event {
                data: e.data_str().to_owned(),
                event_type: e.event_type.into(),
                id: e.id.into(),
            },
            StreamOutput::Item(sse::Item::Comment(c)) => SseEvent::Comment(c),
            StreamOutput::Failed { error, retry_at } => {
                let now: Instant = self.rt.now();
                SseEvent::Error {
                    message: error.cause.to_string(),
                    status_code: error.status_code,
                    retry_in: retry_at.map(|at| at.saturating_duration_since(now)),
                }
            }
            _ => return,
        };
        let _ = self.tx.try_send(event);
    }

    fn finish(&mut self, _machine: &EventStream) {
        self.tx.close();
    }
}
