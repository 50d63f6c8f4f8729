//! [`RelayError`]: why a relay did not start.

use std::io;

/// Why [`RelayBuilder::start`](crate::RelayBuilder::start) failed. No variant holds an
/// SDK key or a password: an environment is named by its name.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// The server that serves the environments did not start (the port is taken, …).
    #[error("cannot start the relay's server: {0}")]
    Server(#[from] flagsync_server::ServerError),
    /// An environment's Redis store settings cannot work (a malformed URL, TLS files
    /// that do not parse, …).
    #[error("environment {environment:?}: invalid Redis settings: {source}")]
    Redis {
        /// The environment's name.
        environment: String,
        /// The store's error (never a password).
        source: flagsync::persist::StoreError,
    },
    /// An environment's client could not be built or started (a URI that cannot work).
    #[error("environment {environment:?}: cannot start its client: {source}")]
    Client {
        /// The environment's name.
        environment: String,
        /// The SDK's error.
        source: flagsync::Error,
    },
    /// The relay's runtime or one of its threads could not be started.
    #[error("cannot start the relay's {what}: {source}")]
    Thread {
        /// What: `runtime` or `events forwarder`.
        what: &'static str,
        /// The cause.
        source: io::Error,
    },
}
