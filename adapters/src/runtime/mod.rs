//! The runtime vocabulary of the adapters: connect, sleep, spawn, and the clock.
//!
//! Everything above this module (the driver, connection tasks, TLS, the client) is
//! written once against `Arc<dyn Runtime>`. Each runtime file only maps these four
//! operations onto its executor (DESIGN.md §4, STYLE.md §1.1).
//!
//! `traits.rs` holds the vocabulary ([`Runtime`], [`BoxFuture`], [`BoxIo`]), `tokio.rs`
//! and `async_io.rs` (smol, async-std) implement it, `own_thread.rs` runs a driver on a
//! thread of its own for them, and `default.rs` picks one when none was given.

use std::future::Future;

#[cfg(feature = "async-io-net")]
mod async_io;
mod default;
#[cfg(any(feature = "tokio", feature = "async-std"))]
mod own_thread;
#[cfg(feature = "tokio")]
mod tokio;
mod traits;

#[cfg(feature = "async-std")]
pub use self::async_io::AsyncStdRuntime;
#[cfg(feature = "smol")]
pub use self::async_io::SmolRuntime;
#[cfg(feature = "tokio")]
pub use self::tokio::TokioRuntime;
pub(crate) use default::default_runtime;
#[cfg(any(feature = "tokio", feature = "async-std"))]
pub(crate) use own_thread::on_own_thread;
pub use traits::{AsyncIo, BoxFuture, BoxIo, DriverFn, Runtime};

/// Completes when the first of `a` and `b` completes; `Ok` for `a`, `Err` for `b`.
pub(crate) async fn race<A, B>(
    a: impl Future<Output = A>,
    b: impl Future<Output = B>,
) -> Result<A, B> {
    futures_lite::future::or(async { Ok(a.await) }, async { Err(b.await) }).await
}
