//! A full data set, `{"flags":{…},"segments":{…}}` or an FDv1 `put` body around one,
//! scanned as a machine that can stop between items and resume later.
//!
//! [`split_all_data`] runs it over the whole text at once. A
//! stream reader can also feed it the pieces of a large `put` as they arrive
//! ([`DataSetScan::advance`]), while those bytes are still in the processor's caches,
//! and finish with the last piece once the event is complete
//! ([`DataSetScan::finish_rest`]). Items are then slices of the pieces, with no copy of
//! the whole text; the few items cut by the end of a piece are copied. Either way the
//! result, errors included, is that of one pass over the whole text: the scan commits a
//! step (one member, or one item with its key) only when it ended before the available
//! text did, so a step cut short by the end of a piece is simply run again with more
//! text.
//!
//! Pieces shorter than [`SMALL_PIECE`] (a server writing a byte at a time, or a slow
//! link) are first gathered into one buffer and read once [`GATHER`] bytes of them
//! have arrived: the memory a data set costs follows its bytes, never the number of
//! reads it came in (each piece kept costs a reference and a buffer of its own, and
//! items cut by the end of a piece are copied).

use bytes::{Buf, Bytes, BytesMut};

use super::{Result, SCHEMA, SYNTAX, Scan};
use crate::store::{Change, Item, Kind};

/// The least a step cut by the end of a piece is given of the next piece before it is
/// tried again: most items are shorter.
const CARRY_GROWTH: usize = 4096;

/// A piece shorter than this is gathered with those around it before it is read.
pub(crate) const SMALL_PIECE: usize = 1024;

/// Gathered small pieces are read, as one piece, once they are this long.
pub(crate) const GATHER: usize = 16 * 1024;

/// An open object of the data set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// The `put` body: `{"path":…,"data":{…}}`.
    Envelope,
    /// The data set: `{"flags":{…},"segments":{…}}`.
    Data,
    /// The items of one kind: `{"KEY":{…},…}`.
    Items(Kind),
}

/// What the next step reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// The outermost object's `{`.
    Open,
    /// A member: its name, colon and value (for an item: the whole item).
    Member,
    /// A `,` or the `}` closing the innermost open object.
    Separator,
    /// Nothing: the outermost object is closed (only whitespace may follow).
    Done,
}

/// Everything a step changes besides the output, copied to undo a step that did not
/// finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Control {
    next: Next,
    levels: [Level; 3],
    depth: usize,
    /// The envelope had a `data` member.
    data: bool,
    /// The data set being read had `flags` and `segments` members.
    flags: bool,
    segments: bool,
}

impl Control {
    fn top(&self) -> Level {
        self.levels[self.depth.saturating_sub(1).min(2)]
    }
}

/// The resumable scan of a data set; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DataSetScan {
    envelope: bool,
    c: Control,
    /// Bytes of the text read so far (committed steps).
    pos: usize,
    /// Items read so far.
    changes: Vec<Change>,
    /// The span of each item of the window being read whose raw JSON is not attached
    /// yet (the last ones of `changes`), in window offsets.
    spans: Vec<(usize, usize)>,
    /// Every piece passed to `advance`: the whole text so far, read again from the start
    /// when the pieces do not read well (`finish_rest` then judges the whole text).
    /// Small pieces are gathered in `gathered` first: each piece here but the last is
    /// a read of at least [`SMALL_PIECE`] bytes or [`GATHER`] bytes gathered.
    pieces: Vec<Bytes>,
    /// Small pieces that arrived after `pieces`, not read yet (see the module docs).
    gathered: BytesMut,
    /// The text that arrived after `pos`: the start of the step that did not finish.
    carry: BytesMut,
    /// [`advance`](Self::advance) waits until `carry` is this long: a step that did not
    /// finish is tried again only once its text has doubled, so rereading costs at most
    /// as much again as reading.
    retry_at: usize,
    /// The pieces do not read well (invalid UTF-8, or text after the end of the data
    /// set): `advance` does nothing more, and `finish_rest` reads the whole text.
    stopped: bool,
}

impl DataSetScan {
    /// A scan of a data set, inside a `put` body's envelope if `envelope`.
    pub(crate) fn new(envelope: bool) -> Self {
        Self {
            envelope,
            c: Control {
                next: Next::Open,
                levels: [Level::Envelope; 3],
                depth: 0,
                data: false,
                flags: false,
                segments: false,
            },
            pos: 0,
            changes: Vec::new(),
            spans: Vec::new(),
            pieces: Vec::new(),
            gathered: BytesMut::new(),
            carry: BytesMut::new(),
            retry_at: 0,
            stopped: false,
        }
    }

