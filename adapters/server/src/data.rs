//! The server's flag data: two versioned maps with tombstones, the payload version
//! and selector, and their renderings (FDv1 all-data JSON, FDv2 objects and their
//! `put-object` data).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::sync::{Arc, OnceLock};

use flagsync_core::datafile::{self, DataSet};
use serde_json::{Value, json};

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

    fn core(self) -> flagsync_core::Kind {
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

/// The data of a `put-object` for a live item.
pub(super) fn put_object(kind: ItemKind, key: &str, version: u64, item: &Value) -> String {
    json!({"version": version, "kind": kind.fdv2_name(), "key": key, "object": item}).to_string()
}

/// One item's change, as a stream sends it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Change {
    /// Added or changed: the item as stored.
    Put(ItemKind, String, Value),
    /// Deleted, with this tombstone version.
    Delete(ItemKind, String, u64),
}

#[derive(Debug, Clone)]
enum Entry {
    Live(Value),
    Deleted(u64),
}

impl Entry {
    fn version(&self) -> u64 {
        match self {
            Self::Live(v) => v.get("version").and_then(Value::as_u64).unwrap_or(0),
            Self::Deleted(n) => *n,
        }
    }
}

/// A rendering of the live data, shared by every response until the data changes.
#[derive(Debug)]
pub(super) struct Rendered {
    /// `{"flags":{…},"segments":{…}}`.
    pub(super) body: Arc<str>,
    /// A quoted strong ETag derived from the body.
    pub(super) etag: String,
    gzipped: OnceLock<Vec<u8>>,
    put_event: OnceLock<Frame>,
}

impl Rendered {
    /// The body gzip-compressed, computed once.
    pub(super) fn gzipped(&self) -> &[u8] {
        self.gzipped.get_or_init(|| {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            // Writing into a Vec cannot fail.
            let _ = enc.write_all(self.body.as_bytes());
            enc.finish().unwrap_or_default()
        })
    }

    /// The FDv1 `put` event of this data, for every stream: the body is shared, not
    /// copied.
    pub(super) fn put_event(&self) -> Frame {
        self.put_event
            .get_or_init(|| {
                Frame::from_pieces(vec![
                    Arc::from(&b"event: put\ndata: {\"path\":\"/\",\"data\":"[..]),
                    Arc::<[u8]>::from(self.body.clone()),
                    Arc::from(&b"}\n\n"[..]),
                ])
            })
            .clone()
    }
}

/// The live data as FDv2 `put-object` event data, shared by every full payload until
/// the data changes.
#[derive(Debug)]
pub(super) struct Fdv2Objects {
    /// The selector state of this data (`basis` equal to it means up to date).
    pub(super) state: String,
    /// The payload version.
    pub(super) version: u64,
    /// One `put-object` data JSON per live flag, then per live segment.
    pub(super) puts: Vec<String>,
    /// Every `put-object` as SSE text, made once and shared by the stream encodings of
    /// full transfers (`fdv2::initial_frame`, `fdv2::full_transfer_frame`).
    pub(super) objects_sse: OnceLock<Arc<[u8]>>,
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
        }
    }
}

impl Data {
    /// Build from `{"flags":{…},"segments":{…}}`, read by the loader of LaunchDarkly's
    /// flag data files that the SDK's file data source uses too
    /// ([`flagsync_core::datafile`]): either map may be missing; a `flagValues` map
    /// (`key → value`) adds a simple flag that serves that value to everyone; items
    /// without `version` get 1, items without `key` the map key. A whole `put` payload
    /// (`{"path":"/","data":{…}}`) is accepted too.
    pub(super) fn from_json(value: Value) -> Result<Self, String> {
        if !value.is_object() {
            return Err(
                "the data must be a JSON object like {\"flags\":{…},\"segments\":{…}}".into(),
            );
        }
        let set = DataSet::from_value(value).map_err(|e| e.to_string())?;
        let mut data = Self::default();
        for (kind, items) in [
            (ItemKind::Flag, set.flags),
            (ItemKind::Segment, set.segments),
        ] {
            let map = data.map_mut(kind);
            map.extend(items.into_iter().map(|(k, v)| (k, Entry::Live(v))));
        }
        Ok(data)
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
        self.map(kind).get(key).map(Entry::version)
    }

