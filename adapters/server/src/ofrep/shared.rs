//! What the OFREP endpoints keep beside the server's state: the environments' event
//! processors, their change-notice channels, and the timer thread that flushes the
//! events.

use std::sync::Mutex;
use std::thread::Thread;

use super::analytics::Analytics;
use super::channels::Channels;

/// The OFREP endpoints' state, a field of the server's shared state (its own locks,
/// never taken while the server's lock is held by the same code path that then takes
/// the server's: the payloads are published after these locks are released).
#[derive(Debug, Default)]
pub(crate) struct OfrepState {
    /// Each environment's analytics event processor.
    pub(crate) analytics: Analytics,
    /// Each environment's change-notice channel.
    pub(crate) channels: Channels,
    /// The thread that flushes the analytics events, once started.
    pub(crate) timer: Mutex<Option<Thread>>,
}
