//! An FDv2 polling body read as it arrives (`fdv2::PollReader`, issue 42), cut anywhere,
//! against the whole-body parse (`fdv2::parse_poll_or_fdv1_with`): the same answer,
//! errors included, with and without the store's data to share buffers with; no panic.
#![no_main]

use bytes::Bytes;
use flagsync_core::fdv2::{PayloadLimits, PollReader, parse_poll_or_fdv1_with};
use flagsync_core::store::Store;
use libfuzzer_sys::fuzz_target;

/// The opening most inputs get, so that the reader's element scan is reached.
const OPENING: &[u8] =
    br#"{"events":[{"event":"server-intent","data":{"payloads":[{"intentCode":"xfer-full"}]}},"#;

fuzz_target!(|input: (u8, bool, u16, &[u8])| {
    let (cut, opened, max_bytes, raw) = input;
    let mut body = Vec::with_capacity(OPENING.len() + raw.len());
    if opened {
        body.extend_from_slice(OPENING);
    }
    body.extend_from_slice(raw);
    let limits = PayloadLimits::for_bytes(usize::from(max_bytes).max(64));
    let expected = parse_poll_or_fdv1_with(&Bytes::copy_from_slice(&body), limits);
    // The store as the answer leaves it: a second reading shares its buffers.
    let mut store = Store::new();
    if let Ok(cs) = &expected {
        store.apply(cs.clone());
    }
    let stored = store.snapshot();
    for with_store in [false, true] {
        let mut reader = PollReader::new(limits);
        for piece in body.chunks(usize::from(cut % 64) + 1) {
            reader.feed(piece, with_store.then_some(&stored));
        }
        assert_eq!(
            reader.finish(),
            expected,
            "cut {} store {with_store}",
            cut % 64 + 1
        );
    }
});
