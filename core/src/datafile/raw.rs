//! A flag data file read into raw JSON items: [`RawDataSet`].
//!
//! The same format and rules as [`DataSet`](super::DataSet), but no item is ever built
//! as a `serde_json::Value`: each is checked with a light scan (is it an object, its
//! `key`, its `version`) and kept as its JSON text. An item that is already compact
//! and has its `key` and `version` is a slice of the file's bytes, with no copy; one
//! with whitespace is compacted (so it fits on one line of a stream), one without its
//! `key` or `version` gets them written in. A server holding a 5.6 MB file this way
//! holds about 5.6 MB, not the ~100 MB its values would take.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{DataSet, Format, LoadError, in_flags_and_flag_values, kind_name, simple_flag};
use crate::store::{Item, Kind};

/// Flags and segments by key, each its raw JSON text (compact, with its `key` and
/// `version`) and its version.
///
/// ```
/// use bytes::Bytes;
/// use flagsync_core::datafile::{Format, RawDataSet};
///
/// let file = Bytes::from_static(br#"{"flags": {"f": {"on": true}}, "flagValues": {"x": 1}}"#);
/// let data = RawDataSet::parse(file, Format::Json)?;
/// assert_eq!(data.flags["f"].raw_str(), r#"{"key":"f","version":1,"on":true}"#);
/// assert_eq!(data.flags["x"].version, 1);
/// # Ok::<(), flagsync_core::datafile::LoadError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawDataSet {
    /// The flags (those of `flagValues` made whole).
    pub flags: BTreeMap<String, Item>,
    /// The segments.
    pub segments: BTreeMap<String, Item>,
}

impl RawDataSet {
    /// Read one file's bytes. JSON items are kept as slices of `bytes` where they can
    /// be; YAML is read as [`DataSet::parse`] reads it, then written as JSON.
    pub fn parse(bytes: Bytes, format: Format) -> Result<Self, LoadError> {
        match format {
            Format::Json => Self::parse_json(&bytes),
            Format::Yaml => DataSet::parse(&bytes, Format::Yaml).map(Self::from),
        }
    }

    /// The items of `kind`.
    pub fn map(&self, kind: Kind) -> &BTreeMap<String, Item> {
        match kind {
            Kind::Segment => &self.segments,
            Kind::Flag => &self.flags,
        }
    }

    /// The items of `kind`, to change.
    pub fn map_mut(&mut self, kind: Kind) -> &mut BTreeMap<String, Item> {
        match kind {
            Kind::Segment => &mut self.segments,
            Kind::Flag => &mut self.flags,
        }
    }

    /// One item of `kind` stored under `key`, from its JSON text: checked, compacted,
    /// its `key` and (with `default_version`) `version` filled in, as a file's items
    /// are.
    pub fn item(kind: Kind, key: &str, raw: &Bytes, default_version: u64) -> Result<Item, String> {
        normalise_raw(kind, key, raw, raw, default_version)
    }

    fn parse_json(bytes: &Bytes) -> Result<Self, LoadError> {
        let syntax = |e: serde_json::Error| LoadError::Syntax {
            format: "JSON",
            message: e.to_string(),
        };
        let top: &RawValue = serde_json::from_slice(bytes).map_err(syntax)?;
        let mut top = match members(top) {
            Some(m) => m.map_err(syntax)?,
            None if top.get() == "null" => Members::new(),
            None => {
                return Err(LoadError::Shape(
                    "the data must be an object like {\"flags\":{…},\"segments\":{…}}".into(),
                ));
            }
        };
        // A whole FDv1 `put` payload is read as its `data`.
        if !top.contains_key("flags")
            && !top.contains_key("flagValues")
            && let Some(Some(Ok(data))) = top.get("data").map(|d| members(d))
        {
            top = data;
        }
        let mut data = Self::default();
        for (name, kind) in [("flags", Kind::Flag), ("segments", Kind::Segment)] {
            let Some(items) = top.remove(name) else {
                continue;
            };
            if items.get() == "null" {
                continue;
            }
            let Some(items) = members(items) else {
                return Err(LoadError::Shape(format!(
                    "\"{name}\" must be an object keyed by {name} key"
                )));
            };
            for (key, item) in items.map_err(syntax)? {
                let item = normalise_raw(kind, &key, bytes, item.get().as_bytes(), 1)
                    .map_err(|e| LoadError::Shape(format!("{name}.{key}: {e}")))?;
                data.map_mut(kind).insert(key, item);
            }
        }
        if let Some(values) = top.remove("flagValues")
            && values.get() != "null"
        {
            let Ok(Value::Object(values)) = serde_json::from_str::<Value>(values.get()) else {
                return Err(LoadError::Shape(
                    "\"flagValues\" must be an object of key → value".into(),
                ));
            };
            for (key, value) in values {
                if data.flags.contains_key(&key) {
                    return Err(in_flags_and_flag_values(key));
                }
                let flag = simple_flag(&key, value);
                data.flags.insert(key, value_item(&flag));
            }
        }
        if let Some(other) = top.keys().next() {
            return Err(LoadError::Shape(format!(
                "unexpected top-level field \"{other}\" (expected \"flags\", \"segments\" or \"flagValues\")"
            )));
        }
        Ok(data)
    }
}

