//! Redis over TLS (`rediss://`, feature `rustls`) against a real redis-server on a
//! TLS port only (`--port 0`), with certificates the test makes (rcgen): the
//! big-segment store, a daemon-mode reader, a CA that did not sign the server's
//! certificate, the webpki roots alone, and mutual TLS required and given. The store
//! contract over TLS is in `store.rs` (`over_tls`).
#![cfg(feature = "tls")]

#[macro_use]
mod common;

use std::time::Duration;

use common::redis_server::{RedisServer, TestCerts, Tls};
use common::*;
use flagsync::Kind;
use flagsync::bigseg::BigSegmentStore;
use flagsync::persist::{CacheConfig, Item, PersistentStore, StoreError};
use flagsync_core::bigseg::context_hash;
use flagsync_redis::{RedisBigSegmentStore, RedisStore};

const SEC: Duration = Duration::from_secs(1);

runtime_tests!(
    big_segments_over_tls,
    a_daemon_reads_over_tls,
    a_server_certificate_from_another_ca_is_a_permanent_fault,
    the_webpki_roots_alone_refuse_a_private_ca,
    mutual_tls_required_and_given,
    tls_to_a_plaintext_port_fails_within_the_timeouts,
);

fn item(key: &str, version: u64) -> Item {
    Item {
        version,
        deleted: false,
        raw: bytes::Bytes::from(format!(
            r#"{{"key":"{key}","version":{version},"on":true,"variations":[true,false],"fallthrough":{{"variation":0}},"offVariation":1}}"#
        )),
    }
}

/// A permanent fault whose message says `cause`.
fn assert_refused(e: &StoreError, cause: &str) {
    assert!(e.is_permanent(), "not permanent: {e:?}");
    let text = e.to_string();
    assert!(text.contains("redis TLS") && text.contains(cause), "{text}");
}

async fn big_segments_over_tls(_rt: Rt) {
    let server = RedisServer::start_tls();
    server.cli(&[
        "SET",
        "launchdarkly:big_segments_synchronized_on",
        "1700000000123",
    ]);
    let hash = context_hash("u1");
    server.cli(&[
        "SADD",
        &format!("launchdarkly:big_segment_include:{hash}"),
        "seg.g1",
    ]);
    let store = server.big_segment_builder().build().unwrap();
    assert_eq!(
        store.metadata().await.unwrap().last_up_to_date,
        Some(1_700_000_000_123)
    );
    let m = store.membership(&hash).await.unwrap().unwrap();
    assert_eq!(m.check("seg.g1"), Some(true));
    assert!(
        store
            .membership(&context_hash("nobody"))
            .await
            .unwrap()
            .is_none()
    );
}

async fn a_daemon_reads_over_tls(rt: Rt) {
    let server = RedisServer::start_tls();
    let writer = server.store_builder().build().unwrap();
    writer
        .init(&[
            (Kind::Flag, "f1".into(), item("f1", 3)),
            (Kind::Flag, "gone".into(), Item::tombstone("gone", 4)),
        ])
        .await
        .unwrap();
    let reader = std::sync::Arc::new(server.store_builder().build().unwrap());
    let client = builder(&rt, "http://127.0.0.1:1")
        .daemon(reader, CacheConfig::ttl(Duration::from_millis(200)))
        .build()
        .unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert!(
        eventually(&rt, 3 * SEC, || client
            .flag("f1")
            .is_some_and(|f| f.version == 3))
        .await
    );
    assert!(client.flag("gone").is_none());
    client.close().await;
}

