use bytes::Bytes;

use super::*;
use crate::publish::Published;

fn item(key: &str, version: u64) -> Item {
    Item {
        version,
        deleted: false,
        raw: Bytes::from(format!(r#"{{"key":"{key}","version":{version}}}"#)),
    }
}

fn versions(view: &StoreView, kind: Kind) -> Vec<(String, u64)> {
    let snapshot = view.snapshot();
    let mut v: Vec<_> = snapshot
        .iter(kind)
        .map(|(k, i)| (k.to_owned(), i.version))
        .collect();
    v.sort();
    v
}

#[test]
fn a_read_without_a_fresh_entry_asks_once_until_answered() {
    let (view, rx) = StoreView::new(CacheConfig::ttl(Duration::from_secs(60)), false);
    view.touch(Kind::Flag, "f");
    view.touch(Kind::Flag, "f");
    assert_eq!(rx.try_recv(), Ok(Fetch::Item(Kind::Flag, "f".into())));
    assert!(rx.try_recv().is_err(), "one request in flight per key");
    let fetch = Fetch::Item(Kind::Flag, "f".into());
    let changed = view.fetched(&fetch, Answer::Item(Some(item("f", 3))), Instant::now());
    assert_eq!(changed, ["f"]);
    assert_eq!(versions(&view, Kind::Flag), [("f".into(), 3)]);
    view.touch(Kind::Flag, "f");
    assert!(rx.try_recv().is_err(), "fresh: not asked again");
}

#[test]
fn an_absent_answer_is_cached_too() {
    let (view, rx) = StoreView::new(CacheConfig::infinite(), false);
    let fetch = Fetch::Item(Kind::Segment, "s".into());
    view.touch(Kind::Segment, "s");
    assert!(rx.try_recv().is_ok());
    assert!(
        view.fetched(&fetch, Answer::Item(None), Instant::now())
            .is_empty()
    );
    view.touch(Kind::Segment, "s");
    assert!(rx.try_recv().is_err(), "the miss is cached");
    assert!(versions(&view, Kind::Segment).is_empty());
}

#[test]
fn expired_and_uncached_entries_are_served_and_asked_again() {
    let (view, rx) = StoreView::new(CacheConfig::ttl(Duration::from_millis(50)), false);
    let fetch = Fetch::Item(Kind::Flag, "f".into());
    let long_ago = Instant::now() - Duration::from_secs(1);
    view.fetched(&fetch, Answer::Item(Some(item("f", 1))), long_ago);
    view.touch(Kind::Flag, "f");
    assert_eq!(rx.try_recv(), Ok(fetch.clone()), "expired: asked again");
    assert_eq!(
        versions(&view, Kind::Flag),
        [("f".into(), 1)],
        "and served meanwhile"
    );

    let (off, rx) = StoreView::new(CacheConfig::disabled(), false);
    off.fetched(&fetch, Answer::Item(Some(item("f", 1))), Instant::now());
    off.touch(Kind::Flag, "f");
    assert_eq!(rx.try_recv(), Ok(fetch), "no cache: every read asks");
}

#[test]
fn an_entry_is_read_again_shortly_before_it_expires() {
    let ttl = CacheTtl::Expires(Duration::from_secs(1));
    let t0 = Instant::now();
    assert!(fresh(ttl, t0, t0 + Duration::from_millis(899)));
    assert!(
        !fresh(ttl, t0, t0 + Duration::from_millis(900)),
        "100 ms ahead"
    );
    let short = CacheTtl::Expires(Duration::from_millis(200));
    assert!(fresh(short, t0, t0 + Duration::from_millis(179)));
    assert!(
        !fresh(short, t0, t0 + Duration::from_millis(180)),
        "a tenth ahead"
    );
    assert!(fresh(
        CacheTtl::Infinite,
        t0,
        t0 + Duration::from_secs(1 << 30)
    ));
    assert!(!fresh(CacheTtl::Disabled, t0, t0));
}

#[test]
fn a_read_that_began_before_a_write_is_dropped() {
    let (view, _rx) = StoreView::new(CacheConfig::infinite(), false);
    let fetch = Fetch::Item(Kind::Flag, "f".into());
    let began = Instant::now();
    std::thread::sleep(Duration::from_millis(2));
    view.wrote(Kind::Flag, "f", &item("f", 2));
    // The read saw the store before the write: absent.
    assert!(view.fetched(&fetch, Answer::Item(None), began).is_empty());
    assert_eq!(versions(&view, Kind::Flag), [("f".into(), 2)]);
    // A full write drops earlier reads of any key, and of whole kinds.
    let other = Fetch::Item(Kind::Flag, "g".into());
    let began = Instant::now();
    std::thread::sleep(Duration::from_millis(2));
    view.wrote_all(&[(Kind::Flag, "f".into(), item("f", 3))]);
    view.fetched(&other, Answer::Item(Some(item("g", 1))), began);
    view.fetched(&Fetch::All(Kind::Flag), Answer::All(Vec::new()), began);
    assert_eq!(versions(&view, Kind::Flag), [("f".into(), 3)]);
    assert_eq!(view.listing().len(Kind::Flag), 1);
}

#[test]
fn writes_replace_entries_and_a_full_write_replaces_all() {
    let (view, _rx) = StoreView::new(CacheConfig::infinite(), false);
    let fetch = Fetch::Item(Kind::Flag, "old".into());
    view.fetched(&fetch, Answer::Item(Some(item("old", 1))), Instant::now());
    view.wrote_all(&[
        (Kind::Flag, "a".into(), item("a", 1)),
        (Kind::Segment, "s".into(), item("s", 1)),
    ]);
    assert_eq!(versions(&view, Kind::Flag), [("a".into(), 1)]);
    view.wrote(Kind::Flag, "a", &item("a", 2));
    assert_eq!(versions(&view, Kind::Flag), [("a".into(), 2)]);
    assert_eq!(versions(&view, Kind::Segment), [("s".into(), 1)]);
}

#[test]
fn listings_are_read_whole_and_kept_apart_from_point_reads() {
    let (view, rx) = StoreView::new(CacheConfig::infinite(), false);
    view.wrote_all(&[(Kind::Flag, "a".into(), item("a", 1))]);
    view.touch_all(Kind::Flag);
    assert!(
        rx.try_recv().is_err(),
        "a full write counts as a whole read"
    );
    let (view, rx) = StoreView::new(CacheConfig::infinite(), false);
    let fetch = Fetch::Item(Kind::Flag, "a".into());
    view.fetched(&fetch, Answer::Item(Some(item("a", 1))), Instant::now());
    view.touch_all(Kind::Flag);
    assert_eq!(rx.try_recv(), Ok(Fetch::All(Kind::Flag)));
    let all = Fetch::All(Kind::Flag);
    let changed = view.fetched(
        &all,
        Answer::All(vec![("b".into(), item("b", 1))]),
        Instant::now(),
    );
    assert_eq!(changed, ["b"]);
    let listed: Vec<_> = view
        .listing()
        .iter(Kind::Flag)
        .map(|(k, _)| k.to_owned())
        .collect();
    assert_eq!(listed, ["b"]);
    // Point reads keep their own entries: "b" is not cached for them, "a" still is.
    assert_eq!(versions(&view, Kind::Flag), [("a".into(), 1)]);
    view.touch(Kind::Flag, "b");
    assert_eq!(rx.try_recv(), Ok(Fetch::Item(Kind::Flag, "b".into())));
}

/// A store that reads only through the runtime (no `get_now`): reads wait for the
/// fetch task.
#[derive(Debug)]
struct AsyncOnly(crate::persist::InMemoryStore);

impl crate::persist::PersistentStore for AsyncOnly {
    fn init<'a>(
        &'a self,
        items: &'a [(Kind, String, Item)],
    ) -> crate::runtime::BoxFuture<'a, Result<(), StoreError>> {
        self.0.init(items)
    }
    fn get<'a>(
        &'a self,
        kind: Kind,
        key: &'a str,
    ) -> crate::runtime::BoxFuture<'a, Result<Option<Item>, StoreError>> {
        self.0.get(kind, key)
    }
    fn all(
        &self,
        kind: Kind,
    ) -> crate::runtime::BoxFuture<'_, Result<Vec<(String, Item)>, StoreError>> {
        self.0.all(kind)
    }
    fn upsert<'a>(
        &'a self,
        kind: Kind,
        key: &'a str,
        item: &'a Item,
    ) -> crate::runtime::BoxFuture<'a, Result<crate::persist::Upserted, StoreError>> {
        self.0.upsert(kind, key, item)
    }
    fn initialized(&self) -> crate::runtime::BoxFuture<'_, Result<bool, StoreError>> {
        self.0.initialized()
    }
    fn is_available(&self) -> crate::runtime::BoxFuture<'_, bool> {
        self.0.is_available()
    }
}

