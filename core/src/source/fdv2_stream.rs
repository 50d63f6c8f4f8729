//! The FDv2 streaming synchronizer: `GET <stream>/sdk/stream[?filter=…][&basis=…]`,
//! the FDv2 protocol events, the `X-LD-FD-Fallback` latch (PROTOCOL.md B §5.4, A.3).

use std::collections::VecDeque;
use std::time::Instant;

use super::SourceOutput;
use super::event_stream::{EventStream, EventStreamConfig, StreamOutput};
use crate::endpoint::Url;
use crate::fdv2::{self, Action, Protocol};
use crate::http1::ResponseHead;
use crate::io::{CloseCause, ConnId};
use crate::sse;
use crate::status::{Cause, ErrorInfo, State};
use crate::store::{ChangeSet, Selector};

/// The FDv2 streaming data source.
///
/// One [`Protocol`] lives across reconnects (PROTOCOL.md B §5.4): a reconnect does not
/// reset it, a new `server-intent` does. Every connection attempt carries the `basis` of
/// the selector last given to [`Fdv2Stream::set_basis`].
///
/// Outputs: `Apply` then `Status(Valid)` for each completed payload; `Status(Interrupted)`
/// for each failure that will be retried (`INVALID_DATA` for bad event data);
/// `Status(Off)` when the server refuses for good (an unrecoverable status under the
/// `Stop` policy, or 204); [`SourceOutput::FallbackToFdv1`] once the server directed
/// FDv1 fallback, after which the source stops.
#[derive(Debug)]
pub struct Fdv2Stream {
    stream: EventStream,
    base: Url,
    protocol: Protocol,
    /// `X-LD-FD-Fallback: true` arrived on a successful response: stop after the next
    /// completed payload, or at the next failure.
    latched: bool,
    out: VecDeque<SourceOutput>,
}

impl Fdv2Stream {
    /// A source for the stream described by `config`, whose URL is the stream endpoint
    /// with any `filter` (the `basis` is added per attempt).
    pub fn new(config: EventStreamConfig, seed: u64, first_conn_id: u64) -> Self {
        Self {
            base: config.url.clone(),
            stream: EventStream::new(config, seed, first_conn_id),
            protocol: Protocol::new(),
            latched: false,
            out: VecDeque::new(),
        }
    }

    /// The underlying SSE client.
    pub fn stream(&self) -> &EventStream {
        &self.stream
    }

    /// The selector the store holds: a defined one is sent as `basis=<state>` from the
    /// next connection attempt on (PROTOCOL.md B §5.4, E 30).
    pub fn set_basis(&mut self, selector: &Selector) {
        let url = if selector.is_defined() {
            self.base.with_path("", &[("basis", &selector.state)])
        } else {
            self.base.clone()
        };
        self.stream.set_url(url);
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

    /// When to call [`Fdv2Stream::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.stream.poll_timeout()
    }

    fn pump(&mut self, now: Instant) {
        while let Some(o) = self.stream.poll_output() {
            match o {
                StreamOutput::Action(a) => self.out.push_back(SourceOutput::Action(a)),
                StreamOutput::Opened(head) => {
                    self.environment_id(&head);
                    // The latch is one-way (PROTOCOL.md B §5.4).
                    self.latched |= fallback_directed(&head);
                }
                StreamOutput::Rejected(head) => {
                    self.environment_id(&head);
                    if fallback_directed(&head) {
                        self.latched = true;
                    }
                }
                StreamOutput::Item(sse::Item::Event(ev)) => self.on_event(now, &ev),
                StreamOutput::Item(_) => {}
                StreamOutput::Failed { error, retry_at } => {
                    let state = if retry_at.is_some() {
                        State::Interrupted
                    } else {
                        State::Off
                    };
                    if self.latched {
                        // Any failure after the latch ends FDv2, even a recoverable one.
                        self.fall_back(state, Some(error));
                        return;
                    }
                    self.out.push_back(SourceOutput::Status(state, Some(error)));
                }
            }
        }
    }

    fn environment_id(&mut self, head: &ResponseHead) {
        if let Some(env) = head.header("x-ld-envid").filter(|e| !e.is_empty()) {
            self.out
                .push_back(SourceOutput::EnvironmentId(env.to_owned()));
        }
    }

    fn on_event(&mut self, now: Instant, ev: &sse::Event) {
        if !self.stream.is_running() {
            return;
        }
        let handled = fdv2::parse_event(&ev.event_type, &ev.data)
            .and_then(|event| self.protocol.handle_event(event));
        match handled {
            Ok(Action::Apply(change_set)) => self.apply(change_set),
            Ok(Action::Goodbye { reason }) => {
                // PROTOCOL.md A.3: close, drop the uncommitted changes, reconnect.
                tracing::debug!(%reason, "fdv2: goodbye");
                self.protocol.reset();
                self.stream.reconnect_later(now);
            }
            Ok(Action::ServerError { payload_id, reason }) => {
                tracing::debug!(%payload_id, %reason, "fdv2: the server abandoned a payload");
            }
            Ok(Action::Ignore) => {}
            Err(e) => {
                tracing::debug!(error = %e, "fdv2: dropping the stream");
                let error = ErrorInfo::new(now, e.kind(), Cause::Fdv2(e));
                if self.latched {
                    self.fall_back(State::Interrupted, Some(error));
                } else {
                    // `fail` reports through `Failed`, handled by the caller's loop.
                    self.stream.fail(now, error);
                }
            }
        }
    }

    fn apply(&mut self, change_set: ChangeSet) {
        self.out.push_back(SourceOutput::Apply(change_set));
        self.out.push_back(SourceOutput::Status(State::Valid, None));
        if self.latched {
            // The payload is applied first, then FDv2 ends (PROTOCOL.md B §5.4).
            self.stream.handle_stop();
            self.drain_actions();
            self.out.push_back(SourceOutput::FallbackToFdv1);
        }
    }

    /// Forward the close actions of a stop; drop anything else the stream had queued.
    fn drain_actions(&mut self) {
        while let Some(o) = self.stream.poll_output() {
            if let StreamOutput::Action(a) = o {
                self.out.push_back(SourceOutput::Action(a));
            }
        }
    }

    fn fall_back(&mut self, state: State, error: Option<ErrorInfo>) {
        self.stream.handle_stop();
        self.drain_actions();
        self.out.push_back(SourceOutput::FallbackToFdv1);
        self.out.push_back(SourceOutput::Status(state, error));
    }
}

/// `X-LD-FD-Fallback: true`, compared exactly (PROTOCOL.md B §5.4).
fn fallback_directed(head: &ResponseHead) -> bool {
    head.header("x-ld-fd-fallback") == Some("true")
}
