//! The client against a scripted server over 127.0.0.1, on every runtime feature.
#![cfg_attr(
    not(any(feature = "tokio", feature = "smol", feature = "async-std")),
    allow(dead_code, unused_imports)
)]

#[macro_use]
mod common;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use flagsync::{ErrorKind, State, UnrecoverablePolicy};

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    initial_put_then_patches_and_deletes,
    reconnects_with_last_event_id_after_a_drop,
    unauthorized_under_retry_policy_keeps_initializing_without_a_fast_retry,
    unauthorized_under_stop_policy_turns_off,
    service_unavailable_then_recovery,
    silent_stream_times_out_and_reconnects,
    polling_with_etag_304_and_gzip,
    through_a_forwarding_proxy,
    close_releases_every_socket,
    initial_change_events_are_delivered_before_initialized,
    bytes_received_counts_the_data_connections,
);

#[cfg(feature = "tls")]
mod tls_rt {
    use super::tls_tests::*;
    runtime_tests!(
        tls_with_a_custom_ca,
        tls_rejects_the_wrong_host_name,
        tls_bad_pem_is_a_build_error,
        tls_accepts_a_common_name_only_certificate_for_its_name,
        tls_rejects_a_common_name_only_certificate_for_another_name,
        tls_rejects_a_common_name_only_certificate_from_an_untrusted_ca,
        tls_ignores_the_common_name_when_a_subject_alt_name_is_present,
    );
}

async fn initial_put_then_patches_and_deletes(rt: Rt) {
    let server = Server::start(|_, r| {
        r.send(SSE_HEAD);
        r.send(put_event(
            &[("f1", 1, true), ("f2", 1, false)],
            &[("s1", 4)],
            None,
        ));
        r.pause(100);
        r.send("event: patch\ndata: {\"path\":\"/flags/f1\",\"data\":{\"key\":\"f1\",\"version\":2,\"on\":false,\"variations\":[1,2,3]}}\n\n");
        r.send("event: delete\ndata: {\"path\":\"/flags/f2\",\"version\":3}\n\n");
        r.send("event: patch\ndata: {\"path\":\"/flags/f1\",\"data\":{\"key\":\"f1\",\"version\":1}}\n\n");
        After::Hold
    });
    let client = builder(&rt, &format!("{}/", server.url())).build().unwrap();
    let changes = client.flag_changes();
    let statuses = client.status_changes();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    // The initial data's changes are buffered before initialization; read now, before
    // the later changes of the same flags would merge into them.
    let mut keys: Vec<String> = std::iter::from_fn(|| changes.try_recv())
        .map(|c| c.key)
        .collect();
    assert_eq!(keys, ["f1", "f2"]);
    assert!(client.initialized());
    assert_eq!(client.environment_id().as_deref(), Some("env-123"));
    let req = &server.requests()[0];
    assert_eq!((req.method.as_str(), req.target.as_str()), ("GET", "/all"));
    assert_eq!(req.header("authorization"), Some(SDK_KEY));
    let s1 = client.segment("s1").unwrap();
    assert_eq!(s1.version, 4);
    // The put is visible at once (the patch comes 100 ms later).
    let f1 = client.flag("f1").unwrap();
    assert_eq!((f1.version, f1.on, f1.variations.len()), (1, true, 2));
    assert!(eventually(&rt, 3 * SEC, || client.flag("f2").is_none()).await);
    let f1 = client.flag("f1").unwrap();
    // The stale patch (version 1) was rejected.
    assert_eq!((f1.version, f1.on, f1.variations.len()), (2, false, 3));
    assert_eq!(client.all_flags().keys().collect::<Vec<_>>(), ["f1"]);
    assert_eq!(
        client
            .snapshot()
            .get(flagsync::Kind::Flag, "f1")
            .unwrap()
            .version,
        2
    );
    while keys.len() < 4 {
        let change = timeout(&rt, 3 * SEC, changes.recv())
            .await
            .flatten()
            .unwrap();
        keys.push(change.key);
    }
    assert_eq!(keys, ["f1", "f2", "f1", "f2"]);
    assert!(
        changes.try_recv().is_none(),
        "a rejected write reports nothing"
    );
    let st = timeout(&rt, SEC, statuses.recv()).await.flatten().unwrap();
    assert_eq!(st.state, State::Valid);
    assert_eq!(client.status().state, State::Valid);
    assert!(client.status().error.is_none());
    client.close().await;
    assert_eq!(client.status().state, State::Off);
    assert!(eventually(&rt, 3 * SEC, || server.open_connections() == 0).await);
}

