//! The runtime the service's clients run on (`--runtime tokio|smol|async-std`).

use std::future::Future;
use std::sync::Arc;

use flagsync::runtime::{AsyncStdRuntime, Runtime, SmolRuntime, TokioRuntime};

/// One of flagsync's three runtimes, and how the service's threads wait on it.
#[derive(Debug)]
pub enum ServiceRuntime {
    /// A multi-threaded tokio runtime owned by the service.
    Tokio(tokio::runtime::Runtime),
    /// smol (async-io's reactor; no runtime object).
    Smol,
    /// async-std (the same async-io reactor).
    AsyncStd,
}

impl ServiceRuntime {
    /// The runtime named `name` (`tokio`, `smol`, `async-std`), if it is one.
    pub fn named(name: &str) -> Option<Self> {
        match name {
            "tokio" => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .ok()
                .map(Self::Tokio),
            "smol" => Some(Self::Smol),
            "async-std" => Some(Self::AsyncStd),
            _ => None,
        }
    }

    /// Its name, as [`ServiceRuntime::named`] takes it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Tokio(_) => "tokio",
            Self::Smol => "smol",
            Self::AsyncStd => "async-std",
        }
    }

    /// The runtime to give a client's builder.
    pub fn runtime(&self) -> Arc<dyn Runtime> {
        match self {
            Self::Tokio(rt) => {
                let _guard = rt.enter();
                Arc::new(TokioRuntime::try_current().expect("inside the runtime just entered"))
            }
            Self::Smol => Arc::new(SmolRuntime),
            Self::AsyncStd => Arc::new(AsyncStdRuntime),
        }
    }

    /// Run `future` to completion on the calling (service) thread.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        match self {
            Self::Tokio(rt) => rt.block_on(future),
            Self::Smol => smol::block_on(future),
            Self::AsyncStd => async_std::task::block_on(future),
        }
    }
}
