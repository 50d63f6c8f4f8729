//! The incremental WHATWG event-stream parser.
//!
//! Spec: <https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation>.

use std::borrow::Cow;
use std::mem;

use bytes::{Buf, Bytes, BytesMut};

use super::queue::{EventType, Queue, known_type};
use super::utf8::Utf8Progress;
use super::{Config, Error, Item, ItemRef, SharedStr};

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

    /// Split input (after the BOM) into lines. Each byte is scanned once.
    fn feed(&mut self, mut input: &[u8], source: Source) {
        if self.failed {
            return;
        }
        if let Some(stash) = self.stash.take() {
            // Not taken before this read: back in the line buffer, in front.
            let mut line = BytesMut::with_capacity(stash.len() + self.line.len());
            line.extend_from_slice(&stash);
            line.extend_from_slice(&self.line);
            self.line = line;
            self.line_utf8 = Utf8Progress::default();
            self.line_utf8.advance(&self.line);
        }
        if self.pending_cr
            && let Some((&first, rest)) = input.split_first()
        {
            self.pending_cr = false;
            if first == b'\n' {
                input = rest;
            }
        }
        if !self.line.is_empty() || self.line_taken > 0 {
            // The end of a line carried over from earlier reads.
            let Some((content, rest)) = LineEnds::new(input)
                .next()
                .and_then(|end| input.split_at_checked(end))
            else {
                let shared_at = match source {
                    Source::Shared { end } => Some(end - input.len()),
                    Source::Borrowed | Source::Held => None,
                };
                self.buffer_partial_line(input, shared_at);
                return;
            };
            input = self.skip_terminator(rest);
            self.complete_line(content);
            if self.failed {
                return;
            }
        }
        match source {
            Source::Shared { end } => self.feed_lines(input, Some(end - input.len())),
            Source::Borrowed if !input.is_empty() => {
                // Whole lines follow: copy them once, so that the data of the events
                // among them can be handed out in slices of the copy.
                let read = Bytes::copy_from_slice(input);
                self.read = Some(read.clone());
                self.feed_lines(&read, Some(0));
            }
            Source::Borrowed | Source::Held => self.feed_lines(input, None),
        }
    }

    /// Split input that starts at a line start: complete lines are parsed in place.
    ///
    /// `base` is the offset of `input` in the shared read, if it is part of one.
    fn feed_lines(&mut self, input: &[u8], base: Option<usize>) {
        let mut ends = LineEnds::new(input);
        let mut start = 0;
        while let Some(end) = ends.next() {
            if end < start {
                // The LF of a CRLF, consumed with its CR, or of a blank line consumed
                // with the event it ends.
                continue;
            }
            let content = input.get(start..end).unwrap_or_default();
            start = end + 1;
            if input.get(end) == Some(&b'\r') {
                match input.get(start) {
                    Some(b'\n') => start += 1,
                    Some(_) => {}
                    None => self.pending_cr = true,
                }
            }
            if content.len() > self.config.max_line_len {
                self.fail(Error::LineTooLong {
                    limit: self.config.max_line_len,
                });
                return;
            }
            // The lines of a typical event first (`process_line` handles all lines).
            match content {
                [] => self.dispatch(),
                [b'd', b'a', b't', b'a', b':', value @ ..] => {
                    let value = strip_space(value);
                    let ascii = ends.take_high() & HIGH == 0;
                    match base {
                        Some(base) if !self.has_data && self.shareable(value, ascii) => {
                            let value_start = base + end - value.len();
                            if start == end + 1 && input.get(start) == Some(&b'\n') {
                                // LF LF: the whole event is here. Dispatch it at once.
                                ends.consume(start);
                                start += 1;
                                self.queue_shared(value_start, base + end);
                            } else {
                                self.slice = Some((value_start, base + end));
                                self.has_data = true;
                            }
                        }
                        _ => {
                            self.append_data(value);
                            if self.failed {
                                return;
                            }
                        }
                    }
                }
                [b'e', b'v', b'e', b'n', b't', b':', value @ ..] => {
                    self.set_event_type(strip_space(value));
                }
                _ => {
                    self.process_line(content);
                    if self.failed {
                        return;
                    }
                }
            }
        }
        self.buffer_partial_line(input.get(start..).unwrap_or_default(), None);
    }

    /// Drop the terminator at the start of `rest` (CR, LF or CRLF); remember a CR that
    /// ends the read, whose LF may come next.
    fn skip_terminator<'a>(&mut self, rest: &'a [u8]) -> &'a [u8] {
        match rest {
            [b'\r', b'\n', after @ ..] => after,
            [b'\r'] => {
                self.pending_cr = true;
                &[]
            }
            [_, after @ ..] => after,
            [] => rest,
        }
    }

    /// Keep the start of a line whose terminator has not arrived yet.
    ///
    /// `shared_at`: `input` is at this offset of the shared read.
    fn buffer_partial_line(&mut self, mut input: &[u8], shared_at: Option<usize>) {
        if input.is_empty() {
            return;
        }
        let len = self.line.len().saturating_add(self.line_taken);
        if len.saturating_add(input.len()) > self.config.max_line_len {
            self.fail(Error::LineTooLong {
                limit: self.config.max_line_len,
            });
            return;
        }
        if self.line_taken > 0
            && self.line.is_empty()
            && let (Some(at), Some(read)) = (shared_at, &self.read)
        {
            // A line being taken goes on through the whole read: keep the read's
            // complete characters where they are, for `take_pending_data`.
            let valid = if input.is_ascii() {
                input.len()
            } else {
                match std::str::from_utf8(input) {
                    Ok(_) => input.len(),
                    Err(error) if error.error_len().is_none() => error.valid_up_to(),
                    Err(_) => 0,
                }
            };
            if valid > 0 {
                self.stash = Some(read.slice(at..at + valid));
                input = input.get(valid..).unwrap_or_default();
            }
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
        let len = self.line.len().saturating_add(self.line_taken);
        if len.saturating_add(content.len()) > limit {
            self.fail(Error::LineTooLong { limit });
            return;
        }
        if self.line_taken > 0 {
            self.complete_taken_line(content);
            return;
        }
        if self.line.is_empty() {
            // The whole line is in this read: parse it in place, no copy.
            self.process_line(content);
            return;
        }
        let (line, valid) = self.end_buffered_line(content);
        if valid
            && !self.has_data
            && let Some(([b'd', b'a', b't', b'a'], value_start)) = split_field(&line)
        {
            // The first data line of an event: the line buffer becomes the data buffer
            // without a copy (a `put` line is tens of MB).
            self.take_data_line(line, value_start, 0);
            return;
        }
        self.process_line(&line);
        self.line = line;
        self.clear_line();
    }

    /// Append `content` to the line buffer and take the line out of it, with whether it
    /// is valid UTF-8 (only its unchecked tail is validated).
    fn end_buffered_line(&mut self, content: &[u8]) -> (BytesMut, bool) {
        self.reserve_line(content.len());
        self.line.extend_from_slice(content);
        let valid = self.line_utf8.is_valid(&self.line);
        self.line_utf8 = Utf8Progress::default();
        (mem::take(&mut self.line), valid)
    }

    /// The end of the pending event's first `data` line, of which the start was taken
    /// (`line` holds the rest of its value).
    #[inline(never)]
    fn complete_taken_line(&mut self, content: &[u8]) {
        let (rest, valid) = self.end_buffered_line(content);
        let taken = self.data_taken;
        self.line_taken = 0;
        if valid {
            self.take_data_line(rest, 0, taken);
            return;
        }
        // The taken bytes end on a character boundary: the rest decodes on its own.
        let text = decode(&rest);
        let limit = self.config.max_event_len;
        if taken.saturating_add(text.len()).saturating_add(1) > limit {
            self.fail(Error::EventTooLarge { limit });
            return;
        }
        self.reserve_data(text.len() + 1);
        self.data.extend_from_slice(text.as_bytes());
        self.has_data = true;
    }

    /// The first `data` line of an event, already validated, moved into the data buffer;
    /// `taken` bytes of its value were taken before.
    fn take_data_line(&mut self, mut line: BytesMut, value_start: usize, taken: usize) {
        line.advance(value_start.min(line.len()));
        let limit = self.config.max_event_len;
        if line.len().saturating_add(taken).saturating_add(1) > limit {
            self.fail(Error::EventTooLarge { limit });
            return;
        }
        self.freeze_done();
        self.data = line;
        self.data_is_line = true;
        self.has_data = true;
    }

    /// Interpret one complete line (without its terminator).
    #[inline(never)]
    fn process_line(&mut self, line: &[u8]) {
        if let Some((b':', text)) = line.split_first() {
            // A comment: everything after the leading colon, spaces included.
            let text = decode(text).into_owned();
            self.items.push_other(Ok(Item::Comment(text)));
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
                    self.items.push_other(Ok(Item::Retry(millis)));
                }
            }
            _ => {}
        }
    }

    /// An `event` field: set the type buffer. A known type needs no string; another
    /// type reuses the previous allocation while the stream repeats it.
    ///
    /// Raw bytes equal to a valid string are that string, so a repeated type is
    /// recognised without decoding it.
    #[inline]
    fn set_event_type(&mut self, value: &[u8]) {
        match known_type(value) {
            Some(known) => self.event_type = known,
            None => self.set_other_event_type(value),
        }
    }

    /// An `event` field with a type that is not one of the known ones.
    #[inline(never)]
    fn set_other_event_type(&mut self, value: &[u8]) {
        self.event_type = EventType::OTHER;
        if self.other_type.as_bytes() == value {
            return;
        }
        self.other_type = if self.last_type.as_bytes() == value {
            self.last_type.clone()
        } else {
            self.last_type = SharedStr::from(&*decode(value));
            self.last_type.clone()
        };
    }

    /// Whether the first `data` value of an event can stay where it is in the shared
    /// read: it is valid UTF-8 (then it is the data as it is) and within the limit.
    /// `ascii`: the value is known to be ASCII.
    #[inline]
    fn shareable(&self, value: &[u8], ascii: bool) -> bool {
        value.len() < self.config.max_event_len
            && (ascii || value.is_ascii() || std::str::from_utf8(value).is_ok())
    }

    /// Copy the pending event's data out of the shared read into the data buffer.
    #[inline(never)]
    fn copy_slice(&mut self) {
        let Some((start, end)) = self.slice.take() else {
            return;
        };
        let value = self
            .read
            .as_ref()
            .map(|read| read.slice(start..end))
            .unwrap_or_default();
        self.reserve_data(value.len() + 1);
        self.data.extend_from_slice(&value);
    }

    /// Append a `data` value and its LF to the data buffer.
    #[inline]
    fn append_data(&mut self, value: &[u8]) {
        if self.slice.is_some() {
            self.copy_slice();
        }
        // The first data line of an event, in ASCII (JSON): copied as it is. The spec's
        // buffer is the value and an LF; the data buffer is empty (handed to the queue
        // at dispatch).
        if !self.has_data && value.len() < self.config.max_event_len && value.is_ascii() {
            self.reserve_data(value.len() + 1);
            self.data.extend_from_slice(value);
            self.has_data = true;
            return;
        }
        self.append_more_data(value);
    }

    /// Append a `data` value and its LF to the data buffer: any line.
    #[inline(never)]
    fn append_more_data(&mut self, value: &[u8]) {
        let value: Cow<'_, [u8]> = if value.is_ascii() {
            Cow::Borrowed(value)
        } else {
            match decode(value) {
                Cow::Borrowed(text) => Cow::Borrowed(text.as_bytes()),
                Cow::Owned(text) => Cow::Owned(text.into_bytes()),
            }
        };
        // The spec's buffer holds every value plus one LF each; `data` omits the last LF
        // (and the taken bytes come before it).
        let current = if self.has_data {
            self.data.len() - self.done + 1 + self.data_taken
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
    /// Copied small events share one arena allocation, frozen once per read and handed
    /// out in slices (a reference count, no copy): no allocation per event.
    fn reserve_data(&mut self, additional: usize) {
        let spare = self.data.capacity() - self.data.len();
        if spare >= additional {
            return;
        }
        if !self.has_data && additional < DATA_ARENA_LEN {
            self.freeze_done();
            self.data = BytesMut::with_capacity(DATA_ARENA_LEN);
        } else {
            self.data.reserve(additional);
        }
    }

    /// A blank line: commit the id, and dispatch the event if there is data.
    #[inline]
    fn dispatch(&mut self) {
        self.data_taken = 0;
        if !self.has_data {
            if self.id_changed {
                self.commit_id();
            }
            self.event_type = EventType::MESSAGE;
            return;
        }
        self.has_data = false;
        if let Some((start, end)) = self.slice.take() {
            self.queue_shared(start, end);
            return;
        }
        let len = if self.data_is_line {
            self.push_line_data()
        } else {
            let len = self.data.len() - self.done;
            self.done = self.data.len();
            len
        };
        let (event_type, new_id) = self.take_event_parts();
        self.items.push_block_event(len, event_type, new_id);
    }

    /// Dispatch the pending event with data `start..end` of the shared read.
    #[inline(always)]
    fn queue_shared(&mut self, start: usize, end: usize) {
        let next_read = !self.read_queued;
        if next_read {
            self.queue_read();
        }
        let (event_type, new_id) = self.take_event_parts();
        self.items
            .push_shared(start, end, event_type, new_id, next_read);
    }

    #[inline(never)]
    fn queue_read(&mut self) {
        self.read_queued = true;
        self.items.push_read(self.read.clone().unwrap_or_default());
    }

    /// The spec's dispatch steps besides the data: commit the id, reset the type. Pass
    /// the type and id along (returns the type and whether the id was passed).
    #[inline(always)]
    fn take_event_parts(&mut self) -> (EventType, bool) {
        let event_type = mem::replace(&mut self.event_type, EventType::MESSAGE);
        if self.id_changed || self.id_dirty || event_type == EventType::OTHER {
            return (event_type, self.pass_event_parts(event_type));
        }
        (event_type, false)
    }

    /// Commit the id and pass the type and id along with the event (returns whether the
    /// id was passed).
    #[inline(never)]
    fn pass_event_parts(&mut self, event_type: EventType) -> bool {
        if self.id_changed {
            self.commit_id();
        }
        if event_type == EventType::OTHER {
            self.items.push_type(mem::take(&mut self.other_type));
        }
        let new_id = self.id_dirty;
        if new_id {
            self.id_dirty = false;
            self.items.push_id(self.last_event_id.clone());
        }
        new_id
    }

    /// Commit the last event id buffer.
    #[inline(never)]
    fn commit_id(&mut self) {
        self.id_changed = false;
        self.last_event_id.clone_from(&self.id_buffer);
        self.id_dirty = true;
        self.id_committed = true;
    }

    /// Queue the data of an event whose data buffer is the allocation of a large line;
    /// return its length.
    #[inline(never)]
    fn push_line_data(&mut self) -> usize {
        self.data_is_line = false;
        let data = self.data.split().freeze();
        // The rest of the line's allocation: reusable once `data` is dropped.
        self.retained = mem::take(&mut self.data);
        let len = data.len();
        self.items.push_block(data);
        len
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

/// Bytes scanned a word at a time without finding a terminator before handing over to
/// `memchr`: most SSE lines (blank lines, `event: patch`, small `data`) are shorter.
const DRY_BYTES: usize = 128;

/// The CR and LF positions of one read, in order, found a word (8 bytes) at a time.
///
/// Each word is loaded once and all the terminators in it are taken from one bit mask,
/// so short lines cost a few instructions each; a long line hands over to `memchr`.
struct LineEnds<'a> {
    bytes: &'a [u8],
    /// Offset of the word that `mask` describes.
    word: usize,
    /// The high bit of each byte of that word that may be an unreturned CR or LF.
    mask: u64,
    /// The bytes of that word.
    bits: u64,
    /// The bytes of the words loaded since the last [`take_high`](Self::take_high) and of
    /// the word then current, OR-ed: its high bits are clear if all are ASCII.
    seen: u64,
}

impl<'a> LineEnds<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        let bits = load_word(bytes, 0);
        Self {
            bytes,
            word: 0,
            mask: candidates(bits),
            bits,
            seen: bits,
        }
    }

    /// The OR of the bytes looked at since the last call: its high bits are clear if the
    /// text since the end returned before the last call is ASCII (padding past the end
    /// of the read and a `memchr` scan count as not ASCII).
    #[inline(always)]
    fn take_high(&mut self) -> u64 {
        mem::replace(&mut self.seen, self.bits)
    }

    /// The caller consumed the terminator at `at`, the byte after the one returned last.
    ///
    /// Only a shortcut: the terminator is skipped if it is in the current word (then it
    /// is the lowest candidate left); otherwise the caller skips it when it comes.
    #[inline(always)]
    fn consume(&mut self, at: usize) {
        if at < self.word + 8 {
            self.mask &= self.mask.wrapping_sub(1);
        }
    }
}

