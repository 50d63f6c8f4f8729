//! The parser's output queue: items in stream order, with events stored compactly.
//!
//! An event is queued as one small entry of plain numbers (where its data is, a type
//! index, whether its id changed); the rare parts (an unknown type, a changed id) wait in
//! side queues, and the [`Item`] is built only when it is polled. Dispatching an event
//! thus moves no large value and touches no reference count: an `Item` is about 80
//! bytes, and copying values of that size right after writing them field by field
//! stalls the processor (a store cannot be forwarded to a wider load).

use std::collections::VecDeque;

use bytes::{Buf, Bytes};

use super::{Error, Event, EventRef, Item, ItemRef, SharedStr};

/// Event types that need no allocation: the default, and the FDv1 and FDv2 names.
///
/// [`EventType`] indexes this table; [`known_type`] is its inverse.
const KNOWN_TYPES: [&str; 11] = [
    "message",
    "put",
    "patch",
    "delete",
    "server-intent",
    "put-object",
    "delete-object",
    "payload-transferred",
    "heart-beat",
    "goodbye",
    "error",
];

/// [`KNOWN_TYPES`] as shared strings, for events read in place.
static KNOWN_SHARED: [SharedStr; 11] = [
    SharedStr::from_static("message"),
    SharedStr::from_static("put"),
    SharedStr::from_static("patch"),
    SharedStr::from_static("delete"),
    SharedStr::from_static("server-intent"),
    SharedStr::from_static("put-object"),
    SharedStr::from_static("delete-object"),
    SharedStr::from_static("payload-transferred"),
    SharedStr::from_static("heart-beat"),
    SharedStr::from_static("goodbye"),
    SharedStr::from_static("error"),
];

/// The type of a pending event: an index into `KNOWN_TYPES`, or [`EventType::OTHER`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EventType(u8);

impl EventType {
    /// `message`: the type of an event without an `event` field (or an empty one).
    pub(super) const MESSAGE: Self = Self(0);
    /// Not a known type: the type is passed along with the event.
    pub(super) const OTHER: Self = Self(u8::MAX);
}

/// The known type spelled by `value` (an empty value means `message`).
#[inline(always)]
pub(super) fn known_type(value: &[u8]) -> Option<EventType> {
    let index = match value {
        b"" | b"message" => 0,
        b"put" => 1,
        b"patch" => 2,
        b"delete" => 3,
        b"server-intent" => 4,
        b"put-object" => 5,
        b"delete-object" => 6,
        b"payload-transferred" => 7,
        b"heart-beat" => 8,
        b"goodbye" => 9,
        b"error" => 10,
        _ => return None,
    };
    Some(EventType(index))
}

/// What a queued entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An event whose data is `start..end` of the current shared read.
    Shared,
    /// An event whose data is the next `end` bytes of the data blocks (none when 0).
    Block,
    /// The next of `others`.
    Other,
}

/// One queued item: plain scalars, written and read field by field.
#[derive(Debug, Clone, Copy)]
struct Entry {
    start: usize,
    end: usize,
    kind: Kind,
    event_type: EventType,
    /// The event's id is the next of `ids`; otherwise that of the previous event.
    new_id: bool,
    /// A `Shared` event is in the read after the previous one's (the next of `reads`).
    next_read: bool,
}

