//! The `streamInits` of periodic diagnostic events: every attempt of the data source
//! to open a stream, how long it took and whether it failed, as LaunchDarkly's SDKs
//! report them.
//!
//! Seen from the driver's side, so the data system needs no part in it: a connection
//! whose request asks for `text/event-stream` is a stream attempt, started when the
//! connection is asked for; it succeeded if the first bytes back are a 2xx status line,
//! and failed on any other status or if the connection ended before answering.

use std::sync::Arc;
use std::time::Instant;

use flagsync_core::{ConnId, Persist};

use super::{Command, Recorder};
use crate::driver::{Machine, Sink};

/// A [`Sink`] that reports stream attempts to the events and passes everything on to
/// `inner`.
#[derive(Debug)]
pub(crate) struct StreamInits<S> {
    inner: S,
    recorder: Arc<Recorder>,
    /// The attempt in progress: its connection, when it started (clock and Unix ms).
    attempt: Option<(ConnId, Instant, u64)>,
}

impl<S> StreamInits<S> {
    pub(crate) fn new(inner: S, recorder: Arc<Recorder>) -> Self {
        Self {
            inner,
            recorder,
            attempt: None,
        }
    }

    fn end(&mut self, conn: ConnId, failed: bool) {
        if let Some((c, started, at)) = self.attempt
            && c == conn
        {
            self.attempt = None;
            let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.recorder.command(Command::StreamInit {
                at,
                duration_ms,
                failed,
            });
        }
    }
}

/// Whether `request` asks for an event stream.
fn is_stream_request(request: &[u8]) -> bool {
    let head = request
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(request, |end| &request[..end]);
    head.split(|&b| b == b'\n').any(|line| {
        let line = String::from_utf8_lossy(line);
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("accept") && value.contains("text/event-stream")
        })
    })
}

/// The status code of a response that starts with `bytes`, if they hold its status line.
fn status_of(bytes: &[u8]) -> Option<u16> {
    let line = bytes.split(|&b| b == b'\r' || b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split(' ');
    parts.next().filter(|v| v.starts_with("HTTP/"))?;
    parts.next()?.parse().ok()
}

impl<M: Machine, S: Sink<M>> Sink<M> for StreamInits<S> {
    fn publish(&mut self, machine: &M, event: M::Event) {
        self.inner.publish(machine, event);
    }

    fn persist(&mut self, request: Persist) {
        self.inner.persist(request);
    }

    fn received(&mut self, bytes: usize) {
        self.inner.received(bytes);
    }

    fn connecting(&mut self, conn: ConnId, request: &[u8]) {
        if is_stream_request(request) {
            self.attempt = Some((conn, Instant::now(), super::clock::unix_ms()));
        }
        self.inner.connecting(conn, request);
    }

    fn data(&mut self, conn: ConnId, bytes: &[u8]) {
        if self.attempt.is_some_and(|(c, ..)| c == conn) {
            let failed = !status_of(bytes).is_some_and(|s| (200..300).contains(&s));
            self.end(conn, failed);
        }
        self.inner.data(conn, bytes);
    }

    fn closed(&mut self, conn: ConnId) {
        self.end(conn, true);
        self.inner.closed(conn);
    }

    fn drained(&mut self, machine: &M) {
        self.inner.drained(machine);
    }

    fn finish(&mut self, machine: &M) {
        self.inner.finish(machine);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::Msg;
    use crate::events::EventsMachine;

    struct Null;

    impl<M: Machine> Sink<M> for Null {
        fn publish(&mut self, _machine: &M, _event: M::Event) {}
    }

    #[test]
    fn each_stream_attempt_is_reported_once_with_its_outcome() {
        let (tx, rx) = async_channel::bounded(16);
        let mut sink = StreamInits::new(Null, Arc::new(Recorder::new(tx, 16, 10)));
        let stream = b"GET /all HTTP/1.1\r\nAccept: text/event-stream\r\n\r\n";
        let poll = b"GET /sdk/latest-all HTTP/1.1\r\n\r\n";
        let s: &mut dyn Sink<EventsMachine> = &mut sink;
        s.connecting(ConnId(1), stream);
        s.data(ConnId(1), b"HTTP/1.1 200 OK\r\n");
        s.data(ConnId(1), b"more bytes");
        s.closed(ConnId(1));
        s.connecting(ConnId(2), stream);
        s.data(ConnId(2), b"HTTP/1.1 503 Unavailable\r\n");
        s.connecting(ConnId(3), stream);
        s.closed(ConnId(3));
        s.connecting(ConnId(4), poll);
        s.closed(ConnId(4));
        let outcomes: Vec<bool> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|m| match m {
                Msg::Command(Command::StreamInit { failed, at, .. }) => {
                    assert!(at > 1_600_000_000_000);
                    failed
                }
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(outcomes, [false, true, true]);
    }

    #[test]
    fn stream_requests_and_status_lines() {
        assert!(is_stream_request(
            b"GET /all HTTP/1.1\r\nHost: h\r\nAccept: text/event-stream\r\n\r\n"
        ));
        assert!(!is_stream_request(
            b"GET /sdk/latest-all HTTP/1.1\r\nHost: h\r\n\r\n"
        ));
        assert!(!is_stream_request(
            b"POST /bulk HTTP/1.1\r\nContent-Type: application/json\r\n\r\n{\"Accept\":\"text/event-stream\"}"
        ));
        assert_eq!(status_of(b"HTTP/1.1 200 OK\r\nContent-Type: x"), Some(200));
        assert_eq!(status_of(b"HTTP/1.1 401 Unauthorized\r\n"), Some(401));
        assert_eq!(status_of(b"garbage"), None);
    }
}