    /// Bytes of the text read so far (committed steps; small pieces still being
    /// gathered are not read yet).
    pub(crate) fn scanned(&self) -> usize {
        self.pos
    }

    /// Read what can be read of `piece`, the text that arrived after the pieces passed
    /// before. Never fails: whatever does not read well now is read again, and judged,
    /// by [`finish_rest`](Self::finish_rest). Items are slices of `piece` (no copy),
    /// except those cut by its end; a piece shorter than [`SMALL_PIECE`] is copied into
    /// the buffer that gathers small pieces, and read with them.
    pub(crate) fn advance(&mut self, piece: &Bytes) {
        if piece.is_empty() {
            return;
        }
        if self.gathered.is_empty() && piece.len() >= SMALL_PIECE {
            self.read_piece(piece);
            return;
        }
        if self.gathered.capacity() == 0 {
            self.gathered = BytesMut::with_capacity(GATHER + SMALL_PIECE);
        }
        // A small piece goes in whole (there is room: less than GATHER is gathered); a
        // large one after small ones fills the buffer up to GATHER, so that every
        // gathered piece but the last is full (a part-filled buffer of GATHER bytes
        // kept for a few bytes would cost what gathering saves).
        let take = if piece.len() < SMALL_PIECE {
            piece.len()
        } else {
            (GATHER - self.gathered.len()).min(piece.len())
        };
        self.gathered
            .extend_from_slice(piece.get(..take).unwrap_or_default());
        if self.gathered.len() >= GATHER {
            self.read_gathered();
        }
        if take < piece.len() {
            self.advance(&piece.slice(take..));
        }
    }

    /// Read the small pieces gathered so far, as one piece.
    fn read_gathered(&mut self) {
        if !self.gathered.is_empty() {
            let piece = std::mem::take(&mut self.gathered).freeze();
            self.read_piece(&piece);
        }
    }

    /// [`advance`](Self::advance) by `piece`, not empty, without gathering.
    fn read_piece(&mut self, piece: &Bytes) {
        self.pieces.push(piece.clone());
        if self.stopped {
            return;
        }
        if self.c.next == Next::Done {
            self.stopped |= !is_whitespace(piece);
            return;
        }
        let mut off = 0;
        if !self.carry.is_empty() {
            // The bytes of `piece` start at `from` in `carry`.
            let mut from = self.carry.len();
            loop {
                // Grow the window to at least twice its length (or to the piece's end),
                // and by enough to finish a usual item at the first try.
                let n = self.carry.len().max(CARRY_GROWTH).min(piece.len() - off);
                self.carry.extend_from_slice(&piece[off..off + n]);
                off += n;
                if self.carry.len() < self.retry_at {
                    if off == piece.len() {
                        return;
                    }
                    continue;
                }
                let committed = self.read_carry(false, from).unwrap_or(0);
                if self.stopped {
                    return;
                }
                if committed >= from {
                    // Caught up with the piece: read the rest of it where it is.
                    off = committed - from;
                    self.carry.clear();
                    self.retry_at = 0;
                    break;
                }
                from -= committed;
                if self.c.next == Next::Done {
                    self.stopped |= !is_whitespace(&self.carry);
                    self.carry.clear();
                    self.stopped |= !is_whitespace(&piece[off..]);
                    return;
                }
                // The step at the start of `carry` was tried over all of it.
                self.retry_at = self.carry.len() * 2;
                if off == piece.len() {
                    return;
                }
            }
        }
        let window = &piece[off..];
        let text = match simdutf8::compat::from_utf8(window) {
            Ok(text) => text,
            Err(error) => {
                // A character cut by the end of the piece is read with the next one.
                self.stopped = error.error_len().is_some();
                let head = window.get(..error.valid_up_to()).unwrap_or_default();
                std::str::from_utf8(head).unwrap_or_default()
            }
        };
        if self.stopped {
            return;
        }
        let committed = self.read(text, false, usize::MAX).unwrap_or(0);
        self.attach(piece, off);
        if self.c.next == Next::Done {
            self.stopped |= !is_whitespace(&window[committed..]);
            return;
        }
        self.carry.extend_from_slice(&window[committed..]);
        self.retry_at = self.carry.len() * 2;
    }

