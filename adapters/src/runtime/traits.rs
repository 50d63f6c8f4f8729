//! The runtime vocabulary itself: the [`Runtime`] trait, the byte streams it connects
//! and the boxed futures it runs.

use std::fmt::Debug;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use futures_lite::{AsyncRead, AsyncWrite};

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
