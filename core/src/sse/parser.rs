//! The incremental WHATWG event-stream parser.
//!
//! Spec: <https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation>.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::mem;

use bytes::{Buf, BytesMut};

use super::utf8::Utf8Progress;
use super::{Config, Error, Event, Item, SharedStr};

/// The UTF-8 byte order mark, stripped once at the start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Size of the shared allocation that small events' data is carved from.
const DATA_ARENA_LEN: usize = 16 * 1024;

/// Line buffers larger than this are released after their line instead of being kept.
const MAX_RETAINED_LINE_CAPACITY: usize = 64 * 1024;

/// Event types that need no allocation (FDv1 and FDv2 names, and the default).
const KNOWN_TYPES: [&str; 11] = [
    "put",
    "patch",
    "delete",
    "message",
    "server-intent",
    "put-object",
    "delete-object",
    "payload-transferred",
    "heart-beat",
    "goodbye",
    "error",
];

/// Whether the start of the stream may still be a BOM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BomState {
    /// This many leading bytes of the stream matched the BOM so far (0 to 2).
    Matching(usize),
    /// The BOM was stripped, or the stream did not start with one.
    Done,
}

/// An incremental parser for one `text/event-stream` connection after another.
///
/// Drive it with [`handle_bytes`](Self::handle_bytes) for every read and
/// [`handle_eof`](Self::handle_eof) when the connection closes, and drain
/// [`poll_item`](Self::poll_item) after each call. Before the next connection, call
/// [`reset`](Self::reset); the last event id survives it.
#[derive(Debug, Clone)]
pub struct Parser {
    config: Config,
    bom: BomState,
    /// The last read ended with CR: an LF at the start of the next read completes it.
    pending_cr: bool,
    /// The unterminated line carried over from earlier reads.
    line: BytesMut,
    /// UTF-8 validation progress over `line`.
    line_utf8: Utf8Progress,
    /// The data buffer without its final LF (valid UTF-8); meaningful when `has_data`.
    data: BytesMut,
    /// At least one `data` field since the last dispatch (the spec's buffer is non-empty).
    has_data: bool,
    /// `data` is the allocation of a large line (moved in by `take_data_line`).
    data_is_line: bool,
    /// The event type buffer (`""`: none, dispatched as `message`).
    event_type: SharedStr,
    /// The last event type that was allocated, reused while the stream repeats it.
    last_type: SharedStr,
    /// The spec's "last event ID buffer": set by `id` fields, committed at dispatch.
    id_buffer: SharedStr,
    /// An `id` field was seen since the last dispatch (`id_buffer` may differ).
    id_changed: bool,
    /// The committed last event id.
    last_event_id: SharedStr,
    /// The allocation of the last large line, kept after its event was dispatched: once
    /// the consumer drops that event's data, the next large line reuses it instead of
    /// faulting in a fresh buffer (a `put` of tens of MB per connection).
    retained: BytesMut,
    items: VecDeque<Result<Item, Error>>,
    /// A limit was exceeded: input is ignored until `reset`.
    failed: bool,
}

impl Parser {
    /// Create a parser for the start of a stream, with no last event id.
    pub fn new(config: Config) -> Self {
        Self {
            config,
            bom: BomState::Matching(0),
            pending_cr: false,
            line: BytesMut::new(),
            line_utf8: Utf8Progress::default(),
            data: BytesMut::new(),
            has_data: false,
            data_is_line: false,
            event_type: SharedStr::default(),
            last_type: SharedStr::default(),
            id_buffer: SharedStr::default(),
            id_changed: false,
            last_event_id: SharedStr::default(),
            retained: BytesMut::new(),
            items: VecDeque::new(),
            failed: false,
        }
    }

    /// Feed the next bytes of the stream, any size (borrowed; copy only what is kept).
    ///
    /// Drain [`poll_item`](Self::poll_item) afterwards. How the stream is split into
    /// reads never changes the items produced. Ignored after an [`Error`] until
    /// [`reset`](Self::reset).
    pub fn handle_bytes(&mut self, bytes: &[u8]) {
        if self.failed || bytes.is_empty() {
            return;
        }
        let mut input = bytes;
        if let BomState::Matching(matched) = self.bom {
            let expected = BOM.get(matched..).unwrap_or_default();
            let common = expected
                .iter()
                .zip(input)
                .take_while(|(want, got)| want == got)
                .count();
            if common == expected.len() {
                self.bom = BomState::Done;
                input = input.get(common..).unwrap_or_default();
            } else if common == input.len() {
                self.bom = BomState::Matching(matched + common);
                return;
            } else {
                // Not a BOM after all: the bytes held back so far are ordinary input.
                self.bom = BomState::Done;
                self.feed(BOM.get(..matched).unwrap_or_default());
            }
        }
        self.feed(input);
    }