async fn reconnects_with_last_event_id_after_a_drop(rt: Rt) {
    let server = Server::start(|req, r| {
        r.send(SSE_HEAD);
        if req.index == 0 {
            r.send(put_event(&[("f", 1, true)], &[], Some("evt-1")));
            r.pause(50);
            After::Close
        } else {
            r.send(put_event(&[("f", 2, true)], &[], Some("evt-2")));
            After::Hold
        }
    });
    let client = builder(&rt, &server.url()).build().unwrap();
    let statuses = client.status_changes();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert!(
        eventually(&rt, 5 * SEC, || client
            .flag("f")
            .is_some_and(|f| f.version == 2))
        .await
    );
    let reqs = server.requests();
    assert_eq!(reqs[0].header("last-event-id"), None);
    assert_eq!(reqs[1].header("last-event-id"), Some("evt-1"));
    let mut seen = Vec::new();
    while let Some(Some(st)) = timeout(&rt, Duration::from_millis(200), statuses.recv()).await {
        seen.push(st);
    }
    let interrupted = seen.iter().find(|s| s.state == State::Interrupted).unwrap();
    assert_eq!(
        interrupted.error.as_ref().unwrap().kind,
        ErrorKind::NetworkError
    );
    assert_eq!(seen.last().unwrap().state, State::Valid);
    client.close().await;
}

async fn unauthorized_under_retry_policy_keeps_initializing_without_a_fast_retry(rt: Rt) {
    for code in [401u16, 403] {
        let server = Server::start(move |_, r| {
            r.send(format!(
                "HTTP/1.1 {code} Denied\r\nContent-Length: 0\r\n\r\n"
            ));
            After::Close
        });
        let client = builder(&rt, &server.url()).build().unwrap();
        client.start().unwrap();
        assert!(
            !client
                .wait_for_initialization(Duration::from_millis(400))
                .await
        );
        let st = client.status();
        assert_eq!(st.state, State::Initializing);
        let err = st.error.unwrap();
        assert_eq!(
            (err.kind, err.status_code),
            (ErrorKind::ErrorResponse, code)
        );
        assert!(err.message.contains(&code.to_string()), "{}", err.message);
        assert!(err.time <= std::time::SystemTime::now());
        assert_eq!(server.connections(), 1, "no retry within 5 minutes");
        client.close().await;
        assert_eq!(client.status().state, State::Off);
    }
}

async fn unauthorized_under_stop_policy_turns_off(rt: Rt) {
    for code in [401u16, 403] {
        let server = Server::start(move |_, r| {
            r.send(format!(
                "HTTP/1.1 {code} Denied\r\nContent-Length: 0\r\n\r\n"
            ));
            After::Close
        });
        let client = builder(&rt, &server.url())
            .unrecoverable(UnrecoverablePolicy::Stop)
            .build()
            .unwrap();
        client.start().unwrap();
        let t0 = std::time::Instant::now();
        assert!(!client.wait_for_initialization(5 * SEC).await);
        assert!(
            t0.elapsed() < 3 * SEC,
            "readiness ends the wait when the source gives up"
        );
        let st = client.status();
        assert_eq!(st.state, State::Off);
        assert_eq!(st.error.unwrap().status_code, code);
        sleep(&rt, Duration::from_millis(100)).await;
        assert_eq!(server.connections(), 1);
        client.close().await;
    }
}