/// Items in stream order.
///
/// Pushes of one event come in this order: its type ([`push_type`](Self::push_type),
/// only for [`EventType::OTHER`]), its id ([`push_id`](Self::push_id), only when it may
/// differ from the previous event's), its data ([`push_read`](Self::push_read) or
/// [`push_block`](Self::push_block), when needed), then the event itself.
#[derive(Debug, Clone, Default)]
pub(super) struct Queue {
    /// Queued entries; those before `polled` have been polled. A `Vec` read from the
    /// front, emptied when drained and compacted before it grows: cheaper to push to
    /// than a `VecDeque`, and bounded by twice the entries not yet polled.
    entries: Vec<Entry>,
    polled: usize,
    /// Comments, retry delays and errors.
    others: VecDeque<Result<Item, Error>>,
    /// The types of queued `EventType::OTHER` events.
    types: VecDeque<SharedStr>,
    /// The ids of queued events with `new_id`.
    ids: VecDeque<SharedStr>,
    /// The id of the event polled last.
    polled_id: SharedStr,
    /// The data of queued events that was copied, back to back: each event takes its
    /// length off the front. A block holds the small events of one read, or one large
    /// event, so handing out an event's data is a reference count, not a copy.
    blocks: VecDeque<Bytes>,
    /// Shared reads that queued events after the one polled last point into.
    reads: VecDeque<Bytes>,
    /// The shared read the event polled last points into.
    read: Bytes,
    /// The type of the event polled last, when not a known one (for events read in
    /// place).
    polled_type: SharedStr,
    /// Bytes at the front of `blocks` lent to the event read in place last: they are
    /// dropped at the next poll.
    lent: usize,
}

impl Queue {
    /// Queue an event whose data is `start..end` of a shared read: the one of the
    /// previous such event, or the next one passed to [`push_read`](Self::push_read)
    /// when `next_read`.
    #[inline(always)]
    pub(super) fn push_shared(
        &mut self,
        start: usize,
        end: usize,
        event_type: EventType,
        new_id: bool,
        next_read: bool,
    ) {
        self.push(Entry {
            start,
            end,
            kind: Kind::Shared,
            event_type,
            new_id,
            next_read,
        });
    }

    /// Queue an event whose data is the next `len` bytes passed to
    /// [`push_block`](Self::push_block).
    pub(super) fn push_block_event(&mut self, len: usize, event_type: EventType, new_id: bool) {
        self.push(Entry {
            start: 0,
            end: len,
            kind: Kind::Block,
            event_type,
            new_id,
            next_read: false,
        });
    }

    /// The type of the next event, which is [`EventType::OTHER`].
    #[inline(never)]
    pub(super) fn push_type(&mut self, event_type: SharedStr) {
        self.types.push_back(event_type);
    }

    /// The id of the next event, which has `new_id`.
    #[inline(never)]
    pub(super) fn push_id(&mut self, id: SharedStr) {
        self.ids.push_back(id);
    }

    /// Append copied data of events queued (or about to be queued), in queue order.
    pub(super) fn push_block(&mut self, data: Bytes) {
        if !data.is_empty() {
            self.blocks.push_back(data);
        }
    }

    /// A shared read that the next event with `next_read` points into.
    #[inline(never)]
    pub(super) fn push_read(&mut self, read: Bytes) {
        self.reads.push_back(read);
    }

    /// Queue a comment, a retry delay or an error.
    pub(super) fn push_other(&mut self, item: Result<Item, Error>) {
        self.others.push_back(item);
        self.push(Entry {
            start: 0,
            end: 0,
            kind: Kind::Other,
            event_type: EventType::MESSAGE,
            new_id: false,
            next_read: false,
        });
    }

    #[inline(always)]
    fn push(&mut self, entry: Entry) {
        if self.entries.len() == self.entries.capacity() && self.polled > 0 {
            self.compact();
        }
        self.entries.push(entry);
    }

    /// Drop the polled entries instead of growing.
    #[inline(never)]
    fn compact(&mut self) {
        self.entries.drain(..self.polled);
        self.polled = 0;
    }

    /// The next item, built now.
    #[inline]
    pub(super) fn pop(&mut self) -> Option<Result<Item, Error>> {
        self.settle();
        let Some(&entry) = self.entries.get(self.polled) else {
            return self.drained();
        };
        self.polled += 1;
        if entry.kind == Kind::Other {
            return self.others.pop_front();
        }
        if entry.new_id {
            self.next_id();
        }
        let event_type = match KNOWN_TYPES.get(usize::from(entry.event_type.0)) {
            Some(known) => SharedStr::from_static(known),
            None => self.next_type(),
        };
        let data = if entry.kind == Kind::Shared {
            if entry.next_read {
                self.next_read();
            }
            self.read.slice(entry.start..entry.end)
        } else {
            self.take_block(entry.end)
        };
        Some(Ok(Item::Event(Event {
            event_type,
            data,
            id: self.polled_id.clone(),
        })))
    }