    /// End of the stream (connection closed).
    ///
    /// A pending unterminated line is discarded, and so is a pending event: no dispatch,
    /// and neither a `retry` nor an `id` of the unfinished block takes effect. Drain
    /// [`poll_item`](Self::poll_item) afterwards, then call [`reset`](Self::reset) before
    /// feeding the next connection.
    pub fn handle_eof(&mut self) {
        if self.failed {
            return;
        }
        self.discard_pending();
    }

    /// Prepare for a new connection.
    ///
    /// Clears all per-connection state: buffers, items not yet polled, the BOM state
    /// (back to "expect a BOM"), the pending event and a sticky error. Keeps the last
    /// event id.
    pub fn reset(&mut self) {
        self.discard_pending();
        self.line = BytesMut::new();
        self.bom = BomState::Matching(0);
        self.items.clear();
        self.failed = false;
    }

    /// Return the next parsed item or error, in stream order.
    ///
    /// Errors are in-band: items completed before the offending line come first, then the
    /// error. After an error the parser is failed: it ignores input until
    /// [`reset`](Self::reset), and this returns `None` once the error has been returned.
    pub fn poll_item(&mut self) -> Option<Result<Item, Error>> {
        self.items.pop_front()
    }

    /// The last event id committed so far (`""` if none).
    ///
    /// This is what a reconnect sends as `Last-Event-ID`; omit the header when empty.
    /// An id is committed when its block is dispatched by a blank line.
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// Drop the unterminated line and the unfinished event; uncommitted ids revert.
    fn discard_pending(&mut self) {
        self.pending_cr = false;
        self.clear_line();
        self.line_utf8 = Utf8Progress::default();
        self.data = BytesMut::new();
        self.has_data = false;
        self.data_is_line = false;
        self.event_type = SharedStr::default();
        self.id_buffer.clone_from(&self.last_event_id);
        self.id_changed = false;
    }

    fn clear_line(&mut self) {
        if self.line.capacity() > MAX_RETAINED_LINE_CAPACITY {
            self.line.clear();
            self.retained = mem::take(&mut self.line);
        } else {
            self.line.clear();
        }
    }

    fn fail(&mut self, error: Error) {
        self.items.push_back(Err(error));
        self.failed = true;
        self.line = BytesMut::new();
        self.data = BytesMut::new();
        self.retained = BytesMut::new();
    }

    /// Split input (after the BOM) into lines. Each byte is scanned once.
    fn feed(&mut self, mut input: &[u8]) {
        if self.pending_cr
            && let Some((&first, rest)) = input.split_first()
        {
            self.pending_cr = false;
            if first == b'\n' {
                input = rest;
            }
        }
        while !self.failed {
            let Some(end) = find_line_end(input) else {
                self.buffer_partial_line(input);
                return;
            };
            let Some((content, rest)) = input.split_at_checked(end) else {
                return;
            };
            let Some((&terminator, rest)) = rest.split_first() else {
                return;
            };
            input = rest;
            if terminator == b'\r' {
                match input.split_first() {
                    Some((b'\n', after_lf)) => input = after_lf,
                    Some(_) => {}
                    None => self.pending_cr = true,
                }
            }
            self.complete_line(content);
        }
    }

    /// Keep the start of a line whose terminator has not arrived yet.
    fn buffer_partial_line(&mut self, input: &[u8]) {
        if input.is_empty() {
            return;
        }
        if self.line.len().saturating_add(input.len()) > self.config.max_line_len {
            self.fail(Error::LineTooLong {
                limit: self.config.max_line_len,
            });
            return;
        }
        self.reserve_line(input.len());
        self.line.extend_from_slice(input);
        self.line_utf8.advance(&self.line);
    }

    /// Make room for `additional` more bytes in the line buffer.
    ///
    /// A line that outgrows the buffer takes over the retained allocation of an earlier
    /// large line if nobody else holds it any more; otherwise the buffer doubles.
    fn reserve_line(&mut self, additional: usize) {
        let len = self.line.len();
        if self.line.capacity() - len >= additional {
            return;
        }
        let wanted = len + additional;
        if self.retained.capacity() < wanted {
            // Move a uniquely owned allocation's free space to the front (never allocates).
            let whole = self.retained.capacity() + 1;
            let _reclaimed = self.retained.try_reclaim(whole);
        }
        if self.retained.capacity() >= wanted {
            let mut reused = mem::take(&mut self.retained);
            reused.clear();
            reused.extend_from_slice(&self.line);
            self.line = reused;
            return;
        }
        self.line.reserve(additional.max(len));
    }

