//! LaunchDarkly's flag data file format, read once for everyone: the SDK's file data
//! source and `flagsync serve --data` (through `flagsync-server`) both load files with
//! it. Pure: bytes in, a [`DataSet`] out.
//!
//! A file is a JSON object (or, with the `yaml` feature, a YAML document) with up to
//! three maps, as LaunchDarkly's file data sources read them:
//!
//! - `flags`: flag key → the flag's JSON, as the flag delivery service sends it;
//! - `flagValues`: flag key → a value; each becomes a flag that is on and serves that
//!   value to everyone ([`simple_flag`]);
//! - `segments`: segment key → the segment's JSON.
//!
//! Each item gets its map key as `key` when it has none (a different `key` is an error)
//! and version 1 when it has no `version`. A flag in both `flags` and `flagValues`, or
//! an item in two files ([`DataSet::merge`]), is an error, as in LaunchDarkly's SDKs;
//! so is any other top-level field (a typo such as `flag` would otherwise load
//! nothing).
//!
//! ```
//! use flagsync_core::datafile::{DataSet, Format};
//!
//! let a = DataSet::parse(br#"{"flagValues": {"banner": "blue"}}"#, Format::Json)?;
//! let b = DataSet::parse(br#"{"segments": {"beta": {"included": ["u1"]}}}"#, Format::Json)?;
//! let data = DataSet::merge([("a.json".to_owned(), a), ("b.json".to_owned(), b)])?;
//! assert_eq!(data.flags["banner"]["variations"][0], "blue");
//! assert_eq!(data.segments["beta"]["version"], 1);
//! # Ok::<(), flagsync_core::datafile::LoadError>(())
//! ```

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::store::{Change, ChangeSet, Kind};

mod raw;

pub use raw::RawDataSet;

/// How a file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON.
    Json,
    /// YAML (needs the `yaml` feature; JSON is YAML too, but is read as JSON).
    Yaml,
}

impl Format {
    /// By the file name's extension: `.yaml` and `.yml` are YAML, anything else JSON.
    pub fn of_file_name(name: &str) -> Self {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".yaml") || lower.ends_with(".yml") {
            Self::Yaml
        } else {
            Self::Json
        }
    }
}

/// Why a file, or a set of files, cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// Not JSON (or YAML) at all.
    #[error("not valid {format}: {message}")]
    Syntax {
        /// `JSON` or `YAML`.
        format: &'static str,
        /// The parser's message.
        message: String,
    },
    /// Well formed, but not flag data.
    #[error("{0}")]
    Shape(String),
    /// The same flag or segment is defined twice.
    #[error("{kind} \"{key}\" is defined in both {first} and {second}")]
    Duplicate {
        /// `flag` or `segment`.
        kind: &'static str,
        /// Its key.
        key: String,
        /// Where it was first (a file name, or `flags` / `flagValues`).
        first: String,
        /// Where it was again.
        second: String,
    },
    /// A YAML file, without the `yaml` feature.
    #[error("YAML files need flagsync-core's `yaml` feature")]
    YamlUnsupported,
}

/// Flags and segments by key, each a JSON object with its `key` and `version`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DataSet {
    /// The flags (those of `flagValues` made whole).
    pub flags: BTreeMap<String, Value>,
    /// The segments.
    pub segments: BTreeMap<String, Value>,
}

impl DataSet {
    /// Read one file's bytes.
    pub fn parse(bytes: &[u8], format: Format) -> Result<Self, LoadError> {
        let value: Value = match format {
            Format::Json => serde_json::from_slice(bytes).map_err(|e| LoadError::Syntax {
                format: "JSON",
                message: e.to_string(),
            })?,
            #[cfg(feature = "yaml")]
            Format::Yaml => serde_yaml_ng::from_slice(bytes).map_err(|e| LoadError::Syntax {
                format: "YAML",
                message: e.to_string(),
            })?,
            #[cfg(not(feature = "yaml"))]
            Format::Yaml => return Err(LoadError::YamlUnsupported),
        };
        Self::from_value(value)
    }

