//! The error of building and starting a client.

use crate::proxy::ProxyError;

/// Why a client could not be built or started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A URI or another setting cannot work.
    #[error(transparent)]
    Config(#[from] flagsync_core::ConfigError),
    /// The proxy URL cannot be used.
    #[error(transparent)]
    Proxy(#[from] ProxyError),
    /// The TLS settings cannot be used (for example, unreadable PEM data).
    #[error("invalid TLS settings: {0}")]
    Tls(String),
    /// No runtime to run on: with the `tokio` feature alone, call `start()` inside a
    /// tokio runtime (or give one with the builder's `runtime`).
    #[error("no async runtime: call start() inside a tokio runtime, or enable the `smol` feature")]
    NoRuntime,
}
