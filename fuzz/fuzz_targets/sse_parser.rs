//! Feeding the SSE parser in pieces gives the same transcript as feeding it whole, whether
//! each piece is borrowed (`handle_bytes`) or shared (`handle_chunk`), and whether the
//! items are taken owned (`poll_item`) or read in place (`poll_ref`).
#![no_main]

use bytes::Bytes;
use flagsync_core::sse::{Config, Parser};

/// Drain `parser`, owned or in place.
fn drain(parser: &mut Parser, in_place: bool, out: &mut Vec<String>) {
    if in_place {
        while let Some(item) = parser.poll_ref() {
            out.push(format!("{:?}", item.map(|item| item.to_item())));
        }
    } else {
        out.extend(std::iter::from_fn(|| parser.poll_item()).map(|item| format!("{item:?}")));
    }
}

/// Feed each piece (shared if flagged), draining after every call (in place if flagged),
/// then EOF.
fn transcript<'a>(
    pieces: impl IntoIterator<Item = (&'a [u8], bool, bool)>,
) -> (Vec<String>, String) {
    let config = Config {
        max_line_len: 256,
        max_event_len: 256,
    };
    let mut parser = Parser::new(config);
    let mut out = Vec::new();
    let mut last_in_place = false;
    for (piece, shared, in_place) in pieces {
        if shared {
            parser.handle_chunk(&Bytes::copy_from_slice(piece));
        } else {
            parser.handle_bytes(piece);
        }
        drain(&mut parser, in_place, &mut out);
        last_in_place = in_place;
    }
    parser.handle_eof();
    drain(&mut parser, last_in_place, &mut out);
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
        pieces.push((piece, state & 0x100 != 0, state & 0x200 != 0));
        rest = tail;
    }
    let whole = transcript([(bytes, false, false)]);
    assert_eq!(whole, transcript([(bytes, true, true)]));
    assert_eq!(whole, transcript(pieces));
});
