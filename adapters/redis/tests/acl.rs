//! ACL users (`redis://user:password@host`) against a real redis-server, on every
//! runtime feature: a user with rights on the prefix works, a wrong password is an
//! authentication fault, a user without rights is a permanent fault; no error or
//! `Debug` output holds the password. (Over TLS: `snapshot_over_tls_…` in the CLI's
//! tests; the logs: `logging.rs`.)

#[macro_use]
mod common;

use bytes::Bytes;
use common::Rt;
use common::redis_server::RedisServer;
use flagsync::Kind;
use flagsync::bigseg::BigSegmentStore;
use flagsync::persist::{Item, PersistentStore, StoreError, Upserted};
use flagsync_redis::{RedisBigSegmentStore, RedisStore};

const PW: &str = "acl-pw-9f3";

runtime_tests!(
    an_acl_user_with_rights_on_the_prefix_works,
    a_wrong_password_is_an_authentication_fault,
    a_user_without_rights_is_a_permanent_fault,
);

fn item(key: &str, version: u64) -> Item {
    Item {
        version,
        deleted: false,
        raw: Bytes::from(format!(r#"{{"key":"{key}","version":{version}}}"#)),
    }
}

/// A server with the user `app` (password [`PW`]) allowed `rules`.
fn server_with_user(rules: &[&str]) -> RedisServer {
    let server = RedisServer::start();
    let pw = format!(">{PW}");
    let mut args = vec!["ACL", "SETUSER", "app", "on", &pw];
    args.extend_from_slice(rules);
    assert_eq!(server.cli(&args), "OK");
    server
}

/// `e` and its forms in statuses and `Debug` hold no password.
fn assert_no_password(e: &StoreError) {
    for text in [e.to_string(), format!("{e:?}"), e.fault().message] {
        assert!(!text.contains(PW) && !text.contains("wrong-"), "{text}");
    }
}

async fn an_acl_user_with_rights_on_the_prefix_works(_rt: Rt) {
    let server = server_with_user(&["~launchdarkly:*", "+@all"]);
    let url = server.user_url("app", PW);
    let store = RedisStore::new(url.clone()).unwrap();
    assert!(!format!("{store:?}").contains(PW));
    store
        .init(&[(Kind::Flag, "f".into(), item("f", 1))])
        .await
        .unwrap();
    assert!(store.initialized().await.unwrap());
    assert_eq!(
        store.upsert(Kind::Flag, "f", &item("f", 2)).await.unwrap(),
        Upserted::Written
    );
    assert_eq!(store.all(Kind::Flag).await.unwrap().len(), 1);
    let now = store.get_now(Kind::Flag, "f", std::time::Duration::from_secs(1));
    assert_eq!(now.unwrap().unwrap().unwrap().version, 2);
    assert!(store.holds_writes().await.unwrap());
    // The default user (no password on this server) sees what `app` wrote.
    assert_eq!(server.cli(&["HLEN", "launchdarkly:features"]), "1");
    server.cli(&["SET", "launchdarkly:big_segments_synchronized_on", "42"]);
    let big = RedisBigSegmentStore::new(url).unwrap();
    assert_eq!(big.metadata().await.unwrap().last_up_to_date, Some(42));
}

async fn a_wrong_password_is_an_authentication_fault(_rt: Rt) {
    let server = server_with_user(&["~launchdarkly:*", "+@all"]);
    let url = server.user_url("app", &format!("wrong-{PW}"));
    let store = RedisStore::new(url.clone()).unwrap();
    let e = store.initialized().await.unwrap_err();
    assert!(matches!(e, StoreError::Auth(_)), "{e:?}");
    assert!(e.is_permanent());
    assert_no_password(&e);
    let e = store
        .get_now(Kind::Flag, "f", std::time::Duration::from_secs(1))
        .unwrap()
        .unwrap_err();
    assert!(matches!(e, StoreError::Auth(_)), "{e:?}");
    assert_no_password(&e);
    let e = RedisBigSegmentStore::new(url)
        .unwrap()
        .metadata()
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Auth(_)), "{e:?}");
    assert_no_password(&e);
    // An unknown user is refused the same way.
    let e = RedisStore::new(server.user_url("nobody", PW))
        .unwrap()
        .initialized()
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Auth(_)), "{e:?}");
}

async fn a_user_without_rights_is_a_permanent_fault(_rt: Rt) {
    // No command allowed, and no key allowed: both refused for good, with the cause.
    // Without `@transaction`: the init's MULTI itself is refused.
    for rules in [
        &["~launchdarkly:*", "-@all"][..],
        &["+@all"][..],
        &["~other:*", "+@all"][..],
        &["~launchdarkly:*", "+@all", "-@transaction"][..],
    ] {
        let server = server_with_user(rules);
        let store = RedisStore::new(server.user_url("app", PW)).unwrap();
        if !rules.contains(&"-@transaction") {
            let e = store.initialized().await.unwrap_err();
            assert!(e.is_permanent(), "{rules:?}: {e:?}");
            assert!(e.to_string().contains("no permissions"), "{rules:?}: {e}");
            assert_no_password(&e);
        }
        let e = store
            .init(&[(Kind::Flag, "f".into(), item("f", 1))])
            .await
            .unwrap_err();
        assert!(e.is_permanent(), "{rules:?}: {e:?}");
        assert!(e.to_string().contains("no permissions"), "{rules:?}: {e}");
        if rules.contains(&"-@transaction") {
            continue;
        }
        let e = RedisBigSegmentStore::new(server.user_url("app", PW))
            .unwrap()
            .metadata()
            .await
            .unwrap_err();
        assert!(e.is_permanent(), "{rules:?}: {e:?}");
    }
}
