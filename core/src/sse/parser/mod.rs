//! The incremental WHATWG event-stream parser.
//!
//! Spec: <https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation>.
//!
//! This file holds the [`Parser`] state and its public calls. The work is split by
//! what it operates on:
//!
//! - `lines`: a read split into lines, the buffered unterminated line, large `data`
//!   lines taken without a copy, and the line length limit;
//! - `line_ends`: the word-at-a-time scan for CR and LF;
//! - `fields`: a complete line interpreted as a comment or field, the event being built
//!   (and its size limit), and its dispatch to the queue;
//! - `syntax`: byte-level helpers for field names, `retry` values and UTF-8 decoding.

use std::mem;

use bytes::{Buf, Bytes, BytesMut};

use super::queue::{EventType, Queue};
use super::utf8::Utf8Progress;
use super::{Config, Error, Item, ItemRef, SharedStr};

mod fields;
mod line_ends;
mod lines;
mod syntax;

/// The UTF-8 byte order mark, stripped once at the start of a stream.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Size of the shared allocation that the data of small events is copied into when it
/// cannot be a slice of the read (several `data` lines, an event across reads, invalid
/// UTF-8).
const DATA_ARENA_LEN: usize = 16 * 1024;

/// Line buffers larger than this are released after their line instead of being kept.
const MAX_RETAINED_LINE_CAPACITY: usize = 64 * 1024;

