//! Conformance scenarios for flagsync: data files with a server script and the expected
//! client-side transcript, and two runners over them (DESIGN.md §5, STYLE.md §3.10).
//!
//! - [`virtual_run`] feeds a scenario into the core's `DataSystem` under virtual time.
//! - [`live`] serves it from a 127.0.0.1 server to the real `flagsync::Client`, on tokio,
//!   smol and async-std.
//!
//! Both compare with [`check::check`], so the expectations are identical.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod check;
pub mod live;
pub mod report;
pub mod scenario;
pub mod sdk_service;
pub mod service_http;
pub mod virtual_run;
