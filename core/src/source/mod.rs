//! Data sources: one streaming or polling connection each, combining HTTP/1.1, SSE,
//! the FDv1 wire format and backoff into a state machine (DESIGN.md §1).
//!
//! Every source follows the same contract: `handle_*` inputs with `now`, drain
//! `poll_output` until `None`, then sleep until `poll_timeout`.

mod event_stream;
mod exchange;
mod fdv1_poll;
mod fdv1_stream;
mod headers;

pub use event_stream::{EventStream, EventStreamConfig, StreamOutput, UnrecoverablePolicy};
pub use fdv1_poll::{Fdv1Poll, PollConfig};
pub use fdv1_stream::Fdv1Stream;
pub use headers::{RequestIdentity, USER_AGENT};

use crate::io::Action;
use crate::status::{ErrorInfo, State};
use crate::store::ChangeSet;

/// What a data source produces.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceOutput {
    /// Perform this I/O.
    Action(Action),
    /// Write this to the store.
    Apply(ChangeSet),
    /// Report this state (and error) through the status rules.
    Status(State, Option<ErrorInfo>),
    /// The server named its environment (`X-LD-EnvID`).
    EnvironmentId(String),
}
