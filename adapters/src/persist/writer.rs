//! The store task: performs the core's persistent-store requests one at a time, in
//! the order the core emitted them, and reports failures and availability answers back
//! to the driver's inbox (DESIGN.md §3: the core decides, the adapter performs).
//!
//! Once it has written a full data set it also watches the store between writes: every
//! [`WATCH_INTERVAL`] it asks whether the store still holds its writes
//! ([`super::PersistentStore::holds_writes`]). A store that lost data unseen (a Redis
//! restarted empty, or from an older save) or that cannot be read is reported as a
//! failure, with no write needed to notice it; the core then polls
//! the store's availability and, once it answers, writes the whole in-memory data set
//! again (PROTOCOL.md A.4.8).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use flagsync_core::{Command, Kind, Persist};

use super::view::StoreView;
use super::{CachingStore, Upserted};
use crate::driver::{Msg, StoreReport, TaskGuard};
use crate::runtime::{Runtime, race};

/// How often the store task reads `$inited` between writes, once it has written a
/// full data set.
pub(crate) const WATCH_INTERVAL: std::time::Duration = std::time::Duration::from_millis(500);

/// Perform every request from `requests` against `store` (and tell `view` what is now
/// stored) until the driver drops the
/// sending side (then finish what is queued and end). `check_pending` is cleared once
/// an availability check is answered (the driver sends at most one at a time).
/// `_guard` keeps the client's "finished" mark unset until then, so `close()` waits
/// (boundedly) for writes in flight.
#[allow(
    clippy::too_many_arguments,
    reason = "one call site; each is a separate handle the task needs"
)]
pub(crate) async fn run(
    rt: Arc<dyn Runtime>,
    store: Arc<CachingStore>,
    view: Option<Arc<StoreView>>,
    requests: WriteReceiver,
    inbox: async_channel::Sender<Msg<Command>>,
    check_pending: Arc<AtomicBool>,
    _guard: Arc<TaskGuard>,
) {
    // A full data set was written and the store has not been reported lost since.
    let mut watching = false;
    loop {
        let request = if watching {
            match race(requests.recv(), rt.sleep_until(rt.now() + WATCH_INTERVAL)).await {
                Ok(request) => request,
                Err(()) => {
                    if let Some(report) = watch(&store).await {
                        watching = false;
                        if inbox.send(Msg::Store(report)).await.is_err() {
                            break;
                        }
                    }
                    continue;
                }
            }
        } else {
            requests.recv().await
        };
        let Some(request) = request else { break };
        let report = match request {
            Persist::Init(items) => match store.init(&items).await {
                Ok(()) => {
                    watching = true;
                    tracing::debug!(items = items.len(), "persistent store initialized");
                    if let Some(view) = &view {
                        view.wrote_all(&items);
                    }
                    None
                }
                Err(error) => {
                    tracing::debug!(%error, "persistent store init failed");
                    Some(StoreReport::Failed(error.fault()))
                }
            },
            Persist::Upsert(kind, key, item) => match store.upsert(kind, &key, &item).await {
                Ok(outcome) => {
                    tracing::trace!(%kind, key, ?outcome, "persistent store upsert");
                    if let Some(view) = &view {
                        let stored = match &outcome {
                            Upserted::Written => &item,
                            Upserted::Rejected { stored } => stored,
                        };
                        view.wrote(kind, &key, stored);
                    }
                    None
                }
                Err(error) => {
                    tracing::debug!(%kind, key, %error, "persistent store upsert failed");
                    Some(StoreReport::Failed(error.fault()))
                }
            },
            Persist::CheckAvailable => {
                let available = store.is_available().await;
                check_pending.store(false, Ordering::Release);
                tracing::trace!(available, "persistent store availability");
                Some(StoreReport::Available(available))
            }
            _ => {
                tracing::debug!("unsupported persistent store request");
                None
            }
        };
        if let Some(report) = report
            && inbox.send(Msg::Store(report)).await.is_err()
        {
            // The driver ended; what is left of the queue still gets written.
            tracing::trace!("driver gone: store report dropped");
        }
    }
    tracing::debug!("store task ended");
}

