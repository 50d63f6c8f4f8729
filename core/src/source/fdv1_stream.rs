//! The FDv1 stream protocol: `put`/`patch`/`delete` events of `GET <stream>/all`
//! (PROTOCOL.md B §1).

use std::collections::VecDeque;
use std::time::Instant;

use super::SourceOutput;
use super::event_stream::{EventStream, StreamOutput};
use crate::fdv1::{self, Event};
use crate::sse;
use crate::status::{Cause, ErrorInfo, State};
use crate::store::ChangeSet;

/// Reads FDv1 events; stateless.
#[derive(Debug)]
pub(super) struct Fdv1Events;

impl Fdv1Events {
    pub(super) fn handle(
        &mut self,
        now: Instant,
        o: StreamOutput,
        stream: &mut EventStream,
        out: &mut VecDeque<SourceOutput>,
    ) {
        match o {
            StreamOutput::Opened(head) => {
                // PROTOCOL.md B §1.11: only from successful responses.
                if let Some(env) = head.header("x-ld-envid").filter(|e| !e.is_empty()) {
                    out.push_back(SourceOutput::EnvironmentId(env.to_owned()));
                }
            }
            StreamOutput::Item(sse::Item::Event(ev)) => on_event(
                now,
                fdv1::parse_event(&ev.event_type, &ev.data),
                stream,
                out,
            ),
            StreamOutput::Put { event, prescan } => {
                let parsed = fdv1::parse_put_prescanned(&event.data, prescan);
                on_event(now, parsed, stream, out)
            }
            StreamOutput::Failed { error, retry_at } => {
                let state = if retry_at.is_some() {
                    State::Interrupted
                } else {
                    State::Off
                };
                out.push_back(SourceOutput::Status(state, Some(error)));
            }
            _ => {}
        }
    }
}

fn on_event(
    now: Instant,
    parsed: Result<Event, fdv1::Error>,
    stream: &mut EventStream,
    out: &mut VecDeque<SourceOutput>,
) {
    match parsed {
        Ok(Event::Put(changes)) => {
            out.push_back(SourceOutput::Apply(ChangeSet::fdv1_full(changes)));
            // Only a put marks the source VALID (PROTOCOL.md B §1.6).
            out.push_back(SourceOutput::Status(State::Valid, None));
        }
        Ok(Event::Patch(c) | Event::Delete(c)) => {
            out.push_back(SourceOutput::Apply(ChangeSet::fdv1_upsert(c)));
        }
        Ok(Event::UnknownPath(path)) => {
            tracing::debug!(%path, "ignoring update for unknown path")
        }
        Ok(other) => tracing::debug!(event = ?other, "ignoring unknown event"),
        Err(e) => {
            tracing::debug!(error = %e, "dropping the stream");
            stream.fail(now, ErrorInfo::new(now, e.kind(), Cause::Fdv1(e)));
        }
    }
}
