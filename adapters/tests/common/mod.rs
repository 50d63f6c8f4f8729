//! Test support: a scripted HTTP/1.1 server on std threads, a CONNECT proxy, TLS
//! certificates, and a harness that runs one async test body on each runtime feature.
#![allow(dead_code, unreachable_pub)]

pub mod proxy;
pub mod server;
#[cfg(feature = "tls")]
pub mod tls;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flagsync::runtime::Runtime;

#[allow(unused_imports)] // not every test binary uses the HTTP server
pub use server::{After, Server};

/// The SDK key of every test (valid characters, so the core sends it).
pub const SDK_KEY: &str = "sdk-0ddba11-secret-key";

/// Run `body` on every enabled runtime feature, as `#[test]`s named after it.
#[macro_export]
macro_rules! runtime_tests {
    ($($name:ident),* $(,)?) => {
        #[cfg(feature = "tokio")]
        mod tokio_rt {
            $( #[test] fn $name() { $crate::common::run_tokio(super::$name) } )*
        }
        #[cfg(feature = "smol")]
        mod smol_rt {
            $( #[test] fn $name() { $crate::common::run_smol(super::$name) } )*
        }
        #[cfg(feature = "async-std")]
        mod async_std_rt {
            $( #[test] fn $name() { $crate::common::run_async_std(super::$name) } )*
        }
    };
}

/// Every test body gets the runtime to run on.
pub type Rt = Arc<dyn Runtime>;

#[cfg(feature = "tokio")]
pub fn run_tokio<F: Future<Output = ()>>(body: impl FnOnce(Rt) -> F) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let runtime: Rt = Arc::new(flagsync::runtime::TokioRuntime::try_current().unwrap());
        body(runtime).await;
    });
}

#[cfg(feature = "smol")]
pub fn run_smol<F: Future<Output = ()>>(body: impl FnOnce(Rt) -> F) {
    smol::block_on(body(Arc::new(flagsync::runtime::SmolRuntime)));
}

#[cfg(feature = "async-std")]
pub fn run_async_std<F: Future<Output = ()>>(body: impl FnOnce(Rt) -> F) {
    async_std::task::block_on(body(Arc::new(flagsync::runtime::AsyncStdRuntime)));
}

/// Sleep on `rt`.
pub async fn sleep(rt: &Rt, d: Duration) {
    rt.sleep_until(Instant::now() + d).await;
}

/// `fut`, or `None` after `d`.
pub async fn timeout<T>(rt: &Rt, d: Duration, fut: impl Future<Output = T>) -> Option<T> {
    futures_lite::future::or(async { Some(fut.await) }, async {
        sleep(rt, d).await;
        None
    })
    .await
}

/// Poll `cond` every 5 ms for at most `d`.
pub async fn eventually(rt: &Rt, d: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        sleep(rt, Duration::from_millis(5)).await;
    }
    cond()
}

/// A client builder for a test server: no proxy from the environment, fast backoff.
pub fn builder(rt: &Rt, stream_uri: &str) -> flagsync::ClientBuilder {
    flagsync::Client::builder(SDK_KEY)
        .stream_uri(stream_uri)
        .polling_uri(stream_uri)
        .runtime(rt.clone())
        .no_proxy()
        .initial_reconnect_delay(Duration::from_millis(20))
        .close_timeout(Duration::from_secs(3))
        .seed(7)
}

/// An SSE `put` of flags (key, version, on) and segments (key, version).
pub fn put_event(
    flags: &[(&str, u64, bool)],
    segments: &[(&str, u64)],
    id: Option<&str>,
) -> String {
    let id = id.map(|i| format!("id: {i}\n")).unwrap_or_default();
    format!(
        "event: put\n{id}data: {{\"path\":\"/\",\"data\":{}}}\n\n",
        all_data(flags, segments)
    )
}

/// The FDv1 all-data JSON (the polling body, and `put`'s `data`).
pub fn all_data(flags: &[(&str, u64, bool)], segments: &[(&str, u64)]) -> String {
    let flags: Vec<String> = flags
        .iter()
        .map(|(k, v, on)| {
            format!(
                "\"{k}\":{{\"key\":\"{k}\",\"version\":{v},\"on\":{on},\"variations\":[true,false]}}"
            )
        })
        .collect();
    let segments: Vec<String> = segments
        .iter()
        .map(|(k, v)| format!("\"{k}\":{{\"key\":\"{k}\",\"version\":{v}}}"))
        .collect();
    format!(
        "{{\"flags\":{{{}}},\"segments\":{{{}}}}}",
        flags.join(","),
        segments.join(",")
    )
}

/// The head of a 200 event-stream response.
pub const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-LD-EnvID: env-123\r\n\r\n";
