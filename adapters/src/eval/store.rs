//! The engine's view of one snapshot, for one evaluation.

use flagsync_core::Snapshot;
use launchdarkly_server_sdk_evaluation::{Context, Flag, Segment, Store};

use super::ModelCache;

/// The evaluation engine's `Store` over a [`Snapshot`], reading models from the cache.
///
/// It lives for one evaluation of one context: segments are handed to the engine as
/// they look to that context (see `segment.rs`), so no key list is ever copied.
/// Prerequisite flags are handed over as clones of the cached model, because the
/// trait returns models by value; unreadable items read as absent.
pub(crate) struct SnapshotStore<'a> {
    snapshot: &'a Snapshot,
    models: &'a ModelCache,
    context: &'a Context,
}

impl<'a> SnapshotStore<'a> {
    pub(crate) fn new(
        snapshot: &'a Snapshot,
        models: &'a ModelCache,
        context: &'a Context,
    ) -> Self {
        Self {
            snapshot,
            models,
            context,
        }
    }
}

impl Store for SnapshotStore<'_> {
    fn flag(&self, flag_key: &str) -> Option<Flag> {
        self.models
            .live_flag(self.snapshot, flag_key)
            .map(|flag| Flag::clone(&flag))
    }

    fn segment(&self, segment_key: &str) -> Option<Segment> {
        self.models
            .segment(self.snapshot, segment_key)
            .map(|segment| segment.for_context(self.context))
    }
}
