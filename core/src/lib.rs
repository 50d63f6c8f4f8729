//! flagsync-core (placeholder while modules land)
#![forbid(unsafe_code)]

pub mod backoff;
pub mod config;
pub mod endpoint;
pub mod fdv1;
pub mod http1;
mod io;
pub mod source;
pub mod sse;
pub mod status;
pub mod store;
mod system;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use config::{Config, ConfigError, Mode};
pub use io::{Action, CloseCause, ConnId, IoCause};
pub use status::{ErrorInfo, ErrorKind, State, Status};
pub use store::{Kind, Snapshot};
pub use system::{Command, DataSystem, Event, Input, Output};

#[cfg(test)]
mod tests;
