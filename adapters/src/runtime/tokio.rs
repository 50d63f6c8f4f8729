//! The tokio runtime (feature `tokio`).

use std::io;
use std::time::Instant;

use tokio::runtime::Handle;
use tokio_util::compat::TokioAsyncReadCompatExt;

use super::{BoxFuture, BoxIo, Runtime};

/// Runs the adapters on a tokio runtime, through its [`Handle`].
///
/// The runtime needs its I/O and time drivers (`enable_all()`, or `#[tokio::main]`).
#[derive(Debug, Clone)]
pub struct TokioRuntime {
    handle: Handle,
}

impl TokioRuntime {
    /// The tokio runtime the caller runs in, if any.
    pub fn try_current() -> Option<Self> {
        Handle::try_current().ok().map(|handle| Self { handle })
    }
}

impl Runtime for TokioRuntime {
    fn connect(&self, host: &str, port: u16) -> BoxFuture<'static, io::Result<BoxIo>> {
        let host = host.to_owned();
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream.compat()) as BoxIo)
        })
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        // Register the timer with this runtime even when called from elsewhere.
        let _guard = self.handle.enter();
        Box::pin(tokio::time::sleep_until(deadline.into()))
    }

    fn spawn(&self, future: BoxFuture<'static, ()>) {
        drop(self.handle.spawn(future));
    }
}
