//! Cheap immutable views of the store for readers in other threads.

use imbl::shared_ptr::DefaultSharedPtr;
use rustc_hash::FxBuildHasher;

use super::{Item, Kind};

/// A persistent hash map with structural sharing: cloning is O(1), and a write after a
/// clone copies only the path to the changed entry. The hasher is unseeded (Fx) so the
/// core stays deterministic; keys come from the flag service, not from strangers.
pub(crate) type ItemMap = imbl::GenericHashMap<String, Item, FxBuildHasher, DefaultSharedPtr>;

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

    /// The stored item including tombstones, as the version rules see it.
    pub fn get_including_deleted(&self, kind: Kind, key: &str) -> Option<&Item> {
        self.map(kind).get(key)
    }

    /// Every live item of `kind`, in no particular order.
    pub fn iter(&self, kind: Kind) -> impl Iterator<Item = (&str, &Item)> + '_ {
        self.map(kind)
            .iter()
            .filter(|(_, i)| !i.deleted)
            .map(|(k, i)| (k.as_str(), i))
    }

    /// Every item of `kind`, tombstones included, in no particular order.
    pub fn iter_including_deleted(&self, kind: Kind) -> impl Iterator<Item = (&str, &Item)> + '_ {
        self.map(kind).iter().map(|(k, i)| (k.as_str(), i))
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
