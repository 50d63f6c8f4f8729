//! flagsync
