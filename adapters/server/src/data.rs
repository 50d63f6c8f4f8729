//! The server's flag data: two versioned maps of raw JSON items with tombstones, the
//! payload version and selector, and their renderings (FDv1 all-data JSON, FDv2
//! objects and their `put-object` data).
//!
//! Items are held as their JSON text ([`Bytes`], compact, with `key` and `version`),
//! never as `serde_json::Value`s: a data file's items are slices of the file's bytes,
//! a relay's are the bytes its client's store holds. Every rendering (the polling
//! body, the FDv1 `put`, the FDv2 objects and poll bodies, their gzip) is made from
//! them when first asked for, once per data version, and shared by every response.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use flagsync_core::datafile::{self, DataSet, RawDataSet};
use serde_json::Value;

use crate::evaluated::{Evaluated, live_change};
use crate::hub::Frame;

/// Which map an item lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ItemKind {
    Flag,
    Segment,
}

impl ItemKind {
    pub(super) fn path_prefix(self) -> &'static str {
        match self {
            Self::Flag => "/flags/",
            Self::Segment => "/segments/",
        }
    }

    pub(super) fn core(self) -> flagsync_core::Kind {
        match self {
            Self::Flag => flagsync_core::Kind::Flag,
            Self::Segment => flagsync_core::Kind::Segment,
        }
    }

    /// The FDv2 object kind.
    pub(super) fn fdv2_name(self) -> &'static str {
        match self {
            Self::Flag => "flag",
            Self::Segment => "segment",
        }
    }
}

/// Flag data for a server: JSON (`{"flags":{…},"segments":{…}}`, `flagValues`, or a
/// whole `put` payload, as [`ServerBuilder::data`](crate::ServerBuilder::data) says), or
/// items already read as raw JSON ([`RawDataSet::parse`] of a data file, or
/// [`RawDataSet::item`] for each item of another source), which the server holds
/// without copying or decoding them.
#[derive(Debug, Clone)]
pub enum FlagData {
    /// JSON values.
    Json(Value),
    /// Raw items, as [`RawDataSet`]'s constructors make them (compact JSON with its
    /// `key` and `version`).
    Items(RawDataSet),
}

impl From<Value> for FlagData {
    fn from(value: Value) -> Self {
        Self::Json(value)
    }
}

impl From<RawDataSet> for FlagData {
    fn from(set: RawDataSet) -> Self {
        Self::Items(set)
    }
}

/// The data of a `put-object` for a live item.
pub(super) fn put_object(kind: ItemKind, key: &str, version: u64, raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len() + key.len() + 48);
    out.push_str("{\"version\":");
    out.push_str(&version.to_string());
    out.push_str(",\"kind\":\"");
    out.push_str(kind.fdv2_name());
    out.push_str("\",\"key\":");
    push_json_str(&mut out, key);
    out.push_str(",\"object\":");
    out.push_str(&String::from_utf8_lossy(raw));
    out.push('}');
    out
}

/// The data of an FDv1 `patch` for a live item.
pub(super) fn patch_data(kind: ItemKind, key: &str, raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len() + key.len() + 32);
    out.push_str("{\"path\":");
    push_json_str(&mut out, &format!("{}{key}", kind.path_prefix()));
    out.push_str(",\"data\":");
    out.push_str(&String::from_utf8_lossy(raw));
    out.push('}');
    out
}

fn push_json_str(out: &mut String, s: &str) {
    out.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()));
}

/// One item's change, as a stream sends it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Change {
    /// Added or changed: the item as stored, with its version.
    Put(ItemKind, String, u64, Bytes),
    /// Deleted, with this tombstone version.
    Delete(ItemKind, String, u64),
}

/// An item: its version, and its JSON unless it is a tombstone.
#[derive(Debug, Clone)]
struct Entry {
    version: u64,
    raw: Option<Bytes>,
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(bytes);
    enc.finish().unwrap_or_default()
}

/// A response body, and the same gzip-compressed once asked for.
#[derive(Debug)]
pub(super) struct Encoded {
    /// The body.
    pub(super) bytes: Arc<[u8]>,
    gzipped: OnceLock<Vec<u8>>,
}

impl Encoded {
    pub(super) fn new(bytes: impl Into<Arc<[u8]>>) -> Self {
        Self {
            bytes: bytes.into(),
            gzipped: OnceLock::new(),
        }
    }

