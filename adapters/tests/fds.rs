//! `close()` releases every file descriptor the client opened, on every runtime:
//! streaming, polling (with a poll in flight), through a CONNECT proxy, and over TLS.
//! The process's open descriptors (`/proc/self/fd`) are counted before, while
//! connected, and after `close()`. Its own test binary, with the tests serialized, so
//! nothing else opens descriptors meanwhile.
#![cfg(target_os = "linux")]
#![cfg_attr(
    not(any(feature = "tokio", feature = "smol", feature = "async-std")),
    allow(dead_code, unused_imports)
)]

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;

const SEC: Duration = Duration::from_secs(1);

/// One test at a time: each counts every descriptor of the process.
static LOCK: Mutex<()> = Mutex::new(());

fn serialized(body: impl FnOnce()) {
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    body();
}

#[cfg(feature = "tokio")]
#[test]
fn tokio_close_releases_every_fd() {
    serialized(|| run_tokio(close_releases_every_fd));
}

#[cfg(feature = "smol")]
#[test]
fn smol_close_releases_every_fd() {
    serialized(|| run_smol(close_releases_every_fd));
}

#[cfg(feature = "async-std")]
#[test]
fn async_std_close_releases_every_fd() {
    serialized(|| run_async_std(close_releases_every_fd));
}

/// The open descriptors of the process: (fd, target).
fn open_fds() -> Vec<(String, String)> {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .map(|e| {
            let target = std::fs::read_link(e.path())
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            (e.file_name().to_string_lossy().into_owned(), target)
        })
        .collect()
}

/// Wait (at most 3 s) until the process is back to `baseline` descriptors.
async fn back_to(rt: &Rt, baseline: &[(String, String)], what: &str) {
    let end = Instant::now() + 3 * SEC;
    loop {
        let now = open_fds();
        if now.len() <= baseline.len() {
            return;
        }
        if Instant::now() >= end {
            let extra: Vec<_> = now.iter().filter(|fd| !baseline.contains(fd)).collect();
            panic!(
                "{what}: {} descriptors open after close(), {} before the client: {extra:?}",
                now.len(),
                baseline.len()
            );
        }
        sleep(rt, Duration::from_millis(10)).await;
    }
}

/// Start `client`, wait until it is connected (`connected`), check it holds
/// descriptors, close it, and check they all return.
async fn check(
    rt: &Rt,
    what: &str,
    client: flagsync::Client,
    baseline: &[(String, String)],
    connected: impl FnMut() -> bool,
) {
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await, "{what}");
    assert!(eventually(rt, 5 * SEC, connected).await, "{what}");
    // Both ends of each connection are in this process.
    let during = open_fds().len();
    assert!(
        during >= baseline.len() + 2,
        "{what}: {during} descriptors while connected, {} before",
        baseline.len()
    );
    client.close().await;
    assert!(client.is_closed(), "{what}");
    back_to(rt, baseline, what).await;
    drop(client);
    back_to(rt, baseline, what).await;
}

async fn close_releases_every_fd(rt: Rt) {
    // Every server first: their listeners belong to the baseline.
    let stream = Server::start(|_, r| {
        r.send(SSE_HEAD);
        r.send(put_event(&[("f", 1, true)], &[], None));
        After::Hold
    });
    let body = all_data(&[("p", 1, true)], &[]);
    let poll = Server::start(move |req, r| {
        if req.index == 0 {
            r.send(format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ));
        }
        // Later polls get no answer: one is in flight when the client closes.
        After::Hold
    });
    let proxy = proxy::Proxy::start();
    #[cfg(feature = "tls")]
    let (certs, secure) = {
        let certs = tls::certs(&["localhost"]);
        let secure = Server::start_wrapped(tls::wrap(certs.server.clone()), |_, r| {
            r.send(SSE_HEAD);
            r.send(put_event(&[("f", 1, true)], &[], None));
            After::Hold
        });
        (certs, secure)
    };
    // The runtime's own descriptors (its reactor) exist from here on.
    sleep(&rt, Duration::from_millis(20)).await;
    let baseline = open_fds();

    let client = builder(&rt, &stream.url()).build().unwrap();
    check(&rt, "streaming", client, &baseline, || {
        stream.open_connections() == 1
    })
    .await;

    let client = builder(&rt, &poll.url())
        .polling(true)
        .poll_interval(Duration::from_millis(100))
        .core_config(|c| c.min_poll_interval = Duration::from_millis(50))
        .build()
        .unwrap();
    check(&rt, "polling", client, &baseline, || {
        poll.connections() >= 2 && poll.open_connections() == 1
    })
    .await;

    let before = stream.connections();
    let client = builder(&rt, &stream.url())
        .proxy(proxy.url())
        .build()
        .unwrap();
    check(&rt, "through the proxy", client, &baseline, || {
        stream.connections() == before + 1 && stream.open_connections() == 1
    })
    .await;
    // A plain-http request is forwarded by the proxy (absolute form), not tunnelled.
    assert_eq!(proxy.forwarded.lock().unwrap().len(), 1);
    assert!(proxy.connects.lock().unwrap().is_empty());

    #[cfg(feature = "tls")]
    {
        let uri = format!("https://localhost:{}", secure.port);
        let client = builder(&rt, &uri)
            .tls_built_in_roots(false)
            .add_root_certificate_pem(certs.ca_pem.clone())
            .build()
            .unwrap();
        check(&rt, "TLS", client, &baseline, || {
            secure.open_connections() == 1
        })
        .await;

        let client = builder(&rt, &uri)
            .tls_built_in_roots(false)
            .add_root_certificate_pem(certs.ca_pem.clone())
            .proxy(proxy.url())
            .build()
            .unwrap();
        check(&rt, "TLS through the proxy", client, &baseline, || {
            secure.open_connections() == 1
        })
        .await;
        assert_eq!(proxy.connects.lock().unwrap().len(), 1);
    }
}
