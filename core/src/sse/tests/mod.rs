//! Unit and property tests for the SSE parser (PROTOCOL.md A.2, Part E 1–15), one file
//! per topic; the helpers they share are here.

use bytes::Bytes;
use proptest::prelude::*;

use super::{Config, Error, Event, Item, ItemRef, Parser, SharedStr};

mod fields;
mod framing;
mod limits;
mod properties;
mod reconnect;
mod shared_reads;

type Transcript = Vec<Result<Item, Error>>;

/// Feed `chunks` one read each, drain after every call, end with EOF.
fn run_with<'a>(
    config: Config,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> (Transcript, String) {
    let mut parser = Parser::new(config);
    let mut out = Vec::new();
    for chunk in chunks {
        parser.handle_bytes(chunk);
        out.extend(std::iter::from_fn(|| parser.poll_item()));
    }
    parser.handle_eof();
    out.extend(std::iter::from_fn(|| parser.poll_item()));
    (out, parser.last_event_id().to_owned())
}

/// The same as `run_with`, through `handle_chunk`.
fn run_shared<'a>(
    config: Config,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> (Transcript, String) {
    let mut parser = Parser::new(config);
    let mut out = Vec::new();
    for chunk in chunks {
        parser.handle_chunk(&Bytes::copy_from_slice(chunk));
        out.extend(std::iter::from_fn(|| parser.poll_item()));
    }
    parser.handle_eof();
    out.extend(std::iter::from_fn(|| parser.poll_item()));
    (out, parser.last_event_id().to_owned())
}

fn run(chunks: &[&[u8]]) -> Transcript {
    run_with(Config::default(), chunks.iter().copied()).0
}

fn event(event_type: &str, data: &str, id: &str) -> Result<Item, Error> {
    Ok(Item::Event(Event {
        event_type: event_type.into(),
        data: Bytes::copy_from_slice(data.as_bytes()),
        id: id.into(),
    }))
}

fn message(data: &str) -> Result<Item, Error> {
    event("message", data, "")
}

fn comment(text: &str) -> Result<Item, Error> {
    Ok(Item::Comment(text.to_owned()))
}

/// Every way of splitting `stream` in two gives `expected`.
fn assert_every_split(stream: &[u8], expected: &Transcript) {
    for at in 0..=stream.len() {
        let (a, b) = stream.split_at(at);
        assert_eq!(&run(&[a, b]), expected, "split at {at}");
    }
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(&run(&bytes), expected, "one byte per read");
}

/// A config with the given line and event limits.
fn small(max_line_len: usize, max_event_len: usize) -> Config {
    Config {
        max_line_len,
        max_event_len,
    }
}
