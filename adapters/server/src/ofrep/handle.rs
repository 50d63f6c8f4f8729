//! The server handle's OFREP method.

use super::flusher;
use crate::ServerHandle;

impl ServerHandle {
    /// Send the analytics events of the OFREP evaluations now, rather than at the next
    /// periodic flush (every 5 s): they reach the event subscriptions
    /// ([`ServerHandle::subscribe_events`]) as payloads posted to `/bulk` do. Shutdown
    /// flushes them too.
    pub fn flush_ofrep_events(&self) {
        flusher::flush(&self.shared);
    }
}