    /// Read one file's parsed content: `{"flags": …, "flagValues": …, "segments": …}`,
    /// every part optional (an empty YAML document is no data). A whole FDv1 `put`
    /// payload, `{"path": "/", "data": {…}}`, is read as its `data`.
    pub fn from_value(value: Value) -> Result<Self, LoadError> {
        let mut top = match value {
            Value::Object(mut top)
                if !top.contains_key("flags")
                    && !top.contains_key("flagValues")
                    && matches!(top.get("data"), Some(Value::Object(_))) =>
            {
                match top.remove("data") {
                    Some(Value::Object(data)) => data,
                    _ => Map::new(),
                }
            }
            Value::Object(top) => top,
            Value::Null => Map::new(),
            _ => {
                return Err(LoadError::Shape(
                    "the data must be an object like {\"flags\":{…},\"segments\":{…}}".into(),
                ));
            }
        };
        let mut data = Self::default();
        for (name, kind) in [("flags", Kind::Flag), ("segments", Kind::Segment)] {
            match top.remove(name) {
                None | Some(Value::Null) => {}
                Some(Value::Object(items)) => {
                    for (key, item) in items {
                        let item = normalise(kind, &key, item, 1)
                            .map_err(|e| LoadError::Shape(format!("{name}.{key}: {e}")))?;
                        data.map_mut(kind).insert(key, item);
                    }
                }
                Some(_) => {
                    return Err(LoadError::Shape(format!(
                        "\"{name}\" must be an object keyed by {name} key"
                    )));
                }
            }
        }
        match top.remove("flagValues") {
            None | Some(Value::Null) => {}
            Some(Value::Object(values)) => {
                for (key, value) in values {
                    if data.flags.contains_key(&key) {
                        return Err(in_flags_and_flag_values(key));
                    }
                    let flag = simple_flag(&key, value);
                    data.flags.insert(key, flag);
                }
            }
            Some(_) => {
                return Err(LoadError::Shape(
                    "\"flagValues\" must be an object of key → value".into(),
                ));
            }
        }
        if let Some(other) = top.keys().next() {
            return Err(LoadError::Shape(format!(
                "unexpected top-level field \"{other}\" (expected \"flags\", \"segments\" or \"flagValues\")"
            )));
        }
        Ok(data)
    }

    /// Merge the data sets of several files, named for the error: an item defined in
    /// two of them is an error.
    pub fn merge(files: impl IntoIterator<Item = (String, Self)>) -> Result<Self, LoadError> {
        let mut merged = Self::default();
        let mut origin: BTreeMap<(Kind, String), String> = BTreeMap::new();
        for (name, data) in files {
            for (kind, map) in [(Kind::Flag, data.flags), (Kind::Segment, data.segments)] {
                for (key, item) in map {
                    if let Some(first) = origin.get(&(kind, key.clone())) {
                        return Err(LoadError::Duplicate {
                            kind: kind_name(kind),
                            key,
                            first: first.clone(),
                            second: name,
                        });
                    }
                    origin.insert((kind, key.clone()), name.clone());
                    merged.map_mut(kind).insert(key, item);
                }
            }
        }
        Ok(merged)
    }

    /// The items of `kind`.
    pub fn map(&self, kind: Kind) -> &BTreeMap<String, Value> {
        match kind {
            Kind::Segment => &self.segments,
            Kind::Flag => &self.flags,
        }
    }

    fn map_mut(&mut self, kind: Kind) -> &mut BTreeMap<String, Value> {
        match kind {
            Kind::Segment => &mut self.segments,
            Kind::Flag => &mut self.flags,
        }
    }

    /// `{"flags":{…},"segments":{…}}`, the FDv1 all-data shape.
    pub fn to_value(&self) -> Value {
        let map = |m: &BTreeMap<String, Value>| {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        };
        serde_json::json!({"flags": map(&self.flags), "segments": map(&self.segments)})
    }

