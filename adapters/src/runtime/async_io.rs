//! The async-io runtimes: smol (feature `smol`) and async-std (feature `async-std`).
//!
//! Both run on `async-io` and `async-net`; they differ only in how they spawn.
//! async-std is discontinued upstream in favour of smol. It is kept working through this
//! shared path, but new code should prefer smol.

use std::io;
use std::time::Instant;

#[cfg(feature = "async-std")]
use std::sync::Arc;

#[cfg(feature = "async-std")]
use super::DriverFn;
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

    /// A thread of its own (see [`Runtime::spawn_driver`]): async-std's executor moves
    /// tasks between its worker threads. Its timers and I/O are async-io's, which any
    /// thread can wait on.
    fn spawn_driver(&self, this: Arc<dyn Runtime>, driver: DriverFn) {
        super::on_own_thread(driver(this), async_std::task::block_on, |future| {
            drop(async_std::task::spawn(future))
        });
    }
}

#[cfg(all(test, feature = "async-std"))]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn async_std_runs_the_driver_on_a_thread_of_its_own() {
        let this: Arc<dyn Runtime> = Arc::new(AsyncStdRuntime);
        let (tx, rx) = std::sync::mpsc::channel();
        this.spawn_driver(
            this.clone(),
            Box::new(move |rt| {
                Box::pin(async move {
                    rt.sleep_until(rt.now() + Duration::from_millis(10)).await;
                    tx.send(std::thread::current().name().map(str::to_owned))
                        .unwrap();
                })
            }),
        );
        let name = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(name.as_deref(), Some("flagsync-driver"));
    }
}
