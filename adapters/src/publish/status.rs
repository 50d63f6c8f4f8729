//! The data-source status and flag changes as readers get them, and the [`Clock`] that
//! dates them in wall-clock time.

use std::time::{Instant, SystemTime};

use flagsync_core::status::{Cause, StoreFaultKind};
use flagsync_core::{ErrorKind, State, Status};

/// The data-source status, with wall-clock times.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DataSourceStatus {
    /// The current state.
    pub state: State,
    /// When the state last changed.
    pub since: SystemTime,
    /// The most recent error since start-up; it stays after a recovery.
    pub error: Option<DataSourceError>,
}

/// A data-source failure, as the status reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DataSourceError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// The HTTP status code, or 0.
    pub status_code: u16,
    /// When it happened.
    pub time: SystemTime,
    /// A description (never contains the SDK key, nor a store's password).
    pub message: String,
    /// For a persistent-store failure (kind STORE_ERROR), what kind it is, when the
    /// store said: [`StoreFaultKind::is_permanent`](crate::persist::StoreFaultKind::is_permanent) tells a wrong password or setting
    /// (which waiting will not clear) from an outage.
    pub store_fault: Option<StoreFaultKind>,
}

/// A flag whose data changed, directly or through a prerequisite or segment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct FlagChange {
    /// The flag key.
    pub key: String,
}

/// Maps the core's `Instant`s to wall-clock time.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    instant: Instant,
    system: SystemTime,
}

impl Clock {
    pub(crate) fn new(instant: Instant) -> Self {
        Self {
            instant,
            system: SystemTime::now() - instant.elapsed(),
        }
    }

    pub(crate) fn to_system(self, at: Instant) -> SystemTime {
        match at.checked_duration_since(self.instant) {
            Some(d) => self.system + d,
            None => self.system - self.instant.duration_since(at),
        }
    }

    pub(crate) fn status(self, s: &Status) -> DataSourceStatus {
        DataSourceStatus {
            state: s.state,
            since: self.to_system(s.since),
            error: s.error.as_ref().map(|e| DataSourceError {
                kind: e.kind,
                status_code: e.status_code,
                time: self.to_system(e.at),
                message: e.cause.to_string(),
                store_fault: match &e.cause {
                    Cause::StoreFault(fault) => Some(fault.kind),
                    _ => None,
                },
            }),
        }
    }
}