impl Iterator for LineEnds<'_> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        loop {
            while self.mask != 0 {
                let at = self.word + (self.mask.trailing_zeros() / 8) as usize;
                self.mask &= self.mask - 1;
                if let Some(b'\n' | b'\r') = self.bytes.get(at) {
                    return Some(at);
                }
            }
            // The next word with a candidate, within `DRY_BYTES`.
            let start = self.word + 8;
            let rest = self.bytes.get(start..).unwrap_or_default();
            let window = rest.get(..DRY_BYTES).unwrap_or(rest);
            let mut words = window.chunks_exact(8);
            let mut at = start;
            for word in words.by_ref() {
                let bits = u64::from_le_bytes(word.try_into().unwrap_or_default());
                self.seen |= bits;
                let mask = candidates(bits);
                if mask != 0 {
                    self.word = at;
                    self.mask = mask;
                    self.bits = bits;
                    break;
                }
                at += 8;
            }
            if self.mask != 0 {
                continue;
            }
            let tail = words.remainder();
            if !tail.is_empty() {
                // The end of the read: pad the last partial word.
                self.word = at;
                self.bits = load_word(tail, 0);
                self.seen |= self.bits;
                self.mask = candidates(self.bits);
                if self.mask != 0 {
                    continue;
                }
                return None;
            }
            if at >= self.bytes.len() {
                self.word = at;
                return None;
            }
            // A long line: continue with memchr's vector scan.
            let Some(end) = memchr::memchr2(b'\n', b'\r', rest) else {
                self.word = self.bytes.len();
                return None;
            };
            self.word = start + end;
            self.bits = load_word(self.bytes, self.word);
            // The bytes memchr skipped were not looked at.
            self.seen |= self.bits | HIGH;
            self.mask = candidates(self.bits);
        }
    }
}