/// Read `$inited` from the store itself (not the latched answer): a failure to report
/// if the store lost its data set or cannot be read.
async fn watch(store: &CachingStore) -> Option<StoreReport> {
    match store.inner().holds_writes().await {
        Ok(true) => None,
        Ok(false) => {
            tracing::warn!(
                "the persistent store lost data this process wrote (restarted empty or from an older save): writing the data set again"
            );
            Some(StoreReport::Failed(flagsync_core::status::StoreFault {
                kind: flagsync_core::status::StoreFaultKind::DataLost,
                message: "the store no longer holds this process's writes".into(),
            }))
        }
        Err(error) => {
            tracing::debug!(%error, "reading the persistent store failed");
            Some(StoreReport::Failed(error.fault()))
        }
    }
}

/// The store task's queue of requests: the driver never waits for the store, and what
/// waits is bounded by the data set, not by how long the store is slow.
///
/// Queued writes are merged: a full data set ([`Persist::Init`]) replaces every write
/// queued before it (it holds all of them), so at most one full data set is pending;
/// an upsert replaces a queued upsert of the same item (the core emits them in version
/// order), so at most one per item is pending. Availability checks stay in order (the
/// driver sends at most one at a time).
pub(crate) fn queue() -> (WriteSender, WriteReceiver) {
    let shared = Arc::new(WriteQueue {
        state: Mutex::new(WriteState::default()),
    });
    (WriteSender(shared.clone()), WriteReceiver(shared))
}

#[derive(Debug)]
struct WriteQueue {
    state: Mutex<WriteState>,
}

#[derive(Default)]
struct WriteState {
    /// Requests in order; a slot is emptied when a later write supersedes it.
    items: VecDeque<Option<Persist>>,
    /// The absolute position of `items[0]` (positions never repeat).
    head: u64,
    /// The position of the queued upsert of each item.
    upserts: HashMap<(Kind, String), u64>,
    /// The sender is gone: the receiver ends once the queue is empty.
    closed: bool,
    waker: Option<Waker>,
}

impl std::fmt::Debug for WriteState {
    /// Counts only: an init holds the whole data set.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteState")
            .field("queued", &self.items.len())
            .field("closed", &self.closed)
            .finish()
    }
}

impl WriteQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, WriteState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The driver's side of [`queue`]; dropping it ends the store task once the queue is
/// written.
#[derive(Debug)]
pub(crate) struct WriteSender(Arc<WriteQueue>);

impl WriteSender {
    /// Queue `request`, merged with what is queued.
    pub(crate) fn send(&self, request: Persist) {
        let mut state = self.0.lock();
        let state = &mut *state;
        match request {
            Persist::Init(items) => {
                // Everything queued but availability checks is older than this data set.
                let mut superseded = 0usize;
                for slot in state.items.iter_mut() {
                    if matches!(slot, Some(Persist::Init(_) | Persist::Upsert(..))) {
                        *slot = None;
                        superseded += 1;
                    }
                }
                state.upserts.clear();
                if superseded > 0 {
                    tracing::debug!(
                        superseded,
                        "queued store writes merged into a full data set"
                    );
                }
                state.items.push_back(Some(Persist::Init(items)));
            }
            Persist::Upsert(kind, key, item) => {
                let at = state.upserts.get(&(kind, key.clone())).copied();
                match at.and_then(|at| state.items.get_mut((at - state.head) as usize)) {
                    Some(slot) => *slot = Some(Persist::Upsert(kind, key, item)),
                    None => {
                        let at = state.head + state.items.len() as u64;
                        state.upserts.insert((kind, key.clone()), at);
                        state
                            .items
                            .push_back(Some(Persist::Upsert(kind, key, item)));
                    }
                }
            }
            other => state.items.push_back(Some(other)),
        }
        if let Some(w) = state.waker.take() {
            w.wake();
        }
    }

