//! Running the driver on a thread of its own, for the runtimes whose executor moves
//! tasks between worker threads (see [`Runtime::spawn_driver`]).
//!
//! [`Runtime::spawn_driver`]: super::Runtime::spawn_driver

use std::sync::Arc;

use super::BoxFuture;

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
