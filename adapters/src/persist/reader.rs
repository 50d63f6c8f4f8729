//! Watches whether the persistent store is initialized (`$inited`) while reads come
//! from it: a warm start (serve the last known flags at once, until the data source
//! delivers), daemon mode and FDv1 with a persistent store (PROTOCOL.md B §4.6,
//! §5.8–5.9). The items themselves are read key by key through the store's view
//! ([`super::view`]); this task makes their first whole listing before the first
//! answer.
//!
//! The answer is read at once, then again every cache TTL (every second with the cache
//! off) until the store says it is initialized, which is latched; with an infinite
//! cache a "not initialized" is kept, as the reference SDKs keep it. A failed
//! read is not a load: waiting for initialization goes on until a read finds the store
//! initialized (or the caller's timeout), so a reader started while the store is down
//! becomes ready once it is back; then the core is told ([`StoreReport::Initialized`]:
//! daemon mode reports VALID).

use std::sync::Arc;
use std::time::Duration;

use flagsync_core::Command;

use super::{CacheTtl, CachingStore};
use crate::driver::{Msg, StoreReport, TaskGuard};
use crate::publish::Published;
use crate::runtime::{Runtime, race};

/// How soon a failed read is tried again (the core polls availability meanwhile).
const RETRY: Duration = Duration::from_secs(1);

/// How often `$inited` is read again while the store says it is not initialized.
pub(crate) fn refresh_interval(ttl: CacheTtl) -> Duration {
    match ttl {
        CacheTtl::Expires(d) => d,
        CacheTtl::Disabled | CacheTtl::Infinite => Duration::from_secs(1),
    }
}

/// Read `$inited` until `stop` closes (the hand-over or the client's end), reads no
/// longer come from the store, or the store says it is initialized. A failed read
/// reads as "not initialized" and is reported to the core as a store failure
/// (PROTOCOL.md A.4.4): the data store status shows it, and the core polls the store's
/// availability.
pub(crate) async fn run(
    rt: Arc<dyn Runtime>,
    store: Arc<CachingStore>,
    published: Arc<Published>,
    stop: async_channel::Receiver<()>,
    inbox: async_channel::Sender<Msg<Command>>,
    _guard: Arc<TaskGuard>,
) {
    let refresh = refresh_interval(store.config().ttl);
    let mut listed = false;
    while published.reads_from_store() {
        // The first listing before the first answer: a client reported ready lists
        // every item of the store.
        if !listed && let Some(view) = published.store_view() {
            match view.load_all(&store).await {
                Ok(()) => listed = true,
                Err(error) => tracing::debug!(%error, "listing the persistent store failed"),
            }
        }
        // The view's answer while it is live (an evaluation may have read it): the
        // store's answer is cached once for the TTL, whoever read it.
        let view = published.store_view();
        let cached = view.as_ref().and_then(|v| v.inited_answer());
        let answer = match cached {
            Some((inited, _)) => Ok(inited),
            None => {
                let at = std::time::Instant::now();
                let answer = store.initialized().await;
                if let (Some(view), Ok(inited)) = (&view, &answer) {
                    view.record_inited(*inited, at);
                }
                answer
            }
        };
        let refresh = match cached {
            Some((false, Some(left))) => left.max(Duration::from_millis(1)),
            _ => refresh,
        };
        let next = match answer {
            Ok(true) if listed || published.store_view().is_none() => {
                published.set_store_initialized(true);
                // The first successful read that found data: waiting ends, and the
                // core learns the store holds a data set.
                published.store_load_done();
                let _ = inbox.send(Msg::Store(StoreReport::Initialized)).await;
                None
            }
            // With an infinite cache a "no" is kept for good, as the reference SDKs
            // cache it: the data source, or this process's own write, initializes.
            Ok(false) if store.config().ttl == CacheTtl::Infinite && view.is_some() => {
                published.set_store_initialized(false);
                None
            }
            Ok(inited) => {
                published.set_store_initialized(inited);
                // Initialized but not yet listed: list again soon.
                Some(if inited { refresh.min(RETRY) } else { refresh })
            }
            Err(error) => {
                tracing::debug!(%error, "reading the persistent store failed");
                let _ = inbox
                    .send(Msg::Store(StoreReport::Failed(error.fault())))
                    .await;
                Some(refresh.min(RETRY))
            }
        };
        let stopped = match next {
            Some(every) => race(stop.recv(), rt.sleep_until(rt.now() + every))
                .await
                .is_ok(),
            None => {
                let _ = stop.recv().await;
                true
            }
        };
        if stopped {
            break;
        }
    }
    published.store_load_done();
    tracing::debug!("persistent store reader ended");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_follows_the_cache_ttl() {
        assert_eq!(
            refresh_interval(CacheTtl::Expires(Duration::from_secs(15))),
            Duration::from_secs(15)
        );
        assert_eq!(refresh_interval(CacheTtl::Disabled), Duration::from_secs(1));
        assert_eq!(refresh_interval(CacheTtl::Infinite), Duration::from_secs(1));
    }
}
