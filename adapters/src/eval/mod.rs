//! Flag evaluation on the [`Client`]: typed `*_variation` and `*_variation_detail`
//! methods, [`Client::all_flags_state`], [`Client::secure_mode_hash`], and (in
//! [`crate::migration`]) the migration stage of a flag.
//!
//! Evaluation is flagsync's own engine (crate `flagsync-eval`, re-exported here as
//! [`engine`] and [`context`]), which follows LaunchDarkly's Go
//! evaluator and is checked by LaunchDarkly's sdk-test-harness. The context types
//! ([`Context`], [`ContextBuilder`], [`MultiContextBuilder`], [`ContextKind`],
//! [`Reference`], [`AttributeValue`], [`FlagValue`]) are flagsync's own ([`context`])
//! with the API and JSON of the official `launchdarkly-server-sdk-evaluation` crate's,
//! so code written for the official SDK builds contexts the same way; the engine reads
//! their attributes borrowed ([`Context::attribute`]). [`Detail`], [`Reason`] and
//! [`EvalError`] are flagsync's own too: the reason also carries `bigSegmentsStatus`.
//!
//! ```text
//!  Client::bool_variation(key, context, default)
//!    │ not ready (B §4.6)? ── default, reason ERROR/CLIENT_NOT_READY
//!    ▼
//!  Snapshot (raw JSON per item) ──► ModelCache: (kind, key, version) → Arc<Flag> / Arc<Segment>
//!    │                                compiled on first use, shared by every later evaluation
//!    ▼
//!  engine::evaluate(&SnapshotStore, &flag, context, {prerequisite recorder, big segments})
//! ```
//!
//! The store keeps flags as raw JSON and parses nothing up front (DESIGN.md §3); a flag
//! or segment is compiled (key lists into hash sets, clause values parsed, regexes
//! compiled) the first time an evaluation needs it, once per version, and shared with
//! `Arc` afterwards. Prerequisite flags and segments are handed to the engine as those
//! `Arc`s: nothing is copied per evaluation.
//!
//! Nothing here returns an error or panics on bad data: an unknown flag is
//! `FLAG_NOT_FOUND`, a flag the engine cannot parse is `MALFORMED_FLAG`, and a client
//! without data answers every call with the default value and `CLIENT_NOT_READY`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), flagsync::Error> {
//! use std::time::Duration;
//! use flagsync::eval::ContextBuilder;
//!
//! let client = flagsync::Client::builder("sdk-key").build()?;
//! client.start()?;
//! client.wait_for_initialization(Duration::from_secs(5)).await;
//! let context = ContextBuilder::new("user-123").build().expect("a valid context");
//! if client.bool_variation("new-checkout", &context, false) {
//!     // …
//! }
//! let detail = client.string_variation_detail("banner-text", &context, "Welcome");
//! println!("{:?} because {:?}", detail.value, detail.reason);
//! # Ok(())
//! # }
//! ```

mod all_flags;
mod cache;
mod record;
mod secure_mode;
mod store;
#[cfg(test)]
mod tests;
mod variation;

use std::sync::Arc;

use flagsync_core::{Kind, Snapshot};

/// The context types (crate `flagsync-eval`).
pub use flagsync_eval::context;
/// The evaluation engine (crate `flagsync-eval`).
pub use flagsync_eval::engine;
pub use flagsync_eval::{AllFlagsOptions, AllFlagsState, FlagState, same_context};
/// The context types, API-compatible with the official crate's (see [`context`]).
pub use flagsync_eval::{
    AttributeRef, AttributeValue, Context, ContextBuilder, FlagValue, MultiContextBuilder,
    Reference, context::Kind as ContextKind,
};
pub use flagsync_eval::{BigSegmentsStatus, Detail, EvalError, Reason};
use flagsync_eval::{Flag, Options, PrerequisiteRecorder};

pub(crate) use cache::ModelCache;
pub(crate) use flagsync_eval::SecureModeKey;
pub(crate) use record::Prerequisites;

use crate::Client;
use store::SnapshotStore;

impl Client {
    /// True when evaluations may read the store; otherwise they answer with the default
    /// value and `CLIENT_NOT_READY` (PROTOCOL.md B §4.6, A.4.4: never an error).
    ///
    /// This is the one place that decides: the data availability is at least CACHED,
    /// so a client that is only CACHED (data without a selector after FDv1 fallback, or
    /// a persistent store not yet refreshed) evaluates from what it has, as B §4.6 says.
    ///
    /// Before that, a client reading from a persistent store (a warm start) asks the
    /// store whether it holds a data set (`$inited`, cached as the reference SDKs cache
    /// it) and evaluates from it if so, as LaunchDarkly's SDKs do.
    fn evaluation_ready(&self) -> bool {
        if self
            .data_availability()
            .at_least(crate::DataAvailability::Cached)
        {
            return true;
        }
        self.inner
            .published
            .view()
            .is_some_and(|view| view.store_initialized())
    }

    /// The flag cache of this client.
    fn models(&self) -> &ModelCache {
        &self.inner.models
    }

    /// Evaluate flag `key` and hand the engine's detail to `with`, together with the
    /// cached flag model when there is one. The detail's value borrows from that model,
    /// so typed callers read it without copying. A missing value (an error, or an off
    /// flag without an off variation) is left for the caller to replace by its default.
    pub(crate) fn evaluate_with<R>(
        &self,
        key: &str,
        context: &Context,
        recorder: Option<&dyn PrerequisiteRecorder>,
        with: impl FnOnce(Option<&Arc<Flag>>, Detail<&FlagValue>) -> R,
    ) -> R {
        if !self.evaluation_ready() {
            tracing::debug!(flag = key, "evaluation before the client has data");
            return with(None, Detail::err(EvalError::ClientNotReady));
        }
        let view = self.inner.published.view();
        if let Some(view) = view {
            view.touch(Kind::Flag, key);
        }
        let snapshot = self.inner.published.read();
        let options = Options {
            recorder,
            big_segments: self.big_segment_lookup(),
        };
        evaluate_in(&snapshot, self.models(), view, key, context, options, with)
    }
}

/// Evaluate flag `key` of `snapshot` with the models of `models` (see
/// [`Client::evaluate_with`]).
fn evaluate_in<R>(
    snapshot: &Snapshot,
    models: &ModelCache,
    view: Option<&crate::persist::view::StoreView>,
    key: &str,
    context: &Context,
    options: Options<'_>,
    with: impl FnOnce(Option<&Arc<Flag>>, Detail<&FlagValue>) -> R,
) -> R {
    let store = SnapshotStore::new(snapshot, models).with_view(view);
    flagsync_eval::evaluate_in(snapshot, models, &store, key, context, options, with)
}
