//! Subscriptions: each a bounded queue that merges changes of one key and counts what
//! it dropped, fed by [`Subscribers`], a broadcast to every live one.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use flagsync_core::StoreStatus;

use super::status::{DataSourceStatus, FlagChange};

/// How many unread items a subscription holds by default
/// ([`crate::ClientBuilder::subscription_capacity`]): enough for one change of every
/// flag of any real environment (changes of one flag merge), so nothing is dropped
/// unless a subscriber stops reading through a flood; at most a few MiB per
/// subscription.
pub const DEFAULT_SUBSCRIPTION_CAPACITY: usize = 65_536;

/// A stream of changes (a [`futures_core::Stream`] usable on any runtime). It ends
/// when the client is closed.
///
/// Each subscription holds at most its capacity of unread items
/// ([`crate::ClientBuilder::subscription_capacity`], default
/// [`DEFAULT_SUBSCRIPTION_CAPACITY`]), so a subscriber that stops reading never makes
/// the client's memory grow. A flag change for a key that is already waiting to be read
/// is merged into it (the change is reported once). When a subscription is full, its
/// oldest unread item is dropped to make room for the newest, so the latest status is
/// always there, and the drop is counted: [`Subscription::lagged`] says how many items
/// a subscriber missed (as `tokio::sync::broadcast` does); one that lagged should read
/// again what it watches (for flags, the client's current values).
#[derive(Debug)]
pub struct Subscription<T>(Inner<T>);

#[derive(Debug)]
enum Inner<T> {
    /// A bounded, coalescing queue (flag changes, statuses).
    Queue(Arc<Queue<T>>),
    /// A channel (the SSE client's events).
    Channel(Pin<Box<async_channel::Receiver<T>>>),
}

impl<T> Subscription<T> {
    pub(crate) fn new(rx: async_channel::Receiver<T>) -> Self {
        Self(Inner::Channel(Box::pin(rx)))
    }

    /// The next change, or `None` once the client is closed.
    pub async fn recv(&self) -> Option<T> {
        match &self.0 {
            Inner::Queue(q) => std::future::poll_fn(|cx| q.poll_pop(cx)).await,
            Inner::Channel(rx) => rx.recv().await.ok(),
        }
    }

    /// The next change if one is buffered.
    pub fn try_recv(&self) -> Option<T> {
        match &self.0 {
            Inner::Queue(q) => q.pop(),
            Inner::Channel(rx) => rx.try_recv().ok(),
        }
    }

    /// How many unread items are held now (at most the capacity).
    pub fn len(&self) -> usize {
        match &self.0 {
            Inner::Queue(q) => q.lock().items.len(),
            Inner::Channel(rx) => rx.len(),
        }
    }

    /// No unread item is held now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many items were dropped unread because this subscription was full, since
    /// the last call (which resets the count). Merged flag changes are not counted:
    /// nothing was lost.
    pub fn lagged(&self) -> u64 {
        match &self.0 {
            Inner::Queue(q) => std::mem::take(&mut q.lock().lagged),
            Inner::Channel(_) => 0,
        }
    }
}

impl<T> Drop for Subscription<T> {
    fn drop(&mut self) {
        if let Inner::Queue(q) = &self.0 {
            let mut state = q.lock();
            state.dropped = true;
            state.items.clear();
            state.hashes.clear();
            state.keyed.clear();
        }
    }
}

impl<T> futures_core::Stream for Subscription<T> {
    type Item = T;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        match &mut self.0 {
            Inner::Queue(q) => q.poll_pop(cx),
            Inner::Channel(rx) => rx.as_mut().poll_next(cx),
        }
    }
}

/// What a subscription merges: items with the same key replace each other.
pub(crate) trait Coalesce: Clone {
    /// The key under which a newer item replaces an unread older one, if any.
    fn key(&self) -> Option<&str> {
        None
    }
}

impl Coalesce for FlagChange {
    fn key(&self) -> Option<&str> {
        Some(&self.key)
    }
}

impl Coalesce for DataSourceStatus {}
impl Coalesce for StoreStatus {}

/// One subscription's unread items.
pub(crate) struct Queue<T> {
    state: Mutex<QueueState<T>>,
    capacity: usize,
    /// [`Coalesce::key`] of `T`.
    key_of: fn(&T) -> Option<&str>,
    /// Hashes keys for [`QueueState::keyed`].
    hasher: RandomState,
}

impl<T> std::fmt::Debug for Queue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Queue")
            .field("len", &state.items.len())
            .field("capacity", &self.capacity)
            .field("lagged", &state.lagged)
            .field("closed", &state.closed)
            .finish()
    }
}

