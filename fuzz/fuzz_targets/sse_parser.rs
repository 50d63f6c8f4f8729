//! Feeding the SSE parser in pieces gives the same transcript as feeding it whole, whether
//! each piece is borrowed (`handle_bytes`) or shared (`handle_chunk`), whether the items
//! are taken owned (`poll_item`) or read in place (`poll_ref`), and whether the line
//! still arriving is taken after a read (`take_pending_data`: the pieces taken, put back
//! in front of the next event's data, give the same data).
#![no_main]

use bytes::Bytes;
use flagsync_core::sse::{Config, Error, Item, Parser};

/// Drain `parser`, owned or in place; bytes `taken` before go in front of the data of
/// the first event.
fn drain(parser: &mut Parser, in_place: bool, taken: &mut Vec<u8>, out: &mut Vec<String>) {
    let mut put = |item: Result<Item, Error>| {
        let item = item.map(|item| match item {
            Item::Event(mut event) if !taken.is_empty() => {
                taken.extend_from_slice(&event.data);
                event.data = Bytes::from(std::mem::take(taken));
                Item::Event(event)
            }
            other => other,
        });
        out.push(format!("{item:?}"));
    };
    if in_place {
        while let Some(item) = parser.poll_ref() {
            put(item.map(|item| item.to_item()));
        }
    } else {
        while let Some(item) = parser.poll_item() {
            put(item);
        }
    }
}

/// Feed each piece (shared if flagged), draining after every call (in place if flagged),
/// then taking the pending data (if flagged), then EOF.
fn transcript<'a>(
    pieces: impl IntoIterator<Item = (&'a [u8], bool, bool, bool)>,
) -> (Vec<String>, String) {
    let config = Config {
        max_line_len: 256,
        max_event_len: 256,
    };
    let mut parser = Parser::new(config);
    let mut out = Vec::new();
    let mut taken = Vec::new();
    let mut last_in_place = false;
    for (piece, shared, in_place, take) in pieces {
        if shared {
            parser.handle_chunk(&Bytes::copy_from_slice(piece));
        } else {
            parser.handle_bytes(piece);
        }
        drain(&mut parser, in_place, &mut taken, &mut out);
        last_in_place = in_place;
        if take && let Some(piece) = parser.take_pending_data() {
            assert!(
                std::str::from_utf8(&piece).is_ok(),
                "taken data is whole characters"
            );
            taken.extend_from_slice(&piece);
        }
    }
    parser.handle_eof();
    // Taken data of an event that never came is dropped with it.
    taken.clear();
    drain(&mut parser, last_in_place, &mut taken, &mut out);
    (out, parser.last_event_id().to_owned())
}

libfuzzer_sys::fuzz_target!(|input: &[u8]| {
    // The first two bytes seed the piece sizes (1 to 64 bytes each) and kinds.
    let (seed, bytes) = match input {
        [a, b, rest @ ..] => (u16::from_le_bytes([*a, *b]), rest),
        _ => return,
    };
    let mut state = u32::from(seed) | 1;
    let mut pieces = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let (piece, tail) = rest.split_at((state % 64 + 1).min(rest.len() as u32) as usize);
        pieces.push((
            piece,
            state & 0x100 != 0,
            state & 0x200 != 0,
            state & 0x400 != 0,
        ));
        rest = tail;
    }
    let whole = transcript([(bytes, false, false, false)]);
    assert_eq!(whole, transcript([(bytes, true, true, false)]));
    assert_eq!(whole, transcript(pieces));
});
