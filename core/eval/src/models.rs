//! Compiled models of a [`Snapshot`]'s items, and the engine's [`Store`] over one.
//!
//! The core's store keeps raw JSON and parses nothing up front. The first evaluation
//! that needs an item compiles it ([`Flag::from_json`], [`Segment::from_json`]) and
//! leaves the model in the item's [`Derived`] slot, which every snapshot holding that
//! item shares: later evaluations read it with no hashing, no lock and no lookup
//! beyond the item's own. [`SlotModels`] is just that; an SDK may put a second level
//! behind the slot (flagsync's client keeps models by key and version, so an item
//! stored again with the same version is not compiled again) by implementing
//! [`Models`] with [`kept`].
//!
//! ```
//! use bytes::Bytes;
//! use flagsync_core::store::{Change, ChangeSet, Store};
//! use flagsync_core::Kind;
//! use flagsync_eval::{ContextBuilder, FlagValue, Options, SlotModels, evaluate_flag};
//!
//! let flag = r#"{"key":"f","version":1,"on":true,"variations":[false,true],
//!               "fallthrough":{"variation":1},"offVariation":0}"#;
//! let mut store = Store::new();
//! store.apply(ChangeSet::fdv1_full(vec![Change::from_json(Kind::Flag, Bytes::from(flag)).unwrap()]));
//! let snapshot = store.snapshot();
//! let context = ContextBuilder::new("u1").build().unwrap();
//! let value = evaluate_flag(&snapshot, &SlotModels, "f", &context, Options::default(),
//!     |_, detail| detail.value.cloned());
//! assert_eq!(value, Some(FlagValue::Bool(true)));
//! ```

use std::sync::Arc;

use flagsync_core::store::{Derived, Item};
use flagsync_core::{Kind, Snapshot};

use crate::engine::{self, Detail, EvalError, Flag, Options, Segment, Store};
use crate::{Context, FlagValue};

/// Where the compiled models of a snapshot's items come from.
pub trait Models {
    /// The model of flag `key` of `snapshot` (`item` is its live item, `derived` the
    /// item's slot); `None` if the engine cannot read it.
    fn flag(
        &self,
        snapshot: &Snapshot,
        key: &str,
        item: &Item,
        derived: &Derived,
    ) -> Option<Arc<Flag>>;

    /// The model of segment `key`, as [`Models::flag`].
    fn segment(
        &self,
        snapshot: &Snapshot,
        key: &str,
        item: &Item,
        derived: &Derived,
    ) -> Option<Arc<Segment>>;

    /// The live flag `key` of `snapshot`, compiled.
    fn live_flag(&self, snapshot: &Snapshot, key: &str) -> Option<Arc<Flag>> {
        let (item, derived) = snapshot.get_with_derived(Kind::Flag, key)?;
        self.flag(snapshot, key, item, derived)
    }

    /// The live segment `key` of `snapshot`, compiled.
    fn live_segment(&self, snapshot: &Snapshot, key: &str) -> Option<Arc<Segment>> {
        let (item, derived) = snapshot.get_with_derived(Kind::Segment, key)?;
        self.segment(snapshot, key, item, derived)
    }
}

/// The model `derived` keeps, else `compile`'s, which the slot then keeps. A `None`
/// (an item the engine cannot read) is kept too, so it is not compiled again.
pub fn kept<M: Send + Sync + 'static>(
    derived: &Derived,
    compile: impl FnOnce() -> Option<Arc<M>>,
) -> Option<Arc<M>> {
    if let Some(kept) = derived.get::<Option<Arc<M>>>() {
        return kept.clone();
    }
    let model = compile();
    derived.set::<Option<Arc<M>>>(model.clone());
    model
}

/// Models kept in each item's [`Derived`] slot only, compiled on first use.
#[derive(Debug, Clone, Copy, Default)]
pub struct SlotModels;

impl Models for SlotModels {
    fn flag(&self, _: &Snapshot, key: &str, item: &Item, derived: &Derived) -> Option<Arc<Flag>> {
        kept(derived, || {
            Flag::from_json(&item.raw, key).ok().map(Arc::new)
        })
    }

    fn segment(
        &self,
        _: &Snapshot,
        key: &str,
        item: &Item,
        derived: &Derived,
    ) -> Option<Arc<Segment>> {
        kept(derived, || {
            Segment::from_json(&item.raw, key).ok().map(Arc::new)
        })
    }
}

/// The engine's [`Store`] over a [`Snapshot`]: prerequisite flags and segments are the
/// models of `models`, shared, never copied. Unreadable items read as absent.
pub struct SnapshotStore<'a, M: Models + ?Sized> {
    snapshot: &'a Snapshot,
    models: &'a M,
}

impl<'a, M: Models + ?Sized> SnapshotStore<'a, M> {
    /// The store over `snapshot`, with the models of `models`.
    pub fn new(snapshot: &'a Snapshot, models: &'a M) -> Self {
        Self { snapshot, models }
    }
}

impl<M: Models + ?Sized> Store for SnapshotStore<'_, M> {
    fn flag(&self, key: &str) -> Option<Arc<Flag>> {
        self.models.live_flag(self.snapshot, key)
    }

    fn segment(&self, key: &str) -> Option<Arc<Segment>> {
        self.models.live_segment(self.snapshot, key)
    }
}

/// Evaluate flag `key` of `snapshot` for `context` and hand the detail to `with`,
/// together with the flag's model when there is one (the detail's value borrows from
/// it). An unknown flag is `FLAG_NOT_FOUND`, an unreadable one `MALFORMED_FLAG`.
pub fn evaluate_flag<R>(
    snapshot: &Snapshot,
    models: &(impl Models + ?Sized),
    key: &str,
    context: &Context,
    options: Options<'_>,
    with: impl FnOnce(Option<&Arc<Flag>>, Detail<&FlagValue>) -> R,
) -> R {
    evaluate_in(
        snapshot,
        models,
        &SnapshotStore::new(snapshot, models),
        key,
        context,
        options,
        with,
    )
}

/// [`evaluate_flag`] with prerequisites and segments read from `store`.
pub fn evaluate_in<R>(
    snapshot: &Snapshot,
    models: &(impl Models + ?Sized),
    store: &dyn Store,
    key: &str,
    context: &Context,
    options: Options<'_>,
    with: impl FnOnce(Option<&Arc<Flag>>, Detail<&FlagValue>) -> R,
) -> R {
    let Some((item, derived)) = snapshot.get_with_derived(Kind::Flag, key) else {
        return with(None, Detail::err(EvalError::FlagNotFound));
    };
    let Some(flag) = models.flag(snapshot, key, item, derived) else {
        return with(None, Detail::err(EvalError::MalformedFlag));
    };
    let detail = engine::evaluate(store, &flag, context, options);
    with(Some(&flag), detail)
}
