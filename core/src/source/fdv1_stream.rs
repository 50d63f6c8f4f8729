//! The FDv1 streaming source: `GET <stream>/all`, `put`/`patch`/`delete` events
//! (PROTOCOL.md B §1).

use std::collections::VecDeque;
use std::time::Instant;

use super::SourceOutput;
use super::event_stream::{EventStream, EventStreamConfig, StreamOutput};
use crate::fdv1::{self, Event};
use crate::io::{CloseCause, ConnId};
use crate::sse;
use crate::status::{Cause, ErrorInfo, State};
use crate::store::ChangeSet;

/// The FDv1 streaming data source.
#[derive(Debug)]
pub struct Fdv1Stream {
    stream: EventStream,
    out: VecDeque<SourceOutput>,
}

impl Fdv1Stream {
    /// A source reading the stream described by `config` (whose URL already ends in
    /// `/all` with any `filter`).
    pub fn new(config: EventStreamConfig, seed: u64, first_conn_id: u64) -> Self {
        Self {
            stream: EventStream::new(config, seed, first_conn_id),
            out: VecDeque::new(),
        }
    }

    /// The underlying SSE client.
    pub fn stream(&self) -> &EventStream {
        &self.stream
    }

    /// Connect.
    pub fn handle_start(&mut self, now: Instant) {
        self.stream.handle_start(now);
        self.pump(now);
    }

    /// Close and stop for good; reports OFF.
    pub fn handle_stop(&mut self, now: Instant) {
        self.stream.handle_stop();
        self.pump(now);
        self.out.push_back(SourceOutput::Status(State::Off, None));
    }

    /// The driver connected `conn`.
    pub fn handle_connected(&mut self, now: Instant, conn: ConnId) {
        self.stream.handle_connected(now, conn);
        self.pump(now);
    }

    /// Bytes arrived on `conn`.
    pub fn handle_data(&mut self, now: Instant, conn: ConnId, bytes: &[u8]) {
        self.stream.handle_data(now, conn, bytes);
        self.pump(now);
    }

    /// `conn` closed.
    pub fn handle_closed(&mut self, now: Instant, conn: ConnId, cause: CloseCause) {
        self.stream.handle_closed(now, conn, cause);
        self.pump(now);
    }

    /// Time passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.stream.handle_timeout(now);
        self.pump(now);
    }

    /// The next output.
    pub fn poll_output(&mut self) -> Option<SourceOutput> {
        self.out.pop_front()
    }

    /// When to call [`Fdv1Stream::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.stream.poll_timeout()
    }

    fn pump(&mut self, now: Instant) {
        while let Some(o) = self.stream.poll_output() {
            match o {
                StreamOutput::Action(a) => self.out.push_back(SourceOutput::Action(a)),
                StreamOutput::Opened(head) => {
                    // PROTOCOL.md B §1.11: only from successful responses.
                    if let Some(env) = head.header("x-ld-envid").filter(|e| !e.is_empty()) {
                        self.out
                            .push_back(SourceOutput::EnvironmentId(env.to_owned()));
                    }
                }
                StreamOutput::Item(sse::Item::Event(ev)) => self.on_event(now, &ev),
                StreamOutput::Item(_) | StreamOutput::Rejected(_) => {}
                StreamOutput::Failed { error, retry_at } => {
                    let state = if retry_at.is_some() {
                        State::Interrupted
                    } else {
                        State::Off
                    };
                    self.out.push_back(SourceOutput::Status(state, Some(error)));
                }
            }
        }
    }

    fn on_event(&mut self, now: Instant, ev: &sse::Event) {
        match fdv1::parse_event(&ev.event_type, &ev.data) {
            Ok(Event::Put(changes)) => {
                self.out
                    .push_back(SourceOutput::Apply(ChangeSet::fdv1_full(changes)));
                // Only a put marks the source VALID (PROTOCOL.md B §1.6).
                self.out.push_back(SourceOutput::Status(State::Valid, None));
            }
            Ok(Event::Patch(c) | Event::Delete(c)) => {
                self.out
                    .push_back(SourceOutput::Apply(ChangeSet::fdv1_upsert(c)));
            }
            Ok(Event::UnknownPath(path)) => {
                tracing::debug!(%path, "ignoring update for unknown path")
            }
            Ok(other) => tracing::debug!(event = ?other, "ignoring unknown event"),
            Err(e) => {
                tracing::debug!(error = %e, "dropping the stream");
                self.stream
                    .fail(now, ErrorInfo::new(now, e.kind(), Cause::Fdv1(e)));
            }
        }
    }
}