impl From<DataSet> for RawDataSet {
    /// Each value written as compact JSON.
    fn from(set: DataSet) -> Self {
        let items = |m: BTreeMap<String, Value>| {
            m.into_iter()
                .map(|(k, v)| {
                    let item = value_item(&v);
                    (k, item)
                })
                .collect()
        };
        Self {
            flags: items(set.flags),
            segments: items(set.segments),
        }
    }
}

/// An item from a value that has its `key` and `version` (a normalised one).
fn value_item(value: &Value) -> Item {
    Item {
        version: value.get("version").and_then(Value::as_u64).unwrap_or(0),
        deleted: false,
        raw: Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
    }
}

type Members<'a> = BTreeMap<String, &'a RawValue>;

/// The members of `raw` if it is an object (`None` if it is not one).
fn members(raw: &RawValue) -> Option<Result<Members<'_>, serde_json::Error>> {
    raw.get()
        .starts_with('{')
        .then(|| serde_json::from_str(raw.get()))
}

/// The two fields of an item the loader checks; every other field is skipped unread.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    key: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    version: Option<&'a RawValue>,
}

/// A field that is present, even as `null` (which `Option` alone reads as absent).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Check `raw` (a slice of `whole`, or `whole` itself), an item of `kind` under
/// `key`; compact it and fill in `key` and `version` where needed.
fn normalise_raw(
    kind: Kind,
    key: &str,
    whole: &Bytes,
    raw: &[u8],
    default_version: u64,
) -> Result<Item, String> {
    let what = kind_name(kind);
    let object = || format!("a {what} must be a JSON object");
    let text = raw.trim_ascii();
    if text.first() != Some(&b'{') {
        return Err(object());
    }
    let head: Head<'_> = serde_json::from_slice(text).map_err(|e| e.to_string())?;
    if let Some(k) = head.key
        && serde_json::from_str::<String>(k.get()).ok().as_deref() != Some(key)
    {
        return Err(format!(
            "the {what}'s \"key\" field ({}) differs from its map key \"{key}\"",
            k.get()
        ));
    }
    let version = match head.version {
        None => None,
        Some(v) => Some(v.get().parse::<u64>().map_err(|_| {
            format!(
                "the {what}'s \"version\" must be a non-negative integer, not {}",
                v.get()
            )
        })?),
    };
    let compacted = compact(text);
    let body = compacted.as_deref().unwrap_or(text);
    let raw = if head.key.is_some() && version.is_some() {
        match compacted {
            Some(c) => Bytes::from(c),
            None => slice_of(whole, text),
        }
    } else {
        let mut out = Vec::with_capacity(body.len() + key.len() + 32);
        out.push(b'{');
        if head.key.is_none() {
            out.extend_from_slice(b"\"key\":");
            out.extend_from_slice(serde_json::to_string(key).unwrap_or_default().as_bytes());
        }
        if version.is_none() {
            if head.key.is_none() {
                out.push(b',');
            }
            out.extend_from_slice(format!("\"version\":{default_version}").as_bytes());
        }
        let inner = &body[1..body.len() - 1];
        if !inner.is_empty() {
            out.push(b',');
            out.extend_from_slice(inner);
        }
        out.push(b'}');
        Bytes::from(out)
    };
    Ok(Item {
        version: version.unwrap_or(default_version),
        deleted: false,
        raw,
    })
}

/// `part` as a slice of `whole` when it lies within it (no copy), else a copy.
fn slice_of(whole: &Bytes, part: &[u8]) -> Bytes {
    let start = (part.as_ptr() as usize).wrapping_sub(whole.as_ptr() as usize);
    if start <= whole.len() && part.len() <= whole.len() - start {
        whole.slice(start..start + part.len())
    } else {
        Bytes::copy_from_slice(part)
    }
}

