//! Cheap immutable views of the store for readers in other threads.

use std::any::Any;
use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use imbl::shared_ptr::DefaultSharedPtr;
use rustc_hash::FxBuildHasher;

use super::{Item, Kind};

/// The items of one kind: a persistent hash map with structural sharing. Cloning is
/// O(1), and a write after a clone copies only the path to the changed entry. The
/// hasher is unseeded (Fx) so the core stays deterministic; keys come from the flag
/// service, not from strangers.
///
/// Each entry is one shared pointer to its key and item, so a map node copied on write
/// clones one pointer per entry (not a key string and an item), and nodes stay small.
#[derive(Clone, Default)]
pub(crate) struct ItemMap(imbl::GenericHashMap<Entry, (), FxBuildHasher, DefaultSharedPtr>);

/// A stored key and item, shared between every map that holds them.
#[derive(Clone)]
struct Entry(Arc<Stored>);

/// What an [`Entry`] points to.
struct Stored {
    /// Boxed rather than a `String`: 8 bytes less per item, which puts `Stored` in a
    /// smaller size class of the allocator (16 bytes less per stored item).
    key: Box<str>,
    item: Item,
    derived: Derived,
}

/// What a reader derives from one stored item — for the evaluation, the item's compiled
/// model — kept beside it and shared by every snapshot that holds the item, so it is
/// derived once per stored version and found with the item, without a lookup of its
/// own. The store never reads it; it goes when the item leaves the last snapshot.
///
/// The first value kept stays ([`Derived::set`] after another reader kept one keeps
/// theirs). Readers are threads of the adapters: `set` may wait the few nanoseconds
/// another thread's `set` of the same item takes.
#[derive(Default)]
pub struct Derived(OnceLock<Box<dyn Any + Send + Sync>>);

impl Derived {
    /// The value kept here, if there is one and it is a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.get()?.downcast_ref()
    }

    /// Keep `value` unless a value is kept already; then the value kept, if a `T`.
    pub fn set<T: Any + Send + Sync>(&self, value: T) -> Option<&T> {
        let _ = self.0.set(Box::new(value));
        self.get()
    }
}

impl std::fmt::Debug for Derived {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "Derived(kept)"
        } else {
            "Derived(empty)"
        })
    }
}

impl Borrow<str> for Entry {
    fn borrow(&self) -> &str {
        &self.0.key
    }
}

impl Hash for Entry {
    /// Hashes as the key's `str` does, so lookups by `&str` find the entry.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.key.hash(state);
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.0.key == other.0.key
    }
}

impl Eq for Entry {}

impl ItemMap {
    pub(crate) fn get(&self, key: &str) -> Option<&Item> {
        self.0.get_key_value(key).map(|(e, ())| &e.0.item)
    }

    /// The item stored under `key` and what readers derived from it.
    pub(crate) fn get_with_derived(&self, key: &str) -> Option<(&Item, &Derived)> {
        self.0
            .get_key_value(key)
            .map(|(e, ())| (&e.0.item, &e.0.derived))
    }

    /// Store `item` under `key`, replacing any item stored there; true if one was.
    pub(crate) fn insert(&mut self, key: String, item: Item) -> bool {
        let stored = Stored {
            key: key.into_boxed_str(),
            item,
            derived: Derived::default(),
        };
        self.0.insert(Entry(Arc::new(stored)), ()).is_some()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &Item)> + '_ {
        self.0.keys().map(|e| (&*e.0.key, &e.0.item))
    }

    pub(crate) fn iter_with_derived(&self) -> impl Iterator<Item = (&str, &Item, &Derived)> + '_ {
        self.0.keys().map(|e| (&*e.0.key, &e.0.item, &e.0.derived))
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Item> + '_ {
        self.0.keys().map(|e| &e.0.item)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// An immutable view of the whole store at one moment.
