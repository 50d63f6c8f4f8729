//! The tokio runtime (feature `tokio`).

use std::io;
use std::sync::Arc;
use std::time::Instant;

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio_util::compat::TokioAsyncReadCompatExt;

use super::{BoxFuture, BoxIo, DriverFn, Runtime};

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

    /// On a current-thread runtime, a task; on a multi-thread runtime, a thread of its
    /// own (see [`Runtime::spawn_driver`]). There its timers run on a small
    /// current-thread runtime of its own, so that the driver never polls a timer of the
    /// application's runtime after that runtime has shut down (tokio panics then); its
    /// connections and other tasks are still spawned on the application's runtime.
    fn spawn_driver(&self, this: Arc<dyn Runtime>, driver: DriverFn) {
        if self.handle.runtime_flavor() == RuntimeFlavor::CurrentThread {
            return self.spawn(driver(this));
        }
        let timers = match tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
        {
            Ok(timers) => timers,
            Err(e) => {
                tracing::warn!(error = %e, "no timer runtime for the driver: it runs as a task");
                return self.spawn(driver(this));
            }
        };
        let on_thread: Arc<dyn Runtime> = Arc::new(DriverThread {
            inner: this,
            timers: timers.handle().clone(),
        });
        let handle = self.handle.clone();
        super::on_own_thread(
            driver(on_thread),
            move |future| timers.block_on(future),
            move |future| drop(handle.spawn(future)),
        );
    }
}

/// The runtime the driver uses on its own thread: the application's runtime, but
/// timers from the thread's own current-thread runtime.
#[derive(Debug)]
struct DriverThread {
    inner: Arc<dyn Runtime>,
    timers: Handle,
}

impl Runtime for DriverThread {
    fn connect(&self, host: &str, port: u16) -> BoxFuture<'static, io::Result<BoxIo>> {
        self.inner.connect(host, port)
    }

    fn sleep_until(&self, deadline: Instant) -> BoxFuture<'static, ()> {
        let _guard = self.timers.enter();
        Box::pin(tokio::time::sleep_until(deadline.into()))
    }

    fn spawn(&self, future: BoxFuture<'static, ()>) {
        self.inner.spawn(future);
    }

    fn now(&self) -> Instant {
        self.inner.now()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn on_a_multi_thread_runtime_the_driver_has_a_thread_and_timers_of_its_own() {
        let app = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let this: Arc<dyn Runtime> =
            Arc::new(app.block_on(async { TokioRuntime::try_current().unwrap() }));
        let (tx, rx) = mpsc::channel();
        this.spawn_driver(
            this.clone(),
            Box::new(move |rt| {
                Box::pin(async move {
                    tx.send(std::thread::current().name().map(str::to_owned))
                        .unwrap();
                    rt.sleep_until(rt.now() + Duration::from_millis(300)).await;
                    tx.send(Some("slept".into())).unwrap();
                })
            }),
        );
        let wait = Duration::from_secs(10);
        assert_eq!(
            rx.recv_timeout(wait).unwrap().as_deref(),
            Some("flagsync-driver")
        );
        // The application's runtime shuts down while the driver sleeps: the driver's
        // timer is its own, so it neither panics nor hangs.
        drop(app);
        assert_eq!(rx.recv_timeout(wait).unwrap().as_deref(), Some("slept"));
    }

    #[test]
    fn on_a_current_thread_runtime_the_driver_is_a_task() {
        let app = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        app.block_on(async {
            let this: Arc<dyn Runtime> = Arc::new(TokioRuntime::try_current().unwrap());
            let (tx, rx) = async_channel::bounded(1);
            this.spawn_driver(
                this.clone(),
                Box::new(move |rt| {
                    Box::pin(async move {
                        rt.sleep_until(rt.now() + Duration::from_millis(10)).await;
                        tx.send(std::thread::current().id()).await.unwrap();
                    })
                }),
            );
            assert_eq!(rx.recv().await.unwrap(), std::thread::current().id());
        });
    }
}