struct QueueState<T> {
    /// Unread items, oldest first.
    items: VecDeque<T>,
    /// The hash of each unread item's key, if it has one, in the same order (a deque of
    /// its own, so that a batch given to an empty queue becomes `items` as it is).
    hashes: VecDeque<Option<u64>>,
    /// The number of `items[0]` (item `i` is number `head + i`).
    head: u64,
    /// For the hash of an unread item's key, that item's number: a newer item with the
    /// same key merges into it. No key is copied for this. Two unread keys with the
    /// same hash are simply not merged with each other (the later one takes the entry).
    keyed: HashMap<u64, u64, BuildHasherDefault<HashIsKey>>,
    lagged: u64,
    /// The client closed: the stream ends once `items` are read.
    closed: bool,
    /// The subscription was dropped: the queue is forgotten.
    dropped: bool,
    waker: Option<Waker>,
}

/// The hasher of [`QueueState::keyed`], whose keys are hashes already.
#[derive(Default)]
struct HashIsKey(u64);

impl Hasher for HashIsKey {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl<T> QueueState<T> {
    /// Wake the reader waiting for an item, if one waits and an item is there.
    fn wake_reader(&mut self) {
        if !self.items.is_empty()
            && let Some(w) = self.waker.take()
        {
            w.wake();
        }
    }

    fn pop(&mut self) -> Option<T> {
        let item = self.items.pop_front()?;
        if let Some(hash) = self.hashes.pop_front().flatten()
            && self.keyed.get(&hash) == Some(&self.head)
        {
            self.keyed.remove(&hash);
        }
        self.head += 1;
        Some(item)
    }

    /// Add `value` whose key hashes to `hash` (merged with an unread item of the same
    /// key; the oldest dropped when full).
    fn push(
        &mut self,
        value: T,
        hash: Option<u64>,
        capacity: usize,
        key_of: fn(&T) -> Option<&str>,
    ) {
        if let Some(hash) = hash
            && let Some(&number) = self.keyed.get(&hash)
            && let Some(unread) = number
                .checked_sub(self.head)
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| self.items.get(i))
            && key_of(unread) == key_of(&value)
        {
            return;
        }
        if self.items.len() >= capacity {
            self.pop();
            self.lagged += 1;
        }
        let number = self.head + self.items.len() as u64;
        self.items.push_back(value);
        self.hashes.push_back(hash);
        if let Some(hash) = hash {
            self.keyed.insert(hash, number);
        }
    }
}

impl<T: Coalesce> Queue<T> {
    fn new(capacity: usize) -> Self {
        Self {
            key_of: T::key,
            state: Mutex::new(QueueState {
                items: VecDeque::new(),
                hashes: VecDeque::new(),
                head: 0,
                keyed: HashMap::default(),
                lagged: 0,
                closed: false,
                dropped: false,
                waker: None,
            }),
            capacity: capacity.max(1),
            hasher: RandomState::new(),
        }
    }

    /// Add `values` in order, taking the lock and waking the reader once (each merged
    /// with an unread item of the same key; the oldest dropped when full). False once
    /// the subscription is gone.
    fn push_all(&self, values: impl IntoIterator<Item = T>) -> bool {
        let mut state = self.lock();
        if state.dropped {
            return false;
        }
        let values = values.into_iter();
        // A large batch (a first data set: one change per flag) is given its room at
        // once, not by doubling: growing would copy the queue and rehash its index,
        // each with the old and the new table alive.
        let room = values
            .size_hint()
            .0
            .min(self.capacity.saturating_sub(state.items.len()));
        state.items.reserve(room);
        state.hashes.reserve(room);
        state.keyed.reserve(room);
        for value in values {
            let hash = self.hash_of(&value);
            state.push(value, hash, self.capacity, self.key_of);
        }
        state.wake_reader();
        true
    }

    /// The hash of `value`'s key, if it has one ([`QueueState::keyed`]).
    fn hash_of(&self, value: &T) -> Option<u64> {
        value.key().map(|key| self.hasher.hash_one(key))
    }

    /// [`Queue::push_all`] for values given by value: a batch that an empty queue can
    /// hold whole but has no room for yet, with no key twice, becomes the queue's items
    /// as it is (a first data set at 50,000 flags: 1.2 MB not copied). Anything else is
    /// pushed one by one, into the room the queue has.
    fn push_batch(&self, values: Vec<T>) -> bool {
        {
            let mut state = self.lock();
            if state.dropped {
                return false;
            }
            if state.items.is_empty()
                && values.len() > state.items.capacity()
                && values.len() <= self.capacity
                && let Some(hashes) = self.index_batch(&mut state, &values)
            {
                state.items = VecDeque::from(values);
                state.hashes = hashes;
                state.wake_reader();
                return true;
            }
        }
        self.push_all(values)
    }