async fn a_server_certificate_from_another_ca_is_a_permanent_fault(_rt: Rt) {
    let server = RedisServer::start_tls();
    let other = server.tls().unwrap().certs.other_ca_pem.clone();
    let store = RedisStore::builder(server.url())
        .tls_ca_pem(other.clone())
        .connect_timeout(SEC)
        .build()
        .unwrap();
    assert_refused(&store.initialized().await.unwrap_err(), "not trusted");
    // The blocking connection too.
    let e = store.get_now(Kind::Flag, "f", SEC).unwrap().unwrap_err();
    assert_refused(&e, "not trusted");
    let big = RedisBigSegmentStore::builder(server.url())
        .tls_ca_pem(other)
        .build()
        .unwrap();
    assert_refused(&big.metadata().await.unwrap_err(), "not trusted");
    // PEM that does not parse is refused when the store is built.
    let e = RedisStore::builder(server.url())
        .tls_ca_pem("not a certificate")
        .build()
        .map(|_| ())
        .unwrap_err();
    assert!(e.is_permanent(), "{e:?}");
    // Certificates for a plaintext URL are a mistake, said as such.
    let e = RedisStore::builder("redis://127.0.0.1:1")
        .tls_ca_pem(server.tls().unwrap().certs.ca_pem.clone())
        .build()
        .map(|_| ())
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::Config(m) if m.contains("rediss://")),
        "{e:?}"
    );
}

async fn the_webpki_roots_alone_refuse_a_private_ca(_rt: Rt) {
    let server = RedisServer::start_tls();
    let store = RedisStore::builder(server.url()).build().unwrap();
    assert_refused(&store.initialized().await.unwrap_err(), "not trusted");
    let big = RedisBigSegmentStore::new(server.url()).unwrap();
    assert_refused(&big.metadata().await.unwrap_err(), "not trusted");
}

async fn mutual_tls_required_and_given(_rt: Rt) {
    let certs = TestCerts::new();
    let tls = |client_cert| Tls {
        certs: certs.clone(),
        auth_clients: "yes",
        client_cert,
    };
    let server = RedisServer::start_with(None, Some(tls(true)));
    // Given: async, blocking and big-segment connections all work.
    let store = server.store_builder().build().unwrap();
    store
        .init(&[(Kind::Flag, "f".into(), item("f", 1))])
        .await
        .unwrap();
    assert!(store.initialized().await.unwrap());
    let got = store
        .get_now(Kind::Flag, "f", SEC)
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(got.version, 1);
    assert_eq!(
        server
            .big_segment_builder()
            .build()
            .unwrap()
            .metadata()
            .await
            .unwrap()
            .last_up_to_date,
        None
    );
    // Required but not given: refused, permanently, saying why.
    let without = RedisStore::builder(server.url())
        .tls_ca_pem(certs.ca_pem.clone())
        .connect_timeout(SEC)
        .build()
        .unwrap();
    assert_refused(
        &without.initialized().await.unwrap_err(),
        "client certificate",
    );
    let e = without.get_now(Kind::Flag, "f", SEC).unwrap().unwrap_err();
    assert_refused(&e, "client certificate");
    let big = RedisBigSegmentStore::builder(server.url())
        .tls_ca_pem(certs.ca_pem.clone())
        .build()
        .unwrap();
    assert_refused(&big.metadata().await.unwrap_err(), "client certificate");
    // A client certificate signed by another CA: refused too.
    let stranger = TestCerts::new();
    let wrong = RedisStore::builder(server.url())
        .tls_ca_pem(certs.ca_pem.clone())
        .tls_client_cert(
            stranger.client_cert_pem.clone(),
            stranger.client_key_pem.clone(),
        )
        .build()
        .unwrap();
    assert!(wrong.initialized().await.unwrap_err().is_permanent());
    // Optional: a store without a certificate is welcome.
    let optional = RedisServer::start_with(
        None,
        Some(Tls {
            auth_clients: "optional",
            ..tls(false)
        }),
    );
    let store = optional.store_builder().build().unwrap();
    assert!(!store.initialized().await.unwrap());
}

async fn tls_to_a_plaintext_port_fails_within_the_timeouts(_rt: Rt) {
    let server = RedisServer::start();
    let certs = TestCerts::new();
    let store = RedisStore::builder(server.url().replace("redis://", "rediss://"))
        .tls_ca_pem(certs.ca_pem.clone())
        .connect_timeout(SEC)
        .build()
        .unwrap();
    // Redis reads the ClientHello as the start of a command and waits for its end:
    // the handshake times out, as against a server that hangs.
    let started = std::time::Instant::now();
    assert!(store.initialized().await.is_err());
    assert!(started.elapsed() < 5 * SEC);
}
