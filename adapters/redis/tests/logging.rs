//! Every log line of a session with a password-protected Redis store, at TRACE,
//! through an outage and a wrong password, is free of the Redis password and the SDK
//! key. Its own test binary: it installs a global subscriber.

#[macro_use]
mod common;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::redis_server::{RedisServer, Role};
use common::topology::MASTER_NAME;
use common::*;
use flagsync::persist::{CacheConfig, PersistentStore, StoreMode};
use flagsync_redis::RedisStore;

const PASSWORD: &str = "pw-never-logged-42";
const ACL_PASSWORD: &str = "acl-pw-never-logged-77";
const ACL_WRONG: &str = "acl-wrong-pw-never-logged-78";
const SEC: Duration = Duration::from_secs(1);

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logs() -> &'static Captured {
    static LOGS: OnceLock<Captured> = OnceLock::new();
    LOGS.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .init();
        captured
    })
}

runtime_tests!(
    the_redis_password_is_never_logged,
    sentinel_passwords_are_never_logged
);

async fn the_redis_password_is_never_logged(rt: Rt) {
    let logs = logs();
    let mut redis = RedisServer::start_with_password(Some(PASSWORD));
    let (feed_tx, feed_rx) = std::sync::mpsc::channel::<String>();
    let feed_rx = Arc::new(Mutex::new(feed_rx));
    let server = Server::start(move |_, r| {
        let rx = feed_rx.lock().unwrap();
        while let Ok(chunk) = rx.recv() {
            r.send(chunk);
        }
        After::Close
    });
    let store = Arc::new(
        RedisStore::builder(redis.url())
            .connect_timeout(Duration::from_millis(300))
            .build()
            .unwrap(),
    );
    let client = builder(&rt, &server.url())
        .persistent_store(store.clone(), StoreMode::ReadWrite, CacheConfig::default())
        .build()
        .unwrap();
    let store_statuses = client.store_status_changes();
    feed_tx.send(SSE_HEAD.into()).unwrap();
    feed_tx
        .send(put_event(&[("f", 1, true)], &[], None))
        .unwrap();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    redis.stop();
    feed_tx
        .send("event: patch\ndata: {\"path\":\"/flags/f\",\"data\":{\"key\":\"f\",\"version\":2}}\n\n".into())
        .unwrap();
    assert!(next_within(&rt, &store_statuses).await.is_some());
    redis.restart();
    assert!(next_within(&rt, &store_statuses).await.is_some());
    client.close().await;
    // A wrong password: the server's refusal is an error, without either password.
    let wrong = RedisStore::new(redis.url().replace(PASSWORD, "wrong-pw")).unwrap();
    assert!(wrong.initialized().await.is_err());
    assert!(!format!("{wrong:?}").contains("wrong-pw"));
    // An ACL user: a wrong password through a client (its status and logs), the
    // blocking connection and the big-segment store.
    redis.cli(&[
        "ACL",
        "SETUSER",
        "app",
        "on",
        &format!(">{ACL_PASSWORD}"),
        "~launchdarkly:*",
        "+@all",
    ]);
    let acl = Arc::new(
        RedisStore::builder(redis.user_url("app", ACL_WRONG))
            .connect_timeout(Duration::from_millis(300))
            .build()
            .unwrap(),
    );
    let daemon = builder(&rt, "http://127.0.0.1:1")
        .daemon(acl.clone(), CacheConfig::default())
        .build()
        .unwrap();
    daemon.start().unwrap();
    let _ = daemon.wait_for_initialization(SEC).await;
    let status = format!("{:?} {:?}", daemon.store_status(), daemon.status());
    assert!(!status.contains(ACL_WRONG), "{status}");
    assert!(
        acl.get_now(flagsync::Kind::Flag, "f", SEC)
            .unwrap()
            .is_err()
    );
    daemon.close().await;
    let big = flagsync_redis::RedisBigSegmentStore::new(redis.user_url("app", ACL_WRONG)).unwrap();
    let e = flagsync::bigseg::BigSegmentStore::metadata(&big)
        .await
        .unwrap_err();
    assert!(!format!("{e} {e:?}").contains(ACL_WRONG));
    let e = flagsync::bigseg::BigSegmentStore::metadata_now(&big, SEC)
        .unwrap()
        .unwrap_err();
    assert!(!format!("{e} {e:?}").contains(ACL_WRONG));
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    for secret in [ACL_PASSWORD, ACL_WRONG] {
        assert!(
            !text.contains(secret),
            "an ACL password leaked into the logs:\n{text}"
        );
    }
    assert!(
        text.contains("app:***@") || text.contains("authentication"),
        "the ACL session was logged:\n{text}"
    );
    assert!(
        text.contains("persistent store"),
        "the session was logged:\n{text}"
    );
    assert!(
        !text.contains(PASSWORD),
        "the Redis password leaked into the logs:\n{text}"
    );
    assert!(
        !text.contains("wrong-pw"),
        "a Redis password leaked into the logs:\n{text}"
    );
    assert!(
        !text.contains(SDK_KEY),
        "the SDK key leaked into the logs:\n{text}"
    );
}

