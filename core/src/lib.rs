//! The sans-I/O protocol core of flagsync: a deterministic state machine that keeps a
//! feature-flag store in sync with a LaunchDarkly-compatible flag delivery service.
//!
//! This crate does no I/O. It opens no socket, reads no clock, starts no thread and
//! draws no global randomness: it is fed bytes, connection events and the current time,
//! and it answers with what to do next and what happened. A driver (the `flagsync`
//! crate's adapters, or your own loop) performs the I/O.
//!
//! ```text
//!   Input::Command(Start|Stop) ─┐                     ┌─► Output::Action(Connect|Close)
//!   Input::Connected / Data ────┤   DataSystem        ├─► Output::Event(StoreChanged|StatusChanged|Ready|…)
//!   Input::Closed / Timeout ────┤ (now: Instant in)   ├─► Output::Persist(Init|Upsert|CheckAvailable)
//!   Input::StoreFailed / ───────┘                     └─► Output::Wait(next deadline)
//!     StoreAvailable
//! ```
//!
//! # The drive contract
//! 1. Build a [`DataSystem`] with a [`Config`], a seed for jitter and `now`.
//! 2. Feed one [`Input`] with [`DataSystem::handle_input`]`(now, input)`.
//! 3. Drain [`DataSystem::poll_output`] until it returns [`Output::Wait`]; perform each
//!    action and publish each event. No new input may be fed before the drain ends.
//! 4. Sleep until the `Wait` deadline or the next I/O, whichever comes first, then go to 2
//!    (send [`Input::Timeout`] when the deadline passed; an early one is harmless).
//!
//! `now` must never go backwards. The same inputs with the same seed give the same
//! outputs, which is what makes the virtual-time tests and the fuzz targets possible.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use flagsync_core::{Action, Command, Config, DataSystem, Event, Input, Kind, Output, State};
//!
//! let t0 = Instant::now(); // any instant: the core only compares them
//! let mut config = Config::new("sdk-key");
//! config.stream_uri = "http://127.0.0.1:8030".into();
//! let mut system = DataSystem::new(config, 1, t0).unwrap();
//! system.handle_input(t0, Input::Command(Command::Start));
//! let Output::Action(Action::Connect { conn, .. }) = system.poll_output() else { unreachable!() };
//! assert!(matches!(system.poll_output(), Output::Wait(Some(_)))); // the connect timeout
//!
//! // The server answers in two reads; the CRLF of the head and the event are split.
//! let now = t0 + Duration::from_millis(20);
//! system.handle_input(now, Input::Connected { conn });
//! system.handle_input(now, Input::Data { conn, bytes: b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nevent: put\ndata: {\"data\":{\"flags\":" });
//! while !matches!(system.poll_output(), Output::Wait(_)) {}
//! system.handle_input(now, Input::Data { conn, bytes: b"{\"f\":{\"key\":\"f\",\"version\":3}},\"segments\":{}}}\n\n" });
//! let mut events = Vec::new();
//! loop {
//!     match system.poll_output() {
//!         Output::Event(e) => events.push(e),
//!         Output::Wait(_) => break,
//!         Output::Action(a) => panic!("unexpected {a:?}"),
//!         Output::Persist(p) => panic!("no persistent store is configured: {p:?}"),
//!     }
//! }
//! assert!(events.contains(&Event::Ready));
//! assert_eq!(system.status().state, State::Valid);
//! assert_eq!(system.snapshot().get(Kind::Flag, "f").unwrap().version, 3);
//! ```
//!
//! Every inner machine is public and usable alone: [`sse::Parser`],
//! [`http1::ResponseReader`], [`source::EventStream`], [`source::StreamSource`],
//! [`source::Poller`] and [`store::Store`]. Behaviour follows the project's
//! PROTOCOL.md; comments cite its sections.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(unreachable_pub, clippy::use_self, elided_lifetimes_in_paths)]

pub mod backoff;
pub mod bigseg;
pub mod config;
pub mod datafile;
pub mod endpoint;
pub mod events;
pub mod fdv1;
pub mod fdv2;
pub mod http1;
mod io;
pub mod source;
pub mod sse;
pub mod status;
pub mod store;
mod system;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use config::{Config, ConfigError, Mode};
pub use io::{Action, CloseCause, ConnId, IoCause};
pub use status::{ErrorInfo, ErrorKind, State, Status};
pub use store::{Kind, Selector, Snapshot};
pub use system::{
    Command, DataAvailability, DataSystem, Event, Input, Output, Persist, PersistenceConfig,
    SourceFailure, StoreMode, StoreStatus,
};

#[cfg(test)]
mod tests;

/// The README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
