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
    key: StoredKey,
    item: Item,
    derived: Derived,
}

/// Where a stored key's bytes are: in the item's own JSON when they appear there (they
/// do in the `key` field of every item a flag service sends), so that a stored item
/// costs no allocation for its key (at 50,000 flags, 50,000 blocks and 1.9 MB fewer);
/// otherwise in a box of its own (a key JSON escapes, a hand-made item).
enum StoredKey {
    InRaw { start: u32, len: u32 },
    Own(Box<str>),
}

/// The JSON of a `key` field with a plain string value, as flag services write it.
const KEY_FIELD: &[u8] = b"\"key\":\"";

/// Where `key`'s bytes are in `raw`: after the first `"key":"` (every item of a flag
/// service: first in a put, among sorted fields in a patch), else anywhere.
fn find_key(raw: &[u8], key: &[u8]) -> Option<usize> {
    let first = raw.first() == Some(&b'{') && raw[1..].starts_with(KEY_FIELD);
    let field = if first {
        Some(1)
    } else {
        memchr::memmem::find(raw, KEY_FIELD)
    };
    if let Some(at) = field {
        let start = at + KEY_FIELD.len();
        if raw.get(start..start + key.len()) == Some(key) {
            return Some(start);
        }
    }
    memchr::memmem::find(raw, key)
}

impl Stored {
    fn new(key: String, item: Item) -> Self {
        let found = find_key(&item.raw, key.as_bytes());
        let key = match found {
            Some(start) => match (u32::try_from(start), u32::try_from(key.len())) {
                (Ok(start), Ok(len)) => StoredKey::InRaw { start, len },
                _ => StoredKey::Own(key.into_boxed_str()),
            },
            None => StoredKey::Own(key.into_boxed_str()),
        };
        Self {
            key,
            item,
            derived: Derived::default(),
        }
    }

    /// The key's bytes (UTF-8: equal to the key's when it was stored).
    fn key_bytes(&self) -> &[u8] {
        match &self.key {
            StoredKey::InRaw { start, len } => {
                let start = *start as usize;
                &self.item.raw[start..start + *len as usize]
            }
            StoredKey::Own(key) => key.as_bytes(),
        }
    }

    /// The key. The bytes of a key found in the item were checked equal to the key's
    /// own, so they are UTF-8 and `""` is never given for a key that is not empty.
    fn key(&self) -> &str {
        std::str::from_utf8(self.key_bytes()).unwrap_or_default()
    }
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

impl Borrow<[u8]> for Entry {
    fn borrow(&self) -> &[u8] {
        self.0.key_bytes()
    }
}

impl Hash for Entry {
    /// Hashes as the key's bytes do, so lookups by `key.as_bytes()` find the entry.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.key_bytes().hash(state);
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.0.key_bytes() == other.0.key_bytes()
    }
}

impl Eq for Entry {}

impl ItemMap {
    pub(crate) fn get(&self, key: &str) -> Option<&Item> {
        self.0
            .get_key_value(key.as_bytes())
            .map(|(e, ())| &e.0.item)
    }

    /// The item stored under `key` and what readers derived from it.
    pub(crate) fn get_with_derived(&self, key: &str) -> Option<(&Item, &Derived)> {
        self.0
            .get_key_value(key.as_bytes())
            .map(|(e, ())| (&e.0.item, &e.0.derived))
    }

    /// Store `item` under `key`, replacing any item stored there; true if one was.
    pub(crate) fn insert(&mut self, key: String, item: Item) -> bool {
        self.0
            .insert(Entry(Arc::new(Stored::new(key, item))), ())
            .is_some()
    }

    /// Store `item` under `key` as [`insert`](Self::insert) does, but keep the entry of
    /// `old` for it if `old` holds exactly `item` (version, tombstone and JSON): no new
    /// entry, and what readers derived from the item (its compiled model) stays.
    /// Returns whether an item was replaced.
    pub(crate) fn insert_reusing(&mut self, key: String, item: Item, old: &Self) -> bool {
        if let Some((entry, ())) = old.0.get_key_value(key.as_bytes())
            && entry.0.item == item
        {
            return self.0.insert(entry.clone(), ()).is_some();
        }
        self.insert(key, item)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &Item)> + '_ {
        self.0.keys().map(|e| (e.0.key(), &e.0.item))
    }

    pub(crate) fn iter_with_derived(&self) -> impl Iterator<Item = (&str, &Item, &Derived)> + '_ {
        self.0.keys().map(|e| (e.0.key(), &e.0.item, &e.0.derived))
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

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn item(raw: &str, version: u64) -> Item {
        Item {
            version,
            deleted: false,
            raw: Bytes::copy_from_slice(raw.as_bytes()),
        }
    }

    #[test]
    fn a_key_in_its_item_is_read_from_there_and_any_other_has_its_own_box() {
        let mut map = ItemMap::default();
        map.insert("flag-a".into(), item(r#"{"key":"flag-a","version":1}"#, 1));
        // JSON escapes this key: its bytes are not in the item.
        map.insert(
            "say \"hi\"".into(),
            item(r#"{"key":"say \"hi\"","version":2}"#, 2),
        );
        // A key the item does not name at all (a hand-made item).
        map.insert("other".into(), item(r#"{"version":3}"#, 3));
        map.insert(String::new(), item("{}", 4));

        let kinds: Vec<bool> = ["flag-a", "say \"hi\"", "other", ""]
            .iter()
            .map(|k| {
                let (e, ()) = map.0.get_key_value(k.as_bytes()).unwrap();
                assert_eq!(e.0.key(), *k);
                matches!(e.0.key, StoredKey::InRaw { .. })
            })
            .collect();
        assert_eq!(kinds, [true, false, false, true]);
        assert_eq!(map.get("say \"hi\"").map(|i| i.version), Some(2));
        assert_eq!(map.get("other").map(|i| i.version), Some(3));
        assert_eq!(map.get("").map(|i| i.version), Some(4));
        assert!(map.get("flag").is_none());

        let mut keys: Vec<&str> = map.iter().map(|(k, _)| k).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["", "flag-a", "other", "say \"hi\""]);

        // A new item for a key replaces the old one wherever its key sits.
        assert!(map.insert("flag-a".into(), item(r#"{"version":5,"key":"flag-a"}"#, 5)));
        assert_eq!(map.get("flag-a").map(|i| i.version), Some(5));
        assert_eq!(map.len(), 4);
    }

    #[test]
    fn a_stored_item_stays_in_its_allocator_size_class() {
        // 104 bytes: with the `Arc` counts, a 112-byte block (see `StoredKey`).
        assert!(std::mem::size_of::<Stored>() <= 104);
    }
}
