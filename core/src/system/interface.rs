//! What goes into and comes out of the data system: [`Command`], [`Input`], [`Event`],
//! [`Output`].

use std::time::Instant;

use super::persist::{Persist, StoreStatus};
use crate::io::{Action, CloseCause, ConnId};
use crate::status::{ErrorKind, Status};
use crate::store::ChangeSet;

/// An instruction from the application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Command {
    /// Start the data source.
    Start,
    /// Stop it for good: close every connection and report OFF.
    Stop,
}

/// Something that happened, fed to [`DataSystem::handle_input`](super::DataSystem::handle_input).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Input<'a> {
    /// An application command.
    Command(Command),
    /// The driver connected `conn` and wrote its request.
    Connected {
        /// The connection.
        conn: ConnId,
    },
    /// Bytes arrived on `conn`.
    Data {
        /// The connection.
        conn: ConnId,
        /// The bytes, borrowed; the core copies what it keeps.
        bytes: &'a [u8],
    },
    /// `conn` closed.
    Closed {
        /// The connection.
        conn: ConnId,
        /// Why.
        cause: CloseCause,
    },
    /// The deadline of the last [`Output::Wait`] passed (early calls are harmless).
    Timeout,
    /// The driver's persistent store failed to take a write the core asked for. The
    /// status becomes INTERRUPTED (INITIALIZING before the first success) with
    /// STORE_ERROR, and no vaguer error kind replaces it for this failure
    /// (PROTOCOL.md A.4.1).
    StoreFailed,
    /// As [`Input::StoreFailed`], with how the store failed: the status error's cause
    /// is [`crate::status::Cause::StoreFault`].
    StoreFault(crate::status::StoreFault),
    /// The persistent store answered a [`Persist::CheckAvailable`] (or the driver saw
    /// it come back). After an outage the core writes the in-memory data back
    /// (PROTOCOL.md A.4.8).
    StoreAvailable(bool),
    /// The driver read the persistent store and found it initialized (`$inited`). In
    /// FDv2 daemon mode, where no data source reports on the data, this makes the
    /// status VALID (clearing nothing: the last error stays); elsewhere the data source
    /// decides the status and this is ignored.
    StoreInitialized,
    /// [`Mode::External`](crate::Mode::External): data from the in-process source. A
    /// full transfer replaces the data set (and the first one makes the data system
    /// ready and VALID), changes merge into it, by the change set's own rules. Ignored
    /// in the other modes and once stopped.
    SourceData(ChangeSet),
    /// [`Mode::External`](crate::Mode::External): the in-process source failed (a
    /// malformed file): the status becomes INTERRUPTED (INITIALIZING before the first
    /// data set) with this error, and the store keeps what it has. The next
    /// [`Input::SourceData`] makes it VALID again. Ignored in the other modes.
    SourceFailed(SourceFailure),
}

/// How an in-process source failed ([`Input::SourceFailed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFailure {
    /// The error kind the status reports (INVALID_DATA for data that cannot be used).
    pub kind: ErrorKind,
    /// What went wrong, for people; reported as [`crate::status::Cause::Source`].
    pub message: String,
}

/// Something that happened, for the application.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The store was written (a rejected stale update writes nothing and reports
    /// nothing); `changed_flags` names every flag whose data changed, directly or
    /// through a prerequisite or segment (maybe none).
    StoreChanged {
        /// The affected flags ([`ChangedFlags::keys`](crate::store::ChangedFlags::keys)
        /// lists them, sorted).
        changed_flags: crate::store::ChangedFlags,
    },
    /// The data-source status changed (PROTOCOL.md B §3.2).
    StatusChanged(Status),
    /// The store holds a full data set for the first time, or the source gave up for
    /// good before that: waiting for initialization can end.
    Ready,
    /// The server named its environment.
    EnvironmentId(String),
    /// The persistent store's status changed (PROTOCOL.md B §4.5).
    StoreStatusChanged(StoreStatus),
}

/// What to do next, from [`DataSystem::poll_output`](super::DataSystem::poll_output).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Perform this I/O.
    Action(Action),
    /// Tell the application.
    Event(Event),
    /// Ask the persistent store to do this (only with
    /// [`Config::persistence`](crate::Config::persistence)).
    Persist(Persist),
    /// Nothing more now: wait for I/O, or until this deadline, then send
    /// [`Input::Timeout`]. `None`: wait for I/O or a command only.
    Wait(Option<Instant>),
}