/// A view whose fetch task "runs" (the test answers its requests).
fn linked(config: CacheConfig) -> (Arc<StoreView>, async_channel::Receiver<Fetch>) {
    let (view, rx) = StoreView::new(config, false);
    let store = Arc::new(AsyncOnly(crate::persist::InMemoryStore::new()));
    view.started(
        Arc::new(CachingStore::new(store, config)),
        std::sync::Weak::<Published>::new(),
    );
    (view, rx)
}

/// Answer the next request of `rx` after `delay`, on another thread (the fetch task).
fn answer_later(
    view: &Arc<StoreView>,
    rx: async_channel::Receiver<Fetch>,
    delay: Duration,
    answer: Answer,
) -> std::thread::JoinHandle<()> {
    let view = Arc::clone(view);
    std::thread::spawn(move || {
        let fetch = futures_lite::future::block_on(rx.recv()).expect("a request");
        std::thread::sleep(delay);
        view.fetched(&fetch, answer, Instant::now());
    })
}

#[test]
fn a_read_without_an_entry_waits_for_the_store() {
    let (view, rx) = linked(CacheConfig::disabled());
    let task = answer_later(
        &view,
        rx,
        Duration::from_millis(30),
        Answer::Item(Some(item("f", 4))),
    );
    let t0 = Instant::now();
    view.touch(Kind::Flag, "f");
    assert!(t0.elapsed() >= Duration::from_millis(30), "it waited");
    assert_eq!(
        versions(&view, Kind::Flag),
        [("f".into(), 4)],
        "and sees the answer"
    );
    task.join().unwrap();
}

