//! The runtime vocabulary of the adapters: connect, sleep, spawn, and the clock.
//!
//! Everything above this module (the driver, connection tasks, TLS, the client) is
//! written once against `Arc<dyn Runtime>`. Each runtime file only maps these four
//! operations onto its executor (DESIGN.md §4, STYLE.md §1.1).

use std::fmt::Debug;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use futures_lite::{AsyncRead, AsyncWrite};

#[cfg(feature = "async-io-net")]
mod async_io;
#[cfg(feature = "tokio")]
mod tokio;

#[cfg(feature = "async-std")]
pub use self::async_io::AsyncStdRuntime;
#[cfg(feature = "smol")]
pub use self::async_io::SmolRuntime;
#[cfg(feature = "tokio")]
pub use self::tokio::TokioRuntime;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A byte stream: `futures-io` read and write halves in one object.
pub trait AsyncIo: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> AsyncIo for T {}

/// A boxed byte stream (a TCP connection, possibly wrapped in TLS).
pub type BoxIo = Box<dyn AsyncIo>;

/// What the adapters need from an async runtime. Object safe: used as `Arc<dyn Runtime>`.
pub trait Runtime: Send + Sync + Debug + 'static {
    /// Open a TCP connection to `host:port` (resolving the name if needed).
    fn connect(&self, host: &str, port: u16) -> BoxFuture<'static, io::Result<BoxIo>>;

    /// A future that completes at (or after) `deadline`.
    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()>;

    /// Run `future` in the background to completion (or until the runtime ends).
    fn spawn(&self, future: BoxFuture<'static, ()>);

    /// The current time. Override it to fake the clock.
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// The runtime to use when none was given: tokio if called inside a tokio runtime, else
/// smol, else async-std (whichever features are enabled).
pub(crate) fn default_runtime() -> Option<Arc<dyn Runtime>> {
    #[cfg(feature = "tokio")]
    if let Some(rt) = TokioRuntime::try_current() {
        return Some(Arc::new(rt));
    }
    #[cfg(feature = "smol")]
    return Some(Arc::new(SmolRuntime));
    #[cfg(all(feature = "async-std", not(feature = "smol")))]
    return Some(Arc::new(AsyncStdRuntime));
    #[allow(unreachable_code)]
    None
}

/// Completes when the first of `a` and `b` completes; `Ok` for `a`, `Err` for `b`.
pub(crate) async fn race<A, B>(
    a: impl Future<Output = A>,
    b: impl Future<Output = B>,
) -> Result<A, B> {
    futures_lite::future::or(async { Ok(a.await) }, async { Err(b.await) }).await
}
