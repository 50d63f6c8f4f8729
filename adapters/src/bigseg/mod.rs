//! Big segments: LaunchDarkly's segments whose membership lives in a separate store
//! (`unbounded` segments), kept current by the Relay Proxy or another LaunchDarkly
//! integration. Configure them with [`crate::ClientBuilder::big_segments`].
//!
//! ```text
//!  evaluation ──► BigSegmentLookup::membership(context key)          (synchronous)
//!                   │ hit ──► MembershipCache (LRU, 1,000 keys, 5 s)   flagsync_core::bigseg
//!                   │ miss ─► BigSegmentStore::membership(context hash) ─► cached
//!                   └ status: HEALTHY / STALE / STORE_ERROR from the last known store status
//!  status poller (a thread, every 5 s) ─► BigSegmentStore::metadata() ─► status, changes
//! ```
//!
//! # Why the store is synchronous
//! The evaluation engine asks for a membership synchronously, inside an evaluation,
//! and a cache miss must be answered there (LaunchDarkly's SDKs, and the contract
//! tests, expect the membership on the very first evaluation of a context). Evaluation
//! is a plain synchronous call ([`crate::Client::bool_variation`] and friends) that may
//! run on any thread, inside any runtime or none, so there is no executor to await an
//! async store on. [`BigSegmentStore`] is therefore synchronous, as in LaunchDarkly's
//! Go SDK, and each implementation bounds its own calls: `flagsync_redis::RedisBigSegmentStore`
//! sets connect and response timeouts (default 2 s and 2 s) on its
//! blocking connection. A miss costs one store round trip on the evaluating thread,
//! at most once per context key per cache TTL; the status is polled on a thread of its
//! own (the client is runtime-agnostic), so no runtime worker blocks on it — except
//! once, when an evaluation or [`crate::Client::big_segment_store_status`] needs the
//! status before the first poll (it is then read on the spot, as LaunchDarkly's SDKs
//! do). Evaluations that miss the same key at once make one store query: the first asks,
//! the others wait for its answer (single flight; a failed query fails them all, and is
//! not cached).
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

pub use flagsync_core::bigseg::{BigSegmentStoreStatus, BigSegmentsStatus, Membership};
pub use options::BigSegmentsOptions;

pub(crate) use lookup::BigSegmentsHandle;

/// Why a big-segment store call failed (the persistent stores' error type).
pub use crate::persist::StoreError;

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
/// writes which contexts each big segment includes or excludes. Synchronous; see the
/// [module docs](self) for why, and bound every call with a timeout.
pub trait BigSegmentStore: Send + Sync + Debug + 'static {
    /// The store's metadata. An `Err` makes the store unavailable.
    fn metadata(&self) -> Result<StoreMetadata, StoreError>;

    /// The memberships of the context whose key hashes to `context_hash` (see
    /// [`flagsync_core::bigseg::context_hash`]), keyed by segment reference
    /// (`{segment key}.g{generation}`); `None` when the store knows nothing of it.
    fn membership(&self, context_hash: &str) -> Result<Option<Membership>, StoreError>;
}
