//! The async-io runtimes: smol (feature `smol`) and async-std (feature `async-std`).
//!
//! Both run on `async-io` and `async-net`; they differ only in how they spawn.
//! async-std is discontinued upstream in favour of smol. It is kept working through this
//! shared path, but new code should prefer smol.

use std::io;
use std::time::Instant;

use super::{BoxFuture, BoxIo, Runtime};

fn connect(host: &str, port: u16) -> BoxFuture<'static, io::Result<BoxIo>> {
    let host = host.to_owned();
    Box::pin(async move {
        let stream = async_net::TcpStream::connect((host.as_str(), port)).await?;
        stream.set_nodelay(true)?;
        Ok(Box::new(stream) as BoxIo)
    })
}

fn sleep_until(deadline: Instant) -> BoxFuture<'static, ()> {
    let timer = async_io::Timer::at(deadline);
    Box::pin(async move {
        timer.await;
    })
}

/// Runs the adapters on smol's global executor.
#[cfg(feature = "smol")]
#[derive(Debug, Clone, Copy, Default)]
pub struct SmolRuntime;

#[cfg(feature = "smol")]
impl Runtime for SmolRuntime {
    fn connect(&self, host: &str, port: u16) -> BoxFuture<'static, io::Result<BoxIo>> {
        connect(host, port)
    }
    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        sleep_until(deadline)
    }
    fn spawn(&self, future: BoxFuture<'static, ()>) {
        smol::spawn(future).detach();
    }
}

/// Runs the adapters on async-std's executor.
///
/// async-std is discontinued upstream in favour of smol; this runtime shares smol's
/// async-io path and differs only in `spawn`. Prefer [`SmolRuntime`] in new code.
#[cfg(feature = "async-std")]
#[derive(Debug, Clone, Copy, Default)]
pub struct AsyncStdRuntime;

#[cfg(feature = "async-std")]
impl Runtime for AsyncStdRuntime {
    fn connect(&self, host: &str, port: u16) -> BoxFuture<'static, io::Result<BoxIo>> {
        connect(host, port)
    }
    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        sleep_until(deadline)
    }
    fn spawn(&self, future: BoxFuture<'static, ()>) {
        drop(async_std::task::spawn(future));
    }
}