async fn service_unavailable_then_recovery(rt: Rt) {
    let server = Server::start(|req, r| {
        if req.index == 0 {
            r.send("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
            return After::Close;
        }
        r.send(SSE_HEAD);
        r.send(put_event(&[("f", 1, true)], &[], None));
        After::Hold
    });
    let client = builder(&rt, &server.url()).build().unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    let st = client.status();
    assert_eq!(st.state, State::Valid);
    let err = st.error.unwrap();
    assert_eq!((err.kind, err.status_code), (ErrorKind::ErrorResponse, 503));
    assert_eq!(server.connections(), 2);
    client.close().await;
}

async fn silent_stream_times_out_and_reconnects(rt: Rt) {
    let server = Server::start(|_, r| {
        r.send(SSE_HEAD);
        r.send(put_event(&[("f", 1, true)], &[], None));
        After::Hold
    });
    let client = builder(&rt, &server.url())
        .stream_read_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert!(eventually(&rt, 5 * SEC, || server.connections() >= 2).await);
    let err = client.status().error.unwrap();
    assert_eq!(err.kind, ErrorKind::NetworkError);
    assert_eq!(err.message, "read timed out");
    // The timed-out connection was closed by the client.
    assert!(eventually(&rt, 3 * SEC, || server.open_connections() <= 1).await);
    client.close().await;
}

fn gzip(s: &str) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(s.as_bytes()).unwrap();
    enc.finish().unwrap()
}

async fn polling_with_etag_304_and_gzip(rt: Rt) {
    let body = gzip(&all_data(&[("p", 5, true)], &[("s", 1)]));
    let server = Server::start(move |req, r| {
        if req.header("if-none-match") == Some("\"v1\"") {
            r.send("HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n");
        } else {
            r.send(format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nETag: \"v1\"\r\nContent-Length: {}\r\n\r\n",
                body.len()
            ));
            r.send(&body);
        }
        After::Hold
    });
    let client = builder(&rt, &server.url())
        .polling(true)
        .poll_interval(Duration::from_millis(100))
        .core_config(|c| c.min_poll_interval = Duration::from_millis(50))
        .build()
        .unwrap();
    let changes = client.flag_changes();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(client.flag("p").unwrap().version, 5);
    assert!(eventually(&rt, 5 * SEC, || server.requests().len() >= 3).await);
    let reqs = server.requests();
    assert_eq!(reqs[0].target, "/sdk/latest-all");
    assert_eq!(reqs[0].header("accept-encoding"), Some("gzip"));
    assert_eq!(reqs[0].header("if-none-match"), None);
    assert_eq!(reqs[1].header("if-none-match"), Some("\"v1\""));
    assert_eq!(client.status().state, State::Valid);
    // One change for the first poll, none for the 304s.
    assert_eq!(changes.try_recv().unwrap().key, "p");
    assert!(changes.try_recv().is_none());
    // Every finished poll's connection is closed by the client.
    assert!(eventually(&rt, 3 * SEC, || server.open_connections() <= 1).await);
    client.close().await;
    assert!(eventually(&rt, 3 * SEC, || server.open_connections() == 0).await);
}

async fn through_a_forwarding_proxy(rt: Rt) {
    let server = Server::start(|_, r| {
        r.send(SSE_HEAD);
        r.send(put_event(&[("f", 1, true)], &[], None));
        After::Hold
    });
    let proxy = proxy::Proxy::start();
    let client = builder(&rt, &server.url())
        .proxy(proxy.url())
        .build()
        .unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    // A plain-http request is forwarded by the proxy, in absolute form (no tunnel).
    assert!(proxy.connects.lock().unwrap().is_empty());
    let forwarded = proxy.forwarded.lock().unwrap().clone();
    assert_eq!(forwarded.len(), 1);
    assert!(
        forwarded[0].starts_with(&format!(
            "GET http://127.0.0.1:{}/all HTTP/1.1\r\n",
            server.port
        )),
        "{forwarded:?}"
    );
    assert_eq!(server.requests()[0].header("authorization"), Some(SDK_KEY));
    client.close().await;
    assert!(eventually(&rt, 3 * SEC, || server.open_connections() == 0).await);
}

