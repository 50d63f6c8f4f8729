//! Where migration op events go.

use std::sync::{Arc, Mutex};

use super::MigrationOpEvent;

/// Takes the [`MigrationOpEvent`]s of migration operations: an event processor that
/// sends them to a service, a log, a test's collector.
///
/// Called on the task that ran the operation, once per tracked operation; it should
/// hand the event off quickly (queue it) rather than do I/O in place.
pub trait EventSink: Send + Sync {
    /// Take one event.
    fn migration_op(&self, event: MigrationOpEvent);
}

impl<S: EventSink + ?Sized> EventSink for Arc<S> {
    fn migration_op(&self, event: MigrationOpEvent) {
        (**self).migration_op(event);
    }
}

impl<S: EventSink + ?Sized> EventSink for &S {
    fn migration_op(&self, event: MigrationOpEvent) {
        (**self).migration_op(event);
    }
}

/// Drops every event (what a migrator of a client without analytics events uses).
#[derive(Debug, Clone, Copy, Default)]
pub struct DiscardSink;

impl EventSink for DiscardSink {
    fn migration_op(&self, _event: MigrationOpEvent) {}
}

/// Keeps every event in memory, for tests and debugging.
///
/// ```
/// use flagsync::migration::MemorySink;
///
/// let sink = MemorySink::new();
/// assert!(sink.take().is_empty());
/// ```
#[derive(Debug, Default)]
pub struct MemorySink {
    events: Mutex<Vec<MigrationOpEvent>>,
}

impl MemorySink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// Remove and return the events received so far, oldest first.
    pub fn take(&self) -> Vec<MigrationOpEvent> {
        std::mem::take(&mut *self.lock())
    }

    /// A copy of the events received so far, oldest first.
    pub fn events(&self) -> Vec<MigrationOpEvent> {
        self.lock().clone()
    }

    /// The number of events received so far.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True if no event is held.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<MigrationOpEvent>> {
        self.events.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl EventSink for MemorySink {
    fn migration_op(&self, event: MigrationOpEvent) {
        self.lock().push(event);
    }
}
