//! What the driver and its tasks share: the messages of the driver's inbox, and the
//! [`Finished`] mark that the last of the driver and its tasks to end sets.

use std::sync::{Arc, Condvar, Mutex};

use flagsync_core::{CloseCause, ConnId};

/// A message to the driver's inbox.
#[derive(Debug)]
pub(crate) enum Msg<C> {
    /// A connection task connected and wrote its request.
    Connected(ConnId),
    /// A connection task read bytes.
    Data(ConnId, Vec<u8>),
    /// A connection task ended.
    Closed(ConnId, CloseCause),
    /// An application command.
    Command(C),
    /// The persistent store's writer reports a failure or an availability answer.
    Store(StoreReport),
    /// An in-process data source (`TestData`, files) has data or failed.
    Source(SourceReport),
    /// Stop the machine, close every connection and end the driver.
    Shutdown,
}

/// What the persistent store's writer tells the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoreReport {
    /// An operation failed, and how (`Input::StoreFault`).
    Failed(flagsync_core::status::StoreFault),
    /// The answer to a `Persist::CheckAvailable` (`Input::StoreAvailable`).
    Available(bool),
    /// The store was read and is initialized (`Input::StoreInitialized`).
    Initialized,
}

/// What an in-process data source tells the machine (`Mode::External`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SourceReport {
    /// Data to apply (`Input::SourceData`).
    Data(flagsync_core::store::ChangeSet),
    /// The source failed (`Input::SourceFailed`).
    Failed(flagsync_core::SourceFailure),
}

/// Set once the driver and all of its connection tasks have ended (every socket they
/// opened is closed by then). Waitable from async and blocking code.
#[derive(Debug)]
pub(crate) struct Finished {
    done: Mutex<bool>,
    cv: Condvar,
    // Closed (never sent on) when finished: async waiters wake on `recv` failing.
    tx: async_channel::Sender<()>,
    rx: async_channel::Receiver<()>,
}

impl Finished {
    pub(crate) fn new() -> Arc<Self> {
        let (tx, rx) = async_channel::bounded(1);
        Arc::new(Self {
            done: Mutex::new(false),
            cv: Condvar::new(),
            tx,
            rx,
        })
    }

    pub(crate) fn is_done(&self) -> bool {
        *self.done.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait asynchronously (bound it with a timer).
    pub(crate) async fn wait(&self) {
        let _ = self.rx.recv().await;
    }

    /// Block the thread for at most `timeout`; true if finished.
    pub(crate) fn wait_blocking(&self, timeout: std::time::Duration) -> bool {
        let guard = self.done.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = self
            .cv
            .wait_timeout_while(guard, timeout, |done| !*done)
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }

    fn set(&self) {
        *self.done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
        self.tx.close();
    }
}

/// Held by the driver and every connection task; the last one dropped marks
/// [`Finished`].
#[derive(Debug)]
pub(crate) struct TaskGuard(pub(crate) Arc<Finished>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.set();
    }
}