///
/// Cloning a snapshot is O(1) and never blocks the writer: the store keeps writing
/// into its own copy, sharing unchanged parts with every snapshot handed out
/// (DESIGN.md §3).
#[derive(Clone, Default)]
pub struct Snapshot {
    pub(crate) flags: ItemMap,
    pub(crate) segments: ItemMap,
    pub(crate) initialized: bool,
}

impl Snapshot {
    pub(crate) fn map(&self, kind: Kind) -> &ItemMap {
        match kind {
            Kind::Flag => &self.flags,
            Kind::Segment => &self.segments,
        }
    }

    pub(crate) fn map_mut(&mut self, kind: Kind) -> &mut ItemMap {
        match kind {
            Kind::Flag => &mut self.flags,
            Kind::Segment => &mut self.segments,
        }
    }

    /// True once a full data set has been stored.
    pub fn initialized(&self) -> bool {
        self.initialized
    }

    /// The live item of `kind` named `key`; `None` if absent or deleted.
    pub fn get(&self, kind: Kind, key: &str) -> Option<&Item> {
        self.map(kind).get(key).filter(|i| !i.deleted)
    }

    /// The live item of `kind` named `key` and what readers derived from it (see
    /// [`Derived`]); `None` if absent or deleted.
    pub fn get_with_derived(&self, kind: Kind, key: &str) -> Option<(&Item, &Derived)> {
        self.map(kind)
            .get_with_derived(key)
            .filter(|(i, _)| !i.deleted)
    }

    /// Every live item of `kind` with what readers derived from it, in no particular
    /// order.
    pub fn iter_with_derived(
        &self,
        kind: Kind,
    ) -> impl Iterator<Item = (&str, &Item, &Derived)> + '_ {
        self.map(kind)
            .iter_with_derived()
            .filter(|(_, i, _)| !i.deleted)
    }

    /// The stored item including tombstones, as the version rules see it.
    pub fn get_including_deleted(&self, kind: Kind, key: &str) -> Option<&Item> {
        self.map(kind).get(key)
    }

    /// Every live item of `kind`, in no particular order.
    pub fn iter(&self, kind: Kind) -> impl Iterator<Item = (&str, &Item)> + '_ {
        self.map(kind).iter().filter(|(_, i)| !i.deleted)
    }

    /// Every item of `kind`, tombstones included, in no particular order.
    pub fn iter_including_deleted(&self, kind: Kind) -> impl Iterator<Item = (&str, &Item)> + '_ {
        self.map(kind).iter()
    }

    /// The number of live items of `kind`.
    pub fn len(&self, kind: Kind) -> usize {
        self.map(kind).values().filter(|i| !i.deleted).count()
    }

    /// True when no live item of either kind is stored.
    pub fn is_empty(&self) -> bool {
        self.len(Kind::Flag) == 0 && self.len(Kind::Segment) == 0
    }

    /// The live items of `kind` sorted by key: a stable view for output and tests.
    pub fn sorted(&self, kind: Kind) -> Vec<(&str, &Item)> {
        let mut v: Vec<_> = self.iter(kind).collect();
        v.sort_unstable_by(|a, b| a.0.cmp(b.0));
        v
    }

    /// Render the live data as `{"flags":{…},"segments":{…}}` with keys sorted, the
    /// shape of an FDv1 polling response.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(64);
        out.push_str("{\"flags\":{");
        self.write_kind(Kind::Flag, &mut out);
        out.push_str("},\"segments\":{");
        self.write_kind(Kind::Segment, &mut out);
        out.push_str("}}");
        out
    }

    fn write_kind(&self, kind: Kind, out: &mut String) {
        for (n, (key, item)) in self.sorted(kind).into_iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(&serde_json::to_string(key).unwrap_or_default());
            out.push(':');
            out.push_str(item.raw_str());
        }
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("initialized", &self.initialized)
            .field("flags", &self.flags.len())
            .field("segments", &self.segments.len())
            .finish()
    }
}
