//! flagsync

#[cfg(feature = "server")]
pub mod server;
