//! Server-sent events.
