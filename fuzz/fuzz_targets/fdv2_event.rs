//! A sequence of FDv2 events (name chosen by a byte, data from the input) through the
//! protocol machine into a store: no panic; an applied change set leaves every one of
//! its keys stored with its last item (no per-item version check, PROTOCOL.md B §5.8),
//! and a full transfer leaves nothing else.
#![no_main]

use std::collections::HashMap;

use bytes::Bytes;
use flagsync_core::Kind;
use flagsync_core::fdv2::{Action, Protocol, parse_event};
use flagsync_core::store::{Store, Transfer};
use libfuzzer_sys::fuzz_target;

const NAMES: [&str; 9] = [
    "server-intent",
    "put-object",
    "delete-object",
    "payload-transferred",
    "goodbye",
    "error",
    "heart-beat",
    "heartbeat",
    "other",
];

fuzz_target!(|events: Vec<(u8, &[u8])>| {
    let mut protocol = Protocol::new();
    let mut store = Store::new();
    for (name, data) in events {
        let name = NAMES[usize::from(name) % NAMES.len()];
        let action = parse_event(name, &Bytes::copy_from_slice(data))
            .and_then(|event| protocol.handle_event(event));
        let Ok(Action::Apply(cs)) = action else {
            continue;
        };
        let full = cs.transfer == Transfer::Full;
        let mut last = HashMap::new();
        for c in &cs.changes {
            last.insert((c.kind, c.key.clone()), c.item.clone());
        }
        let none = cs.transfer == Transfer::None;
        store.apply(cs);
        if none {
            continue;
        }
        for ((kind, key), item) in &last {
            assert_eq!(store.data().get_including_deleted(*kind, key), Some(item));
        }
        if full {
            let stored: usize = Kind::ALL
                .into_iter()
                .map(|k| store.data().iter_including_deleted(k).count())
                .sum();
            assert_eq!(stored, last.len());
        }
    }
});