    /// The body gzip-compressed, computed once.
    pub(super) fn gzipped(&self) -> &[u8] {
        self.gzipped.get_or_init(|| gzip(&self.bytes))
    }
}

/// A rendering of the live data, shared by every response until the data changes.
#[derive(Debug)]
pub(super) struct Rendered {
    /// `{"flags":{…},"segments":{…}}`.
    pub(super) body: Encoded,
    /// A quoted strong ETag derived from the body.
    pub(super) etag: String,
    put_event: OnceLock<Frame>,
}

impl Rendered {
    /// The FDv1 `put` event of this data, for every stream: the body is shared, not
    /// copied.
    pub(super) fn put_event(&self) -> Frame {
        self.put_event
            .get_or_init(|| {
                Frame::from_pieces(vec![
                    Arc::from(&b"event: put\ndata: {\"path\":\"/\",\"data\":"[..]),
                    self.body.bytes.clone(),
                    Arc::from(&b"}\n\n"[..]),
                ])
            })
            .clone()
    }

    /// The body as text.
    pub(super) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body.bytes).into_owned()
    }
}

/// One live item as an FDv2 object.
#[derive(Debug)]
pub(super) struct Object {
    kind: ItemKind,
    key: String,
    version: u64,
    raw: Bytes,
}

impl Object {
    #[cfg(test)]
    pub(super) fn new(kind: ItemKind, key: &str, version: u64, raw: Bytes) -> Self {
        Self {
            kind,
            key: key.to_owned(),
            version,
            raw,
        }
    }

    /// Its `put-object` data.
    pub(super) fn put_data(&self) -> String {
        put_object(self.kind, &self.key, self.version, &self.raw)
    }
}

/// The live data as FDv2 objects, and their encodings, shared by every full payload
/// until the data changes. The items are the data's own bytes (not copied); each
/// encoding is made when first asked for.
#[derive(Debug)]
pub(super) struct Fdv2Objects {
    /// The selector state of this data (`basis` equal to it means up to date).
    pub(super) state: String,
    /// The payload version.
    pub(super) version: u64,
    /// Every live flag, then every live segment.
    pub(super) objects: Vec<Object>,
    /// Every `put-object` as SSE text, made once and shared by the stream encodings of
    /// full transfers (`fdv2::initial_frame`, `fdv2::full_transfer_frame`).
    pub(super) objects_sse: OnceLock<Arc<[u8]>>,
    /// The polling bodies of a full transfer: for a client without a basis, and for
    /// one with an old basis (they differ in the intent's reason).
    pub(super) poll_bodies: [OnceLock<Arc<Encoded>>; 2],
}

#[derive(Debug)]
pub(super) struct Data {
    flags: BTreeMap<String, Entry>,
    segments: BTreeMap<String, Entry>,
    /// The payload version: 1 for the initial data, plus one per change.
    version: u64,
    /// Distinguishes this server's selectors from another run's.
    epoch: String,
    rendered: Option<Arc<Rendered>>,
    fdv2: Option<Arc<Fdv2Objects>>,
    /// The data as the evaluation engine reads it, once an endpoint evaluates.
    evaluated: Evaluated,
}

impl Default for Data {
    fn default() -> Self {
        Self {
            flags: BTreeMap::new(),
            segments: BTreeMap::new(),
            version: 1,
            epoch: String::new(),
            rendered: None,
            fdv2: None,
            evaluated: Evaluated::default(),
        }
    }
}

impl Data {
    /// Build from [`FlagData`]. JSON is read by the loader of LaunchDarkly's flag data
    /// files that the SDK's file data source uses too ([`flagsync_core::datafile`]):
    /// either map may be missing; a `flagValues` map (`key → value`) adds a simple
    /// flag that serves that value to everyone; items without `version` get 1, items
    /// without `key` the map key. A whole `put` payload (`{"path":"/","data":{…}}`)
    /// is accepted too.
    pub(super) fn new(data: FlagData) -> Result<Self, String> {
        let set = match data {
            FlagData::Items(set) => set,
            FlagData::Json(value) => {
                if !value.is_object() {
                    return Err(
                        "the data must be a JSON object like {\"flags\":{…},\"segments\":{…}}"
                            .into(),
                    );
                }
                RawDataSet::from(DataSet::from_value(value).map_err(|e| e.to_string())?)
            }
        };
        let mut data = Self::default();
        for (kind, items) in [
            (ItemKind::Flag, set.flags),
            (ItemKind::Segment, set.segments),
        ] {
            data.map_mut(kind)
                .extend(items.into_iter().map(|(k, item)| {
                    let raw = (!item.deleted).then_some(item.raw);
                    let entry = Entry {
                        version: item.version,
                        raw,
                    };
                    (k, entry)
                }));
        }
        Ok(data)
    }

