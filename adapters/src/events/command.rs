//! [`Command`]: what the client (through the recorder) asks of the event processor.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

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
    /// Send what is queued now and tell the waiter once nothing is left to send.
    FlushWait(Arc<FlushWaiter>),
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

/// The answer to a [`Command::FlushWait`]: set once by the event processor's task
/// (true: every payload went out; false: one was dropped or delivery stopped), read
/// by an async or a blocking waiter.
#[derive(Debug)]
pub(crate) struct FlushWaiter {
    result: Mutex<Option<bool>>,
    cv: Condvar,
    // Closed (never sent on) when the result is set: async waiters wake on `recv`.
    tx: async_channel::Sender<()>,
    rx: async_channel::Receiver<()>,
}

impl FlushWaiter {
    pub(crate) fn new() -> Arc<Self> {
        let (tx, rx) = async_channel::bounded(1);
        Arc::new(Self {
            result: Mutex::new(None),
            cv: Condvar::new(),
            tx,
            rx,
        })
    }

    /// Set the result (the first one set stays).
    pub(crate) fn set(&self, delivered: bool) {
        let mut result = self.result.lock().unwrap_or_else(|e| e.into_inner());
        if result.is_none() {
            *result = Some(delivered);
        }
        self.cv.notify_all();
        self.tx.close();
    }

    /// The result, if set.
    pub(crate) fn result(&self) -> Option<bool> {
        *self.result.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait until the result is set.
    pub(crate) async fn wait(&self) {
        let _ = self.rx.recv().await;
    }

    /// Block until the result is set or `timeout` passes; the result if set.
    pub(crate) fn wait_blocking(&self, timeout: Duration) -> Option<bool> {
        let guard = self.result.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = self
            .cv
            .wait_timeout_while(guard, timeout, |r| r.is_none())
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }
}