    /// Insert or replace an item. Without a `version` field the item gets the previous
    /// version (live or deleted) plus one. Returns the stored item. The payload version
    /// goes up by one.
    pub(super) fn upsert(
        &mut self,
        kind: ItemKind,
        key: &str,
        item: Value,
    ) -> Result<Value, String> {
        let next = self.version_of(kind, key).unwrap_or(0) + 1;
        let item = datafile::normalise(kind.core(), key, item, next)?;
        self.map_mut(kind)
            .insert(key.to_owned(), Entry::Live(item.clone()));
        self.version += 1;
        Ok(item)
    }

    /// Delete an item, leaving a tombstone. Returns the tombstone's version. The
    /// payload version goes up by one.
    pub(super) fn delete(&mut self, kind: ItemKind, key: &str, version: Option<u64>) -> u64 {
        let version = version.unwrap_or_else(|| self.version_of(kind, key).unwrap_or(0) + 1);
        self.map_mut(kind)
            .insert(key.to_owned(), Entry::Deleted(version));
        self.version += 1;
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
    fn floor_versions(&self, new: &mut Self) {
        for kind in [ItemKind::Flag, ItemKind::Segment] {
            for (key, entry) in new.map_mut(kind).iter_mut() {
                let Entry::Live(Value::Object(item)) = entry else {
                    continue;
                };
                let floor = match self.map(kind).get(key) {
                    None => continue,
                    Some(Entry::Live(old)) => {
                        datafile::version_floor(old, &Value::Object(item.clone()))
                    }
                    Some(old) => old.version() + 1,
                };
                let version = item.get("version").and_then(Value::as_u64).unwrap_or(0);
                if version < floor {
                    item.insert("version".into(), Value::from(floor));
                }
            }
        }
    }

    /// Take `new`'s items; the payload version goes up by one and the epoch is kept.
    fn swap_in(&mut self, new: Self) {
        let version = self.version + 1;
        let epoch = std::mem::take(&mut self.epoch);
        *self = new;
        self.version = version;
        self.epoch = epoch;
    }

    /// Replace every item with `new`'s as [`replace`](Self::replace) does, and say
    /// what changed: each item added or changed (as stored), and each item `new` lacks,
    /// deleted with a tombstone one version above the one served. Tombstones are kept
    /// (a key deleted, then added back, comes back with a higher version). Nothing
    /// changed: the data, its payload version included, stays as it was.
    pub(super) fn replace_with_changes(&mut self, mut new: Self) -> Vec<Change> {
        let mut changes = Vec::new();
        for kind in [ItemKind::Flag, ItemKind::Segment] {
            for (key, entry) in self.map(kind) {
                if new.map(kind).contains_key(key) {
                    continue;
                }
                let tombstone = match entry {
                    Entry::Live(_) => {
                        let version = entry.version() + 1;
                        changes.push(Change::Delete(kind, key.clone(), version));
                        version
                    }
                    Entry::Deleted(version) => *version,
                };
                new.map_mut(kind)
                    .insert(key.clone(), Entry::Deleted(tombstone));
            }
        }
        self.floor_versions(&mut new);
        for kind in [ItemKind::Flag, ItemKind::Segment] {
            for (key, entry) in new.map(kind) {
                let Entry::Live(item) = entry else { continue };
                match self.map(kind).get(key) {
                    Some(Entry::Live(old)) if old == item => {}
                    _ => changes.push(Change::Put(kind, key.clone(), item.clone())),
                }
            }
        }
        if !changes.is_empty() {
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

    /// The live item, if any.
    pub(super) fn get(&self, kind: ItemKind, key: &str) -> Option<&Value> {
        match self.map(kind).get(key) {
            Some(Entry::Live(v)) => Some(v),
            _ => None,
        }
    }

    /// The live keys of `kind`, sorted.
    pub(super) fn keys(&self, kind: ItemKind) -> Vec<String> {
        self.map(kind)
            .iter()
            .filter(|(_, e)| matches!(e, Entry::Live(_)))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The live data as FDv2 objects, cached until the next change. Each `put-object`
    /// carries the item's own version as its envelope version.
    pub(super) fn fdv2_objects(&mut self) -> Arc<Fdv2Objects> {
        if let Some(o) = &self.fdv2 {
            return o.clone();
        }
        let mut puts = Vec::with_capacity(self.flags.len() + self.segments.len());
        for (kind, map) in [
            (ItemKind::Flag, &self.flags),
            (ItemKind::Segment, &self.segments),
        ] {
            for (key, entry) in map {
                if let Entry::Live(item) = entry {
                    puts.push(put_object(kind, key, entry.version(), item));
                }
            }
        }
        let o = Arc::new(Fdv2Objects {
            state: self.state(),
            version: self.version,
            puts,
            objects_sse: OnceLock::new(),
        });
        self.fdv2 = Some(o.clone());
        o
    }

    /// The live data rendered, cached until the next change.
    pub(super) fn rendered(&mut self) -> Arc<Rendered> {
        if let Some(r) = &self.rendered {
            return r.clone();
        }
        let mut body = String::with_capacity(64);
        body.push_str("{\"flags\":");
        render_map(&self.flags, &mut body);
        body.push_str(",\"segments\":");
        render_map(&self.segments, &mut body);
        body.push('}');
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        body.hash(&mut hasher);
        let etag = format!("\"fs-{:016x}-{:x}\"", hasher.finish(), body.len());
        let r = Arc::new(Rendered {
            body: body.into(),
            etag,
            gzipped: OnceLock::new(),
            put_event: OnceLock::new(),
        });
        self.rendered = Some(r.clone());
        r
    }
}

fn render_map(map: &BTreeMap<String, Entry>, out: &mut String) {
    let live: BTreeMap<&str, &Value> = map
        .iter()
        .filter_map(|(k, e)| match e {
            Entry::Live(v) => Some((k.as_str(), v)),
            Entry::Deleted(_) => None,
        })
        .collect();
    out.push_str(&serde_json::to_string(&live).unwrap_or_else(|_| "{}".into()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fills_key_and_version_and_bumps() {
        let mut d = Data::from_json(json!({"flags": {"a": {"on": true}}})).unwrap();
        assert_eq!(d.get(ItemKind::Flag, "a").unwrap()["version"], 1);
        assert_eq!(d.get(ItemKind::Flag, "a").unwrap()["key"], "a");
        let v = d.upsert(ItemKind::Flag, "a", json!({"on": false})).unwrap();
        assert_eq!(v["version"], 2);
        assert_eq!(d.delete(ItemKind::Flag, "a", None), 3);
        assert!(d.get(ItemKind::Flag, "a").is_none());
        let v = d.upsert(ItemKind::Flag, "a", json!({})).unwrap();
        assert_eq!(v["version"], 4);
        let v = d
            .upsert(ItemKind::Flag, "a", json!({"version": 2}))
            .unwrap();
        assert_eq!(v["version"], 2);
    }

    #[test]
    fn rejects_bad_shapes() {
        assert!(Data::from_json(json!([1])).is_err());
        assert!(Data::from_json(json!({"flags": []})).is_err());
        assert!(Data::from_json(json!({"flags": {"a": {"key": "b"}}})).is_err());
        assert!(Data::from_json(json!({"flags": {"a": {"version": "x"}}})).is_err());
        assert!(Data::from_json(json!({"flagz": {}})).is_err());
    }

    #[test]
    fn replacing_never_takes_an_item_version_back() {
        let mut d = Data::from_json(json!({"flags": {
            "same": {"on": true}, "edited": {"on": true}, "ahead": {"on": true},
            "gone": {}
        }}))
        .unwrap();
        d.upsert(ItemKind::Flag, "edited", json!({"on": true}))
            .unwrap(); // version 2
        d.delete(ItemKind::Flag, "gone", None); // tombstone 2
        d.replace(
            Data::from_json(json!({"flags": {
                "same": {"on": true}, "edited": {"on": false},
                "ahead": {"on": false, "version": 9}, "gone": {}, "new": {}
            }}))
            .unwrap(),
        );
        let v = |k| {
            d.get(ItemKind::Flag, k).unwrap()["version"]
                .as_u64()
                .unwrap()
        };
        assert_eq!(v("same"), 1, "unchanged: kept");
        assert_eq!(v("edited"), 3, "changed: the served version plus one");
        assert_eq!(v("ahead"), 9, "a newer version in the data wins");
        assert_eq!(v("gone"), 3, "above the tombstone");
        assert_eq!(v("new"), 1);
        assert_eq!(d.version(), 4);
    }

    #[test]
    fn replacing_says_what_changed_and_keeps_tombstones() {
        let mut d = Data::from_json(json!({"flags": {"same": {"on": true}, "edited": {},
            "gone": {"version": 4}}, "segments": {"s": {}}}))
        .unwrap();
        let same = json!({"flags": {"same": {"on": true}, "edited": {}, "gone": {"version": 4}},
            "segments": {"s": {}}});
        assert!(
            d.replace_with_changes(Data::from_json(same).unwrap())
                .is_empty()
        );
        assert_eq!(d.version(), 1, "nothing changed: the payload version stays");
        let changes = d.replace_with_changes(
            Data::from_json(
                json!({"flags": {"same": {"on": true}, "edited": {"on": true},
                "new": {}}, "segments": {"s": {}}}),
            )
            .unwrap(),
        );
        assert_eq!(
            changes,
            [
                Change::Delete(ItemKind::Flag, "gone".into(), 5),
                Change::Put(
                    ItemKind::Flag,
                    "edited".into(),
                    json!({"key": "edited", "version": 2, "on": true})
                ),
                Change::Put(
                    ItemKind::Flag,
                    "new".into(),
                    json!({"key": "new", "version": 1})
                ),
            ]
        );
        assert_eq!(d.version(), 2);
        assert!(d.get(ItemKind::Flag, "gone").is_none());
        // The key back: above its tombstone, whatever the file says.
        let changes = d.replace_with_changes(
            Data::from_json(
                json!({"flags": {"same": {"on": true}, "edited": {"on": true},
                "new": {}, "gone": {"version": 1}}, "segments": {"s": {}}}),
            )
            .unwrap(),
        );
        assert_eq!(
            changes,
            [Change::Put(
                ItemKind::Flag,
                "gone".into(),
                json!({"key": "gone", "version": 6})
            )]
        );
    }

    #[test]
    fn etag_follows_content() {
        let mut d = Data::from_json(json!({"flags": {"a": {}}})).unwrap();
        let e1 = d.rendered().etag.clone();
        assert_eq!(d.rendered().etag, e1);
        d.upsert(ItemKind::Flag, "a", json!({})).unwrap();
        assert_ne!(d.rendered().etag, e1);
        assert_eq!(
            &*d.rendered().body,
            r#"{"flags":{"a":{"key":"a","version":2}},"segments":{}}"#
        );
    }

    #[test]
    fn payload_version_and_state_follow_changes() {
        let mut d = Data::from_json(json!({"flags": {"a": {}}, "segments": {"s": {}}})).unwrap();
        d.set_epoch("e".into());
        assert_eq!((d.version(), d.state()), (1, "e-1".to_owned()));
        let o = d.fdv2_objects();
        assert_eq!((o.state.as_str(), o.version, o.puts.len()), ("e-1", 1, 2));
        let put: Value = serde_json::from_str(&o.puts[0]).unwrap();
        assert_eq!(
            put,
            json!({"version": 1, "kind": "flag", "key": "a", "object": {"key": "a", "version": 1}})
        );
        d.upsert(ItemKind::Flag, "b", json!({})).unwrap();
        d.delete(ItemKind::Flag, "a", None);
        assert_eq!(d.state(), "e-3");
        let o = d.fdv2_objects();
        assert_eq!((o.version, o.puts.len()), (3, 2));
        d.replace(Data::from_json(json!({})).unwrap());
        assert_eq!(d.state(), "e-4");
        assert!(d.fdv2_objects().puts.is_empty());
    }

    #[test]
    fn flag_values_and_put_shape() {
        let d = Data::from_json(json!({"flagValues": {"x": true}})).unwrap();
        assert_eq!(d.get(ItemKind::Flag, "x").unwrap()["variations"][0], true);
        let d = Data::from_json(json!({"path": "/", "data": {"flags": {}, "segments": {"s": {}}}}))
            .unwrap();
        assert!(d.get(ItemKind::Segment, "s").is_some());
    }
}
