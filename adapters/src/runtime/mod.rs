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

/// The data system's driver, made for the runtime it is given (see
/// [`Runtime::spawn_driver`]).
pub type DriverFn = Box<dyn FnOnce(Arc<dyn Runtime>) -> BoxFuture<'static, ()> + Send>;

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

    /// Run the data system's driver: `driver` makes it for the runtime its timers and
    /// connections should use, `this` being this runtime. By default it is spawned like
    /// any task.
    ///
    /// A runtime whose executor moves tasks between worker threads runs it on a thread
    /// of its own instead (tokio's multi-thread runtime, async-std). The driver
    /// allocates every item the store keeps; moved from thread to thread, it spreads the
    /// store over the allocator's per-thread arenas (glibc keeps one per thread), and
    /// an arena does not reuse what another one freed: under a flood of patches the
    /// process grew by about the size of the store.
    fn spawn_driver(&self, this: Arc<dyn Runtime>, driver: DriverFn) {
        self.spawn(driver(this));
    }

    /// The current time. Override it to fake the clock.
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// Run `future` on a thread of its own named `flagsync-driver`, with `block_on`; if no
/// thread can be started, hand it to `fallback` instead.
#[cfg(any(feature = "tokio", feature = "async-std"))]
pub(crate) fn on_own_thread<F>(
    future: BoxFuture<'static, ()>,
    block_on: F,
    fallback: impl FnOnce(BoxFuture<'static, ()>),
) where
    F: FnOnce(BoxFuture<'static, ()>) + Send + 'static,
{
    let slot = Arc::new(std::sync::Mutex::new(Some(future)));
    let theirs = slot.clone();
    let started = std::thread::Builder::new()
        .name("flagsync-driver".into())
        .spawn(move || {
            let future = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(future) = future {
                block_on(future);
            }
        });
    if let Err(e) = started {
        tracing::warn!(error = %e, "no thread for the driver: it runs as a task");
        let future = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(future) = future {
            fallback(future);
        }
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
