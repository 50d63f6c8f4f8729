//! The store task: performs the core's persistent-store requests one at a time, in
//! the order the core emitted them, and reports failures and availability answers back
//! to the driver's inbox (DESIGN.md §3: the core decides, the adapter performs).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use flagsync_core::{Command, Persist};

use super::view::StoreView;
use super::{CachingStore, Upserted};
use crate::driver::{Msg, StoreReport, TaskGuard};

/// Perform every request from `requests` against `store` (and tell `view` what is now
/// stored) until the driver drops the
/// sending side (then finish what is queued and end). `check_pending` is cleared once
/// an availability check is answered (the driver sends at most one at a time).
/// `_guard` keeps the client's "finished" mark unset until then, so `close()` waits
/// (boundedly) for writes in flight.
pub(crate) async fn run(
    store: Arc<CachingStore>,
    view: Option<Arc<StoreView>>,
    requests: async_channel::Receiver<Persist>,
    inbox: async_channel::Sender<Msg<Command>>,
    check_pending: Arc<AtomicBool>,
    _guard: Arc<TaskGuard>,
) {
    while let Ok(request) = requests.recv().await {
        let report = match request {
            Persist::Init(items) => match store.init(&items).await {
                Ok(()) => {
                    tracing::debug!(items = items.len(), "persistent store initialized");
                    if let Some(view) = &view {
                        view.wrote_all(&items);
                    }
                    None
                }
                Err(error) => {
                    tracing::debug!(%error, "persistent store init failed");
                    Some(StoreReport::Failed)
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
                    Some(StoreReport::Failed)
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