    /// Make versions move forward from `previous` (the data loaded before), as the
    /// flag delivery service's always do: SDKs compare versions to tell what changed.
    /// An item whose content changed gets at least its previous version plus one, an
    /// unchanged one at least its previous version; a file edited without touching its
    /// versions (or without any) then reaches clients as changes.
    pub fn carry_versions(&mut self, previous: &Self) {
        for kind in [Kind::Flag, Kind::Segment] {
            let before = previous.map(kind);
            for (key, item) in self.map_mut(kind).iter_mut() {
                let Some(old) = before.get(key) else { continue };
                let floor = version_floor(old, item);
                if version_of(item) < floor
                    && let Value::Object(obj) = item
                {
                    obj.insert("version".into(), Value::from(floor));
                }
            }
        }
    }

    /// The data set as an FDv1 full transfer for the store (segments first).
    pub fn change_set(&self) -> Result<ChangeSet, LoadError> {
        let mut changes = Vec::with_capacity(self.flags.len() + self.segments.len());
        for kind in [Kind::Segment, Kind::Flag] {
            for (key, item) in self.map(kind) {
                let raw = Bytes::from(serde_json::to_vec(item).unwrap_or_default());
                let change = Change::from_json(kind, raw)
                    .map_err(|e| LoadError::Shape(format!("{} \"{key}\": {e}", kind_name(kind))))?;
                changes.push(change);
            }
        }
        Ok(ChangeSet::fdv1_full(changes))
    }
}

/// A flag in both `flags` and `flagValues`.
fn in_flags_and_flag_values(key: String) -> LoadError {
    LoadError::Duplicate {
        kind: "flag",
        key,
        first: "\"flags\"".into(),
        second: "\"flagValues\"".into(),
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Segment => "segment",
        Kind::Flag => "flag",
    }
}

fn version_of(item: &Value) -> u64 {
    item.get("version").and_then(Value::as_u64).unwrap_or(0)
}

/// The lowest version `new` may have after `old` (same key): `old`'s if they differ
/// only in `version`, else `old`'s plus one.
pub fn version_floor(old: &Value, new: &Value) -> u64 {
    let same = match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            o.len() == n.len() && o.iter().all(|(k, v)| k == "version" || n.get(k) == Some(v))
        }
        _ => false,
    };
    version_of(old) + u64::from(!same)
}

/// Check an item of `kind` stored under `key`, and fill in `key` and (with
/// `default_version`) `version`.
pub fn normalise(
    kind: Kind,
    key: &str,
    item: Value,
    default_version: u64,
) -> Result<Value, String> {
    let what = kind_name(kind);
    let Value::Object(mut obj) = item else {
        return Err(format!("a {what} must be a JSON object"));
    };
    match obj.get("key") {
        None => {
            obj.insert("key".into(), Value::String(key.to_owned()));
        }
        Some(Value::String(k)) if k == key => {}
        Some(other) => {
            return Err(format!(
                "the {what}'s \"key\" field ({other}) differs from its map key \"{key}\""
            ));
        }
    }
    match obj.get("version") {
        None => {
            obj.insert("version".into(), Value::from(default_version));
        }
        Some(v) if v.as_u64().is_some() => {}
        Some(other) => {
            return Err(format!(
                "the {what}'s \"version\" must be a non-negative integer, not {other}"
            ));
        }
    }
    Ok(Value::Object(obj))
}

