//! Big segments on the [`Client`]: the store's status, its changes, and the lookup the
//! evaluation engine uses.

use flagsync_core::bigseg::{BigSegmentLookup, BigSegmentStoreStatus};

use crate::{Client, Subscription};

impl Client {
    /// The big-segment store's status (`available`, `stale`), if big segments are
    /// configured ([`crate::ClientBuilder::big_segments`]): as last polled, or read
    /// from the store now if it never was. Then this call waits for that one store
    /// query: on this thread through the store's blocking path
    /// ([`crate::bigseg::BigSegmentStore::metadata_now`], bounded by the store's
    /// timeouts), or else for its future on the client's runtime, at most 5 s (see
    /// [`crate::bigseg`]).
    pub fn big_segment_store_status(&self) -> Option<BigSegmentStoreStatus> {
        self.inner.big_segments.as_ref().map(|b| b.shared.status())
    }

    /// Every later change of [`Client::big_segment_store_status`] (the first status
    /// read counts as a change). Bounded like the other subscriptions; ends when the
    /// client closes, at once when big segments are not configured.
    pub fn big_segment_store_status_changes(&self) -> Subscription<BigSegmentStoreStatus> {
        match &self.inner.big_segments {
            Some(b) => b.shared.subscribe(),
            None => Subscription::new(async_channel::bounded(1).1),
        }
    }

    /// What the evaluation engine asks about big segments; `None` when none are
    /// configured (big segments then evaluate as `NOT_CONFIGURED`).
    pub(crate) fn big_segment_lookup(&self) -> Option<&dyn BigSegmentLookup> {
        self.inner
            .big_segments
            .as_ref()
            .map(|b| &*b.shared as &dyn BigSegmentLookup)
    }
}
