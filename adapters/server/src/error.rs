//! [`ServerError`]: why the server could not start or take an update.

use std::io;
use std::net::SocketAddr;

/// An error from starting or updating the server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A listening socket could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for (port 0 = any).
        addr: SocketAddr,
        /// The cause.
        source: io::Error,
    },
    /// The TLS certificate, key or client CA could not be used; names the setting and
    /// the file, never a key's contents.
    #[error("TLS: {0}")]
    Tls(String),
    /// The flag data was not in the expected shape.
    #[error("invalid flag data: {0}")]
    InvalidData(String),
    /// A thread (or its event loop) could not be started.
    #[error("cannot start a server thread: {0}")]
    Thread(io::Error),
}
