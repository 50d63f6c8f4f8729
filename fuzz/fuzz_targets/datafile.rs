//! LaunchDarkly's flag data files (`flagsync_core::datafile`, the loader of the SDK's
//! file source and `flagsync serve --data`): arbitrary bytes as JSON and as YAML, several
//! files merged, versions carried from the previous load, the result applied to a
//! store. No panic; a merge holds every item of its files once; carried versions never
//! go back; the change set is the data set.
#![no_main]

use std::collections::BTreeMap;

use flagsync_core::datafile::{DataSet, Format};
use flagsync_core::store::{Kind, Store};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|files: Vec<(bool, &[u8])>| {
    let mut loaded = Vec::new();
    for (i, (yaml, bytes)) in files.iter().enumerate() {
        let format = if *yaml { Format::Yaml } else { Format::Json };
        if let Ok(set) = DataSet::parse(bytes, format) {
            loaded.push((format!("file-{i}"), set));
        }
    }
    let count = |set: &DataSet| set.map(Kind::Flag).len() + set.map(Kind::Segment).len();
    let total: usize = loaded.iter().map(|(_, s)| count(s)).sum();
    let previous = loaded.first().map(|(_, s)| s.clone());
    let Ok(mut merged) = DataSet::merge(loaded) else {
        return;
    };
    assert_eq!(count(&merged), total, "a merge keeps every item once");
    if let Some(previous) = previous {
        let before: BTreeMap<(Kind, String), u64> = Kind::ALL
            .into_iter()
            .flat_map(|k| {
                previous
                    .map(k)
                    .iter()
                    .map(move |(key, v)| ((k, key.clone()), v["version"].as_u64().unwrap_or(0)))
            })
            .collect();
        merged.carry_versions(&previous);
        for ((kind, key), version) in before {
            if let Some(item) = merged.map(kind).get(&key) {
                assert!(
                    item["version"].as_u64().unwrap_or(0) >= version,
                    "a version went back"
                );
            }
        }
    }
    if let Ok(change_set) = merged.change_set() {
        let mut store = Store::new();
        store.apply(change_set);
        for kind in Kind::ALL {
            assert!(store.data().len(kind) <= merged.map(kind).len());
        }
    }
});
