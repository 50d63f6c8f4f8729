//! Analytics events: what the SDK evaluated and what the application tracked, reported
//! to the events service as LaunchDarkly's SDKs report it (DESIGN.md §7).
//!
//! [`EventProcessor`] is a deterministic state machine shaped like
//! [`crate::DataSystem`]: fed [`Input`]s (records, flushes, connection events) with
//! `now`, drained of [`Output`]s (connections to open, what happened, the next
//! deadline). It opens no socket and reads no clock; wall-clock times come with the
//! records, and its own (diagnostics) from the `unix_ms` it was started with.
//!
//! ```text
//!  Record::Evaluation ─┐   summary counters ─┐
//!  Record::Custom      ├─► index / feature /  ├─► flush (timer or Input::Flush)
//!  Record::Identify    │   debug events,      │     POST {events}/bulk  (schema 4,
//!  Record::MigrationOp ┘   bounded queue      ┘     payload id, gzip, one retry)
//!  Input::Summary (a Summarizer kept elsewhere, merged in)
//! ```
//!
//! The hot path of an SDK need not go through the processor at all: an evaluation that
//! only counts toward the summary can be counted in a [`Summarizer`] the caller keeps
//! per thread and hands over with [`Input::Summary`] before a flush.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Instant;
//! use flagsync_core::events::{EventContext, EventProcessor, EventsConfig, Input, Output, Record, Identify};
//! use flagsync_core::Action;
//!
//! let t0 = Instant::now();
//! let mut config = EventsConfig::new("sdk-key");
//! config.events_uri = "http://127.0.0.1:8030".into();
//! let mut events = EventProcessor::new(config, 7, t0, 1_700_000_000_000);
//! let context = EventContext::parse(&serde_json::json!({"kind": "user", "key": "u1"})).unwrap();
//! events.handle_input(t0, Input::Record(Record::Identify(Identify {
//!     creation_date: 1_700_000_000_000,
//!     context: Arc::new(context),
//! })));
//! events.handle_input(t0, Input::Flush);
//! let Output::Action(Action::Connect { request, .. }) = events.poll_output() else { unreachable!() };
//! assert!(request.starts_with(b"POST /bulk HTTP/1.1\r\n"));
//! ```

mod config;
pub mod context;
mod lru;
mod processor;
mod record;
mod summary;
#[cfg(test)]
mod tests;

pub use config::{DiagnosticInfo, EventsConfig};
pub use context::{
    ComponentError, ContextError, ContextFormatter, ContextKind, EventContext, unescape_component,
};
pub use processor::{Event, EventProcessor, Input, Output, status_is_recoverable};
pub use record::{Custom, Evaluation, Identify, MigrationOp, Record};
pub use summary::{FlagRef, Summarizer};

/// A random (version 4) UUID drawn from `rng`, lower-case and hyphenated.
pub fn uuid_v4(rng: &mut fastrand::Rng) -> String {
    processor::uuid_v4(rng)
}
