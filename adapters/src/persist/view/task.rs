//! The view's fetch task: answers the reads the view asks for, one at a time.

use std::sync::Arc;
use std::time::Instant;

use flagsync_core::Command;

use super::Fetch;
use super::{Answer, StoreView, answer};
use crate::driver::{Msg, StoreReport, TaskGuard};
use crate::persist::CachingStore;
use crate::publish::Published;
use crate::runtime::race;

/// Answer the view's fetch requests, one at a time, until `stop` closes (the hand-over
/// to memory, or the client's end). Changed flags are published to the flag
/// subscribers; a failed read keeps what the view holds and is reported to the core
/// as a store failure (PROTOCOL.md A.4.4).
pub(crate) async fn run(
    view: Arc<StoreView>,
    requests: async_channel::Receiver<Fetch>,
    store: Arc<CachingStore>,
    published: Arc<Published>,
    stop: async_channel::Receiver<()>,
    inbox: async_channel::Sender<Msg<Command>>,
    _guard: Arc<TaskGuard>,
) {
    // The store was last found without a data set (reported once per loss).
    let mut lost = false;
    loop {
        let fetch = match race(requests.recv(), stop.recv()).await {
            Ok(Ok(fetch)) => fetch,
            _ => break,
        };
        view.fetching_on_this_thread();
        let started = Instant::now();
        let changed = match answer(&store, &fetch, view.is_reader()).await {
            Ok(Answer::NotInitialized) => {
                if !lost && published.initialized() {
                    lost = true;
                    tracing::warn!(
                        "the persistent store holds no data set ($inited is missing): \
                         serving the data last read until it is written again"
                    );
                    let _ = inbox
                        .send(Msg::Store(StoreReport::Failed(
                            flagsync_core::status::StoreFault {
                                kind: flagsync_core::status::StoreFaultKind::DataLost,
                                message: "$inited is missing".into(),
                            },
                        )))
                        .await;
                }
                view.fetched(&fetch, Answer::NotInitialized, started)
            }
            Ok(a) => {
                lost = false;
                view.fetched(&fetch, a, started)
            }
            Err(error) => {
                tracing::debug!(%error, "reading the persistent store failed");
                view.given_up(&fetch);
                let _ = inbox
                    .send(Msg::Store(StoreReport::Failed(error.fault())))
                    .await;
                Vec::new()
            }
        };
        if !changed.is_empty() {
            published.flags_changed(changed);
        }
    }
    requests.close();
    view.ended();
    tracing::debug!("persistent store view ended");
}