    /// Build from JSON, as [`new`](Self::new) does.
    #[cfg(test)]
    pub(super) fn from_json(value: Value) -> Result<Self, String> {
        Self::new(FlagData::Json(value))
    }

    fn map(&self, kind: ItemKind) -> &BTreeMap<String, Entry> {
        match kind {
            ItemKind::Flag => &self.flags,
            ItemKind::Segment => &self.segments,
        }
    }

    fn map_mut(&mut self, kind: ItemKind) -> &mut BTreeMap<String, Entry> {
        self.rendered = None;
        self.fdv2 = None;
        match kind {
            ItemKind::Flag => &mut self.flags,
            ItemKind::Segment => &mut self.segments,
        }
    }

    /// The version of `key`, live or deleted, if it ever existed.
    fn version_of(&self, kind: ItemKind, key: &str) -> Option<u64> {
        self.map(kind).get(key).map(|e| e.version)
    }

    /// Insert or replace an item. Without a `version` field the item gets the previous
    /// version (live or deleted) plus one. Returns the stored item and its version. The
    /// payload version goes up by one.
    pub(super) fn upsert(
        &mut self,
        kind: ItemKind,
        key: &str,
        item: Value,
    ) -> Result<(u64, Bytes), String> {
        let next = self.version_of(kind, key).unwrap_or(0) + 1;
        let item = datafile::normalise(kind.core(), key, item, next)?;
        let version = item.get("version").and_then(Value::as_u64).unwrap_or(0);
        let raw = Bytes::from(serde_json::to_vec(&item).map_err(|e| e.to_string())?);
        Ok(self.insert(kind, key, version, raw))
    }

    /// [`upsert`](Self::upsert) an item given as its JSON text (kept as it is when it
    /// is compact and has its `key` and `version`).
    pub(super) fn upsert_raw(
        &mut self,
        kind: ItemKind,
        key: &str,
        raw: &Bytes,
    ) -> Result<(u64, Bytes), String> {
        let next = self.version_of(kind, key).unwrap_or(0) + 1;
        let item = RawDataSet::item(kind.core(), key, raw, next)?;
        Ok(self.insert(kind, key, item.version, item.raw))
    }

    fn insert(&mut self, kind: ItemKind, key: &str, version: u64, raw: Bytes) -> (u64, Bytes) {
        let entry = Entry {
            version,
            raw: Some(raw.clone()),
        };
        self.map_mut(kind).insert(key.to_owned(), entry);
        self.version += 1;
        self.evaluated.upsert(kind.core(), key, version, &raw);
        (version, raw)
    }

    /// Delete an item, leaving a tombstone. Returns the tombstone's version. The
    /// payload version goes up by one.
    pub(super) fn delete(&mut self, kind: ItemKind, key: &str, version: Option<u64>) -> u64 {
        let version = version.unwrap_or_else(|| self.version_of(kind, key).unwrap_or(0) + 1);
        let entry = Entry { version, raw: None };
        self.map_mut(kind).insert(key.to_owned(), entry);
        self.version += 1;
        self.evaluated.delete(kind.core(), key, version);
        version
    }

    /// Replace every item with `new`'s; the payload version goes up by one (it never
    /// goes back, so old selectors stay stale) and the epoch is kept.
    ///
    /// Item versions never go back either, as LaunchDarkly's never do (SDKs compare
    /// them to tell what changed, and ignore an update that is not newer): an item
    /// whose content changed gets at least the version served before plus one, an
    /// unchanged one keeps at least the version served before. So a data file edited
    /// without touching its versions (or without any) reaches clients as changes.
    pub(super) fn replace(&mut self, mut new: Self) {
        self.floor_versions(&mut new);
        self.swap_in(new);
    }