    /// How many requests are queued (merged writes count once).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().items.iter().flatten().count()
    }
}

impl Drop for WriteSender {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.closed = true;
        if let Some(w) = state.waker.take() {
            w.wake();
        }
    }
}

/// The store task's side of [`queue`].
#[derive(Debug)]
pub(crate) struct WriteReceiver(Arc<WriteQueue>);

impl WriteReceiver {
    /// The next request, or `None` once the sender is gone and the queue is empty.
    pub(crate) async fn recv(&self) -> Option<Persist> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<Persist>> {
        let mut state = self.0.lock();
        while let Some(slot) = state.items.pop_front() {
            let at = state.head;
            state.head += 1;
            let Some(request) = slot else { continue };
            if let Persist::Upsert(kind, key, _) = &request
                && state.upserts.get(&(*kind, key.clone())) == Some(&at)
            {
                state.upserts.remove(&(*kind, key.clone()));
            }
            return Poll::Ready(Some(request));
        }
        if state.closed {
            return Poll::Ready(None);
        }
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use flagsync_core::store::Item;

    use super::*;

    fn item(version: u64) -> Item {
        Item {
            version,
            deleted: false,
            raw: format!("{{\"version\":{version}}}").into_bytes().into(),
        }
    }

    fn poll_now(rx: &WriteReceiver) -> Option<Persist> {
        let waker = Waker::noop();
        match rx.poll_recv(&mut Context::from_waker(waker)) {
            Poll::Ready(r) => r,
            Poll::Pending => None,
        }
    }

    #[test]
    fn at_most_one_full_data_set_is_pending() {
        let (tx, rx) = queue();
        for v in 0..1000 {
            tx.send(Persist::Upsert(Kind::Flag, format!("f{}", v % 10), item(v)));
            tx.send(Persist::Init(vec![(Kind::Flag, "a".into(), item(v))]));
            tx.send(Persist::CheckAvailable);
        }
        tx.send(Persist::Upsert(Kind::Flag, "b".into(), item(1)));
        tx.send(Persist::Upsert(Kind::Flag, "b".into(), item(2)));
        // 1000 checks, one init (the last), one upsert of b (the last).
        assert_eq!(tx.len(), 1002);
        let mut inits = Vec::new();
        let mut upserts = Vec::new();
        while let Some(r) = poll_now(&rx) {
            match r {
                Persist::Init(items) => inits.push(items[0].2.version),
                Persist::Upsert(_, key, item) => upserts.push((key, item.version)),
                _ => {}
            }
        }
        assert_eq!(inits, [999]);
        assert_eq!(upserts, [("b".to_owned(), 2)]);
    }

    #[test]
    fn upserts_of_one_item_merge_and_others_keep_their_order() {
        let (tx, rx) = queue();
        tx.send(Persist::Upsert(Kind::Flag, "a".into(), item(1)));
        tx.send(Persist::Upsert(Kind::Segment, "a".into(), item(1)));
        tx.send(Persist::Upsert(Kind::Flag, "b".into(), item(1)));
        tx.send(Persist::Upsert(Kind::Flag, "a".into(), item(3)));
        let got: Vec<_> = std::iter::from_fn(|| poll_now(&rx))
            .map(|r| match r {
                Persist::Upsert(kind, key, item) => (kind, key, item.version),
                _ => panic!("only upserts"),
            })
            .collect();
        assert_eq!(
            got,
            [
                (Kind::Flag, "a".to_owned(), 3),
                (Kind::Segment, "a".to_owned(), 1),
                (Kind::Flag, "b".to_owned(), 1)
            ]
        );
        // Once read, a new upsert of the item is queued again.
        tx.send(Persist::Upsert(Kind::Flag, "a".into(), item(4)));
        assert!(matches!(poll_now(&rx), Some(Persist::Upsert(_, _, i)) if i.version == 4));
        drop(tx);
        assert!(matches!(
            rx.poll_recv(&mut Context::from_waker(Waker::noop())),
            Poll::Ready(None)
        ));
    }
}