    /// A terminator arrived: `content` is the end of the line (or all of it).
    fn complete_line(&mut self, content: &[u8]) {
        let limit = self.config.max_line_len;
        if self.line.len().saturating_add(content.len()) > limit {
            self.fail(Error::LineTooLong { limit });
            return;
        }
        if self.line.is_empty() {
            // The whole line is in this read: parse it in place, no copy.
            self.process_line(content);
            return;
        }
        self.reserve_line(content.len());
        self.line.extend_from_slice(content);
        let valid = self.line_utf8.is_valid(&self.line);
        self.line_utf8 = Utf8Progress::default();
        let line = mem::take(&mut self.line);
        if valid
            && !self.has_data
            && let Some(([b'd', b'a', b't', b'a'], value_start)) = split_field(&line)
        {
            // The first data line of an event: the line buffer becomes the data buffer
            // without a copy (a `put` line is tens of MB).
            self.take_data_line(line, value_start);
            return;
        }
        self.process_line(&line);
        self.line = line;
        self.clear_line();
    }

    /// The first `data` line of an event, already validated, moved into the data buffer.
    fn take_data_line(&mut self, mut line: BytesMut, value_start: usize) {
        line.advance(value_start.min(line.len()));
        let limit = self.config.max_event_len;
        if line.len().saturating_add(1) > limit {
            self.fail(Error::EventTooLarge { limit });
            return;
        }
        self.data = line;
        self.data_is_line = true;
        self.has_data = true;
    }

    /// Interpret one complete line (without its terminator).
    fn process_line(&mut self, line: &[u8]) {
        if let Some((b':', text)) = line.split_first() {
            // A comment: everything after the leading colon, spaces included.
            let text = decode(text).into_owned();
            self.items.push_back(Ok(Item::Comment(text)));
            return;
        }
        let Some((name, value_start)) = split_field(line) else {
            self.dispatch();
            return;
        };
        let value = line.get(value_start..).unwrap_or_default();
        match name {
            [b'd', b'a', b't', b'a'] => self.append_data(value),
            [b'e', b'v', b'e', b'n', b't'] => self.set_event_type(value),
            // An id containing NUL is ignored.
            [b'i', b'd'] if memchr::memchr(0, value).is_none() => {
                if self.id_buffer.as_bytes() != value {
                    self.id_buffer = SharedStr::from(&*decode(value));
                }
                self.id_changed = true;
            }
            [b'r', b'e', b't', b'r', b'y'] => {
                if let Some(millis) = parse_retry(value) {
                    self.items.push_back(Ok(Item::Retry(millis)));
                }
            }
            _ => {}
        }
    }

    /// An `event` field: set the type buffer, reusing a known or repeated type's string.
    ///
    /// Raw bytes equal to a valid string are that string, so a repeated type is
    /// recognised without decoding it.
    fn set_event_type(&mut self, value: &[u8]) {
        if self.event_type.as_bytes() == value {
            return;
        }
        self.event_type =
            if let Some(known) = KNOWN_TYPES.iter().find(|known| known.as_bytes() == value) {
                SharedStr::from_static(known)
            } else if self.last_type.as_bytes() == value {
                self.last_type.clone()
            } else {
                self.last_type = SharedStr::from(&*decode(value));
                self.last_type.clone()
            };
    }