    /// Raise `new`'s item versions so that none goes back (see [`replace`](Self::replace)).
    /// Only an item whose version did not move forward is decoded, to compare it.
    fn floor_versions(&self, new: &mut Self) {
        for kind in [ItemKind::Flag, ItemKind::Segment] {
            let old_map = match kind {
                ItemKind::Flag => &self.flags,
                ItemKind::Segment => &self.segments,
            };
            let new_map = match kind {
                ItemKind::Flag => &mut new.flags,
                ItemKind::Segment => &mut new.segments,
            };
            for (key, entry) in new_map.iter_mut() {
                let (Some(raw), Some(old)) = (&entry.raw, old_map.get(key)) else {
                    continue;
                };
                let floor = match &old.raw {
                    None => old.version + 1,
                    Some(_) if entry.version > old.version => continue,
                    Some(old_raw) if old_raw == raw => continue,
                    Some(old_raw) => match (value(old_raw), value(raw)) {
                        (Some(o), Some(n)) => datafile::version_floor(&o, &n),
                        _ => old.version + 1,
                    },
                };
                if entry.version < floor
                    && let Some(Value::Object(mut item)) = value(raw)
                {
                    item.insert("version".into(), Value::from(floor));
                    let text = serde_json::to_vec(&item).unwrap_or_default();
                    *entry = Entry {
                        version: floor,
                        raw: Some(Bytes::from(text)),
                    };
                }
            }
        }
        new.rendered = None;
        new.fdv2 = None;
    }

    /// Take `new`'s items; the payload version goes up by one and the epoch is kept.
    fn swap_in(&mut self, new: Self) {
        let version = self.version + 1;
        let epoch = std::mem::take(&mut self.epoch);
        let evaluated = std::mem::take(&mut self.evaluated);
        *self = new;
        self.version = version;
        self.epoch = epoch;
        self.evaluated = evaluated;
        if self.evaluated.is_built() {
            let live = self.live_changes();
            self.evaluated.replace(|| live);
        } else {
            self.evaluated.replace(Vec::new);
        }
    }

    /// Every live item, as changes for the evaluation store.
    fn live_changes(&self) -> Vec<flagsync_core::store::Change> {
        [
            (ItemKind::Flag, &self.flags),
            (ItemKind::Segment, &self.segments),
        ]
        .into_iter()
        .flat_map(|(kind, map)| {
            map.iter().filter_map(move |(key, e)| {
                let raw = e.raw.as_ref()?;
                Some(live_change(kind.core(), key, e.version, raw))
            })
        })
        .collect()
    }

    /// The current data as the evaluation engine reads it (an O(1) view; the store
    /// behind it is built on the first call and kept up to date after).
    pub(super) fn eval_snapshot(&mut self) -> flagsync_core::Snapshot {
        if self.evaluated.is_built() {
            return self.evaluated.snapshot(Vec::new);
        }
        let live = self.live_changes();
        self.evaluated.snapshot(|| live)
    }

    /// The flags the last change changed, dependants included; `None` if unknown (no
    /// evaluation had been asked for then).
    #[allow(dead_code)] // until the evaluating endpoints land
    pub(super) fn changed_flags(&self) -> Option<&[String]> {
        self.evaluated.changed_flags()
    }

    /// Replace every item with `new`'s as [`replace`](Self::replace) does, and say
    /// what changed: each item added or changed (as stored), and each item `new` lacks,
    /// deleted with a tombstone one version above the one served. Tombstones are kept
    /// (a key deleted, then added back, comes back with a higher version). Nothing
    /// changed: the payload version stays as it was, and so does what is sent, but the
    /// items are `new`'s bytes (the same content), so that what a replaced source held
    /// (such as a relay client's previous transfer) is freed.
    pub(super) fn replace_with_changes(&mut self, mut new: Self) -> Vec<Change> {
        let mut changes = Vec::new();
        for kind in [ItemKind::Flag, ItemKind::Segment] {
            for (key, entry) in self.map(kind) {
                if new.map(kind).contains_key(key) {
                    continue;
                }
                let tombstone = match entry.raw {
                    Some(_) => {
                        let version = entry.version + 1;
                        changes.push(Change::Delete(kind, key.clone(), version));
                        version
                    }
                    None => entry.version,
                };
                let entry = Entry {
                    version: tombstone,
                    raw: None,
                };
                new.map_mut(kind).insert(key.clone(), entry);
            }
        }
        self.floor_versions(&mut new);
        for kind in [ItemKind::Flag, ItemKind::Segment] {
            for (key, entry) in new.map(kind) {
                let Some(raw) = &entry.raw else { continue };
                let unchanged = match self.map(kind).get(key) {
                    Some(Entry {
                        version,
                        raw: Some(old),
                    }) => old == raw || (*version == entry.version && value(old) == value(raw)),
                    _ => false,
                };
                if !unchanged {
                    changes.push(Change::Put(kind, key.clone(), entry.version, raw.clone()));
                }
            }
        }
        if changes.is_empty() {
            // The same content in other bytes: hold `new`'s. The FDv2 objects share
            // the items (not the FDv1 body, a copy of its own): made again when asked.
            self.flags = new.flags;
            self.segments = new.segments;
            self.fdv2 = None;
            self.evaluated.forget();
        } else {
            self.swap_in(new);
        }
        changes
    }

