//! What the parser produces: events, comments and reconnection delays.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use bytes::Bytes;

/// One unit of parser output, in stream order.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// An event, dispatched by a blank line after at least one `data` field.
    Event(Event),
    /// A comment line (`:` at the start of a line), reported at its own line end.
    ///
    /// The text is everything after the colon, decoded as UTF-8 with U+FFFD for invalid
    /// bytes; a space after the colon is kept. LaunchDarkly heartbeats are comments.
    Comment(String),
    /// A valid `retry` field: the reconnection delay requested by the server, in
    /// milliseconds (saturated at `u64::MAX`). Reported at the end of its line, without
    /// waiting for a dispatch.
    Retry(u64),
}

/// An event dispatched by the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The event type: the last `event` field of the block, or `"message"` when there was
    /// none (or it was empty).
    pub event_type: SharedStr,
    /// The `data` field values joined with LF (the final LF removed).
    ///
    /// Always valid UTF-8 when built by the parser; see [`Event::data_str`]. The data of
    /// an event shares an allocation with the events around it: the read it arrived in
    /// (the buffer passed to [`Parser::handle_chunk`](super::Parser::handle_chunk), or a
    /// copy of a read's whole lines), or a block of up to 16 KiB. The allocation is freed
    /// when the last of them is dropped; copy the data to keep it long-term.
    pub data: Bytes,
    /// The last event id at dispatch time (`""` if none): ids persist across events.
    pub id: SharedStr,
}

impl Event {
    /// Return the data as text.
    ///
    /// Data built by the parser is always valid UTF-8. For an `Event` built by hand with
    /// invalid data, this returns the longest valid prefix instead of panicking.
    pub fn data_str(&self) -> &str {
        match std::str::from_utf8(&self.data) {
            Ok(text) => text,
            Err(error) => {
                let valid = self.data.get(..error.valid_up_to()).unwrap_or_default();
                std::str::from_utf8(valid).unwrap_or_default()
            }
        }
    }
}

/// An immutable string that is cheap to clone: an event type or an event id.
///
/// The parser hands out the same allocation for a type or id that repeats (`put`,
/// `patch`, an unchanged last event id), so dispatching an event allocates no string.
/// It dereferences to `str` and compares with `str`, `&str` and `String`.
#[derive(Clone)]
pub struct SharedStr(Repr);

#[derive(Clone)]
enum Repr {
    Static(&'static str),
    Shared(Arc<str>),
}

impl SharedStr {
    /// Wrap a string literal (no allocation).
    pub const fn from_static(text: &'static str) -> Self {
        Self(Repr::Static(text))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Static(text) => text,
            Repr::Shared(text) => text,
        }
    }
}

impl Default for SharedStr {
    fn default() -> Self {
        Self::from_static("")
    }
}

impl Deref for SharedStr {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl PartialEq for SharedStr {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for SharedStr {}

impl PartialOrd for SharedStr {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SharedStr {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for SharedStr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialEq<str> for SharedStr {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for SharedStr {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for SharedStr {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<SharedStr> for str {
    fn eq(&self, other: &SharedStr) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<SharedStr> for &str {
    fn eq(&self, other: &SharedStr) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<SharedStr> for String {
    fn eq(&self, other: &SharedStr) -> bool {
        self == other.as_str()
    }
}

impl From<&str> for SharedStr {
    fn from(text: &str) -> Self {
        if text.is_empty() {
            Self::default()
        } else {
            Self(Repr::Shared(Arc::from(text)))
        }
    }
}

impl From<String> for SharedStr {
    fn from(text: String) -> Self {
        Self::from(text.as_str())
    }
}

impl From<SharedStr> for String {
    fn from(text: SharedStr) -> Self {
        text.as_str().to_owned()
    }
}
