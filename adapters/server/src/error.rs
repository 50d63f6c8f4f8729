//! [`ServerError`]: why the server could not start or take an update.

use std::io;

/// An error from starting or updating the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The listening socket could not be bound.
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind {
        /// The port asked for (0 = any).
        port: u16,
        /// The cause.
        source: io::Error,
    },
    /// The flag data was not in the expected shape.
    #[error("invalid flag data: {0}")]
    InvalidData(String),
    /// A thread could not be started.
    #[error("cannot start a server thread: {0}")]
    Thread(io::Error),
}
