//! Borrowed parser output: events read in place, without taking ownership.

use std::ops::Range;

use bytes::Bytes;

use super::{Event, Item, SharedStr};

/// One unit of parser output, borrowed from the [`Parser`](super::Parser) until the next
/// call on it; see [`Parser::poll_ref`](super::Parser::poll_ref).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemRef<'a> {
    /// An event, read in place.
    Event(EventRef<'a>),
    /// A comment line, as in [`Item::Comment`].
    Comment(String),
    /// A valid `retry` field, as in [`Item::Retry`].
    Retry(u64),
}

impl ItemRef<'_> {
    /// The owned item: the same as [`Parser::poll_item`](super::Parser::poll_item) would
    /// have returned.
    pub fn to_item(&self) -> Item {
        match self {
            Self::Event(event) => Item::Event(event.to_event()),
            Self::Comment(text) => Item::Comment(text.clone()),
            Self::Retry(ms) => Item::Retry(*ms),
        }
    }

    /// Wrap an owned comment or retry delay.
    pub(super) fn from_other(item: Item) -> Self {
        match item {
            Item::Event(_) => unreachable_event(),
            Item::Comment(text) => Self::Comment(text),
            Item::Retry(ms) => Self::Retry(ms),
        }
    }
}

/// Events never wait in the side queue of other items; an empty comment stands in.
#[cold]
fn unreachable_event() -> ItemRef<'static> {
    debug_assert!(false, "an event in the queue of other items");
    ItemRef::Comment(String::new())
}

/// An event read in place: its type, data and id borrow the parser's buffers.
///
/// Reading an event this way touches no reference count and allocates nothing, so a
/// consumer that looks at the data and keeps only part of it (or none) pays for what it
/// keeps: [`data_bytes`](Self::data_bytes) or [`Bytes::slice_ref`] on
/// [`owner`](Self::owner) make an owned slice without copying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRef<'a> {
    event_type: &'a SharedStr,
    owner: &'a Bytes,
    range: Range<usize>,
    id: &'a SharedStr,
}

impl<'a> EventRef<'a> {
    /// An event whose data is `owner[range]`; `range` must lie within `owner`.
    pub(super) fn new(
        event_type: &'a SharedStr,
        owner: &'a Bytes,
        range: Range<usize>,
        id: &'a SharedStr,
    ) -> Self {
        debug_assert!(range.start <= range.end && range.end <= owner.len());
        Self {
            event_type,
            owner,
            range,
            id,
        }
    }

    /// The event type, as in [`Event::event_type`].
    pub fn event_type(&self) -> &'a str {
        self.event_type.as_str()
    }

    /// The data, as in [`Event::data`]: valid UTF-8.
    pub fn data(&self) -> &'a [u8] {
        let owner: &'a Bytes = self.owner;
        owner.get(self.range.clone()).unwrap_or_default()
    }

    /// The data as text (checked; the parser only produces valid UTF-8, see
    /// [`Event::data_str`]).
    pub fn data_str(&self) -> &'a str {
        let data = self.data();
        match std::str::from_utf8(data) {
            Ok(text) => text,
            Err(error) => {
                let valid = data.get(..error.valid_up_to()).unwrap_or_default();
                std::str::from_utf8(valid).unwrap_or_default()
            }
        }
    }

    /// The last event id at dispatch time, as in [`Event::id`].
    pub fn id(&self) -> &'a str {
        self.id.as_str()
    }

    /// The shared buffer the data lies in; slice it with [`Bytes::slice_ref`] to keep
    /// part of the data without a copy.
    pub fn owner(&self) -> &'a Bytes {
        self.owner
    }

    /// The data as an owned slice of its buffer (no copy).
    pub fn data_bytes(&self) -> Bytes {
        if self.range.is_empty() {
            return Bytes::new();
        }
        self.owner.slice(self.range.clone())
    }

    /// The owned event, equal to what [`Parser::poll_item`](super::Parser::poll_item)
    /// would have returned.
    pub fn to_event(&self) -> Event {
        Event {
            event_type: self.event_type.clone(),
            data: self.data_bytes(),
            id: self.id.clone(),
        }
    }
}
