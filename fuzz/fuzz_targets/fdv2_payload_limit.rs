//! FDv2 events through a protocol machine with small, arbitrary payload limits (issue
//! 33): what it holds never passes either bound, a payload cut off at a bound never
//! commits (not even when its `payload-transferred` follows), and the store it feeds
//! never panics.
#![no_main]

use bytes::Bytes;
use flagsync_core::fdv2::{Action, Error, PayloadLimits, Protocol, parse_event};
use flagsync_core::store::Store;
use libfuzzer_sys::fuzz_target;

const NAMES: [&str; 6] = [
    "server-intent",
    "put-object",
    "delete-object",
    "payload-transferred",
    "goodbye",
    "error",
];

/// Well-formed event data, so that the machine gets past parsing most of the time.
fn data(name: &str, n: u8, raw: &[u8]) -> Vec<u8> {
    let key = format!("k{}", n % 8);
    let pad = "x".repeat(usize::from(n) * 3);
    match name {
        "server-intent" => {
            let code = ["xfer-full", "xfer-changes", "none"][usize::from(n) % 3];
            format!(r#"{{"payloads":[{{"id":"p","target":1,"intentCode":"{code}"}}]}}"#).into_bytes()
        }
        "put-object" => format!(
            r#"{{"version":{n},"kind":"flag","key":"{key}","object":{{"key":"{key}","version":{n},"pad":"{pad}"}}}}"#
        )
        .into_bytes(),
        "delete-object" => format!(r#"{{"version":{n},"kind":"segment","key":"{key}"}}"#).into_bytes(),
        "payload-transferred" => format!(r#"{{"state":"s{n}","version":{n}}}"#).into_bytes(),
        _ => raw.to_vec(),
    }
}

/// An event: a name (index), a byte for its data (and whether to use the raw bytes), raw bytes.
type Step<'a> = (u8, u8, &'a [u8]);

fuzz_target!(|input: (u16, u8, Vec<Step<'_>>)| {
    let (max_bytes, max_objects, events) = input;
    let limits = PayloadLimits {
        max_bytes: usize::from(max_bytes % 2048),
        max_objects: usize::from(max_objects % 16),
    };
    let mut protocol = Protocol::with_limits(limits);
    let mut store = Store::new();
    let mut cut_off = false;
    for (name, n, raw) in events {
        let name = NAMES[usize::from(name) % NAMES.len()];
        // Mostly well-formed data; raw bytes when the low bit of `n` says so.
        let bytes = if n & 1 == 1 {
            raw.to_vec()
        } else {
            data(name, n, raw)
        };
        let Ok(event) = parse_event(name, &Bytes::from(bytes)) else {
            continue;
        };
        let intent = name == "server-intent";
        let result = protocol.handle_event(event);
        let held = protocol.builder();
        assert!(
            held.held_bytes() <= limits.max_bytes,
            "{} > {limits:?}",
            held.held_bytes()
        );
        assert!(held.changes().len() <= limits.max_objects);
        match result {
            Err(Error::PayloadTooLarge { .. } | Error::TooManyObjects { .. }) => {
                assert!(held.changes().is_empty() && held.intent().is_none());
                cut_off = true;
            }
            Ok(Action::Apply(cs)) => {
                assert!(!cut_off || intent, "a cut-off payload committed");
                store.apply(cs);
            }
            _ => {}
        }
        if intent {
            cut_off = false;
        }
    }
});