/// A flag that serves `value` to everyone, as LaunchDarkly's file data sources make
/// for `flagValues`: on, one variation, served by the fallthrough and when off.
pub fn simple_flag(key: &str, value: Value) -> Value {
    serde_json::json!({
        "key": key,
        "version": 1,
        "on": true,
        "variations": [value],
        "fallthrough": {"variation": 0},
        "offVariation": 0,
        "targets": [],
        "rules": [],
        "prerequisites": [],
        "salt": key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(s: &str) -> Result<DataSet, LoadError> {
        DataSet::parse(s.as_bytes(), Format::Json)
    }

    #[test]
    fn flags_segments_and_flag_values_are_read_and_completed() {
        let d = parse(
            r#"{"flags": {"a": {"on": true, "version": 4}},
                "flagValues": {"b": [1, 2]},
                "segments": {"s": {"included": ["u"]}}}"#,
        )
        .unwrap();
        assert_eq!(d.flags["a"], json!({"key": "a", "on": true, "version": 4}));
        assert_eq!(d.flags["b"], simple_flag("b", json!([1, 2])));
        assert_eq!(d.flags["b"]["fallthrough"], json!({"variation": 0}));
        assert_eq!(
            d.segments["s"],
            json!({"key": "s", "version": 1, "included": ["u"]})
        );
        let cs = d.change_set().unwrap();
        assert_eq!(cs.changes.len(), 3);
        assert_eq!(cs.changes[0].kind, Kind::Segment);
    }

    #[test]
    fn several_files_merge_and_a_duplicate_is_an_error() {
        let a = parse(r#"{"flagValues": {"x": 1}}"#).unwrap();
        let b = parse(r#"{"flags": {"y": {}}, "segments": {"x": {}}}"#).unwrap();
        let c = parse(r#"{"flags": {"x": {}}}"#).unwrap();
        let merged = DataSet::merge([("a".into(), a.clone()), ("b".into(), b.clone())]).unwrap();
        assert_eq!(merged.flags.len(), 2);
        assert_eq!(merged.segments.len(), 1, "a segment may share a flag's key");
        let err = DataSet::merge([("a".into(), a), ("b".into(), b), ("c".into(), c)]);
        assert_eq!(
            err.unwrap_err().to_string(),
            "flag \"x\" is defined in both a and c"
        );
        let err = parse(r#"{"flags": {"x": {}}, "flagValues": {"x": 1}}"#).unwrap_err();
        assert!(matches!(err, LoadError::Duplicate { .. }), "{err}");
    }

    #[test]
    fn malformed_files_are_errors() {
        assert!(matches!(parse("{"), Err(LoadError::Syntax { .. })));
        for bad in [
            "[1]",
            r#"{"flags": []}"#,
            r#"{"flags": {"a": {"key": "b"}}}"#,
            r#"{"flags": {"a": {"version": "x"}}}"#,
            r#"{"flags": {"a": 3}}"#,
            r#"{"flagValues": 1}"#,
            r#"{"flagz": {}}"#,
        ] {
            assert!(matches!(parse(bad), Err(LoadError::Shape(_))), "{bad}");
        }
        assert_eq!(parse("{}").unwrap(), DataSet::default());
        let put = parse(r#"{"path": "/", "data": {"flags": {"a": {}}, "segments": {}}}"#);
        assert_eq!(put.unwrap().flags["a"]["key"], "a");
    }

    #[cfg(feature = "yaml")]
    #[test]
    fn yaml_files_read_as_json_ones() {
        let yaml = "flags:\n  a:\n    on: true\n    variations: [true, false]\nflagValues:\n  b: hello\nsegments:\n  s:\n    included: [u1]\n";
        let d = DataSet::parse(yaml.as_bytes(), Format::Yaml).unwrap();
        assert_eq!(d.flags["a"]["variations"], json!([true, false]));
        assert_eq!(d.flags["b"]["variations"], json!(["hello"]));
        assert_eq!(d.segments["s"]["key"], "s");
        assert!(matches!(
            DataSet::parse(b"flags: [a, b", Format::Yaml),
            Err(LoadError::Syntax { format: "YAML", .. })
        ));
        assert_eq!(
            DataSet::parse(b"", Format::Yaml).unwrap(),
            DataSet::default()
        );
        assert_eq!(Format::of_file_name("x.YML"), Format::Yaml);
        assert_eq!(Format::of_file_name("x.json"), Format::Json);
    }

    #[test]
    fn versions_only_move_forward_across_loads() {
        let old = parse(r#"{"flags": {"same": {"on": true, "version": 3}, "edited": {"on": true, "version": 3}, "ahead": {"version": 1}}}"#).unwrap();
        let mut new = parse(r#"{"flags": {"same": {"on": true}, "edited": {"on": false}, "ahead": {"on": 1, "version": 9}, "new": {}}}"#).unwrap();
        new.carry_versions(&old);
        let v = |k: &str| new.flags[k]["version"].as_u64().unwrap();
        assert_eq!((v("same"), v("edited"), v("ahead"), v("new")), (3, 4, 9, 1));
    }
}
