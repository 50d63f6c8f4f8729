//! The driver's own thread on runtimes that move tasks between workers (tokio's
//! multi-thread runtime, async-std): there while a client runs, gone once it is closed
//! or dropped. One test in this binary, so that no other client's thread is counted.
#![cfg_attr(
    not(all(target_os = "linux", any(feature = "tokio", feature = "async-std"))),
    allow(dead_code, unused_imports)
)]

mod common;

use std::time::Duration;

use common::*;

const SEC: Duration = Duration::from_secs(1);

/// Threads of this process named `flagsync-driver` (Linux: `/proc/self/task/*/comm`).
fn driver_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "flagsync-driver")
        .count()
}

async fn a_client_has_one_driver_thread_until_it_is_closed_or_dropped(rt: Rt) {
    let server = Server::start(|_, r| {
        r.send(SSE_HEAD);
        r.send(put_event(&[("f", 1, true)], &[], None));
        After::Hold
    });
    assert_eq!(driver_threads(), 0);
    let client = builder(&rt, &server.url()).build().unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(driver_threads(), 1);
    client.close().await;
    assert!(eventually(&rt, 5 * SEC, || driver_threads() == 0).await);

    let client = builder(&rt, &server.url()).build().unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(driver_threads(), 1);
    drop(client);
    assert!(eventually(&rt, 5 * SEC, || driver_threads() == 0).await);
}

#[cfg(all(target_os = "linux", any(feature = "tokio", feature = "async-std")))]
#[test]
fn driver_thread_lives_as_long_as_its_client() {
    #[cfg(feature = "tokio")]
    run_tokio(a_client_has_one_driver_thread_until_it_is_closed_or_dropped);
    #[cfg(feature = "async-std")]
    run_async_std(a_client_has_one_driver_thread_until_it_is_closed_or_dropped);
}
