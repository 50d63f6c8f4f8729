//! The engine's view of one snapshot, for one evaluation.

use std::sync::Arc;

use flagsync_core::{Kind, Snapshot};

use flagsync_eval::{Flag, Models, Segment, Store};

use super::ModelCache;
use crate::persist::view::StoreView;

/// The evaluation engine's [`Store`] over a [`Snapshot`], reading compiled models from
/// the cache: prerequisite flags and segments are handed over as the cached `Arc`s,
/// never copied. Unreadable items read as absent.
pub(crate) struct SnapshotStore<'a> {
    snapshot: &'a Snapshot,
    models: &'a ModelCache,
    /// While reads come from a persistent store: told of every item read, so that
    /// absent or expired ones are read from the store again.
    view: Option<&'a StoreView>,
}

impl<'a> SnapshotStore<'a> {
    pub(crate) fn new(snapshot: &'a Snapshot, models: &'a ModelCache) -> Self {
        Self {
            snapshot,
            models,
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
    fn flag(&self, flag_key: &str) -> Option<Arc<Flag>> {
        if let Some(view) = self.view {
            // The read may have waited for the store: read what the view holds now.
            view.touch(Kind::Flag, flag_key);
            return self.models.live_flag(&view.snapshot(), flag_key);
        }
        self.models.live_flag(self.snapshot, flag_key)
    }

    fn segment(&self, segment_key: &str) -> Option<Arc<Segment>> {
        if let Some(view) = self.view {
            view.touch(Kind::Segment, segment_key);
            return self.models.live_segment(&view.snapshot(), segment_key);
        }
        self.models.live_segment(self.snapshot, segment_key)
    }
}