    /// Read the last piece, `rest` (the text that arrived after the pieces passed to
    /// [`advance`](Self::advance)), and return the changes, or the error one pass over
    /// the whole text gives, with that whole text.
    pub(crate) fn finish_rest(
        mut self,
        rest: &Bytes,
    ) -> std::result::Result<Vec<Change>, (super::DecodeError, Bytes)> {
        self.advance(rest);
        self.read_gathered();
        if !self.stopped {
            let read = match self.read_carry(true, usize::MAX) {
                Ok(_) if self.c.next == Next::Done => Ok(()),
                Ok(_) => Err(SYNTAX),
                Err(e) => Err(e),
            };
            if read.is_ok() && !self.stopped {
                return Ok(self.changes);
            }
        }
        // Something does not read well: judge the whole text in one pass.
        let whole = self.text(&Bytes::new());
        Self::new(self.envelope)
            .finish(&whole)
            .map_err(|e| (e, whole))
    }

    /// The pieces passed so far followed by `rest`, in one buffer (no copy when that
    /// is one piece).
    pub(crate) fn text(&self, rest: &Bytes) -> Bytes {
        match (
            self.pieces.as_slice(),
            self.gathered.is_empty(),
            rest.is_empty(),
        ) {
            ([], true, _) => return rest.clone(),
            ([one], true, true) => return one.clone(),
            _ => {}
        }
        let len =
            self.pieces.iter().map(Bytes::len).sum::<usize>() + self.gathered.len() + rest.len();
        let mut whole = BytesMut::with_capacity(len);
        for piece in &self.pieces {
            whole.extend_from_slice(piece);
        }
        whole.extend_from_slice(&self.gathered);
        whole.extend_from_slice(rest);
        whole.freeze()
    }

    /// Read `whole`, the complete text, from the start: the changes (raw JSON sliced
    /// from `whole`, no copy), or the error one pass over `whole` gives.
    pub(crate) fn finish(mut self, whole: &Bytes) -> Result<Vec<Change>> {
        // One UTF-8 check (vectorised) of the whole text.
        let text = simdutf8::basic::from_utf8(whole).map_err(|_| SYNTAX)?;
        self.read(text, true, usize::MAX)?;
        self.attach(whole, 0);
        Ok(self.changes)
    }

    /// Read `carry` (at the end of the text if `last`) up to the first step that ends
    /// at `enough` or later: the committed bytes leave it.
    fn read_carry(&mut self, last: bool, enough: usize) -> Result<usize> {
        let carry = std::mem::take(&mut self.carry);
        let text = match simdutf8::compat::from_utf8(&carry) {
            Ok(text) => text,
            Err(error) if error.error_len().is_none() && !last => {
                let head = carry.get(..error.valid_up_to()).unwrap_or_default();
                std::str::from_utf8(head).unwrap_or_default()
            }
            Err(_) => {
                self.stopped = true;
                self.carry = carry;
                return Err(SYNTAX);
            }
        };
        let read = self.read(text, last, enough);
        let mut carry = carry;
        match read {
            Ok(committed) => {
                // A buffer of its own, exactly as long: a slice of `carry` would keep
                // all of its allocation alive for as long as the items live, and the
                // next growth of `carry` would allocate anew (at least as much as it
                // ever held), once for every piece that cuts an item.
                let done = Bytes::copy_from_slice(carry.get(..committed).unwrap_or_default());
                carry.advance(committed.min(carry.len()));
                self.attach(&done, 0);
            }
            // At the end, and wrong: the whole text will be read again.
            Err(_) => self.spans.clear(),
        }
        self.carry = carry;
        read
    }

    /// Read steps of `text`, the text from `pos` on (all of the text left if `last`),
    /// committing those that end before it does, until one ends at `enough` or later;
    /// returns the bytes committed. Spans of
    /// the items read are offsets in `text`, for [`attach`](Self::attach).
    fn read(&mut self, text: &str, last: bool, enough: usize) -> Result<usize> {
        let mut s = Scan::new(text);
        s.depth = self.c.depth;
        let mut committed = 0;
        while self.c.next != Next::Done && committed < enough {
            let (saved, items, spans) = (self.c, self.changes.len(), self.spans.len());
            let stepped = self.step(&mut s);
            if last {
                stepped?;
                committed = s.i;
            } else if stepped.is_ok() && (self.c.next == Next::Done || s.peek().is_some()) {
                committed = s.i;
            } else {
                // Cut short (or wrong, which the end will say): undo, wait for more.
                self.c = saved;
                self.changes.truncate(items);
                self.spans.truncate(spans);
                break;
            }
        }
        if last {
            s.end()?;
            committed = text.len();
        }
        self.pos += committed;
        Ok(committed)
    }

