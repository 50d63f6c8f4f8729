//! Tests of the request writer and the response reader, one file per topic; the helpers
//! they share are here.

use std::io::Write as _;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use proptest::prelude::*;

use super::*;

mod errors;
mod framing;
mod gzip_bodies;
mod properties;
mod requests;

type Transcript = Vec<Result<ResponseEvent, Error>>;

/// Feed `parts` (then EOF if `eof`), polling after each call; merge adjacent bodies.
fn transcript(config: Config, parts: &[&[u8]], eof: bool) -> Transcript {
    let mut reader = ResponseReader::new(config);
    let mut out: Transcript = Vec::new();
    let drain = |reader: &mut ResponseReader, out: &mut Transcript| {
        while let Some(event) = reader.poll_event() {
            match (out.last_mut(), event) {
                (Some(Ok(ResponseEvent::Body(prev))), Ok(ResponseEvent::Body(more))) => {
                    assert!(!more.is_empty(), "empty Body event");
                    *prev = [prev.as_ref(), more.as_ref()].concat().into();
                }
                (_, event) => out.push(event),
            }
        }
        assert!(
            reader.poll_event().is_none(),
            "poll after None must stay None"
        );
    };
    for part in parts {
        reader.handle_bytes(part);
        drain(&mut reader, &mut out);
    }
    if eof {
        reader.handle_eof();
        drain(&mut reader, &mut out);
    }
    out
}

/// Assert that `input` gives `expected` whole, split at every position, and byte by byte.
fn assert_all_splits(config: Config, input: &[u8], eof: bool, expected: &Transcript) {
    assert_eq!(&transcript(config, &[input], eof), expected, "whole input");
    for i in 0..=input.len() {
        let (a, b) = input.split_at(i);
        assert_eq!(&transcript(config, &[a, b], eof), expected, "split at {i}");
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(&transcript(config, &bytes, eof), expected, "byte by byte");
}

fn head(status: u16, reason: &str, headers: &[(&str, &str)]) -> Result<ResponseEvent, Error> {
    Ok(ResponseEvent::Head(ResponseHead {
        status,
        reason: reason.into(),
        headers: headers.iter().map(|&(n, v)| (n.into(), v.into())).collect(),
    }))
}

fn body(bytes: &[u8]) -> Result<ResponseEvent, Error> {
    Ok(ResponseEvent::Body(Bytes::copy_from_slice(bytes)))
}

const END: Result<ResponseEvent, Error> = Ok(ResponseEvent::End);

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    let _ = encoder.write_all(data);
    encoder.finish().unwrap_or_default()
}

fn limited(max_body_len: usize) -> Config {
    Config {
        max_body_len: Some(max_body_len),
        ..Config::default()
    }
}

/// Encode `data` as chunks of `size` bytes.
fn chunked(data: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in data.chunks(size) {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}
