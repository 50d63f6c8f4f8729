//! The membership cache policy: least-recently-used, bounded, with a time to live.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use super::Membership;

/// The default of [`MembershipCache::new`]'s `capacity`: 1,000 context keys.
pub const DEFAULT_CACHE_CAPACITY: usize = 1_000;

/// The default of [`MembershipCache::new`]'s `ttl`: 5 s.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(5);

/// Memberships by context key, at most `capacity` of them, each for `ttl` after it was
/// stored. When full, storing evicts the least recently used entry (read or stored).
/// A plain value: the caller owns it (behind its own lock) and passes `now` in.
///
/// ```
/// use std::sync::Arc;
/// use std::time::{Duration, Instant};
/// use flagsync_core::bigseg::{Membership, MembershipCache};
///
/// let t0 = Instant::now();
/// let mut cache = MembershipCache::new(2, Duration::from_secs(5));
/// cache.insert(t0, "a", Arc::new(Membership::default()));
/// assert!(cache.get(t0 + Duration::from_secs(4), "a").is_some());
/// assert!(cache.get(t0 + Duration::from_secs(5), "a").is_none()); // expired
/// ```
#[derive(Debug, Clone)]
pub struct MembershipCache {
    capacity: usize,
    ttl: Duration,
    entries: FxHashMap<Box<str>, Entry>,
    /// Recency: the tick of each entry's last use → its key. The first is the least
    /// recently used.
    order: BTreeMap<u64, Box<str>>,
    tick: u64,
}

#[derive(Debug, Clone)]
struct Entry {
    membership: Arc<Membership>,
    expires: Instant,
    tick: u64,
}

impl MembershipCache {
    /// An empty cache of at most `capacity` entries (0 caches nothing), each kept for
    /// `ttl` (zero caches nothing).
    pub fn new(capacity: usize, ttl: Duration) -> Self {
        Self {
            capacity,
            ttl,
            entries: FxHashMap::default(),
            order: BTreeMap::new(),
            tick: 0,
        }
    }

    /// How many entries are held (expired ones included until they are met).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// The membership of `key` unless it is missing or expired at `now` (an expired
    /// entry is removed). A hit becomes the most recently used entry.
    pub fn get(&mut self, now: Instant, key: &str) -> Option<Arc<Membership>> {
        let tick = self.next_tick();
        let entry = self.entries.get_mut(key)?;
        if now >= entry.expires {
            let old = entry.tick;
            self.order.remove(&old);
            self.entries.remove(key);
            return None;
        }
        let old = std::mem::replace(&mut entry.tick, tick);
        let membership = entry.membership.clone();
        if let Some(k) = self.order.remove(&old) {
            self.order.insert(tick, k);
        }
        Some(membership)
    }

    /// Store the membership of `key` read at `now`, evicting the least recently used
    /// entry if the cache is full.
    pub fn insert(&mut self, now: Instant, key: &str, membership: Arc<Membership>) {
        if self.capacity == 0 || self.ttl.is_zero() {
            return;
        }
        let tick = self.next_tick();
        let expires = now.checked_add(self.ttl).unwrap_or(now);
        if let Some(entry) = self.entries.get_mut(key) {
            let old = std::mem::replace(&mut entry.tick, tick);
            entry.membership = membership;
            entry.expires = expires;
            if let Some(k) = self.order.remove(&old) {
                self.order.insert(tick, k);
            }
            return;
        }
        while self.entries.len() >= self.capacity {
            let Some((_, lru)) = self.order.pop_first() else {
                break;
            };
            self.entries.remove(&lru);
        }
        let key: Box<str> = key.into();
        self.order.insert(tick, key.clone());
        self.entries.insert(
            key,
            Entry {
                membership,
                expires,
                tick,
            },
        );
    }

