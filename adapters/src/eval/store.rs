//! The engine's view of one snapshot, for one evaluation.

use flagsync_core::{Kind, Snapshot};
use launchdarkly_server_sdk_evaluation::{Context, Flag, Segment, Store};

use super::ModelCache;
use crate::persist::view::StoreView;

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
    /// While reads come from a persistent store: told of every item read, so that
    /// absent or expired ones are read from the store again.
    view: Option<&'a StoreView>,
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
            view: None,
        }
    }

    /// Tell `view` of every item this evaluation reads.
    pub(crate) fn with_view(mut self, view: Option<&'a StoreView>) -> Self {
        self.view = view;
        self
    }
}

impl Store for SnapshotStore<'_> {
    fn flag(&self, flag_key: &str) -> Option<Flag> {
        if let Some(view) = self.view {
            // The read may have waited for the store: read what the view holds now.
            view.touch(Kind::Flag, flag_key);
            return self
                .models
                .live_flag(&view.snapshot(), flag_key)
                .map(|flag| Flag::clone(&flag));
        }
        self.models
            .live_flag(self.snapshot, flag_key)
            .map(|flag| Flag::clone(&flag))
    }

    fn segment(&self, segment_key: &str) -> Option<Segment> {
        if let Some(view) = self.view {
            view.touch(Kind::Segment, segment_key);
            return self
                .models
                .segment(&view.snapshot(), segment_key)
                .map(|segment| segment.for_context(self.context));
        }
        self.models
            .segment(self.snapshot, segment_key)
            .map(|segment| segment.for_context(self.context))
    }
}
