//! Big segments: the pure parts (LaunchDarkly's "unbounded" segments, whose membership
//! lives in a separate store rather than in the segment's JSON).
//!
//! The evaluation engine asks a [`BigSegmentLookup`] for the membership of a context
//! key, at most once per context key per evaluation, and reads it with
//! [`Membership::check`] using the segment's [`segment_ref`]. The lookup's answer carries
//! the [`BigSegmentsStatus`] the evaluation reason reports (`bigSegmentsStatus`).
//! Where the membership comes from (a store, a cache, a poller of the store's metadata)
//! is the adapters' business; the rules they follow are here, pure: the cache policy
//! ([`MembershipCache`]: LRU, bounded, with a TTL, `now` passed in) and the status rules
//! ([`store_status`], [`evaluation_status`], [`poll_interval`]).

use std::sync::Arc;

use rustc_hash::FxHashMap;

/// The health of the big-segment store as an evaluation reason reports it
/// (`bigSegmentsStatus`), the names LaunchDarkly's SDKs use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BigSegmentsStatus {
    /// The membership was read from an up-to-date store.
    Healthy,
    /// The membership was read, but the store's last update is older than the stale
    /// threshold (or its metadata could not be read).
    Stale,
    /// The membership could not be read.
    StoreError,
    /// No big-segment store is configured, or the segment has no `generation`.
    NotConfigured,
}

impl BigSegmentsStatus {
    /// The JSON name: `HEALTHY`, `STALE`, `STORE_ERROR` or `NOT_CONFIGURED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Healthy => "HEALTHY",
            Self::Stale => "STALE",
            Self::StoreError => "STORE_ERROR",
            Self::NotConfigured => "NOT_CONFIGURED",
        }
    }
}

/// A context's big-segment membership: segment references ([`segment_ref`]) it is
/// included in (`true`) or excluded from (`false`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Membership {
    refs: FxHashMap<Box<str>, bool>,
}

impl Membership {
    /// A membership from the store's include and exclude lists. A reference in both is
    /// included, as LaunchDarkly's SDKs read it.
    pub fn from_refs<I, E>(included: I, excluded: E) -> Self
    where
        I: IntoIterator,
        I::Item: Into<Box<str>>,
        E: IntoIterator,
        E::Item: Into<Box<str>>,
    {
        let mut refs = FxHashMap::default();
        for r in excluded {
            refs.insert(r.into(), false);
        }
        for r in included {
            refs.insert(r.into(), true);
        }
        Self { refs }
    }

    /// `Some(true)` if the context is included in the segment reference, `Some(false)`
    /// if excluded, `None` if the store says nothing (the segment's rules decide).
    pub fn check(&self, segment_ref: &str) -> Option<bool> {
        self.refs.get(segment_ref).copied()
    }

    /// True if the store lists the context in no segment.
    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }
}

/// The answer to one membership query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupResult {
    /// The membership, or `None` when it could not be read (then `status` says why).
    pub membership: Option<Arc<Membership>>,
    /// The status to report in the evaluation's reason.
    pub status: BigSegmentsStatus,
}

/// What the evaluation engine asks about big segments. Implemented by the adapters
/// (store, cache and status poller); an evaluation without one reports
/// [`BigSegmentsStatus::NotConfigured`] for every big segment it meets.
pub trait BigSegmentLookup: Send + Sync {
    /// The membership of the context whose key (for the segment's
    /// `unboundedContextKind`) is `context_key`. The engine asks at most once per
    /// context key per evaluation and hashes nothing itself: the implementation hashes
    /// the key for its store (see [`context_hash`]).
    fn membership(&self, context_key: &str) -> LookupResult;
}

/// The reference a big segment's membership is stored under: `{key}.g{generation}`.
pub fn segment_ref(segment_key: &str, generation: i64) -> String {
    format!("{segment_key}.g{generation}")
}

/// The key the store files a context's membership under: base64 (standard alphabet,
/// padded) of the SHA-256 of the context key. Implemented in the adapters' big-segment
/// module is fine too, but this is the one definition; see `hash.rs`.
pub use hash::context_hash;

pub use cache::{DEFAULT_CACHE_CAPACITY, DEFAULT_CACHE_TTL, MembershipCache};
pub use status::{
    BigSegmentStoreStatus, DEFAULT_STALE_AFTER, DEFAULT_STATUS_POLL_INTERVAL, evaluation_status,
    poll_interval, store_status,
};

mod cache;
mod hash;
mod status;
