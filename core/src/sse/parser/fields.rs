//! Interpreting complete lines: comments and fields, the event being built, and its
//! dispatch to the queue.

use std::borrow::Cow;
use std::mem;

use bytes::BytesMut;

use super::syntax::{decode, parse_retry, split_field};
use super::{DATA_ARENA_LEN, Parser};
use crate::sse::queue::{EventType, known_type};
use crate::sse::{Error, Item, SharedStr};

impl Parser {
    /// Interpret one complete line (without its terminator).
    #[inline(never)]
    pub(super) fn process_line(&mut self, line: &[u8]) {
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
    pub(super) fn set_event_type(&mut self, value: &[u8]) {
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
    pub(super) fn shareable(&self, value: &[u8], ascii: bool) -> bool {
        value.len() < self.config.max_event_len
            && (ascii || value.is_ascii() || std::str::from_utf8(value).is_ok())
    }

    /// Copy the pending event's data out of the shared read into the data buffer.
    #[inline(never)]
    pub(super) fn copy_slice(&mut self) {
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
    pub(super) fn append_data(&mut self, value: &[u8]) {
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
    pub(super) fn reserve_data(&mut self, additional: usize) {
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
    pub(super) fn dispatch(&mut self) {
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
    pub(super) fn queue_shared(&mut self, start: usize, end: usize) {
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
