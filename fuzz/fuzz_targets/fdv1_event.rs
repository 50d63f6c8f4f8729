//! FDv1 event data under each event name, applied to a populated store: no panic, a
//! patch or delete never moves a version backwards, and a put replaces everything.
#![no_main]

use bytes::Bytes;
use flagsync_core::Kind;
use flagsync_core::fdv1::{Event, parse_event};
use flagsync_core::store::{ChangeSet, Store};
use libfuzzer_sys::fuzz_target;

const BASE: &[u8] = br#"{"data":{"flags":{"a":{"key":"a","version":100},"b":{"key":"b","version":5,"prerequisites":[{"key":"a"}]}},"segments":{"s":{"key":"s","version":100}}}}"#;

fuzz_target!(|input: (u8, &[u8])| {
    let (name, data) = input;
    let name = ["put", "patch", "delete", "other"][usize::from(name % 4)];
    let mut store = Store::new();
    let Ok(Event::Put(base)) = parse_event("put", &Bytes::from_static(BASE)) else {
        panic!("base data parses")
    };
    store.apply(ChangeSet::fdv1_full(base));
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
        Ok(Event::Put(changes)) => {
            let n = changes.iter().filter(|c| c.kind == Kind::Flag).count();
            store.apply(ChangeSet::fdv1_full(changes));
            assert!(store.data().iter_including_deleted(Kind::Flag).count() <= n);
        }
        _ => assert_eq!(store.data().len(Kind::Flag), before.len(Kind::Flag)),
    }
});