    /// Set the tag that makes this server's selector states unique to it.
    pub(super) fn set_epoch(&mut self, epoch: String) {
        self.epoch = epoch;
        self.fdv2 = None;
    }

    /// The payload version.
    pub(super) fn version(&self) -> u64 {
        self.version
    }

    /// The selector state of the current data: `<epoch>-<version>`.
    pub(super) fn state(&self) -> String {
        format!("{}-{}", self.epoch, self.version)
    }

    /// The live item's JSON, if any.
    pub(super) fn get(&self, kind: ItemKind, key: &str) -> Option<&Bytes> {
        self.map(kind).get(key).and_then(|e| e.raw.as_ref())
    }

    /// The live keys of `kind`, sorted.
    pub(super) fn keys(&self, kind: ItemKind) -> Vec<String> {
        self.map(kind)
            .iter()
            .filter(|(_, e)| e.raw.is_some())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// How many live items of `kind` there are.
    pub(super) fn count(&self, kind: ItemKind) -> usize {
        self.map(kind).values().filter(|e| e.raw.is_some()).count()
    }

    /// The live data as FDv2 objects, cached until the next change. Each `put-object`
    /// carries the item's own version as its envelope version.
    pub(super) fn fdv2_objects(&mut self) -> Arc<Fdv2Objects> {
        if let Some(o) = &self.fdv2 {
            return o.clone();
        }
        let mut objects = Vec::with_capacity(self.flags.len() + self.segments.len());
        for (kind, map) in [
            (ItemKind::Flag, &self.flags),
            (ItemKind::Segment, &self.segments),
        ] {
            for (key, entry) in map {
                if let Some(raw) = &entry.raw {
                    objects.push(Object {
                        kind,
                        key: key.clone(),
                        version: entry.version,
                        raw: raw.clone(),
                    });
                }
            }
        }
        let o = Arc::new(Fdv2Objects {
            state: self.state(),
            version: self.version,
            objects,
            objects_sse: OnceLock::new(),
            poll_bodies: [OnceLock::new(), OnceLock::new()],
        });
        self.fdv2 = Some(o.clone());
        o
    }

    /// The live data rendered, cached until the next change.
    pub(super) fn rendered(&mut self) -> Arc<Rendered> {
        if let Some(r) = &self.rendered {
            return r.clone();
        }
        let size: usize = [&self.flags, &self.segments]
            .iter()
            .flat_map(|m| m.iter())
            .filter_map(|(k, e)| e.raw.as_ref().map(|r| r.len() + k.len() + 4))
            .sum();
        let mut body = String::with_capacity(size + 32);
        body.push_str("{\"flags\":");
        render_map(&self.flags, &mut body);
        body.push_str(",\"segments\":");
        render_map(&self.segments, &mut body);
        body.push('}');
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        body.hash(&mut hasher);
        let etag = format!("\"fs-{:016x}-{:x}\"", hasher.finish(), body.len());
        let r = Arc::new(Rendered {
            body: Encoded::new(body.into_bytes()),
            etag,
            put_event: OnceLock::new(),
        });
        self.rendered = Some(r.clone());
        r
    }
}

/// An item's JSON decoded (to compare two texts of an item by content).
fn value(raw: &[u8]) -> Option<Value> {
    serde_json::from_slice(raw).ok()
}

fn render_map(map: &BTreeMap<String, Entry>, out: &mut String) {
    out.push('{');
    let mut first = true;
    for (key, entry) in map {
        let Some(raw) = &entry.raw else { continue };
        if !first {
            out.push(',');
        }
        first = false;
        push_json_str(out, key);
        out.push(':');
        out.push_str(&String::from_utf8_lossy(raw));
    }
    out.push('}');
}

#[cfg(test)]
#[path = "data_tests.rs"]
mod tests;
