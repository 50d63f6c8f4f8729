//! FDv1 event data under each event name, applied to a populated store: no panic, a
//! patch or delete never moves a version backwards, and a put replaces everything. A
//! `put` read ahead in pieces (cut where the first data byte says) parses exactly as
//! the whole data does.
#![no_main]

use bytes::Bytes;
use flagsync_core::Kind;
use flagsync_core::fdv1::{Event, PutPrescan, parse_event, parse_put_prescanned};
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
    let data = Bytes::copy_from_slice(data);
    let parsed = parse_event(name, &data);
    if name == "put" {
        let step = data.first().map_or(1, |b| usize::from(b % 32) + 1);
        let mut prescan = PutPrescan::new();
        let mut at = 0;
        while at + step < data.len() {
            prescan.advance(&data.slice(at..at + step));
            at += step;
        }
        assert_eq!(prescan.data(&data.slice(at..)), data);
        assert_eq!(parse_put_prescanned(&data.slice(at..), prescan), parsed);
    }
    match parsed {
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