async fn close_releases_every_socket(rt: Rt) {
    let requests = Arc::new(AtomicUsize::new(0));
    let seen = requests.clone();
    let server = Server::start(move |_, r| {
        seen.fetch_add(1, Ordering::SeqCst);
        r.send(SSE_HEAD);
        r.send(put_event(&[("f", 1, true)], &[], None));
        After::Hold
    });
    let client = builder(&rt, &server.url()).build().unwrap();
    let statuses = client.status_changes();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(server.open_connections(), 1);
    let t0 = std::time::Instant::now();
    client.close().await;
    assert!(client.is_closed(), "close waits for every connection task");
    assert!(t0.elapsed() < 3 * SEC);
    assert!(eventually(&rt, 3 * SEC, || server.open_connections() == 0).await);
    // Idempotent, and start after close does nothing.
    client.close().await;
    client.close_blocking();
    client.start().unwrap();
    sleep(&rt, Duration::from_millis(50)).await;
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    assert_eq!(client.status().state, State::Off);
    // Subscriptions end.
    let mut last = None;
    while let Some(Some(st)) = timeout(&rt, SEC, statuses.recv()).await {
        last = Some(st.state);
    }
    assert_eq!(last, Some(State::Off));
}

/// `initialized()` (and so `wait_for_initialization`) turns true only once every change
/// event of the initial data is in each subscription made before.
async fn initial_change_events_are_delivered_before_initialized(rt: Rt) {
    const N: usize = 5000;
    let keys: Vec<String> = (0..N).map(|i| format!("flag-{i:05}")).collect();
    let flags: Vec<(&str, u64, bool)> = keys.iter().map(|k| (k.as_str(), 1, true)).collect();
    let put = put_event(&flags, &[], None);
    let server = Server::start(move |_, r| {
        r.send(SSE_HEAD);
        r.send(&put);
        After::Hold
    });
    let client = builder(&rt, &server.url()).build().unwrap();
    let spun = client.flag_changes();
    let waited = client.flag_changes();
    // A thread spinning on `initialized()` counts what is buffered the moment it flips.
    let watcher = {
        let client = client.clone();
        std::thread::spawn(move || {
            let end = std::time::Instant::now() + 10 * SEC;
            while !client.initialized() {
                assert!(std::time::Instant::now() < end, "never initialized");
                std::hint::spin_loop();
            }
            std::iter::from_fn(|| spun.try_recv()).count()
        })
    };
    client.start().unwrap();
    assert!(client.wait_for_initialization(10 * SEC).await);
    let mut seen: Vec<String> = std::iter::from_fn(|| waited.try_recv())
        .map(|c| c.key)
        .collect();
    seen.sort();
    assert_eq!(seen, keys, "every change event precedes initialization");
    assert!(eventually(&rt, 10 * SEC, || watcher.is_finished()).await);
    assert_eq!(watcher.join().unwrap(), N);
    assert_eq!(client.status().state, State::Valid);
    client.close().await;
}

async fn bytes_received_counts_the_data_connections(rt: Rt) {
    let put = put_event(&[("f", 1, true)], &[], None);
    let expected = (SSE_HEAD.len() + put.len()) as u64;
    let server = Server::start(move |_, r| {
        r.send(SSE_HEAD);
        r.send(&put);
        After::Hold
    });
    let client = builder(&rt, &server.url()).build().unwrap();
    assert_eq!(client.bytes_received(), 0);
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert_eq!(client.bytes_received(), expected);
    client.close().await;
    assert_eq!(client.bytes_received(), expected);
}

#[cfg(feature = "tls")]
mod tls_tests {
    use super::*;