#[test]
fn the_wait_is_bounded_and_can_be_turned_off() {
    let config = CacheConfig::ttl(Duration::from_secs(5)).with_read_wait(Duration::from_millis(40));
    let (view, _rx) = linked(config);
    let t0 = Instant::now();
    view.touch(Kind::Flag, "f");
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(40), "{waited:?}");
    assert!(waited < Duration::from_secs(2), "{waited:?}");
    assert!(versions(&view, Kind::Flag).is_empty());

    let (view, _rx) = linked(config.with_read_wait(Duration::ZERO));
    let t0 = Instant::now();
    view.touch(Kind::Flag, "f");
    assert!(t0.elapsed() < Duration::from_millis(30), "no wait");
}

#[test]
fn a_live_entry_is_refreshed_ahead_without_waiting_and_the_fetch_thread_never_waits() {
    let config = CacheConfig::ttl(Duration::from_secs(1)).with_read_wait(Duration::from_secs(5));
    let (view, rx) = linked(config);
    let fetch = Fetch::Item(Kind::Flag, "f".into());
    // Read 950 ms ago: live, but within the refresh-ahead window.
    let at = Instant::now() - Duration::from_millis(950);
    view.fetched(&fetch, Answer::Item(Some(item("f", 1))), at);
    let t0 = Instant::now();
    view.touch(Kind::Flag, "f");
    assert!(t0.elapsed() < Duration::from_secs(1), "served at once");
    assert_eq!(rx.try_recv(), Ok(fetch), "and asked again");

    // The fetch task's own thread would wait for itself: it never waits.
    let (view, _rx) = linked(config);
    view.fetching_on_this_thread();
    let t0 = Instant::now();
    view.touch(Kind::Flag, "g");
    assert!(t0.elapsed() < Duration::from_secs(1));
    // Nor does anyone once the fetch task has ended.
    let (view, _rx) = linked(config);
    view.ended();
    drop(_rx);
    let t0 = Instant::now();
    view.touch(Kind::Flag, "g");
    assert!(t0.elapsed() < Duration::from_secs(1));
}