/// Where the bytes passed to `Parser::feed` come from.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// The end of the shared read, which ends at offset `end`.
    Shared { end: usize },
    /// The end of a borrowed read.
    Borrowed,
    /// Bytes held back while the start of the stream looked like a BOM.
    Held,
}

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
/// Drive it with [`handle_chunk`](Self::handle_chunk) (or
/// [`handle_bytes`](Self::handle_bytes)) for every read and
/// [`handle_eof`](Self::handle_eof) when the connection closes, and drain
/// [`poll_item`](Self::poll_item) after each call. Before the next connection, call
/// [`reset`](Self::reset); the last event id survives it.
///
/// The hot path is an event whose `data` is one line inside one read, the shape of every
/// LaunchDarkly `patch`: its line ends are found eight bytes at a time, the blank line
/// that ends it is taken with the `data` line, it is queued as a few numbers, and its
/// data is handed out as a slice of the read (a reference count, no copy).
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
    /// Bytes of the unterminated line taken by `take_pending_data`, its `data:` field
    /// name included (0: none). When non-zero, `line` holds the rest of the value of the
    /// pending event's first `data` line, without the field name.
    line_taken: usize,
    /// Bytes of the pending event's data taken by `take_pending_data` (they come
    /// before the data buffer); they count towards the event's size limit until it is
    /// dispatched.
    data_taken: usize,
    /// Between reads: the part of the last shared read that continued a line being
    /// taken, kept as a slice of the read (no copy) for `take_pending_data`. It comes
    /// before `line`, which then holds at most an incomplete character.
    stash: Option<Bytes>,
    /// The data arena. Its first `done` bytes are the data of events already queued
    /// (handed to the queue before the next poll); after them, the current event's data
    /// buffer without its final LF (valid UTF-8), meaningful when `has_data`.
    data: BytesMut,
    /// Bytes at the front of `data` that belong to queued events.
    done: usize,
    /// At least one `data` field since the last dispatch (the spec's buffer is non-empty).
    has_data: bool,
    /// The pending event's data is this range of `read` (one `data` line, no copy).
    slice: Option<(usize, usize)>,
    /// During `handle_*`: the shared read being parsed (`handle_chunk`'s, or a copy of
    /// the whole lines of `handle_bytes`'s).
    read: Option<Bytes>,
    /// `read` has been passed to the queue.
    read_queued: bool,
    /// `data` is the allocation of a large line (moved in by `take_data_line`).
    data_is_line: bool,
    /// The type of the pending event: the event type buffer, or `message` when the
    /// buffer is empty (the type it is dispatched with).
    event_type: EventType,
    /// The pending event's type when `event_type` is `EventType::OTHER`.
    other_type: SharedStr,
    /// The last event type that was allocated, reused while the stream repeats it.
    last_type: SharedStr,
    /// The spec's "last event ID buffer": set by `id` fields, committed at dispatch.
    id_buffer: SharedStr,
    /// An `id` field was seen since the last dispatch (`id_buffer` may differ).
    id_changed: bool,
    /// The committed last event id.
    last_event_id: SharedStr,
    /// `last_event_id` may differ from the id of the last queued event.
    id_dirty: bool,
    /// Some block with an `id` field has been dispatched (`last_event_id` was set).
    id_committed: bool,
    /// The allocation of the last large line, kept after its event was dispatched: once
    /// the consumer drops that event's data, the next large line reuses it instead of
    /// faulting in a fresh buffer (a `put` of tens of MB per connection).
    retained: BytesMut,
    items: Queue,
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
            line_taken: 0,
            data_taken: 0,
            stash: None,
            data: BytesMut::new(),
            done: 0,
            has_data: false,
            slice: None,
            read: None,
            read_queued: false,
            data_is_line: false,
            event_type: EventType::MESSAGE,
            other_type: SharedStr::default(),
            last_type: SharedStr::default(),
            id_buffer: SharedStr::default(),
            id_changed: false,
            last_event_id: SharedStr::default(),
            id_dirty: false,
            id_committed: false,
            retained: BytesMut::new(),
            items: Queue::default(),
            failed: false,
        }
    }

    /// Feed the next bytes of the stream, any size (borrowed).
    ///
    /// Drain [`poll_item`](Self::poll_item) afterwards. How the stream is split into
    /// reads never changes the items produced. Ignored after an [`Error`] until
    /// [`reset`](Self::reset).
    ///
    /// The whole lines of `bytes` are copied once, and the data of events among them is
    /// handed out as slices of that copy; the start of a line that continues in the next
    /// read is kept in a line buffer. Prefer [`handle_chunk`](Self::handle_chunk) when the
    /// read is a [`Bytes`] already.
    pub fn handle_bytes(&mut self, bytes: &[u8]) {
        self.handle(bytes, None);
    }

    /// Feed the next bytes of the stream as a shared buffer, any size.
    ///
    /// The same items as [`handle_bytes`](Self::handle_bytes), but nothing is copied for
    /// an event whose one `data` line lies inside `chunk`: its data is a slice of
    /// `chunk`, which keeps the allocation behind `chunk` alive while the data lives.
    /// Reads mixed with `handle_bytes` reads parse the same.
    pub fn handle_chunk(&mut self, chunk: &Bytes) {
        self.handle(chunk, Some(chunk));
    }

    /// Parse `bytes`, which are `shared` if given (else borrowed).
    fn handle(&mut self, bytes: &[u8], shared: Option<&Bytes>) {
        if self.failed || bytes.is_empty() {
            return;
        }
        self.read = shared.cloned();
        self.read_queued = false;
        self.handle_read(bytes, shared.is_some());
        // A slice of this read cannot outlive the call unqueued: copy it.
        self.copy_slice();
        self.read = None;
        self.freeze_done();
    }

    fn handle_read(&mut self, bytes: &[u8], shared: bool) {
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
                self.feed(BOM.get(..matched).unwrap_or_default(), Source::Held);
            }
        }
        let source = if shared {
            // `input` is the end of `bytes`.
            Source::Shared { end: bytes.len() }
        } else {
            Source::Borrowed
        };
        self.feed(input, source);
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
        self.read = None;
        self.bom = BomState::Matching(0);
        self.items.clear();
        // The queue forgot the id of the last queued event.
        self.id_dirty = true;
        self.failed = false;
    }

    /// Return the next parsed item or error, in stream order.
    ///
    /// Errors are in-band: items completed before the offending line come first, then the
    /// error. After an error the parser is failed: it ignores input until
    /// [`reset`](Self::reset), and this returns `None` once the error has been returned.
    #[inline]
    pub fn poll_item(&mut self) -> Option<Result<Item, Error>> {
        self.items.pop()
    }

    /// Return the next parsed item or error, read in place.
    ///
    /// The same items, in the same order, as [`poll_item`](Self::poll_item) (the two can
    /// be mixed), but an event is lent as an [`EventRef`](super::EventRef) borrowing the parser's buffers
    /// until the next call on the parser: nothing is allocated, cloned or reference
    /// counted for it. Take what you keep with [`EventRef::data_bytes`](super::EventRef::data_bytes) (a slice, no
    /// copy) or [`EventRef::to_event`](super::EventRef::to_event).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use flagsync_core::sse::{Config, ItemRef, Parser};
    ///
    /// let mut parser = Parser::new(Config::default());
    /// parser.handle_chunk(&Bytes::from_static(b"event: patch\ndata: {\"v\":1}\n\n:hb\n"));
    /// let mut patches = 0;
    /// while let Some(item) = parser.poll_ref() {
    ///     match item {
    ///         Ok(ItemRef::Event(event)) if event.event_type() == "patch" => {
    ///             assert_eq!(event.data(), b"{\"v\":1}");
    ///             patches += 1;
    ///         }
    ///         Ok(other) => assert_eq!(other, ItemRef::Comment("hb".to_owned())),
    ///         Err(error) => panic!("{error}"),
    ///     }
    /// }
    /// assert_eq!(patches, 1);
    /// ```
    #[inline]
    pub fn poll_ref(&mut self) -> Option<Result<ItemRef<'_>, Error>> {
        self.items.pop_ref()
    }

    /// The value so far of a `data` line that is still arriving, when it is the first
    /// `data` line of the pending event, less what
    /// [`take_pending_data`](Self::take_pending_data) took of it; `None` otherwise.
    ///
    /// Up to its first invalid UTF-8 sequence (which the event gets as U+FFFD), what
    /// this returns is a prefix of the data of the next event dispatched, if one is
    /// dispatched before [`reset`](Self::reset) or [`handle_eof`](Self::handle_eof);
    /// later calls return longer prefixes of the same data until then. The value starts
    /// once the byte after `data:` is known (an optional space is not part of it).
    ///
    /// ```
    /// use flagsync_core::sse::{Config, Parser};
    ///
    /// let mut parser = Parser::new(Config::default());
    /// parser.handle_bytes(b"event: put\ndata: {\"flags\":");
    /// assert_eq!(parser.pending_data(), Some(&b"{\"flags\":"[..]));
    /// parser.handle_bytes(b"{}}\n\n");
    /// assert_eq!(parser.pending_data(), None);
    /// ```
    pub fn pending_data(&self) -> Option<&[u8]> {
        if self.failed || self.has_data {
            return None;
        }
        if let Some(stash) = &self.stash {
            // `line` holds at most an incomplete character after it.
            return Some(stash);
        }
        if self.line_taken > 0 {
            return Some(&self.line);
        }
        match self.line.strip_prefix(b"data:")? {
            [b' ', value @ ..] => Some(value),
            [] => None,
            value => Some(value),
        }
    }

    /// Take what has arrived of a `data` line that is still arriving, when it is the
    /// first `data` line of the pending event; `None` when there is no such line or
    /// nothing new of it.
    ///
    /// For reading a large event (an FDv1 `put` is tens of MB on one line) while it
    /// arrives, when its bytes are still in the processor's caches, and without the
    /// parser gathering all of it in one buffer. Each call returns the bytes that arrived
    /// since the previous one, whole characters of valid UTF-8 only; the parser forgets
    /// them. The event, if it is dispatched (before [`reset`](Self::reset) or
    /// [`handle_eof`](Self::handle_eof), which drop it), then carries only the rest of
    /// its data: the pieces taken, followed by the dispatched data, are the data the
    /// event would have had (invalid UTF-8 in the rest is replaced as usual). Limits
    /// count the taken bytes. The value starts once the byte after `data:` is known (an
    /// optional space is not part of it).
    ///
    /// ```
    /// use flagsync_core::sse::{Config, Item, Parser};
    ///
    /// let mut parser = Parser::new(Config::default());
    /// parser.handle_bytes(b"event: put\ndata: {\"flags\":");
    /// let piece = parser.take_pending_data().unwrap();
    /// assert_eq!(piece, &b"{\"flags\":"[..]);
    /// assert_eq!(parser.take_pending_data(), None);
    /// parser.handle_bytes(b"{}}\n\n");
    /// assert_eq!(parser.take_pending_data(), None);
    /// let Some(Ok(Item::Event(event))) = parser.poll_item() else { panic!() };
    /// assert_eq!(event.data, &b"{}}"[..]);
    /// ```
    pub fn take_pending_data(&mut self) -> Option<Bytes> {
        if self.failed || self.has_data {
            return None;
        }
        if let Some(stash) = self.stash.take() {
            self.line_taken += stash.len();
            self.data_taken += stash.len();
            return Some(stash);
        }
        if self.line_taken == 0 {
            let value_start = match self.line.strip_prefix(b"data:")? {
                [b' ', ..] => 6,
                [] => return None,
                _ => 5,
            };
            if self.line_utf8.checked() <= value_start {
                return None;
            }
            self.line.advance(value_start);
            self.line_utf8.consumed(value_start);
            self.line_taken = value_start;
        }
        let n = self.line_utf8.checked();
        if n == 0 {
            return None;
        }
        self.line_utf8.consumed(n);
        self.line_taken += n;
        self.data_taken += n;
        Some(self.line.split_to(n).freeze())
    }

    /// The last event id committed so far (`""` if none).
    ///
    /// This is what a reconnect sends as `Last-Event-ID`; omit the header when empty.
    /// An id is committed when its block is dispatched by a blank line.
    pub fn last_event_id(&self) -> &str {
        &self.last_event_id
    }

    /// True once a block with an `id` field has been dispatched by a blank line, so
    /// that [`last_event_id`](Self::last_event_id) is the stream's own (possibly empty)
    /// id rather than the initial one.
    ///
    /// This includes a block holding only an `id` (no `data`), which dispatches no
    /// event but still commits the id (PROTOCOL.md A.2). Kept across
    /// [`reset`](Self::reset), like the id itself.
    pub fn has_committed_id(&self) -> bool {
        self.id_committed
    }

    /// Drop the unterminated line and the unfinished event; uncommitted ids revert.
    fn discard_pending(&mut self) {
        self.pending_cr = false;
        self.clear_line();
        self.line_taken = 0;
        self.data_taken = 0;
        self.stash = None;
        self.line_utf8 = Utf8Progress::default();
        self.freeze_done();
        self.data = BytesMut::new();
        self.has_data = false;
        self.slice = None;
        self.data_is_line = false;
        self.event_type = EventType::MESSAGE;
        self.other_type = SharedStr::default();
        self.id_buffer.clone_from(&self.last_event_id);
        self.id_changed = false;
    }

    /// Hand the data of the events queued so far to the queue, in one block.
    fn freeze_done(&mut self) {
        if self.done > 0 {
            let done = self.data.split_to(self.done.min(self.data.len()));
            self.items.push_block(done.freeze());
            self.done = 0;
        }
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
        self.slice = None;
        self.freeze_done();
        self.items.push_other(Err(error));
        self.failed = true;
        self.line = BytesMut::new();
        self.line_taken = 0;
        self.data_taken = 0;
        self.stash = None;
        self.data = BytesMut::new();
        self.retained = BytesMut::new();
    }
}
