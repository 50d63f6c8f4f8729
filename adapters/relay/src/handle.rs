//! [`RelayHandle`]: a running relay, and stopping it.

use std::future::Future;
use std::time::{Duration, Instant};

use flagsync_server::{RelayEnvironment, ServerHandle};
use tokio::runtime::Runtime;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::forward::{ForwardReport, Forwarder};

/// How long the sync tasks get to close their clients on shutdown.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

/// A running relay, made by [`RelayBuilder::start`](crate::RelayBuilder::start): its
/// server, and the runtime its clients and sync tasks run on. Dropping it shuts it down
/// (as [`shutdown`](Self::shutdown), without the report).
pub struct RelayHandle {
    server: ServerHandle,
    /// Its own runtime (`None` once shut down).
    runtime: Option<Runtime>,
    /// Tells the sync tasks to close their clients and end.
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    forwarder: Option<Forwarder>,
}

impl std::fmt::Debug for RelayHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayHandle")
            .field("url", &self.server.url())
            .field("environments", &self.tasks.len())
            .field("running", &self.runtime.is_some())
            .finish_non_exhaustive()
    }
}

impl RelayHandle {
    /// A relay serving on `server`, its tasks to run on `runtime` (none yet).
    pub(crate) fn new(server: ServerHandle, runtime: Runtime) -> Self {
        Self {
            server,
            runtime: Some(runtime),
            stop: watch::channel(false).0,
            tasks: Vec::new(),
            forwarder: None,
        }
    }

    /// Run `task` on the relay's runtime until shutdown; it gets the signal to stop.
    pub(crate) fn spawn<F>(&mut self, task: impl FnOnce(watch::Receiver<bool>) -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        if let Some(runtime) = &self.runtime {
            self.tasks.push(runtime.spawn(task(self.stop.subscribe())));
        }
    }

    /// The relay's runtime, entered: a client built meanwhile runs on it.
    pub(crate) fn enter(&self) -> Option<tokio::runtime::EnterGuard<'_>> {
        self.runtime.as_ref().map(Runtime::enter)
    }

    /// Forward the events the server receives for `environments` upstream.
    pub(crate) fn forward_events(
        &mut self,
        environments: &[RelayEnvironment],
    ) -> std::io::Result<()> {
        self.forwarder = Some(Forwarder::start(&self.server, environments)?);
        Ok(())
    }

    /// The server the relay serves its environments on: its [`url`](ServerHandle::url)
    /// is the stream, polling and events URI of downstream SDKs, and
    /// [`environment`](ServerHandle::environment) reaches each environment by name.
    pub fn server(&self) -> &ServerHandle {
        &self.server
    }

    /// Stop: close every environment's client (the sync tasks end), shut the server
    /// down, and wait for the events forwarder to finish what it holds; what it lost is
    /// in the report (and in the log). Blocks for up to a few seconds: from async code,
    /// call it where blocking is allowed (e.g. `tokio::task::spawn_blocking`).
    pub fn shutdown(mut self) -> ForwardReport {
        self.stop()
    }

    fn stop(&mut self) -> ForwardReport {
        let _ = self.stop.send(true);
        if let Some(runtime) = self.runtime.take() {
            // Waited for here rather than with `block_on`, which a caller inside an
            // async runtime may not call; likewise the runtime is dropped without
            // blocking.
            let deadline = Instant::now() + CLOSE_GRACE;
            while self.tasks.iter().any(|t| !t.is_finished()) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            self.tasks.clear();
            runtime.shutdown_background();
        }
        // Ends the events subscription: the forwarder then finishes.
        self.server.shutdown();
        self.forwarder
            .take()
            .map(|mut f| f.finish())
            .unwrap_or_default()
    }
}

impl Drop for RelayHandle {
    fn drop(&mut self) {
        self.stop();
    }
}
