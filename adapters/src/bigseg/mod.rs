//! Big segments: LaunchDarkly's segments whose membership lives in a separate store
//! (`unbounded` segments), kept current by the Relay Proxy or another LaunchDarkly
//! integration. Configure them with [`crate::ClientBuilder::big_segments`].
//!
//! ```text
//!  evaluation ──► BigSegmentLookup::membership(context key)          (synchronous)
//!                   │ hit ──► MembershipCache (LRU, 1,000 keys, 5 s)   flagsync_core::bigseg
//!                   │ miss ─► BigSegmentStore::membership_now(hash)  on the evaluating thread
//!                   │         or membership(hash) on the runtime,    waited for, bounded ─► cached
//!                   └ status: HEALTHY / STALE / STORE_ERROR from the last known store status
//!  status poller (a task on the client's runtime, every 5 s) ─► BigSegmentStore::metadata()
//! ```
//!
//! # An async store, and the calls that wait
//! [`BigSegmentStore`] is async, with boxed futures, as
//! [`PersistentStore`](crate::persist::PersistentStore) is: the status poller is a task
//! on the client's runtime that awaits [`BigSegmentStore::metadata`], so no thread is
//! kept for it and no runtime thread blocks on the store.
//!
//! Evaluation, though, is a plain synchronous call ([`crate::Client::bool_variation`]
//! and friends) that may run on any thread, inside any runtime or none, and a cache miss
//! must be answered there (LaunchDarkly's SDKs, and the contract tests, expect the
//! membership on the very first evaluation of a context). Two calls therefore wait:
//!
//! - an evaluation that misses the membership cache, once per context key per cache
//!   TTL;
//! - [`crate::Client::big_segment_store_status`] (and an evaluation) before the first
//!   poll, once, when the status was never read (as LaunchDarkly's SDKs read it on the
//!   spot).
//!
//! Each asks the store's blocking path first ([`BigSegmentStore::membership_now`],
//! [`BigSegmentStore::metadata_now`]), which answers on the calling thread within the
//! store's own timeouts: `flagsync_redis::RedisBigSegmentStore` has one blocking
//! connection with a 2 s connect and a 2 s response timeout, as before the store became
//! async. A store without one (the default) has its future run on the client's runtime
//! (on a thread of its own before the client knows its runtime), and the caller waits
//! for the answer at most 5 s; not at all on the thread where the store's futures last
//! ran (it may be a single-threaded runtime's only one, which would wait for itself):
//! that evaluation reports STORE_ERROR and the answer fills the cache when it comes.
//! Evaluations that miss the same key at once make one store query: the first asks,
//! the others wait for its answer, at most 5 s (single flight; a failed query fails
//! them all, and is not cached).
//!
//! The pure rules (cache policy, status rules, segment references, context hashes)
//! live in [`flagsync_core::bigseg`] and are tested there in virtual time.

mod client;
mod lookup;
mod options;
#[cfg(test)]
mod single_flight_tests;
#[cfg(test)]
mod tests;

use std::fmt::Debug;
use std::time::Duration;

pub use flagsync_core::bigseg::{BigSegmentStoreStatus, BigSegmentsStatus, Membership};
pub use options::BigSegmentsOptions;

pub(crate) use lookup::BigSegmentsHandle;

/// Why a big-segment store call failed (the persistent stores' error type).
pub use crate::persist::StoreError;
use crate::runtime::BoxFuture;

/// What the store says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StoreMetadata {
    /// When the store was last brought up to date (unix milliseconds), if it ever was.
    pub last_up_to_date: Option<u64>,
}

impl StoreMetadata {
    /// Metadata with `last_up_to_date` (unix milliseconds).
    pub fn new(last_up_to_date: Option<u64>) -> Self {
        Self { last_up_to_date }
    }
}

/// A big-segment store: where the Relay Proxy (or another LaunchDarkly integration)
/// writes which contexts each big segment includes or excludes.
///
/// Async with boxed futures, like [`PersistentStore`](crate::persist::PersistentStore),
/// so it is object safe and runs on any runtime. Bound every call with a timeout. The
/// two blocking methods are optional: a store that can answer on the calling thread
/// (with a blocking connection) saves evaluations a hop through the runtime; see the
/// [module docs](self) for which calls wait, and how long.
pub trait BigSegmentStore: Send + Sync + Debug + 'static {
    /// The store's metadata. An `Err` makes the store unavailable.
    fn metadata(&self) -> BoxFuture<'_, Result<StoreMetadata, StoreError>>;

    /// The memberships of the context whose key hashes to `context_hash` (see
    /// [`flagsync_core::bigseg::context_hash`]), keyed by segment reference
    /// (`{segment key}.g{generation}`); `None` when the store knows nothing of it.
    fn membership<'a>(
        &'a self,
        context_hash: &'a str,
    ) -> BoxFuture<'a, Result<Option<Membership>, StoreError>>;

    /// [`membership`](Self::membership) on the calling thread, without the async
    /// runtime, answering within about `timeout`; `None` if this store cannot (the
    /// default). An evaluation that misses the cache uses it to answer before it
    /// returns; without it the store's future runs on the client's runtime and the
    /// evaluation waits for it (bounded, see the [module docs](self)).
    fn membership_now(
        &self,
        context_hash: &str,
        timeout: Duration,
    ) -> Option<Result<Option<Membership>, StoreError>> {
        let _ = (context_hash, timeout);
        None
    }

    /// [`metadata`](Self::metadata) on the calling thread, as
    /// [`membership_now`](Self::membership_now); `None` if this store cannot (the
    /// default). Used when a status is needed before the first poll.
    fn metadata_now(&self, timeout: Duration) -> Option<Result<StoreMetadata, StoreError>> {
        let _ = timeout;
        None
    }
}
