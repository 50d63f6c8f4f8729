//! What a data source asks the store to do.

use bytes::Bytes;

use super::deps::ItemRef;
use super::snapshot::Snapshot;
use super::{DecodeError, Item, Kind, decode};

/// Which protocol's rules apply a [`ChangeSet`] (DESIGN.md §3): the two apply modes of
/// one store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApplyMode {
    /// FDv1: an upsert or delete applies only if its version is newer than the stored
    /// item's (tombstones included); a full data set counts an item as changed only if
    /// its version grew (PROTOCOL.md B §3.4, §4.1).
    Fdv1,
    /// FDv2: the payload state wins; items are written without per-item version checks
    /// and change detection compares versions for inequality (PROTOCOL.md B §5.8).
    ///
    /// A change (`xfer-changes`) whose version is not newer than the stored item's is
    /// written too. LaunchDarkly's Go SDK (`memorystorev2.ApplyDelta`) ignores it, as
    /// FDv1 does; the Python SDK writes it, and the v3 contract harness requires that
    /// ("ignores model version": a flag at version 100, then a change at version 1 in a
    /// later payload, must take effect: the payload's state is later, so its data is).
    /// The harness decides, so flagsync writes it, but never silently (issue 42: one
    /// service rolled back 1,939 items that way, 345 of them deleted): each such change
    /// is listed in [`super::Applied::not_newer`], and the data system warns with the
    /// keys. A persistent store keeps its own versioned upserts.
    Fdv2,
}

/// How a change set relates to what is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// Replace everything (FDv1 `put` or poll, FDv2 `xfer-full`).
    Full,
    /// Merge into what is stored (FDv1 `patch`/`delete`, FDv2 `xfer-changes`).
    Changes,
    /// Nothing changed (FDv2 intent `none`): a no-op.
    None,
}

/// An FDv2 selector: the payload state the store holds, sent back as `basis`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Selector {
    /// The opaque state string from `payload-transferred`.
    pub state: String,
    /// The payload version.
    pub version: u64,
}

impl Selector {
    /// A selector is defined unless it is the empty selector `("", 0)`.
    pub fn is_defined(&self) -> bool {
        !(self.state.is_empty() && self.version == 0)
    }
}

/// One item to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The item's kind.
    pub kind: Kind,
    /// The key it is stored under.
    pub key: String,
    /// The item (a tombstone for a delete).
    pub item: Item,
    /// What the item references (see [`super::DependencyIndex`]).
    pub depends_on: Vec<ItemRef>,
}

impl Change {
    /// Decode `raw` as an item of `kind`, stored under its own `key` field.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use flagsync_core::store::{Change, Kind};
    ///
    /// let c = Change::from_json(Kind::Flag, Bytes::from_static(br#"{"key":"f","version":2}"#)).unwrap();
    /// assert_eq!((c.key.as_str(), c.item.version), ("f", 2));
    /// ```
    pub fn from_json(kind: Kind, raw: Bytes) -> Result<Self, DecodeError> {
        let d = decode(kind, raw)?;
        Ok(Self {
            kind,
            key: d.key.ok_or(DecodeError::Schema)?,
            item: d.item,
            depends_on: d.depends_on,
        })
    }
}

impl Change {
    /// Give the item a buffer of its own, or the buffer of the same item `stored`
    /// holds (same version, tombstone and JSON under the same kind and key): see
    /// [`ChangeSet::compact_against`].
    pub(crate) fn compact_against(&mut self, stored: &Snapshot) {
        let item = &mut self.item;
        item.raw = match stored.get_including_deleted(self.kind, &self.key) {
            Some(old) if *old == *item => old.raw.clone(),
            _ => Bytes::copy_from_slice(&item.raw),
        };
    }
}

/// A batch of writes with the rules to apply them by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeSet {
    /// FDv1 or FDv2 rules.
    pub mode: ApplyMode,
    /// Full replacement, merge, or nothing.
    pub transfer: Transfer,
    /// The items, in order; a later change to the same key wins.
    pub changes: Vec<Change>,
    /// The FDv2 selector to store (FDv1 change sets carry `None` and leave it as is).
    pub selector: Option<Selector>,
}

impl ChangeSet {
    /// An FDv1 full data set (`put` or a poll response).
    pub fn fdv1_full(changes: Vec<Change>) -> Self {
        Self {
            mode: ApplyMode::Fdv1,
            transfer: Transfer::Full,
            changes,
            selector: None,
        }
    }

    /// An FDv1 single upsert or delete.
    pub fn fdv1_upsert(change: Change) -> Self {
        Self {
            mode: ApplyMode::Fdv1,
            transfer: Transfer::Changes,
            changes: vec![change],
            selector: None,
        }
    }

    /// Give every item a buffer of its own, exactly its raw JSON (the same bytes).
    ///
    /// Parsers hand out items as slices of the reads they came in (no copy while
    /// parsing): a stored item would then keep its whole read alive, 16–64 KiB for a
    /// flag of 1 KiB, and a `put` whose items are later patched one by one would keep
    /// nearly all of its reads until the last of their items is replaced, while the
    /// patches pin reads of their own. A store that keeps compacted items holds what
    /// it stores and no more, and frees an item's bytes when it is replaced. The cost
    /// is one copy of each item's bytes and one allocation per item; done in order, a
    /// read is freed as soon as its last item is copied, so compacting a `put` needs no
    /// memory beyond one read.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use flagsync_core::store::{Change, ChangeSet, Kind};
    ///
    /// let read = Bytes::from_static(br#"..{"key":"f","version":2}.."#);
    /// let change = Change::from_json(Kind::Flag, read.slice(2..25)).unwrap();
    /// let mut cs = ChangeSet::fdv1_upsert(change);
    /// cs.compact();
    /// let raw = &cs.changes[0].item.raw;
    /// assert_eq!(&raw[..], br#"{"key":"f","version":2}"#);
    /// assert!(!read.as_ptr_range().contains(&raw.as_ptr()));
    /// ```
    pub fn compact(&mut self) {
        for change in &mut self.changes {
            let raw = &mut change.item.raw;
            *raw = Bytes::copy_from_slice(raw);
        }
    }

    /// [`compact`](Self::compact), except that an item `stored` already holds, the
    /// same (version, tombstone and JSON under the same kind and key), takes the stored
    /// item's buffer instead of a copy. A full transfer that repeats the data set (a
    /// poll of an unchanged body, a reconnect's `put`) then costs no second copy of
    /// it: its buffer is freed once read, and the store keeps its entries.
    pub(crate) fn compact_against(&mut self, stored: &Snapshot) {
        for change in &mut self.changes {
            change.compact_against(stored);
        }
    }
}
