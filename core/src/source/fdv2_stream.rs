//! The FDv2 stream protocol: `server-intent` … `payload-transferred` events of
//! `GET <stream>/sdk/stream`, the `basis`, and the `X-LD-FD-Fallback` latch
//! (PROTOCOL.md B §5.4, A.3).

use std::collections::VecDeque;
use std::time::Instant;

use super::SourceOutput;
use super::event_stream::{EventStream, StreamOutput};
use crate::endpoint::Url;
use crate::fdv2::{self, Action, PayloadLimits, Protocol};
use crate::http1::ResponseHead;
use crate::sse;
use crate::status::{Cause, ErrorInfo, State};
use crate::store::{ChangeSet, Selector};

/// Reads FDv2 events. The protocol machine lives across reconnects: a reconnect does not
/// reset it, a new `server-intent` does (PROTOCOL.md B §5.4).
#[derive(Debug)]
pub(super) struct Fdv2Events {
    base: Url,
    protocol: Protocol,
    /// `X-LD-FD-Fallback: true` arrived: stop after the next completed payload, or at
    /// the next failure.
    latched: bool,
}

impl Fdv2Events {
    pub(super) fn new(base: Url) -> Self {
        Self {
            base,
            protocol: Protocol::new(),
            latched: false,
        }
    }

    /// Bound the uncommitted payload; the machine is new (no intent yet).
    pub(super) fn set_payload_limits(&mut self, limits: PayloadLimits) {
        self.protocol = Protocol::with_limits(limits);
    }

    /// The stream URL for `selector`: a defined one is sent as `basis=<state>`.
    pub(super) fn url_for(&self, selector: &Selector) -> Url {
        if selector.is_defined() {
            self.base.with_path("", &[("basis", &selector.state)])
        } else {
            self.base.clone()
        }
    }

    pub(super) fn handle(
        &mut self,
        now: Instant,
        o: StreamOutput,
        stream: &mut EventStream,
        out: &mut VecDeque<SourceOutput>,
    ) {
        match o {
            // The latch is one-way, from success and error responses alike.
            StreamOutput::Opened(head) | StreamOutput::Rejected(head) => {
                environment_id(&head, out);
                self.latched |= fallback_directed(&head);
            }
            StreamOutput::Item(sse::Item::Event(ev)) => self.on_event(now, &ev, stream, out),
            StreamOutput::Failed { error, retry_at } => {
                let state = if retry_at.is_some() {
                    State::Interrupted
                } else {
                    State::Off
                };
                if self.latched {
                    // Any failure after the latch ends FDv2, even a recoverable one.
                    fall_back(stream, out, state, Some(error));
                } else {
                    out.push_back(SourceOutput::Status(state, Some(error)));
                }
            }
            _ => {}
        }
    }

    fn on_event(
        &mut self,
        now: Instant,
        ev: &sse::Event,
        stream: &mut EventStream,
        out: &mut VecDeque<SourceOutput>,
    ) {
        if !stream.is_running() {
            return;
        }
        let handled = fdv2::parse_event(&ev.event_type, &ev.data)
            .and_then(|event| self.protocol.handle_event(event));
        match handled {
            Ok(Action::Apply(change_set)) => self.apply(change_set, stream, out),
            Ok(Action::Goodbye { reason }) => {
                // PROTOCOL.md A.3: close, drop the uncommitted changes, reconnect.
                tracing::debug!(%reason, "fdv2: goodbye");
                self.protocol.reset();
                stream.reconnect_later(now);
            }
            Ok(Action::ServerError { payload_id, reason }) => {
                tracing::debug!(%payload_id, %reason, "fdv2: the server abandoned a payload");
            }
            Ok(Action::Ignore) => {}
            Err(e) => {
                tracing::debug!(error = %e, "fdv2: dropping the stream");
                let error = ErrorInfo::new(now, e.kind(), Cause::Fdv2(e));
                if self.latched {
                    fall_back(stream, out, State::Interrupted, Some(error));
                } else {
                    // Reported through `Failed`, which the pump handles next.
                    stream.fail(now, error);
                }
            }
        }
    }

    fn apply(
        &mut self,
        change_set: ChangeSet,
        stream: &mut EventStream,
        out: &mut VecDeque<SourceOutput>,
    ) {
        out.push_back(SourceOutput::Apply(change_set));
        out.push_back(SourceOutput::Status(State::Valid, None));
        if self.latched {
            // The payload is applied first, then FDv2 ends (PROTOCOL.md B §5.4).
            stream.handle_stop();
            drain_actions(stream, out);
            out.push_back(SourceOutput::FallbackToFdv1);
        }
    }
}

fn environment_id(head: &ResponseHead, out: &mut VecDeque<SourceOutput>) {
    if let Some(env) = head.header("x-ld-envid").filter(|e| !e.is_empty()) {
        out.push_back(SourceOutput::EnvironmentId(env.to_owned()));
    }
}

fn fall_back(
    stream: &mut EventStream,
    out: &mut VecDeque<SourceOutput>,
    state: State,
    error: Option<ErrorInfo>,
) {
    stream.handle_stop();
    drain_actions(stream, out);
    out.push_back(SourceOutput::FallbackToFdv1);
    out.push_back(SourceOutput::Status(state, error));
}

/// `X-LD-FD-Fallback: true`, compared exactly (PROTOCOL.md B §5.4).
fn fallback_directed(head: &ResponseHead) -> bool {
    head.header("x-ld-fd-fallback") == Some("true")
}

/// Forward the close actions of a stopped stream; drop anything else it had queued.
fn drain_actions(stream: &mut EventStream, out: &mut VecDeque<SourceOutput>) {
    while let Some(o) = stream.poll_output() {
        if let StreamOutput::Action(a) = o {
            out.push_back(SourceOutput::Action(a));
        }
    }
}
