//! Data sources: one streaming or polling connection each, combining HTTP/1.1, SSE,
//! the FDv1 wire format and backoff into a state machine (DESIGN.md §1).
//!
//! Every source follows the same contract: `handle_*` inputs with `now`, drain
//! `poll_output` until `None`, then sleep until `poll_timeout`.

mod event_stream;
pub(crate) mod exchange;
mod fdv1_stream;
mod fdv2_stream;
mod headers;
mod poll;
mod stream;

pub use event_stream::{EventStream, EventStreamConfig, StreamOutput, UnrecoverablePolicy};
pub(crate) use headers::is_token;
pub use headers::{RequestIdentity, USER_AGENT};
pub use poll::{PollConfig, PollFormat, Poller};
pub use stream::StreamSource;

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
    /// FDv2: the server sent `X-LD-FD-Fallback: true`; the data system must move to
    /// FDv1 for good once the outputs around this one are handled (PROTOCOL.md B §5.4,
    /// §5.7). The source has stopped, or stops after the payload in flight.
    FallbackToFdv1,
}