/// The high bit of every byte of a word.
const HIGH: u64 = u64::from_le_bytes([0x80; 8]);

/// The 8 bytes at `at` as a little-endian word, padded with zeros past the end.
#[inline]
fn load_word(bytes: &[u8], at: usize) -> u64 {
    if let Some(word) = bytes.get(at..at + 8) {
        return u64::from_le_bytes(word.try_into().unwrap_or_default());
    }
    let mut word = [0xFF; 8];
    let tail = bytes.get(at..).unwrap_or_default();
    if let Some(dst) = word.get_mut(..tail.len()) {
        dst.copy_from_slice(tail);
    }
    u64::from_le_bytes(word)
}

/// The high bit of each byte of `word` that may be a CR or LF: every CR and LF, and
/// possibly other bytes (checked by the caller).
///
/// The classic "has a byte less than n" test (here n = 0x0E, above CR and LF) flags every
/// byte below n, plus bytes that a borrow from a flagged byte below them makes look
/// small: no byte is missed, and false candidates are rare in text.
#[inline]
fn candidates(word: u64) -> u64 {
    const BELOW: u64 = u64::from_le_bytes([0x0E; 8]);
    word.wrapping_sub(BELOW) & !word & HIGH
}

/// A field value without the one space that may follow the colon.
fn strip_space(value: &[u8]) -> &[u8] {
    match value {
        [b' ', rest @ ..] => rest,
        _ => value,
    }
}

/// Bytes scanned one by one before handing over to `memchr`: its dispatch costs more
/// than a short scalar scan, and field names are short.
const SCALAR_HEAD: usize = 16;

/// Index of the first colon (field names are short).
fn find_colon(bytes: &[u8]) -> Option<usize> {
    let head = bytes.get(..SCALAR_HEAD).unwrap_or(bytes);
    if let Some(colon) = head.iter().position(|&b| b == b':') {
        return Some(colon);
    }
    let tail = bytes.get(head.len()..)?;
    memchr::memchr(b':', tail).map(|colon| colon + head.len())
}
