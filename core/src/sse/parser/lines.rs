//! Splitting reads into lines: terminators, the buffered unterminated line, and the
//! large `data` lines that are taken without a copy.

use std::mem;

use bytes::{Buf, Bytes, BytesMut};

use super::line_ends::{HIGH, LineEnds};
use super::syntax::{decode, split_field, strip_space};
use super::{Parser, Source};
use crate::sse::Error;
use crate::sse::utf8::Utf8Progress;

impl Parser {
    /// Split input (after the BOM) into lines. Each byte is scanned once.
    pub(super) fn feed(&mut self, mut input: &[u8], source: Source) {
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
}