    /// Give the items read last their raw JSON: their spans in `backing[off..]`.
    fn attach(&mut self, backing: &Bytes, off: usize) {
        let first = self.changes.len() - self.spans.len();
        for (change, (start, end)) in self.changes[first..].iter_mut().zip(self.spans.drain(..)) {
            change.item.raw = backing.slice(off + start..off + end);
        }
    }

    /// One step at the scanner's position (an item's span is recorded in the scanner's
    /// offsets).
    fn step(&mut self, s: &mut Scan<'_>) -> Result<()> {
        match self.c.next {
            Next::Open => {
                let root = if self.envelope {
                    Level::Envelope
                } else {
                    Level::Data
                };
                self.open(s, root)
            }
            Next::Member => {
                let name = s.string_text()?;
                s.eat(b':')?;
                match (self.c.top(), name.as_ref()) {
                    (Level::Envelope, "data") => {
                        self.c.data = true;
                        self.open(s, Level::Data)
                    }
                    (Level::Data, "flags") => {
                        self.c.flags = true;
                        self.open(s, Level::Items(Kind::Flag))
                    }
                    (Level::Data, "segments") => {
                        self.c.segments = true;
                        self.open(s, Level::Items(Kind::Segment))
                    }
                    (Level::Items(kind), _) => {
                        let key = name.into_owned();
                        s.peek();
                        let start = s.i;
                        let mut depends_on = Vec::new();
                        let (_, version, deleted) = s.item(kind, &mut depends_on)?;
                        self.changes.push(Change {
                            kind,
                            key,
                            item: Item {
                                version,
                                deleted,
                                raw: Bytes::new(),
                            },
                            depends_on,
                        });
                        self.spans.push((start, s.i));
                        self.c.next = Next::Separator;
                        Ok(())
                    }
                    _ => {
                        s.value()?;
                        self.c.next = Next::Separator;
                        Ok(())
                    }
                }
            }
            Next::Separator => match s.peek() {
                Some(b',') => {
                    s.i += 1;
                    self.c.next = Next::Member;
                    Ok(())
                }
                Some(b'}') => {
                    s.i += 1;
                    self.close(s)
                }
                _ => Err(SYNTAX),
            },
            Next::Done => Ok(()),
        }
    }

    /// An object of the shape `level` starts here (a value of another shape is a schema
    /// error, after its syntax is checked).
    fn open(&mut self, s: &mut Scan<'_>, level: Level) -> Result<()> {
        s.shape(b'{')?;
        s.eat(b'{')?;
        s.enter()?;
        self.c.levels[self.c.depth.min(2)] = level;
        self.c.depth += 1;
        if level == Level::Data {
            self.c.flags = false;
            self.c.segments = false;
        }
        if s.peek() == Some(b'}') {
            s.i += 1;
            return self.close(s);
        }
        self.c.next = Next::Member;
        Ok(())
    }

    /// The innermost open object just closed (its `}` consumed).
    fn close(&mut self, s: &mut Scan<'_>) -> Result<()> {
        let level = self.c.top();
        s.depth -= 1;
        self.c.depth -= 1;
        match level {
            Level::Items(_) => {}
            Level::Data if !(self.c.flags && self.c.segments) => return Err(SCHEMA),
            Level::Data => {}
            Level::Envelope if !self.c.data => return Err(SCHEMA),
            Level::Envelope => {}
        }
        self.c.next = if self.c.depth == 0 {
            Next::Done
        } else {
            Next::Separator
        };
        Ok(())
    }
}

/// Only JSON whitespace.
fn is_whitespace(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

/// Split a full data set `{"flags":{…},"segments":{…}}`, or with `envelope`, an FDv1
/// `put` body `{"path":…,"data":{…}}`, into changes whose raw JSON are slices of
/// `whole` (no copy).
pub fn split_all_data(whole: &Bytes, envelope: bool) -> Result<Vec<Change>> {
    DataSetScan::new(envelope).finish(whole)
}

#[cfg(test)]
#[path = "data_set_tests.rs"]
mod tests;