    /// Forget every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.order.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn m(r: &str) -> Arc<Membership> {
        Arc::new(Membership::from_refs([r.to_owned()], Vec::<String>::new()))
    }

    #[test]
    fn the_least_recently_used_entry_is_evicted() {
        let t = crate::testing::origin();
        let mut c = MembershipCache::new(2, DEFAULT_CACHE_TTL);
        c.insert(t, "a", m("a"));
        c.insert(t, "b", m("b"));
        assert!(c.get(t, "a").is_some()); // a is now the most recent
        c.insert(t, "c", m("c"));
        assert!(c.get(t, "b").is_none(), "b was least recently used");
        assert!(c.get(t, "a").is_some() && c.get(t, "c").is_some());
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn the_harness_eviction_sequence() {
        // size 2: user1, user2, user2 again, user3 (evicts user1), user1 is a miss.
        let t = crate::testing::origin();
        let mut c = MembershipCache::new(2, DEFAULT_CACHE_TTL);
        c.insert(t, "u1", m("x"));
        c.insert(t, "u2", m("x"));
        assert!(c.get(t, "u2").is_some());
        assert!(c.get(t, "u3").is_none());
        c.insert(t, "u3", m("x"));
        assert!(c.get(t, "u1").is_none());
    }

    #[test]
    fn entries_expire_after_the_ttl_and_a_refresh_renews_them() {
        let t = crate::testing::origin();
        let ttl = Duration::from_millis(10);
        let mut c = MembershipCache::new(10, ttl);
        c.insert(t, "a", m("1"));
        assert_eq!(c.get(t + Duration::from_millis(9), "a"), Some(m("1")));
        assert_eq!(c.get(t + ttl, "a"), None);
        assert!(c.is_empty(), "the expired entry is removed");
        c.insert(t + ttl, "a", m("2"));
        c.insert(t + ttl * 2 - Duration::from_millis(1), "a", m("3"));
        assert_eq!(c.get(t + ttl * 2, "a"), Some(m("3")));
    }

    #[test]
    fn zero_capacity_or_ttl_caches_nothing() {
        let t = crate::testing::origin();
        for mut c in [
            MembershipCache::new(0, DEFAULT_CACHE_TTL),
            MembershipCache::new(5, Duration::ZERO),
        ] {
            c.insert(t, "a", m("a"));
            assert!(c.get(t, "a").is_none());
            assert!(c.is_empty());
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8, u16),
        Get(u8, u16),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..12, 0u16..50).prop_map(|(k, dt)| Op::Insert(k, dt)),
            (0u8..12, 0u16..50).prop_map(|(k, dt)| Op::Get(k, dt)),
        ]
    }

    proptest! {
        /// Against a model (key → (value, expiry, last use)): never more than the
        /// capacity, never an expired or evicted value, and a value is present exactly
        /// when the model says it is.
        #[test]
        fn the_cache_agrees_with_a_model_and_stays_bounded(
            capacity in 0usize..6,
            ttl_ms in 0u64..60,
            ops in proptest::collection::vec(op(), 0..200),
        ) {
            let start = crate::testing::origin();
            let ttl = Duration::from_millis(ttl_ms);
            let mut cache = MembershipCache::new(capacity, ttl);
            // key → (value id, expires, last use)
            let mut model: Vec<(u8, u16, Instant, u64)> = Vec::new();
            let mut now = start;
            let mut use_tick = 0u64;
            for (i, op) in ops.into_iter().enumerate() {
                use_tick += 1;
                match op {
                    Op::Insert(k, dt) => {
                        now += Duration::from_millis(u64::from(dt));
                        let value = i as u16;
                        cache.insert(now, &k.to_string(), m(&value.to_string()));
                        if capacity > 0 && ttl_ms > 0 {
                            if let Some(e) = model.iter_mut().find(|e| e.0 == k) {
                                *e = (k, value, now + ttl, use_tick);
                            } else {
                                if model.len() >= capacity {
                                    let lru = model.iter().enumerate()
                                        .min_by_key(|(_, e)| e.3).map(|(j, _)| j);
                                    if let Some(j) = lru { model.remove(j); }
                                }
                                model.push((k, value, now + ttl, use_tick));
                            }
                        }
                    }
                    Op::Get(k, dt) => {
                        now += Duration::from_millis(u64::from(dt));
                        let got = cache.get(now, &k.to_string());
                        let pos = model.iter().position(|e| e.0 == k);
                        let expected = match pos {
                            Some(j) if now < model[j].2 => {
                                model[j].3 = use_tick;
                                Some(m(&model[j].1.to_string()))
                            }
                            Some(j) => { model.remove(j); None }
                            None => None,
                        };
                        prop_assert_eq!(got, expected);
                    }
                }
                prop_assert!(cache.len() <= capacity);
                prop_assert_eq!(cache.len(), model.len());
            }
        }
    }
}