const SENTINEL_PW: &str = "sentinel-pw-never-logged-91";
const MASTER_PW: &str = "master-pw-never-logged-92";
const SENTINEL_WRONG: &str = "sentinel-wrong-pw-never-logged-93";

/// A store behind a password-protected sentinel, on a password-protected master: a
/// writer client through an outage of the master, wrong sentinel and master passwords,
/// the blocking connection and the big-segment store; no password in any log line.
async fn sentinel_passwords_are_never_logged(rt: Rt) {
    let logs = logs();
    let mut master = RedisServer::start_with_password(Some(MASTER_PW));
    let sentinel = RedisServer::start_as(
        Role {
            password: Some(SENTINEL_PW.into()),
            sentinel: Some(format!(
                "sentinel monitor {MASTER_NAME} 127.0.0.1 {} 1\nsentinel auth-pass {MASTER_NAME} {MASTER_PW}\n",
                master.port()
            )),
            ..Role::default()
        },
        None,
    );
    let url = |pw: &str| format!("redis://:{pw}@127.0.0.1:{}", sentinel.port());
    let store = Arc::new(
        RedisStore::builder_sentinel(MASTER_NAME, [url(SENTINEL_PW)])
            .master_credentials(None, MASTER_PW)
            .connect_timeout(Duration::from_millis(300))
            .build()
            .unwrap(),
    );
    let server = Server::start(move |_, r| {
        r.send(SSE_HEAD);
        r.send(put_event(&[("f", 1, true)], &[], None));
        After::Hold
    });
    let client = builder(&rt, &server.url())
        .persistent_store(store.clone(), StoreMode::ReadWrite, CacheConfig::default())
        .build()
        .unwrap();
    let store_statuses = client.store_status_changes();
    client.start().unwrap();
    assert!(client.wait_for_initialization(5 * SEC).await);
    assert!(inited_within(&rt, &master).await);
    master.stop();
    assert!(next_within(&rt, &store_statuses).await.is_some());
    master.restart();
    assert!(next_within(&rt, &store_statuses).await.is_some());
    assert!(
        store
            .get_now(flagsync::Kind::Flag, "f", SEC)
            .unwrap()
            .is_ok()
    );
    client.close().await;
    for (sentinel_pw, master_pw) in [(SENTINEL_WRONG, MASTER_PW), (SENTINEL_PW, SENTINEL_WRONG)] {
        let wrong = RedisStore::builder_sentinel(MASTER_NAME, [url(sentinel_pw)])
            .master_credentials(None, master_pw)
            .build()
            .unwrap();
        let e = wrong.initialized().await.unwrap_err();
        let e2 = wrong
            .get_now(flagsync::Kind::Flag, "f", SEC)
            .unwrap()
            .unwrap_err();
        let text = format!("{e} {e:?} {e2:?} {wrong:?}");
        for secret in [SENTINEL_PW, MASTER_PW, SENTINEL_WRONG] {
            assert!(!text.contains(secret), "{text}");
        }
    }
    let big =
        flagsync_redis::RedisBigSegmentStore::builder_sentinel(MASTER_NAME, [url(SENTINEL_PW)])
            .master_credentials(None, MASTER_PW)
            .build()
            .unwrap();
    assert!(
        flagsync::bigseg::BigSegmentStore::metadata(&big)
            .await
            .is_ok()
    );
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        text.contains("redis sentinel"),
        "the sentinel session was logged:\n{text}"
    );
    for secret in [SENTINEL_PW, MASTER_PW, SENTINEL_WRONG] {
        assert!(
            !text.contains(secret),
            "a sentinel or master password leaked into the logs:\n{text}"
        );
    }
}
