//! What the parser produces: events, comments and reconnection delays.

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
    pub event_type: String,
    /// The `data` field values joined with LF (the final LF removed).
    ///
    /// Always valid UTF-8 when built by the parser; see [`Event::data_str`]. The data of
    /// small events may share one allocation of up to 16 KiB with the events around it,
    /// which is freed when the last of them is dropped; copy it to keep it long-term.
    pub data: Bytes,
    /// The last event id at dispatch time (`""` if none): ids persist across events.
    pub id: String,
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