    /// Append a `data` value and its LF to the data buffer.
    fn append_data(&mut self, value: &[u8]) {
        let value: Cow<'_, [u8]> = if value.is_ascii() {
            Cow::Borrowed(value)
        } else {
            match decode(value) {
                Cow::Borrowed(text) => Cow::Borrowed(text.as_bytes()),
                Cow::Owned(text) => Cow::Owned(text.into_bytes()),
            }
        };
        // The spec's buffer holds every value plus one LF each; `data` omits the last LF.
        let current = if self.has_data {
            self.data.len() + 1
        } else {
            0
        };
        let limit = self.config.max_event_len;
        if current.saturating_add(value.len()).saturating_add(1) > limit {
            self.fail(Error::EventTooLarge { limit });
            return;
        }
        self.reserve_data(value.len() + 1);
        if self.has_data {
            self.data.extend_from_slice(b"\n");
        }
        self.data.extend_from_slice(&value);
        self.has_data = true;
    }

    /// Make room for `additional` more data bytes.
    ///
    /// Small events share one arena allocation: each dispatch splits its data off the
    /// front (a reference count, no copy), so a burst of `patch` events costs no
    /// allocation per event.
    fn reserve_data(&mut self, additional: usize) {
        let spare = self.data.capacity() - self.data.len();
        if spare >= additional {
            return;
        }
        if !self.has_data && additional < DATA_ARENA_LEN {
            self.data = BytesMut::with_capacity(DATA_ARENA_LEN);
        } else {
            self.data.reserve(additional);
        }
    }

    /// A blank line: commit the id, and dispatch the event if there is data.
    fn dispatch(&mut self) {
        if self.id_changed {
            self.id_changed = false;
            self.last_event_id.clone_from(&self.id_buffer);
        }
        let event_type = mem::take(&mut self.event_type);
        if !self.has_data {
            return;
        }
        self.has_data = false;
        let data = self.data.split().freeze();
        if mem::take(&mut self.data_is_line) {
            // The rest of a large line's allocation: reusable once `data` is dropped.
            self.retained = mem::take(&mut self.data);
        }
        let event_type = if event_type.is_empty() {
            SharedStr::from_static("message")
        } else {
            event_type
        };
        self.items.push_back(Ok(Item::Event(Event {
            event_type,
            data,
            id: self.last_event_id.clone(),
        })));
    }
}

/// Split a non-empty line into its field name and the offset of its value.
///
/// The name runs up to the first colon (empty for a comment); one space after the colon
/// is not part of the value. A line without a colon is all name, with an empty value.
/// Returns `None` for a blank line.
fn split_field(line: &[u8]) -> Option<(&[u8], usize)> {
    if line.is_empty() {
        return None;
    }
    let Some(colon) = find_colon(line) else {
        return Some((line, line.len()));
    };
    let name = line.get(..colon).unwrap_or_default();
    let value_start = if line.get(colon + 1) == Some(&b' ') {
        colon + 2
    } else {
        colon + 1
    };
    Some((name, value_start))
}

/// A `retry` value: ASCII digits only, not empty; saturates instead of overflowing.
fn parse_retry(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(value.iter().fold(0_u64, |millis, digit| {
        millis
            .saturating_mul(10)
            .saturating_add(u64::from(digit - b'0'))
    }))
}

/// Decode UTF-8, replacing invalid sequences with U+FFFD (validation first: the common
/// valid case does not go through the lossy decoder).
fn decode(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Bytes scanned one by one before handing over to `memchr`: its dispatch costs more
/// than a short scalar scan, and field names are short.
const SCALAR_HEAD: usize = 16;

/// Bytes scanned a word at a time before handing over to `memchr`: most SSE lines
/// (blank lines, `event: patch`, small `data`) are shorter.
const WORD_HEAD: usize = 128;

/// Index of the first CR or LF. Each byte is looked at once.
fn find_line_end(bytes: &[u8]) -> Option<usize> {
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    const LF: u64 = u64::from_le_bytes([b'\n'; 8]);
    const CR: u64 = u64::from_le_bytes([b'\r'; 8]);
    let head = bytes.get(..WORD_HEAD).unwrap_or(bytes);
    let mut words = head.chunks_exact(8);
    let mut offset = 0;
    for word in words.by_ref() {
        let word = u64::from_le_bytes(word.try_into().unwrap_or_default());
        // Exact zero-byte test (no false positives): a byte of `x` is zero iff the
        // high bit of `!(((x & 0x7F..) + 0x7F..) | x) & 0x80..` is set.
        let zero = |x: u64| !(((x & !HIGH).wrapping_add(!HIGH)) | x) & HIGH;
        let found = zero(word ^ LF) | zero(word ^ CR);
        if found != 0 {
            return Some(offset + (found.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    let rest = words.remainder();
    if let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
        return Some(offset + end);
    }
    let tail = bytes.get(head.len()..)?;
    memchr::memchr2(b'\n', b'\r', tail).map(|end| end + head.len())
}

/// Index of the first colon (field names are short).
fn find_colon(bytes: &[u8]) -> Option<usize> {
    let head = bytes.get(..SCALAR_HEAD).unwrap_or(bytes);
    if let Some(colon) = head.iter().position(|&b| b == b':') {
        return Some(colon);
    }
    let tail = bytes.get(head.len()..)?;
    memchr::memchr(b':', tail).map(|colon| colon + head.len())
}
