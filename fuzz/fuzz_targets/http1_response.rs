//! Response reader on arbitrary bytes: never panics, and splitting the input at a
//! fuzzer-chosen point never changes the transcript (events, bodies concatenated, errors).
#![no_main]
use flagsync_core::http1::{Config, ResponseEvent, ResponseReader};

fn transcript(parts: &[&[u8]]) -> Vec<Result<ResponseEvent, flagsync_core::http1::Error>> {
    let config = Config {
        max_head_len: 1024,
        max_headers: 16,
        max_body_len: Some(64 * 1024),
        ..Config::default()
    };
    let mut reader = ResponseReader::new(config);
    let mut out = Vec::new();
    for part in parts.iter().map(Some).chain([None]) {
        match part {
            Some(bytes) => reader.handle_bytes(bytes),
            None => reader.handle_eof(),
        }
        while let Some(event) = reader.poll_event() {
            match (out.last_mut(), event) {
                (Some(Ok(ResponseEvent::Body(a))), Ok(ResponseEvent::Body(b))) => {
                    *a = [&a[..], &b[..]].concat().into()
                }
                (_, event) => out.push(event),
            }
        }
    }
    // Known limitation: how many bytes decoded just before corrupt gzip data are
    // delivered depends on the split (miniz_oxide drops its window on a data error).
    if out.last() == Some(&Err(flagsync_core::http1::Error::Gzip)) {
        out.retain(|e| !matches!(e, Ok(ResponseEvent::Body(_))));
    }
    out
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let seed = data.iter().take(2).fold(0, |n, &b| n << 8 | usize::from(b));
    let split = seed % (data.len() + 1);
    let (a, b) = data.split_at(split);
    assert_eq!(transcript(&[data]), transcript(&[a, b]));
});
