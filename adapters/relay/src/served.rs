//! [`Served`]: what an environment of the server serves, and bringing it to a client's
//! snapshot with as few changes as it takes.

use std::collections::HashMap;

use flagsync::{Kind, Snapshot};
use flagsync_core::datafile::RawDataSet;
use flagsync_core::store::Item;
use flagsync_server::{EnvironmentHandle, ServerError};

/// More changes than this at once go out as one replacement of the whole data set.
const MAX_PATCHES: usize = 64;

/// What an environment serves: each item's version, whether it is deleted, and where
/// its bytes are (the client's: the server holds the same bytes, not a copy).
#[derive(Default)]
pub(crate) struct Served {
    ready: bool,
    items: [HashMap<String, (u64, bool, usize)>; 2],
}

fn served(item: &Item) -> (u64, bool, usize) {
    (item.version, item.deleted, item.raw.as_ptr() as usize)
}

fn slot(kind: Kind) -> usize {
    usize::from(kind == Kind::Segment)
}

impl Served {
    /// Bring `env` to `snap`; the number of items changed.
    pub(crate) fn sync(
        &mut self,
        env: &EnvironmentHandle,
        snap: &Snapshot,
    ) -> Result<usize, ServerError> {
        let mut changes: Vec<(Kind, &str, &Item)> = Vec::new();
        // Served keys that `snap` still holds: fewer than are served means some
        // vanished (a full replacement upstream), which only a replacement removes.
        let mut kept = 0;
        // Items the client holds again in other bytes (the same versions, such as a
        // full transfer of unchanged data): the server takes them, so that the bytes it
        // held (the client's previous transfer) are freed.
        let mut moved = false;
        for kind in [Kind::Flag, Kind::Segment] {
            let served = &self.items[slot(kind)];
            for (key, item) in snap.iter_including_deleted(kind) {
                match served.get(key) {
                    Some(&(version, deleted, at))
                        if (version, deleted) == (item.version, item.deleted) =>
                    {
                        kept += 1;
                        moved |= !deleted && at != item.raw.as_ptr() as usize;
                        continue;
                    }
                    Some(_) => kept += 1,
                    None => {}
                }
                changes.push((kind, key, item));
            }
        }
        let vanished = self.items.iter().map(HashMap::len).sum::<usize>() > kept;
        if !self.ready || vanished || moved || changes.len() > MAX_PATCHES {
            let n = if self.ready {
                changes.len().max(usize::from(vanished))
            } else {
                0
            };
            env.replace_all(raw_data_set(snap)?)?;
            self.ready = true;
            for (i, kind) in [Kind::Flag, Kind::Segment].into_iter().enumerate() {
                self.items[i] = snap
                    .iter_including_deleted(kind)
                    .map(|(k, item)| (k.to_owned(), served(item)))
                    .collect();
            }
            return Ok(n);
        }
        let n = changes.len();
        for (kind, key, item) in changes {
            match (kind, item.deleted) {
                (_, false) => drop(env.set_item_json(kind, key, &item.raw)?),
                (Kind::Flag, true) => drop(env.delete_flag_version(key, item.version)),
                (Kind::Segment, true) => drop(env.delete_segment_version(key, item.version)),
            }
            self.items[slot(kind)].insert(key.to_owned(), served(item));
        }
        Ok(n)
    }
}

/// The live items of `snap`, sharing its bytes (the server holds no copy of them).
fn raw_data_set(snap: &Snapshot) -> Result<RawDataSet, ServerError> {
    let mut data = RawDataSet::default();
    for kind in [Kind::Flag, Kind::Segment] {
        for (key, item) in snap.iter(kind) {
            let item = RawDataSet::item(kind, key, &item.raw, item.version)
                .map_err(|e| ServerError::InvalidData(format!("{key}: {e}")))?;
            data.map_mut(kind).insert(key.to_owned(), item);
        }
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flagsync_core::store::{ChangeSet, Store, split_all_data};
    use flagsync_server::{Environment, Server};
    use serde_json::{Value, json};

    /// A snapshot of `flags` (a map of flag key → flag).
    fn snapshot(flags: Value) -> Snapshot {
        let data = json!({"flags": flags, "segments": {}});
        let whole = data.to_string().into_bytes().into();
        let mut store = Store::new();
        store.apply(ChangeSet::fdv1_full(split_all_data(&whole, false).unwrap()));
        store.snapshot()
    }

    fn flag(key: &str, version: u64) -> Value {
        json!({"key": key, "version": version, "on": true, "variations": [true],
               "fallthrough": {"variation": 0}, "offVariation": 0})
    }

    /// The flag keys `env` serves, with their versions.
    fn served_flags(env: &EnvironmentHandle) -> Vec<(String, u64)> {
        let data: Value = serde_json::from_str(&env.data_json()).unwrap();
        let mut flags: Vec<(String, u64)> = data["flags"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, f)| f["deleted"] != true)
            .map(|(k, f)| (k.clone(), f["version"].as_u64().unwrap()))
            .collect();
        flags.sort();
        flags
    }

    #[test]
    fn changes_are_patched_and_vanished_keys_replace_the_whole_set() {
        let server = Server::builder()
            .environment(Environment::new("e", "sdk-relay-unit"))
            .start()
            .unwrap();
        let env = server.environment("e").unwrap();
        let mut served = Served::default();
        let first = json!({"a": flag("a", 1), "b": flag("b", 1)});
        assert_eq!(served.sync(&env, &snapshot(first)).unwrap(), 0);
        assert_eq!(served_flags(&env), [("a".into(), 1), ("b".into(), 1)]);

        // One changed flag: one patch.
        let second = json!({"a": flag("a", 2), "b": flag("b", 1)});
        assert_eq!(served.sync(&env, &snapshot(second.clone())).unwrap(), 1);
        assert_eq!(served_flags(&env), [("a".into(), 2), ("b".into(), 1)]);
        assert_eq!(served.sync(&env, &snapshot(second)).unwrap(), 0);

        // "b" gone and "c" new in one sync (as many keys as before): "b" is no longer
        // served.
        let third = json!({"a": flag("a", 2), "c": flag("c", 1)});
        assert_eq!(served.sync(&env, &snapshot(third)).unwrap(), 1);
        assert_eq!(served_flags(&env), [("a".into(), 2), ("c".into(), 1)]);
    }
}