    /// The next item, read in place: nothing is built, cloned or allocated for an event.
    #[inline]
    pub(super) fn pop_ref(&mut self) -> Option<Result<ItemRef<'_>, Error>> {
        self.settle();
        let Some(&entry) = self.entries.get(self.polled) else {
            self.drained();
            return None;
        };
        self.polled += 1;
        if entry.kind == Kind::Other {
            return self
                .others
                .pop_front()
                .map(|item| item.map(ItemRef::from_other));
        }
        if entry.new_id {
            self.next_id();
        }
        let known = KNOWN_SHARED.get(usize::from(entry.event_type.0));
        if known.is_none() {
            self.polled_type = self.next_type();
        }
        if entry.kind == Kind::Shared {
            if entry.next_read {
                self.next_read();
            }
            let range = entry.start..entry.end;
            return Some(Ok(ItemRef::Event(EventRef::new(
                known.unwrap_or(&self.polled_type),
                &self.read,
                range,
                &self.polled_id,
            ))));
        }
        let (owner, range) = match self.blocks.front() {
            Some(block) if entry.end > 0 => {
                let len = entry.end.min(block.len());
                self.lent = len;
                (block, 0..len)
            }
            _ => (&self.read, 0..0),
        };
        Some(Ok(ItemRef::Event(EventRef::new(
            known.unwrap_or(&self.polled_type),
            owner,
            range,
            &self.polled_id,
        ))))
    }

    /// Drop the bytes lent to the event read in place last.
    #[inline(always)]
    fn settle(&mut self) {
        if self.lent != 0 {
            self.return_lent();
        }
    }

    #[inline(never)]
    fn return_lent(&mut self) {
        let lent = std::mem::take(&mut self.lent);
        if let Some(block) = self.blocks.front_mut() {
            if lent < block.len() {
                block.advance(lent);
            } else {
                self.blocks.pop_front();
            }
        }
    }

    /// Every entry has been polled: reuse the space, and release the last read (the
    /// next shared event comes from a later read, with `next_read`).
    #[inline(never)]
    fn drained(&mut self) -> Option<Result<Item, Error>> {
        self.entries.clear();
        self.polled = 0;
        self.read = Bytes::new();
        None
    }

    #[inline(never)]
    fn next_id(&mut self) {
        if let Some(id) = self.ids.pop_front() {
            self.polled_id = id;
        }
    }

    #[inline(never)]
    fn next_type(&mut self) -> SharedStr {
        self.types.pop_front().unwrap_or_default()
    }

    #[inline(never)]
    fn next_read(&mut self) {
        self.read = self.reads.pop_front().unwrap_or_default();
    }

    /// The front `len` bytes of `blocks`.
    #[inline(never)]
    fn take_block(&mut self, len: usize) -> Bytes {
        if len == 0 {
            return Bytes::new();
        }
        let Some(block) = self.blocks.front_mut() else {
            return Bytes::new();
        };
        if len < block.len() {
            return block.split_to(len);
        }
        self.blocks.pop_front().unwrap_or_default()
    }

    /// Drop every queued item. The id of the next event queued must be passed along.
    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.polled = 0;
        self.others.clear();
        self.types.clear();
        self.ids.clear();
        self.blocks.clear();
        self.reads.clear();
        self.read = Bytes::new();
        self.lent = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_types_match_their_names() {
        for (index, name) in KNOWN_TYPES.iter().enumerate() {
            let index = u8::try_from(index).unwrap();
            assert_eq!(known_type(name.as_bytes()), Some(EventType(index)));
        }
        assert_eq!(known_type(b""), Some(EventType::MESSAGE));
        assert_eq!(known_type(b"patches"), None);
    }
}