/// Valid JSON `text` without the whitespace between its tokens, or `None` when it has
/// none (so that it fits on one line of a stream, and takes no more than it must).
pub(crate) fn compact(text: &[u8]) -> Option<Vec<u8>> {
    let mut in_string = false;
    let mut escaped = false;
    let mut out: Option<Vec<u8>> = None;
    for (i, &b) in text.iter().enumerate() {
        let keep = if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            true
        } else if matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            false
        } else {
            in_string = b == b'"';
            true
        };
        match (&mut out, keep) {
            (Some(out), true) => out.push(b),
            (Some(_), false) => {}
            (None, true) => {}
            (None, false) => {
                let mut v = Vec::with_capacity(text.len());
                v.extend_from_slice(&text[..i]);
                out = Some(v);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> Result<RawDataSet, LoadError> {
        RawDataSet::parse(Bytes::from(text.to_owned()), Format::Json)
    }

    #[test]
    fn reads_as_the_value_loader_does() {
        for text in [
            r#"{"flags": {"a": {"on": true, "variations": [1, "x y"]}, "b": {"key": "b", "version": 7}},
                "segments": {"s": {"included": ["u 1"]}}, "flagValues": {"v": {"deep": [1]}}}"#,
            r#"{"path": "/", "data": {"flags": {"a": {}}, "segments": null}}"#,
            r#"{"flags": {"a": {"key": "a", "version": 3, "s": "tab\t\"quoted\" \\ {"}}}"#,
            "null",
            r#"{"flags":{"é\"":{"on":false}}}"#,
        ] {
            let raw = parse(text).unwrap();
            let values = DataSet::parse(text.as_bytes(), Format::Json).unwrap();
            assert_eq!(
                raw.clone().normalised(),
                RawDataSet::from(values.clone()).normalised(),
                "{text}"
            );
            for kind in [Kind::Flag, Kind::Segment] {
                for (key, item) in raw.map(kind) {
                    let v: Value = serde_json::from_slice(&item.raw).unwrap();
                    assert_eq!(&v, &values.map(kind)[key], "{text}");
                    assert_eq!(item.version, v["version"].as_u64().unwrap());
                    assert!(!item.raw.contains(&b'\n'));
                }
            }
        }
    }

    impl RawDataSet {
        /// Items re-read as values and written back, so that two loaders' texts
        /// compare by content.
        fn normalised(mut self) -> Self {
            for kind in [Kind::Flag, Kind::Segment] {
                for item in self.map_mut(kind).values_mut() {
                    let v: Value = serde_json::from_slice(&item.raw).unwrap();
                    *item = value_item(&v);
                }
            }
            self
        }
    }

    #[test]
    fn refuses_what_the_value_loader_refuses() {
        for text in [
            "[1]",
            "3",
            r#"{"flags": []}"#,
            r#"{"flags": {"a": {"key": "b"}}}"#,
            r#"{"flags": {"a": {"key": null}}}"#,
            r#"{"flags": {"a": {"version": "x"}}}"#,
            r#"{"flags": {"a": {"version": -1}}}"#,
            r#"{"flags": {"a": {"version": 1.5}}}"#,
            r#"{"flags": {"a": [1, 2]}}"#,
            r#"{"flagz": {}}"#,
            r#"{"flags": {"a": {}}, "flagValues": {"a": 1}}"#,
            r#"{"flagValues": [1]}"#,
            "{",
        ] {
            assert!(parse(text).is_err(), "{text}");
            assert!(
                DataSet::parse(text.as_bytes(), Format::Json).is_err(),
                "{text}"
            );
        }
    }

    #[test]
    fn compact_items_are_slices_of_the_file() {
        let file = Bytes::from_static(br#"{"flags":{"a":{"key":"a","version":2,"on":true}}}"#);
        let data = RawDataSet::parse(file.clone(), Format::Json).unwrap();
        let item = &data.flags["a"].raw;
        let start = item.as_ptr() as usize - file.as_ptr() as usize;
        assert_eq!(&file[start..start + item.len()], &item[..]);
        assert_eq!(data.flags["a"].version, 2);
    }

    #[test]
    fn compacting_keeps_strings() {
        assert_eq!(compact(br#"{"a":1}"#), None);
        assert_eq!(
            compact(b"{ \"a b\" :\n [1, \"\\\" x\"] }").unwrap(),
            br#"{"a b":[1,"\" x"]}"#
        );
    }

    #[test]
    fn an_item_alone() {
        let item = RawDataSet::item(Kind::Segment, "s", &Bytes::from_static(b" {} "), 4).unwrap();
        assert_eq!(item.raw_str(), r#"{"key":"s","version":4}"#);
        let v = json!({"key": "s", "version": 9});
        let item = RawDataSet::item(Kind::Segment, "s", &Bytes::from(v.to_string()), 4).unwrap();
        assert_eq!(item.version, 9);
    }
}
