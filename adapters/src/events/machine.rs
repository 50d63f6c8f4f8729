//! The event processor as a [`Machine`] of the one driver.

use std::sync::Arc;
use std::time::Instant;

use flagsync_core::events::{Event, EventProcessor, Input, Output, Record};

use super::{Command, FlushWaiter, Recorder};
use crate::driver::{In, Machine, Msg, Out, Sink};

/// [`EventProcessor`] with the recorder's shards: their summaries are merged in before
/// anything that may flush.
#[derive(Debug)]
pub(crate) struct EventsMachine {
    processor: EventProcessor,
    recorder: Arc<Recorder>,
    /// [`Command::FlushWait`]s not answered yet, each with whether a payload was
    /// dropped since it came.
    waiters: Vec<(Arc<FlushWaiter>, bool)>,
}

impl EventsMachine {
    pub(crate) fn new(processor: EventProcessor, recorder: Arc<Recorder>) -> Self {
        Self {
            processor,
            recorder,
            waiters: Vec::new(),
        }
    }

    /// Answer the flush waiters once nothing is queued, summarised or in flight (or
    /// delivery stopped for good).
    fn answer_waiters(&mut self) {
        if self.waiters.is_empty() {
            return;
        }
        let disabled = self.processor.is_disabled();
        let idle = self.processor.queued() == 0
            && self.processor.summary().is_empty()
            && self.processor.in_flight() == 0;
        if disabled || idle {
            for (waiter, dropped) in self.waiters.drain(..) {
                waiter.set(!disabled && !dropped);
            }
        }
    }

    /// The records waiting in the recorder's queue, in their order.
    fn drain(&mut self, now: Instant) {
        for command in self.recorder.take_pending() {
            if let Some(input) = record_input(command) {
                self.processor.handle_input(now, input);
            }
        }
    }

    /// The waiting records, then the shards' and threads' summaries.
    fn merge(&mut self, now: Instant) {
        self.drain(now);
        for summary in self.recorder.take_summaries() {
            self.processor.handle_input(now, Input::Summary(summary));
        }
    }
}

impl Machine for EventsMachine {
    type Command = Command;
    type Event = Event;

    fn handle(&mut self, now: Instant, input: In<'_, Command>) {
        if let In::Command(command) = &input
            && command.is_record()
        {
            self.recorder.received();
        }
        let input = match input {
            In::Command(command @ (Command::Record(_) | Command::Evaluation(_))) => {
                let Some(input) = record_input(command) else {
                    return;
                };
                input
            }
            In::Command(Command::Drain) => {
                self.drain(now);
                return;
            }
            In::Command(Command::Flush) => {
                self.merge(now);
                Input::Flush
            }
            In::Command(Command::FlushWait(waiter)) => {
                self.merge(now);
                self.waiters.push((waiter, false));
                Input::Flush
            }
            In::Command(Command::Close) => {
                self.merge(now);
                Input::Close
            }
            In::Command(Command::StreamInit {
                at,
                duration_ms,
                failed,
            }) => Input::StreamInit {
                at,
                duration_ms,
                failed,
            },
            In::Connected(conn) => Input::Connected { conn },
            In::Data(conn, bytes) => Input::Data { conn, bytes },
            In::Closed(conn, cause) => Input::Closed { conn, cause },
            In::Timeout => {
                self.merge(now);
                Input::Timeout
            }
            In::Store(_) | In::Source(_) => return,
        };
        self.processor.handle_input(now, input);
    }

    fn poll(&mut self) -> Out<Event> {
        match self.processor.poll_output() {
            Output::Action(a) => Out::Action(a),
            Output::Event(e) => {
                if matches!(e, Event::Failed { retrying: false, events, .. } if events > 0) {
                    for (_, dropped) in &mut self.waiters {
                        *dropped = true;
                    }
                }
                Out::Event(e)
            }
            Output::Wait(w) => {
                self.answer_waiters();
                Out::Wait(w)
            }
            other => {
                tracing::debug!(output = ?other, "unknown event processor output");
                Out::Wait(None)
            }
        }
    }

    fn stop(&mut self, _now: Instant) {
        // The driver cancels every connection it opened; what was not sent is not.
        for (waiter, _) in self.waiters.drain(..) {
            waiter.set(false);
        }
    }
}

/// The processor's input for a record ([`Command::Record`], [`Command::Evaluation`]):
/// an evaluation's context is put in its event form here, on the processor's task.
fn record_input(command: Command) -> Option<Input<'static>> {
    match command {
        Command::Record(record) => Some(Input::Record(*record)),
        Command::Evaluation(pending) => {
            let (context, mut evaluation) = *pending;
            evaluation.context = super::event_context(&context)?;
            Some(Input::Record(Record::Evaluation(evaluation)))
        }
        _ => None,
    }
}

/// Logs what happened to deliveries and ends the driver once a close has sent
/// everything.
#[derive(Debug)]
pub(crate) struct EventsSink {
    pub(crate) tx: async_channel::Sender<Msg<Command>>,
}

impl Sink<EventsMachine> for EventsSink {
    fn publish(&mut self, _machine: &EventsMachine, event: Event) {
        match event {
            Event::Delivered { events } => tracing::debug!(events, "analytics events delivered"),
            Event::Disabled { status } => tracing::error!(
                status,
                "the events service refused the SDK key: analytics events are no longer sent"
            ),
            Event::Closed => {
                let _ = self.tx.force_send(Msg::Shutdown);
            }
            // The core logs failures and overflows itself.
            other => tracing::trace!(event = ?other, "events"),
        }
    }
}