    pub(crate) async fn tls_with_a_custom_ca(rt: Rt) {
        let certs = tls::certs(&["localhost"]);
        let server = Server::start_wrapped(tls::wrap(certs.server.clone()), |_, r| {
            r.send(SSE_HEAD);
            r.send(put_event(&[("f", 1, true)], &[], None));
            After::Hold
        });
        let uri = format!("https://localhost:{}", server.port);
        let client = builder(&rt, &uri)
            .tls_built_in_roots(false)
            .add_root_certificate_pem(certs.ca_pem.clone())
            .build()
            .unwrap();
        client.start().unwrap();
        assert!(client.wait_for_initialization(5 * SEC).await);
        assert_eq!(server.requests()[0].header("authorization"), Some(SDK_KEY));
        client.close().await;
        assert!(eventually(&rt, 3 * SEC, || server.open_connections() == 0).await);

        // Through the proxy as well.
        let proxy = proxy::Proxy::start();
        let client = builder(&rt, &uri)
            .add_root_certificate_pem(certs.ca_pem)
            .proxy(proxy.url())
            .build()
            .unwrap();
        client.start().unwrap();
        assert!(client.wait_for_initialization(5 * SEC).await);
        // https: a CONNECT tunnel, so the proxy never sees the request or the key.
        let connects = proxy.connects.lock().unwrap().clone();
        assert_eq!(connects.len(), 1);
        assert!(
            connects[0].starts_with(&format!("CONNECT localhost:{} HTTP/1.1\r\n", server.port))
        );
        assert!(
            !connects[0].contains(SDK_KEY),
            "the proxy never sees the request"
        );
        assert!(proxy.forwarded.lock().unwrap().is_empty());
        client.close().await;
    }

    pub(crate) async fn tls_rejects_the_wrong_host_name(rt: Rt) {
        let certs = tls::certs(&["other.example"]);
        let server = Server::start_wrapped(tls::wrap(certs.server.clone()), |_, r| {
            r.send(SSE_HEAD);
            r.send(put_event(&[("f", 1, true)], &[], None));
            After::Hold
        });
        let uri = format!("https://localhost:{}", server.port);
        let client = builder(&rt, &uri)
            .add_root_certificate_pem(certs.ca_pem.clone())
            .build()
            .unwrap();
        client.start().unwrap();
        assert!(
            !client
                .wait_for_initialization(Duration::from_millis(500))
                .await
        );
        certificate_error(&client, &server);
        client.close().await;

        // Only an explicit opt-out accepts it.
        let client = builder(&rt, &uri)
            .tls_built_in_roots(false)
            .danger_accept_invalid_certs(true)
            .build()
            .unwrap();
        client.start().unwrap();
        assert!(client.wait_for_initialization(5 * SEC).await);
        client.close().await;
    }

    /// The client's error, which must be a certificate error seen before any request
    /// reached `server`; its message.
    fn certificate_error(client: &flagsync::Client, server: &Server) -> String {
        let err = client.status().error.unwrap();
        assert_eq!(err.kind, ErrorKind::NetworkError);
        assert!(
            err.message.to_lowercase().contains("certificate"),
            "{}",
            err.message
        );
        assert!(server.requests().is_empty());
        err.message
    }

    /// Serve `served` over TLS and connect to it as `https://{host}:{port}`, trusting
    /// only `trusted_ca_pem`; a `host` other than `localhost` or an IP address is reached
    /// through a proxy that tunnels every `CONNECT` to the local server. `Ok` when the
    /// client initialized; otherwise the failure, which must be a certificate error (its
    /// message is returned) with no request seen by the server.
    async fn tls_connects(
        rt: &Rt,
        served: &tls::Certs,
        trusted_ca_pem: &str,
        host: &str,
    ) -> Result<(), String> {
        let server = Server::start_wrapped(tls::wrap(served.server.clone()), |_, r| {
            r.send(SSE_HEAD);
            r.send(put_event(&[("f", 1, true)], &[], None));
            After::Hold
        });
        let uri = format!("https://{host}:{}", server.port);
        let mut builder = builder(rt, &uri)
            .tls_built_in_roots(false)
            .add_root_certificate_pem(trusted_ca_pem.to_owned());
        let proxy;
        if host != "localhost" && host.parse::<std::net::IpAddr>().is_err() {
            proxy = proxy::Proxy::start_redirecting_to(server.port);
            builder = builder.proxy(proxy.url());
        }
        let client = builder.build().unwrap();
        client.start().unwrap();
        let result = if client.wait_for_initialization(2 * SEC).await {
            Ok(())
        } else {
            Err(certificate_error(&client, &server))
        };
        client.close().await;
        result
    }

