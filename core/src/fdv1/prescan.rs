//! Reading a `put` while it arrives.

use bytes::Bytes;

use super::{Error, Event, malformed_first};
use crate::store::DataSetScan;

/// A `put` event's data, read while it is still arriving.
///
/// A LaunchDarkly `put` carries the whole data set on one SSE `data` line, tens of MB.
/// Read at the end, those bytes come back from main memory; read as they arrive (call
/// [`advance`](Self::advance) with [`sse::Parser::pending_data`](crate::sse::Parser::pending_data)
/// after each read), they are still in the processor's caches. When the event is
/// dispatched, [`parse_put_prescanned`] reads the rest. The result, errors included, is
/// always that of [`parse_event`](super::parse_event) on the complete data.
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
///         let prescan = std::mem::take(&mut prescan);
///         assert!(prescan.scanned() > 0);
///         let Event::Put(changes) = fdv1::parse_put_prescanned(&event.data, prescan)? else {
///             unreachable!()
///         };
///         assert_eq!(changes[0].key, "f");
///     }
///     if let Some(partial) = parser.pending_data() {
///         prescan.advance(partial);
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

    /// Read what can be read of `prefix`, the data that has arrived so far.
    ///
    /// Each call's `prefix` must start with the previous call's, and all must be
    /// prefixes of the data later passed to [`parse_put_prescanned`]. Cheap to call
    /// after every read: whatever is cut short is read again only once the data has
    /// grown by as much, so the total work stays linear. Never fails; errors are
    /// reported by `parse_put_prescanned`.
    pub fn advance(&mut self, prefix: &[u8]) {
        self.0.advance(prefix);
    }

    /// Bytes of the data read so far.
    pub fn scanned(&self) -> usize {
        self.0.scanned()
    }
}

impl Default for PutPrescan {
    fn default() -> Self {
        Self::new()
    }
}

/// Parse the data of a `put` event, of which `prescan` has read a prefix: the same as
/// [`parse_event`](super::parse_event)`("put", data)`.
pub fn parse_put_prescanned(data: &Bytes, prescan: PutPrescan) -> Result<Event, Error> {
    prescan
        .0
        .finish(data)
        .map(Event::Put)
        .map_err(|e| malformed_first(Error::from_decode("put", e), data))
}