#[test]
fn before_the_fetch_task_runs_nothing_waits_and_a_blocking_store_answers_at_once() {
    let config = CacheConfig::disabled().with_read_wait(Duration::from_secs(5));
    let (view, rx) = StoreView::new(config, false);
    let t0 = Instant::now();
    view.touch(Kind::Flag, "f");
    assert!(!view.store_initialized());
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "not started: no wait"
    );
    assert_eq!(
        rx.try_recv(),
        Ok(Fetch::Item(Kind::Flag, "f".into())),
        "queued"
    );

    // A store with reads on the caller's thread: no request reaches the task.
    let config = config.with_read_wait(Duration::from_millis(200));
    let (view, rx) = StoreView::new(config, false);
    let db = Arc::new(crate::persist::InMemoryStore::new());
    db.put_raw(Kind::Flag, "f", r#"{"key":"f","version":7}"#);
    db.set_initialized(true);
    view.started(
        Arc::new(CachingStore::new(db.clone(), config)),
        std::sync::Weak::<Published>::new(),
    );
    assert!(view.store_initialized());
    view.touch(Kind::Flag, "f");
    assert_eq!(versions(&view, Kind::Flag), [("f".into(), 7)]);
    assert!(rx.try_recv().is_err(), "answered on this thread");
    // A store that fails there leaves the read to the fetch task.
    db.set_available(false);
    view.touch(Kind::Flag, "g");
    assert_eq!(rx.try_recv(), Ok(Fetch::Item(Kind::Flag, "g".into())));
}

#[test]
fn inited_is_read_and_cached_as_the_reference_caches_it() {
    // Cache off: every question asks; a "yes" is kept.
    let (view, rx) = linked(CacheConfig::disabled());
    let task = answer_later(&view, rx.clone(), Duration::ZERO, Answer::Inited(false));
    assert!(!view.store_initialized());
    task.join().unwrap();
    let task = answer_later(&view, rx.clone(), Duration::ZERO, Answer::Inited(true));
    assert!(view.store_initialized(), "asked again and found");
    task.join().unwrap();
    assert!(view.store_initialized(), "kept");
    assert!(rx.try_recv().is_err(), "without asking");

    // Infinite cache: a "no" is kept too.
    let (view, rx) = linked(CacheConfig::infinite());
    let task = answer_later(&view, rx.clone(), Duration::ZERO, Answer::Inited(false));
    assert!(!view.store_initialized());
    task.join().unwrap();
    assert!(!view.store_initialized());
    assert!(rx.try_recv().is_err(), "not asked again");

    // A TTL: a "no" is asked again once it expires.
    let (view, rx) = linked(CacheConfig::ttl(Duration::from_secs(60)));
    let old = Instant::now() - Duration::from_secs(61);
    view.fetched(&Fetch::Inited, Answer::Inited(false), old);
    let task = answer_later(&view, rx, Duration::ZERO, Answer::Inited(true));
    assert!(view.store_initialized());
    task.join().unwrap();
}

#[test]
fn the_capacity_evicts_the_oldest_entries() {
    let (view, _rx) = StoreView::new(CacheConfig::infinite().with_capacity(2), false);
    let t0 = Instant::now();
    for (i, key) in ["a", "b", "c"].into_iter().enumerate() {
        let fetch = Fetch::Item(Kind::Flag, key.into());
        let at = t0 + Duration::from_millis(i as u64);
        view.fetched(&fetch, Answer::Item(Some(item(key, 1))), at);
    }
    assert_eq!(
        versions(&view, Kind::Flag),
        [("b".into(), 1), ("c".into(), 1)]
    );
}
