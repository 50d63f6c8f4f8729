//! FDv1 event data for each event name, applied to a store: no panic, and a patch
//! or delete never moves a version backwards.
#![no_main]

use bytes::Bytes;
use flagsync_core::fdv1::{Event, parse_event};
use flagsync_core::store::{ChangeSet, Store};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (u8, &[u8])| {
    let (name, data) = input;
    let name = ["put", "patch", "delete", "other"][usize::from(name % 4)];
    let mut store = Store::new();
    if let Ok(Event::Put(changes)) = parse_event("put", &Bytes::copy_from_slice(data)) {
        store.apply(ChangeSet::fdv1_full(changes));
    }
    let before = store.snapshot();
    match parse_event(name, &Bytes::copy_from_slice(data)) {
        Ok(Event::Patch(c) | Event::Delete(c)) => {
            let (kind, key) = (c.kind, c.key.clone());
            store.apply(ChangeSet::fdv1_upsert(c));
            if let Some(old) = before.get_including_deleted(kind, &key) {
                let new = store
                    .data()
                    .get_including_deleted(kind, &key)
                    .map(|i| i.version);
                assert!(new >= Some(old.version));
            }
        }
        _ => {}
    }
});
