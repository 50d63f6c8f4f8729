//! `Client::all_flags_state`: every flag evaluated for one context
//! ([`flagsync_eval::flags_state`]) over the client's snapshot, or, while reads come
//! from a persistent store, over everything the store holds.

use flagsync_core::Kind;
use flagsync_eval::flags_state;

use super::store::SnapshotStore;
use super::{AllFlagsOptions, AllFlagsState, Context};
use crate::Client;

impl Client {
    /// Evaluate every flag for `context`, e.g. to bootstrap a client-side SDK.
    ///
    /// Before the client has data the state is empty and not [valid](AllFlagsState::valid)
    /// (PROTOCOL.md B §4.6). A flag that cannot be parsed, or whose evaluation fails, is
    /// included with no value, no variation and the reason `ERROR` (`MALFORMED_FLAG`); an
    /// unparsable flag is left out with `client_side_only`, which needs the parsed flag
    /// to decide.
    ///
    /// Every flag is parsed into the cache on the first call, so later calls (and
    /// variations) start from parsed models.
    pub fn all_flags_state(&self, context: &Context, options: AllFlagsOptions) -> AllFlagsState {
        if !self.evaluation_ready() {
            tracing::debug!("all_flags_state before the client has data");
            return AllFlagsState::invalid();
        }
        let now_ms = crate::events::clock::unix_ms();
        let published = &self.inner.published;
        // As the reference reads every flag of a persistent store: whole, cached.
        let snapshot = match published.view() {
            Some(view) => {
                view.touch_all(Kind::Segment);
                view.touch_all(Kind::Flag);
                view.listing()
            }
            None => published.memory_snapshot(),
        };
        let store = SnapshotStore::new(&snapshot, self.models()).with_view(published.view());
        flags_state(
            &snapshot,
            self.models(),
            &store,
            self.big_segment_lookup(),
            context,
            options,
            now_ms,
        )
    }
}
