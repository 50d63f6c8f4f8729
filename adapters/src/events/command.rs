//! [`Command`]: what the client (through the recorder) asks of the event processor.

use crate::eval::Context;
use flagsync_core::events::{Evaluation, Record};

/// What the client asks of the event processor.
#[derive(Debug)]
pub(crate) enum Command {
    /// Something to report (queued by the recorder, not sent: see [`super::Recorder::command`]).
    Record(Box<Record>),
    /// An evaluation and the context it was made for: the context's event form is
    /// made here, on the driver's task, rather than on the evaluating thread.
    Evaluation(Box<(Context, Evaluation)>),
    /// Take the records waiting in the recorder's queue (see [`super::Recorder::command`]).
    Drain,
    /// Send what is queued now.
    Flush,
    /// Send what is queued, then end the driver.
    Close,
    /// The data source tried to open a stream (for diagnostic events).
    StreamInit {
        /// When the attempt started, Unix milliseconds.
        at: u64,
        /// How long until it was answered or failed.
        duration_ms: u64,
        /// Whether it failed.
        failed: bool,
    },
}

impl Command {
    /// Whether it is a record, which takes a place in the bounded inbox (flushes and
    /// closes do not: they always get in).
    pub(crate) fn is_record(&self) -> bool {
        matches!(
            self,
            Self::Record(_) | Self::Evaluation(_) | Self::StreamInit { .. }
        )
    }
}
