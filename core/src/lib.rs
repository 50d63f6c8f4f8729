//! flagsync-core (placeholder while modules land)
#![forbid(unsafe_code)]

pub mod http1;
pub mod sse;
pub mod store;
