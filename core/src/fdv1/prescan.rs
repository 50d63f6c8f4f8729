//! Reading a `put` while it arrives.

use bytes::Bytes;

use super::{Error, Event, malformed_first};
use crate::store::DataSetScan;

/// A `put` event's data, read while it is still arriving.
///
/// A LaunchDarkly `put` carries the whole data set on one SSE `data` line, tens of MB.
/// Read at the end, those bytes come back from main memory, after the SSE parser has
/// gathered them in one buffer as large as the event; read as they arrive (pass each
/// piece that [`sse::Parser::take_pending_data`](crate::sse::Parser::take_pending_data)
/// returns to [`advance`](Self::advance)), they are still in the processor's caches,
/// and no buffer of that size is needed: the items are slices of the pieces. When the
/// event is dispatched with the rest of its data, [`parse_put_prescanned`] reads that
/// rest. The result, errors included, is always that of
/// [`parse_event`](super::parse_event) on the complete data.
///
/// ```
/// use bytes::Bytes;
/// use flagsync_core::fdv1::{self, Event, PutPrescan};
/// use flagsync_core::sse::{Config, Item, Parser};
///
/// let stream = br#"event: put
/// data: {"path":"/","data":{"flags":{"f":{"key":"f","version":1}},"segments":{}}}
///
/// "#;
/// let mut parser = Parser::new(Config::default());
/// let mut prescan = PutPrescan::new();
/// for read in stream.chunks(16) {
///     parser.handle_bytes(read);
///     while let Some(Ok(Item::Event(event))) = parser.poll_item() {
///         // `event.data` is the rest of the data: what was not taken.
///         let prescan = std::mem::take(&mut prescan);
///         assert!(prescan.data(&event.data).starts_with(br#"{"path":"/""#));
///         let Event::Put(changes) = fdv1::parse_put_prescanned(&event.data, prescan)? else {
///             unreachable!()
///         };
///         assert_eq!(changes[0].key, "f");
///     }
///     if let Some(piece) = parser.take_pending_data() {
///         prescan.advance(&piece);
///     }
/// }
/// # Ok::<(), fdv1::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutPrescan(DataSetScan);

impl PutPrescan {
    /// Nothing read yet.
    pub fn new() -> Self {
        Self(DataSetScan::new(true))
    }

    /// Read what can be read of `piece`, the data that arrived after the pieces passed
    /// before (any split). The stored items of the `put` will be slices of the pieces
    /// (a reference count, no copy), except the few cut by the end of one, which are
    /// copied. Pieces shorter than 1 KiB (a server writing a byte at a time) are first
    /// copied together into buffers of 16 KiB and read when one is full, so that the
    /// memory a `put` costs follows its bytes, not the number of reads. Cheap to call after every read: whatever is cut short is read again only
    /// once its text has doubled, so the total work stays linear. Never fails; errors
    /// are reported by [`parse_put_prescanned`].
    pub fn advance(&mut self, piece: &Bytes) {
        self.0.advance(piece);
    }

    /// Bytes of the data read so far (small pieces being gathered are not read yet).
    pub fn scanned(&self) -> usize {
        self.0.scanned()
    }

    /// The complete data: the pieces passed so far followed by `rest` (a copy), for an
    /// event that turns out not to be a `put`.
    pub fn data(&self, rest: &Bytes) -> Bytes {
        self.0.text(rest)
    }
}

impl Default for PutPrescan {
    fn default() -> Self {
        Self::new()
    }
}

/// Parse the data of a `put` event of which `prescan` has read the start: `rest` is the
/// data that was not passed to [`PutPrescan::advance`]. The same as
/// [`parse_event`](super::parse_event)`("put", data)` on the complete data.
pub fn parse_put_prescanned(rest: &Bytes, prescan: PutPrescan) -> Result<Event, Error> {
    prescan
        .0
        .finish_rest(rest)
        .map(Event::Put)
        .map_err(|(e, whole)| malformed_first(Error::from_decode("put", e), &whole))
}