    /// LaunchDarkly's sdk-test-harness serves a certificate with no subjectAltName,
    /// only `CN=localhost`: accepted for `localhost`, as OpenSSL-based SDKs do.
    pub(crate) async fn tls_accepts_a_common_name_only_certificate_for_its_name(rt: Rt) {
        let certs = tls::certs_with(&[], Some("localhost"));
        tls_connects(&rt, &certs, &certs.ca_pem, "localhost")
            .await
            .unwrap();
    }

    pub(crate) async fn tls_rejects_a_common_name_only_certificate_for_another_name(rt: Rt) {
        let certs = tls::certs_with(&[], Some("localhost"));
        // The redirecting proxy still works for a certificate valid for the name ...
        let valid = tls::certs_with(&[], Some("other.example"));
        tls_connects(&rt, &valid, &valid.ca_pem, "other.example")
            .await
            .unwrap();
        // ... but `CN=localhost` is not valid for other.example.
        let err = tls_connects(&rt, &certs, &certs.ca_pem, "other.example")
            .await
            .unwrap_err();
        assert!(err.contains("not valid for name"), "{err}");
        // Nor for an IP address: the common name is only ever matched to DNS names.
        let err = tls_connects(&rt, &certs, &certs.ca_pem, "127.0.0.1")
            .await
            .unwrap_err();
        assert!(err.contains("not valid for name"), "{err}");
        let ip = tls::certs_with(&[], Some("127.0.0.1"));
        let err = tls_connects(&rt, &ip, &ip.ca_pem, "127.0.0.1")
            .await
            .unwrap_err();
        assert!(err.contains("not valid for name"), "{err}");
    }

    pub(crate) async fn tls_rejects_a_common_name_only_certificate_from_an_untrusted_ca(rt: Rt) {
        let certs = tls::certs_with(&[], Some("localhost"));
        // Another CA, with the same name as the one that signed the certificate.
        let other_ca = tls::certs(&["localhost"]);
        let err = tls_connects(&rt, &certs, &other_ca.ca_pem, "localhost")
            .await
            .unwrap_err();
        // Rejected by the chain check, before any name is looked at.
        assert!(err.contains("BadSignature"), "{err}");
    }

    pub(crate) async fn tls_ignores_the_common_name_when_a_subject_alt_name_is_present(rt: Rt) {
        let certs = tls::certs_with(&["other.example"], Some("localhost"));
        let err = tls_connects(&rt, &certs, &certs.ca_pem, "localhost")
            .await
            .unwrap_err();
        assert!(err.contains("not valid for name"), "{err}");
    }

    pub(crate) async fn tls_bad_pem_is_a_build_error(_rt: Rt) {
        let err = flagsync::Client::builder(SDK_KEY)
            .add_root_certificate_pem("not a pem")
            .build()
            .unwrap_err();
        assert!(matches!(err, flagsync::Error::Tls(_)), "{err}");
    }
}

#[test]
fn invalid_uris_are_build_errors() {
    let err = flagsync::Client::builder(SDK_KEY)
        .stream_uri("localhost:8080")
        .build()
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid stream URI: unsupported scheme (use http:// or https://)"
    );
    let err = flagsync::Client::builder(SDK_KEY)
        .polling_uri("http://")
        .build()
        .unwrap_err();
    assert!(err.to_string().starts_with("invalid polling URI"), "{err}");
    let err = flagsync::Client::builder(SDK_KEY)
        .proxy("socks5://x:1")
        .build()
        .unwrap_err();
    assert!(matches!(err, flagsync::Error::Proxy(_)), "{err}");
}

#[cfg(all(feature = "tokio", not(feature = "smol"), not(feature = "async-std")))]
#[test]
fn start_outside_a_tokio_runtime_is_a_clear_error() {
    let client = flagsync::Client::builder(SDK_KEY).build().unwrap();
    assert_eq!(client.start(), Err(flagsync::Error::NoRuntime));
    client.close_blocking();
}
