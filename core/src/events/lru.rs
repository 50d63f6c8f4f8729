//! The contexts seen recently: an LRU set of fully qualified keys.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

/// At most `capacity` keys; adding one more forgets the least recently added or seen.
#[derive(Debug, Clone)]
pub(crate) struct SeenKeys {
    capacity: usize,
    stamp: u64,
    by_key: FxHashMap<String, u64>,
    by_stamp: BTreeMap<u64, String>,
}

impl SeenKeys {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            stamp: 0,
            by_key: FxHashMap::default(),
            by_stamp: BTreeMap::new(),
        }
    }

    /// Mark `key` as seen now; true if it was already there.
    pub(crate) fn add(&mut self, key: &str) -> bool {
        self.stamp += 1;
        let stamp = self.stamp;
        if let Some(old) = self.by_key.get_mut(key) {
            let previous = std::mem::replace(old, stamp);
            if let Some(k) = self.by_stamp.remove(&previous) {
                self.by_stamp.insert(stamp, k);
            }
            return true;
        }
        if self.capacity == 0 {
            return false;
        }
        while self.by_key.len() >= self.capacity {
            let Some((_, oldest)) = self.by_stamp.pop_first() else {
                break;
            };
            self.by_key.remove(&oldest);
        }
        self.by_key.insert(key.to_owned(), stamp);
        self.by_stamp.insert(stamp, key.to_owned());
        false
    }

    pub(crate) fn clear(&mut self) {
        self.by_key.clear();
        self.by_stamp.clear();
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgets_the_least_recently_seen() {
        let mut s = SeenKeys::new(2);
        assert!(!s.add("a"));
        assert!(!s.add("b"));
        assert!(s.add("a")); // a is now the most recent
        assert!(!s.add("c")); // evicts b
        assert!(s.add("a"));
        assert!(!s.add("b"));
        assert_eq!(s.len(), 2);
        s.clear();
        assert!(!s.add("a"));
    }
}