    /// Index `values` as the unread items of an empty queue: the hash of each key, and
    /// its number in `keyed`. `None`, with `keyed` left empty, if a key is there twice.
    fn index_batch(
        &self,
        state: &mut QueueState<T>,
        values: &[T],
    ) -> Option<VecDeque<Option<u64>>> {
        debug_assert!(state.keyed.is_empty());
        let mut hashes = VecDeque::with_capacity(values.len());
        state.keyed.reserve(values.len());
        for (i, value) in values.iter().enumerate() {
            let hash = self.hash_of(value);
            if let Some(hash) = hash {
                let number = state.head + i as u64;
                if let Some(earlier) = state.keyed.insert(hash, number)
                    && let Ok(earlier) = usize::try_from(earlier - state.head)
                    && values[earlier].key() == value.key()
                {
                    state.keyed.clear();
                    return None;
                }
            }
            hashes.push_back(hash);
        }
        Some(hashes)
    }

    fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        if let Some(w) = state.waker.take() {
            w.wake();
        }
    }
}

impl<T> Queue<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState<T>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pop(&self) -> Option<T> {
        self.lock().pop()
    }

    fn poll_pop(&self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut state = self.lock();
        match state.pop() {
            Some(item) => Poll::Ready(Some(item)),
            None if state.closed => Poll::Ready(None),
            None => {
                state.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// A broadcast to every live subscription; a dropped subscription is forgotten.
#[derive(Debug)]
pub(crate) struct Subscribers<T> {
    list: Mutex<Option<Vec<Arc<Queue<T>>>>>,
    capacity: usize,
}

impl<T: Coalesce> Subscribers<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            list: Mutex::new(Some(Vec::new())),
            capacity,
        }
    }

    pub(crate) fn subscribe(&self) -> Subscription<T> {
        let queue = Arc::new(Queue::new(self.capacity));
        match &mut *self.list.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(list) => list.push(queue.clone()),
            None => queue.close(), // closed: the stream ends at once
        }
        Subscription(Inner::Queue(queue))
    }

    /// True while someone is subscribed.
    pub(super) fn any(&self) -> bool {
        self.list
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|list| !list.is_empty())
    }

    pub(crate) fn send(&self, value: &T) {
        self.send_all(vec![value.clone()]);
    }

    /// Send every value to every subscription as one batch: each subscription's lock
    /// is taken, and its reader woken, once. The last subscription gets the values
    /// themselves, the others copies.
    pub(super) fn send_all(&self, values: Vec<T>) {
        if values.is_empty() {
            return;
        }
        if let Some(list) = &mut *self.list.lock().unwrap_or_else(|e| e.into_inner()) {
            let last = list.len().saturating_sub(1);
            let mut values = Some(values);
            let mut i = 0;
            list.retain(|q| {
                let kept = if i == last {
                    q.push_batch(values.take().unwrap_or_default())
                } else {
                    q.push_all(values.iter().flatten().cloned())
                };
                i += 1;
                kept
            });
        }
    }

    pub(crate) fn close(&self) {
        if let Some(list) = self.list.lock().unwrap_or_else(|e| e.into_inner()).take() {
            for q in list {
                q.close();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(key: &str) -> FlagChange {
        FlagChange { key: key.into() }
    }

    fn unread(s: &Subscription<FlagChange>) -> Vec<String> {
        std::iter::from_fn(|| s.try_recv()).map(|c| c.key).collect()
    }

    #[test]
    fn a_batch_reaches_every_subscriber_merged() {
        let subs = Subscribers::<FlagChange>::new(8);
        let (a, b) = (subs.subscribe(), subs.subscribe());
        subs.send_all(vec![change("x"), change("y"), change("x")]);
        subs.send_all(vec![change("y"), change("z")]);
        for s in [&a, &b] {
            assert_eq!(unread(s), ["x", "y", "z"]);
            assert_eq!(s.lagged(), 0);
        }
        // Read changes are reported again; a dropped subscription is forgotten.
        drop(b);
        subs.send_all(vec![change("x")]);
        assert_eq!(unread(&a), ["x"]);
        assert_eq!(subs.list.lock().unwrap().as_ref().map(Vec::len), Some(1));
    }

    #[test]
    fn a_full_subscription_keeps_the_newest_of_a_batch_and_counts_the_rest() {
        let subs = Subscribers::<FlagChange>::new(2);
        let s = subs.subscribe();
        subs.send_all(["a", "b", "c", "d", "e"].map(change).to_vec());
        assert_eq!(s.len(), 2);
        assert_eq!(s.lagged(), 3);
        assert_eq!(unread(&s), ["d", "e"]);
        // The keys of dropped items merge nothing any more.
        subs.send_all(vec![change("a"), change("e")]);
        assert_eq!(unread(&s), ["a", "e"]);
    }

    #[test]
    fn a_large_batch_gets_its_room_at_once_within_the_capacity() {
        // 1,025 changes: grown by doubling, the queue would hold room for 2,048.
        let keys: Vec<String> = (0..1025).map(|i| format!("flag-{i}")).collect();
        let changes = || keys.iter().map(|k| change(k)).collect::<Vec<_>>();
        let queue = Queue::<FlagChange>::new(100_000);
        assert!(queue.push_all(changes()));
        {
            let state = queue.lock();
            assert_eq!(state.items.len(), 1025);
            assert!(state.items.capacity() < 1100, "{}", state.items.capacity());
            assert!(state.keyed.capacity() >= 1025);
        }
        // Never more room than the capacity allows: the oldest are dropped as before.
        let small = Queue::<FlagChange>::new(100);
        assert!(small.push_all(changes()));
        let state = small.lock();
        assert_eq!(state.items.len(), 100);
        assert!(state.items.capacity() < 200, "{}", state.items.capacity());
        assert_eq!(state.lagged, 925);
        assert_eq!(
            state.items.front().map(|c| c.key.as_str()),
            Some("flag-925")
        );
    }

    #[test]
    fn a_batch_for_an_empty_queue_becomes_its_items_as_it_is() {
        let queue = Queue::<FlagChange>::new(8);
        let batch = vec![change("a"), change("b"), change("c")];
        let first = batch.as_ptr();
        assert!(queue.push_batch(batch));
        {
            let mut state = queue.lock();
            // The batch's own memory, not a copy.
            assert_eq!(state.items.make_contiguous().as_ptr(), first);
            assert_eq!(state.keyed.len(), 3);
        }
        // Its items merge later changes as pushed ones do.
        assert!(queue.push_all(vec![change("b"), change("d")]));
        let keys: Vec<String> = std::iter::from_fn(|| queue.pop()).map(|c| c.key).collect();
        assert_eq!(keys, ["a", "b", "c", "d"]);
        assert!(queue.lock().keyed.is_empty());
    }

    proptest::proptest! {
        /// A batch by value ends as pushing its values one by one would: merged, the
        /// oldest dropped when full, the same count of dropped ones, whatever the queue
        /// held before.
        #[test]
        fn a_batch_by_value_is_pushed_as_one_by_one(
            before in proptest::collection::vec(0u8..6, 0..4),
            batch in proptest::collection::vec(0u8..12, 0..12),
            capacity in 1usize..10,
            later in proptest::collection::vec(0u8..12, 0..4),
        ) {
            let keys = |v: &[u8]| v.iter().map(|k| change(&format!("k{k}"))).collect::<Vec<_>>();
            let (fast, slow) = (Queue::<FlagChange>::new(capacity), Queue::<FlagChange>::new(capacity));
            for q in [&fast, &slow] {
                q.push_all(keys(&before));
            }
            fast.push_batch(keys(&batch));
            for c in keys(&batch) {
                slow.push_all([c]);
            }
            for q in [&fast, &slow] {
                q.push_all(keys(&later));
            }
            let drain = |q: &Queue<FlagChange>| {
                let lagged = q.lock().lagged;
                let keys: Vec<String> = std::iter::from_fn(|| q.pop()).map(|c| c.key).collect();
                let state = q.lock();
                (keys, lagged, state.keyed.len(), state.hashes.len())
            };
            proptest::prop_assert_eq!(drain(&fast), drain(&slow));
        }
    }

    #[test]
    fn keys_with_the_same_hash_are_never_merged_or_lost() {
        let mut state = QueueState {
            items: VecDeque::new(),
            hashes: VecDeque::new(),
            head: 0,
            keyed: HashMap::default(),
            lagged: 0,
            closed: false,
            dropped: false,
            waker: None,
        };
        let key_of: fn(&FlagChange) -> Option<&str> = FlagChange::key;
        for key in ["a", "b", "a", "b"] {
            state.push(change(key), Some(7), 16, key_of);
        }
        let keys: Vec<String> = std::iter::from_fn(|| state.pop()).map(|c| c.key).collect();
        // Each took the hash's entry from the other, so nothing merged: a key may be
        // reported twice, none is lost.
        assert_eq!(keys, ["a", "b", "a", "b"]);
        for key in ["a", "a"] {
            state.push(change(key), Some(7), 16, key_of);
        }
        let keys: Vec<String> = std::iter::from_fn(|| state.pop()).map(|c| c.key).collect();
        assert_eq!(keys, ["a"]);
        assert!(state.keyed.is_empty());
    }
}
