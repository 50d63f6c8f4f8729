//! The caching rules of PROTOCOL.md B §4.3 against an [`InMemoryStore`] that counts
//! the operations it serves, under a fake clock.

use std::cell::Cell;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_lite::future::block_on;

use super::*;
use crate::persist::{InMemoryStore, OpCounts};

thread_local! {
    static ELAPSED: Cell<Duration> = const { Cell::new(Duration::ZERO) };
}

/// A clock per test thread that moves only when told to.
fn fake_now() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now) + ELAPSED.with(Cell::get)
}

fn advance(d: Duration) {
    ELAPSED.with(|e| e.set(e.get() + d));
}

const TTL: Duration = Duration::from_secs(15);

fn item(key: &str, version: u64) -> Item {
    Item {
        version,
        deleted: false,
        raw: Bytes::from(format!(r#"{{"key":"{key}","version":{version}}}"#)),
    }
}

fn setup(config: CacheConfig) -> (Arc<InMemoryStore>, CachingStore) {
    let db = Arc::new(InMemoryStore::new());
    let store = CachingStore::with_clock(db.clone(), config, fake_now);
    (db, store)
}

fn counts(db: &InMemoryStore) -> OpCounts {
    db.op_counts()
}

#[test]
fn get_results_are_cached_for_the_ttl_absent_ones_too() {
    block_on(async {
        let (db, store) = setup(CacheConfig::ttl(TTL));
        db.put_raw(Kind::Flag, "f", r#"{"key":"f","version":1}"#);
        assert_eq!(
            store.get(Kind::Flag, "f").await.unwrap().unwrap().version,
            1
        );
        assert!(store.get(Kind::Flag, "missing").await.unwrap().is_none());
        // Another process changes the data: the cache still answers.
        db.put_raw(Kind::Flag, "f", r#"{"key":"f","version":2}"#);
        db.put_raw(Kind::Flag, "missing", r#"{"key":"missing","version":1}"#);
        advance(TTL - Duration::from_millis(1));
        assert_eq!(
            store.get(Kind::Flag, "f").await.unwrap().unwrap().version,
            1
        );
        assert!(store.get(Kind::Flag, "missing").await.unwrap().is_none());
        assert_eq!(counts(&db).get, 2);
        // One TTL after they were stored, the entries are gone.
        advance(Duration::from_millis(1));
        assert_eq!(
            store.get(Kind::Flag, "f").await.unwrap().unwrap().version,
            2
        );
        assert!(store.get(Kind::Flag, "missing").await.unwrap().is_some());
        assert_eq!(counts(&db).get, 4);
    });
}

#[test]
fn a_zero_ttl_disables_the_cache() {
    block_on(async {
        let (db, store) = setup(CacheConfig::ttl(Duration::ZERO));
        assert!(!store.cache_enabled());
        for _ in 0..3 {
            let _ = store.get(Kind::Flag, "f").await.unwrap();
            let _ = store.all(Kind::Flag).await.unwrap();
        }
        assert_eq!((counts(&db).get, counts(&db).all), (3, 3));
    });
}

#[test]
fn an_infinite_ttl_never_expires() {
    block_on(async {
        let (db, store) = setup(CacheConfig::infinite());
        db.put_raw(Kind::Segment, "s", r#"{"key":"s","version":1}"#);
        let _ = store.all(Kind::Segment).await.unwrap();
        advance(Duration::from_secs(365 * 24 * 3600));
        assert_eq!(store.all(Kind::Segment).await.unwrap().len(), 1);
        assert_eq!(
            store
                .get(Kind::Segment, "s")
                .await
                .unwrap()
                .unwrap()
                .version,
            1
        );
        assert_eq!((counts(&db).all, counts(&db).get), (1, 0));
    });
}

#[test]
fn tombstones_read_as_absent() {
    block_on(async {
        let (db, store) = setup(CacheConfig::default());
        db.put_raw(Kind::Flag, "a", r#"{"version":3,"deleted":true}"#);
        db.put_raw(
            Kind::Flag,
            "b",
            r#"{"key":"$deleted","version":3,"deleted":true}"#,
        );
        db.put_raw(Kind::Flag, "c", r#"{"key":"c","version":3,"deleted":true}"#);
        db.put_raw(Kind::Flag, "d", r#"{"key":"d","version":1}"#);
        for k in ["a", "b", "c"] {
            assert!(store.get(Kind::Flag, k).await.unwrap().is_none(), "{k}");
        }
        let all = store.all(Kind::Flag).await.unwrap();
        assert_eq!(all.keys().collect::<Vec<_>>(), ["d"]);
    });
}

#[test]
fn a_cached_all_answers_gets() {
    block_on(async {
        let (db, store) = setup(CacheConfig::default());
        db.put_raw(Kind::Flag, "d", r#"{"key":"d","version":1}"#);
        let _ = store.all(Kind::Flag).await.unwrap();
        assert!(store.get(Kind::Flag, "d").await.unwrap().is_some());
        assert!(store.get(Kind::Flag, "nope").await.unwrap().is_none());
        assert_eq!(counts(&db).get, 0);
    });
}

#[test]
fn init_writes_then_fills_the_cache_and_latches_initialized() {
    block_on(async {
        let (db, store) = setup(CacheConfig::default());
        let tomb = Item::tombstone("gone", 4);
        store
            .init(&[
                (Kind::Segment, "s".into(), item("s", 1)),
                (Kind::Flag, "f".into(), item("f", 2)),
                (Kind::Flag, "gone".into(), tomb),
            ])
            .await
            .unwrap();
        assert_eq!(counts(&db).init, 1);
        // The database holds the tombstone in the Go SDK's shape.
        assert_eq!(
            &db.raw(Kind::Flag)["gone"][..],
            br#"{"key":"$deleted","version":4,"deleted":true}"#
        );
        assert!(store.initialized().await.unwrap());
        assert_eq!(store.all(Kind::Flag).await.unwrap().len(), 1);
        assert!(store.get(Kind::Flag, "gone").await.unwrap().is_none());
        assert!(store.get(Kind::Segment, "s").await.unwrap().is_some());
        let c = counts(&db);
        assert_eq!((c.initialized, c.all, c.get), (0, 0, 0));
    });
}

#[test]
fn upsert_caches_what_is_stored_and_drops_the_kinds_all() {
    block_on(async {
        let (db, store) = setup(CacheConfig::default());
        store
            .init(&[(Kind::Flag, "f".into(), item("f", 5))])
            .await
            .unwrap();
        let written = store.upsert(Kind::Flag, "g", &item("g", 1)).await.unwrap();
        assert_eq!(written, Upserted::Written);
        let rejected = store.upsert(Kind::Flag, "f", &item("f", 5)).await.unwrap();
        assert!(matches!(rejected, Upserted::Rejected { ref stored } if stored.version == 5));
        let older = store.upsert(Kind::Flag, "f", &item("f", 4)).await.unwrap();
        assert!(matches!(older, Upserted::Rejected { .. }));
        assert_eq!(
            store.get(Kind::Flag, "g").await.unwrap().unwrap().version,
            1
        );
        assert_eq!(
            store.get(Kind::Flag, "f").await.unwrap().unwrap().version,
            5
        );
        assert_eq!(counts(&db).get, 0);
        // "all" was dropped by the upserts: it is read again, and holds both.
        assert_eq!(store.all(Kind::Flag).await.unwrap().len(), 2);
        assert_eq!(counts(&db).all, 1);
        // A delete is an upsert of a tombstone.
        store
            .upsert(Kind::Flag, "g", &Item::tombstone("g", 2))
            .await
            .unwrap();
        assert!(store.get(Kind::Flag, "g").await.unwrap().is_none());
        assert_eq!(store.all(Kind::Flag).await.unwrap().len(), 1);
    });
}

#[test]
fn cached_initialized_can_cache_a_false_result() {
    block_on(async {
        let (db, store) = setup(CacheConfig::ttl(TTL));
        assert!(!store.initialized().await.unwrap());
        db.set_initialized(true);
        advance(TTL / 2);
        assert!(!store.initialized().await.unwrap());
        assert_eq!(counts(&db).initialized, 1);
        advance(TTL / 2);
        assert!(store.initialized().await.unwrap());
        assert_eq!(counts(&db).initialized, 2);
        // Latched: never asked again, even after the marker goes.
        db.set_initialized(false);
        advance(TTL * 10);
        assert!(store.initialized().await.unwrap());
        assert!(store.known_initialized());
        assert_eq!(counts(&db).initialized, 2);
    });
}

#[test]
fn uncached_initialized_queries_the_store_only_until_initialized() {
    block_on(async {
        let (db, store) = setup(CacheConfig::disabled());
        assert!(!store.initialized().await.unwrap());
        assert!(!store.initialized().await.unwrap());
        assert_eq!(counts(&db).initialized, 2);
        db.set_initialized(true);
        assert!(store.initialized().await.unwrap());
        assert!(store.initialized().await.unwrap());
        assert_eq!(counts(&db).initialized, 3);
    });
}

#[test]
fn errors_pass_through_and_are_not_cached() {
    block_on(async {
        let (db, store) = setup(CacheConfig::default());
        db.set_available(false);
        assert!(matches!(
            store.get(Kind::Flag, "f").await,
            Err(StoreError::Unreachable(_))
        ));
        assert!(store.initialized().await.is_err());
        assert!(!store.is_available().await);
        db.set_available(true);
        db.put_raw(Kind::Flag, "f", r#"{"key":"f","version":1}"#);
        assert!(store.get(Kind::Flag, "f").await.unwrap().is_some());
        assert!(store.is_available().await);
    });
}

#[test]
fn disable_cache_is_idempotent_and_later_reads_ask_the_store() {
    block_on(async {
        let (db, store) = setup(CacheConfig::default());
        let _ = store.all(Kind::Flag).await.unwrap();
        store.disable_cache();
        store.disable_cache();
        assert!(!store.cache_enabled());
        let _ = store.all(Kind::Flag).await.unwrap();
        let _ = store.all(Kind::Flag).await.unwrap();
        assert_eq!(counts(&db).all, 3);
        // Writes still go through.
        store.upsert(Kind::Flag, "x", &item("x", 1)).await.unwrap();
        assert_eq!(db.raw(Kind::Flag).len(), 1);
    });
}

#[test]
fn the_oldest_single_item_entries_are_evicted_at_capacity() {
    block_on(async {
        let (db, store) = setup(CacheConfig::default().with_capacity(2));
        for k in ["a", "b", "c"] {
            let _ = store.get(Kind::Flag, k).await.unwrap();
        }
        assert_eq!(counts(&db).get, 3);
        let _ = store.get(Kind::Flag, "c").await.unwrap();
        let _ = store.get(Kind::Flag, "b").await.unwrap();
        assert_eq!(counts(&db).get, 3);
        let _ = store.get(Kind::Flag, "a").await.unwrap();
        assert_eq!(counts(&db).get, 4);
    });
}
