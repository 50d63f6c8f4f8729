//! What the core asks a persistent store to do, and the store's availability
//! (PROTOCOL.md B §4.2–4.5, §5.8–5.9, A.4.1, A.4.4, A.4.8, A.4.9).
//!
//! The core decides *what* to write and *when*; the driver performs it against the
//! store and reports failures ([`super::Input::StoreFailed`]) and availability
//! ([`super::Input::StoreAvailable`]).

use std::time::{Duration, Instant};

use crate::store::{Item, Kind};

/// Whether the data system writes to its persistent store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreMode {
    /// Write every applied change through, and read from the store until the first full
    /// data set arrives (a warm start). The default.
    #[default]
    ReadWrite,
    /// Never write: another process (a Relay Proxy, another SDK) keeps the store
    /// current; this one reads it until it has data of its own.
    ReadOnly,
}

/// Settings of the persistent store, as far as the core is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PersistenceConfig {
    /// Read-write or read-only.
    pub mode: StoreMode,
    /// How often the store is asked whether it is back during an outage (default
    /// 0.5 s, PROTOCOL.md B §4.5).
    pub availability_poll: Duration,
}

impl Default for PersistenceConfig {
    fn default() -> Self {
        Self {
            mode: StoreMode::ReadWrite,
            availability_poll: Duration::from_millis(500),
        }
    }
}

/// A request to the persistent store.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Persist {
    /// Replace everything the store holds with these items, in this order (segments
    /// first, prerequisites before the flags that need them, PROTOCOL.md B §4.2), then
    /// mark the store initialized (`$inited`).
    Init(Vec<(Kind, String, Item)>),
    /// Write one item (a tombstone for a delete) unless the store holds the same key at
    /// the same or a higher version.
    Upsert(Kind, String, Item),
    /// Report whether the store is reachable, with
    /// [`super::Input::StoreAvailable`] (during an outage, every
    /// [`PersistenceConfig::availability_poll`]).
    CheckAvailable,
}

/// The persistent store's status (PROTOCOL.md B §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreStatus {
    /// The store answers.
    pub available: bool,
    /// The store may lack writes this process made: true from a failure until the
    /// in-memory data has been written back after the store returned.
    pub stale: bool,
}

/// The core's side of a persistent store.
#[derive(Debug)]
pub(crate) struct Persistence {
    config: PersistenceConfig,
    available: bool,
    /// Writes were missed during an outage: rewrite everything on recovery.
    dirty: bool,
    next_check: Option<Instant>,
}

/// What the data system must do after a persistence input.
#[derive(Debug, Default)]
pub(crate) struct Effects {
    pub(crate) writes: Vec<Persist>,
    pub(crate) status: Option<StoreStatus>,
    /// The store came back: write the whole in-memory data set (A.4.8).
    pub(crate) rewrite: bool,
}

impl Persistence {
    pub(crate) fn new(mut config: PersistenceConfig) -> Self {
        // A zero interval would make every check due forever.
        config.availability_poll = config.availability_poll.max(Duration::from_millis(1));
        Self {
            config,
            available: true,
            dirty: false,
            next_check: None,
        }
    }

    pub(crate) fn writable(&self) -> bool {
        self.config.mode == StoreMode::ReadWrite
    }

    /// Writes go out now; during an outage they are held back (the store would refuse
    /// them) and the whole data set is written on recovery instead.
    pub(crate) fn accepts_writes(&mut self) -> bool {
        if !self.writable() {
            return false;
        }
        if !self.available {
            self.dirty = true;
        }
        self.available
    }

    pub(crate) fn status(&self) -> StoreStatus {
        StoreStatus {
            available: self.available,
            stale: self.dirty,
        }
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.next_check
    }

    /// A store operation failed: the store is unavailable until it says otherwise.
    pub(crate) fn failed(&mut self, now: Instant) -> Effects {
        let mut fx = Effects::default();
        if self.writable() {
            self.dirty = true;
        }
        if self.available {
            self.available = false;
            fx.status = Some(self.status());
            // The first check goes out at once (PROTOCOL.md B §4.5: no initial delay).
            fx.writes.push(Persist::CheckAvailable);
            self.next_check = Some(now + self.config.availability_poll);
        }
        fx
    }

    /// The store answered a check (or the driver noticed it came back).
    pub(crate) fn answered(&mut self, now: Instant, available: bool) -> Effects {
        let mut fx = Effects::default();
        match (self.available, available) {
            (false, true) => {
                self.available = true;
                self.next_check = None;
                fx.rewrite = self.dirty && self.writable();
                self.dirty = false;
                fx.status = Some(self.status());
            }
            (false, false) => {
                if self.next_check.is_none_or(|t| t <= now) {
                    self.next_check = Some(now + self.config.availability_poll);
                }
            }
            (true, false) => return self.failed(now),
            (true, true) => {}
        }
        fx
    }

    /// Time passed: ask again when a check is due.
    pub(crate) fn timeout(&mut self, now: Instant) -> Effects {
        let mut fx = Effects::default();
        if let Some(at) = self.next_check
            && now >= at
        {
            fx.writes.push(Persist::CheckAvailable);
            self.next_check = Some(super::next_on_grid(at, self.config.availability_poll, now));
        }
        fx
    }
}
