//! Server-sent events: an incremental, sans-I/O parser for `text/event-stream` bodies.
//!
//! [`Parser`] implements the WHATWG "parse an event stream" algorithm exactly
//! (PROTOCOL.md A.2), not the quirks of any SDK's SSE library:
//!
//! - one UTF-8 BOM is stripped only at the very start of a stream, also when it is split
//!   across reads;
//! - lines end with CR, LF or CRLF, and a CRLF split across reads is one terminator;
//! - invalid UTF-8 becomes U+FFFD, never an error;
//! - `retry` takes ASCII digits only, an `id` containing NUL is ignored, an id-only block
//!   still commits the last event id, the event type resets after every dispatch;
//! - an unterminated event at the end of the stream is discarded;
//! - comments are surfaced as [`Item::Comment`] (LaunchDarkly heartbeats are comments);
//! - every buffer has a [`Config`] limit, and going over it is a typed [`Error`].
//!
//! The parser scans every input byte once for line terminators, eight bytes at a time,
//! so its cost is linear in the input however the stream is split into reads. Splitting
//! never changes the output, errors included. Reads passed as [`bytes::Bytes`] to
//! [`Parser::handle_chunk`] are not copied: an event's data is a slice of its read.
//!
//! # Example
//!
//! ```
//! use bytes::Bytes;
//! use flagsync_core::sse::{Config, Item, Parser};
//!
//! let mut parser = Parser::new(Config::default());
//! // The event arrives in two reads; the CRLF is split between them.
//! parser.handle_bytes(b":hi\nevent: put\r");
//! parser.handle_chunk(&Bytes::from_static(b"\nid: 7\ndata: {\"flags\":{}}\n\n"));
//!
//! assert_eq!(parser.poll_item(), Some(Ok(Item::Comment("hi".to_owned()))));
//! let Some(Ok(Item::Event(event))) = parser.poll_item() else {
//!     panic!("expected an event");
//! };
//! assert_eq!(event.event_type, "put");
//! assert_eq!(event.data_str(), r#"{"flags":{}}"#);
//! assert_eq!(event.id, "7");
//! assert_eq!(parser.poll_item(), None);
//!
//! // The connection closes; a reconnect sends `Last-Event-ID: 7`.
//! parser.handle_eof();
//! parser.reset();
//! assert_eq!(parser.last_event_id(), "7");
//! ```
#![deny(missing_docs)]
#![warn(unreachable_pub, clippy::use_self, elided_lifetimes_in_paths)]

mod borrowed;
mod item;
mod parser;
mod queue;
mod utf8;

#[cfg(test)]
mod tests;

pub use borrowed::{EventRef, ItemRef};
pub use item::{Event, Item, SharedStr};
pub use parser::Parser;

/// Limits on the buffers of a [`Parser`].
///
/// Going over a limit produces an in-band [`Error`] and fails the parser until
/// [`Parser::reset`]. Memory held by a parser stays within a small multiple of
/// `max_line_len + max_event_len` (buffers grow by doubling). The allocation of the last
/// long line is kept across events and [`Parser::reset`], so that the next long line can
/// reuse it once the consumer has dropped the event data that shares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Longest line accepted, in bytes, not counting its terminator (CR, LF or CRLF).
    ///
    /// A longer line is reported as [`Error::LineTooLong`] as soon as it is known to be
    /// too long, before it is buffered in full. Default: 64 MiB, because a LaunchDarkly
    /// `put` event carries the whole flag set on one `data` line (tens of MB).
    pub max_line_len: usize,
    /// Largest data buffer of one event, in bytes, counted as the WHATWG algorithm
    /// builds it: the decoded value of each `data` line plus one LF per line.
    ///
    /// A larger buffer is reported as [`Error::EventTooLarge`] when the `data` line that
    /// overflows it ends. Default: 64 MiB.
    pub max_event_len: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_line_len: 64 * 1024 * 1024,
            max_event_len: 64 * 1024 * 1024,
        }
    }
}

/// A limit of the [`Config`] was exceeded; the stream cannot be parsed further.
///
/// Errors are delivered by [`Parser::poll_item`] after every item completed before the
/// offending line. The parser then ignores input until [`Parser::reset`]; the caller is
/// expected to close the connection and reconnect.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A line was longer than [`Config::max_line_len`].
    #[error("sse line longer than {limit} bytes")]
    LineTooLong {
        /// The configured limit, in bytes.
        limit: usize,
    },
    /// The data buffer of an event grew beyond [`Config::max_event_len`].
    #[error("sse event data larger than {limit} bytes")]
    EventTooLarge {
        /// The configured limit, in bytes.
        limit: usize,
    },
}
