//! Small typed views of stored items. The store keeps raw JSON; these read the few
//! fields most callers want and keep the rest in `raw`.

use bytes::Bytes;
use flagsync_core::store::Item;
use serde::Deserialize;

/// A feature flag: its key, version, on/off switch and variations, plus its raw JSON.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Flag {
    /// The flag key.
    pub key: String,
    /// The flag version.
    pub version: u64,
    /// Whether targeting is on.
    pub on: bool,
    /// The variation values.
    pub variations: Vec<serde_json::Value>,
    /// The flag's JSON as the service sent it.
    pub raw: Bytes,
}

/// A segment: its key and version, plus its raw JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Segment {
    /// The segment key.
    pub key: String,
    /// The segment version.
    pub version: u64,
    /// The segment's JSON as the service sent it.
    pub raw: Bytes,
}

#[derive(Deserialize, Default)]
struct FlagFields {
    #[serde(default)]
    on: bool,
    #[serde(default)]
    variations: Vec<serde_json::Value>,
}

impl Flag {
    pub(crate) fn from_item(key: &str, item: &Item) -> Self {
        // The core accepted this JSON; a field of an unexpected type reads as absent.
        let fields: FlagFields = serde_json::from_slice(&item.raw).unwrap_or_default();
        Self {
            key: key.to_owned(),
            version: item.version,
            on: fields.on,
            variations: fields.variations,
            raw: item.raw.clone(),
        }
    }

    /// The raw JSON as text.
    pub fn raw_str(&self) -> &str {
        std::str::from_utf8(&self.raw).unwrap_or("")
    }
}

impl Segment {
    pub(crate) fn from_item(key: &str, item: &Item) -> Self {
        Self {
            key: key.to_owned(),
            version: item.version,
            raw: item.raw.clone(),
        }
    }
}
