//! Persistent stores: a flag store shared by many processes, kept in a database.
//!
//! The protocol core decides *what* to write and *when* (DESIGN.md §3): a full data
//! set in init order (segments first, prerequisites before the flags that need them,
//! PROTOCOL.md B §4.2), one upsert per applied change, and after an outage one rewrite
//! of everything held in memory (A.4.8). This module performs those requests:
//!
//! ```text
//!   DataSystem ── Output::Persist(Init | Upsert | CheckAvailable) ──► driver
//!                                                                      │
//!        Input::StoreFailed / StoreAvailable(bool) ◄────────────────── │
//!                                                                      ▼
//!                               CachingStore (TTL cache, `$inited` latch, handover)
//!                                                                      │
//!                               dyn PersistentStore: flagsync_redis::RedisStore │ InMemoryStore │ yours
//! ```
//!
//! [`PersistentStore`] is the whole contract of a database: six async operations that
//! return boxed futures, so it is object safe and works on any runtime (no runtime type
//! appears in it). [`CachingStore`] wraps one with the caching rules of the reference
//! SDKs (B §4.3). `RedisStore` (crate `flagsync-redis`) keeps the key layout every
//! LaunchDarkly SDK and the Relay Proxy use (A.1, B §4.4), so they can share one store.

mod cache;
mod in_memory;
pub(crate) mod reader;
pub(crate) mod view;
pub(crate) mod writer;

use std::fmt::Debug;
use std::time::Duration;

use bytes::Bytes;
pub use flagsync_core::status::{StoreFault, StoreFaultKind};
pub use flagsync_core::store::Item;
use flagsync_core::{Kind, store};
pub use flagsync_core::{PersistenceConfig, StoreMode, StoreStatus};

pub use cache::{CacheConfig, CacheTtl, CachingStore, ItemMap};
pub use in_memory::{InMemoryStore, OpCounts};

use crate::runtime::BoxFuture;

/// How many times an upsert that lost an optimistic-locking race is tried before it
/// fails (the reference SDKs' `_MAX_UPSERT_RETRIES`, PROTOCOL.md B §4.4).
pub const MAX_UPSERT_ATTEMPTS: u32 = 10;

/// A database holding flags and segments for many processes.
///
/// The contract, checked for every implementation by the same tests:
/// - [`init`](Self::init) replaces *everything* with the given items, written in the
///   given order, then marks the store initialized (`$inited`). A kind with no items
///   ends up empty. Tombstones are written too (as tombstones).
/// - [`get`](Self::get) and [`all`](Self::all) return what is stored **including
///   tombstones** (the version rules need them); an item that cannot be decoded is left
///   out, logged at `warn` and counted ([`skipped_items`](Self::skipped_items)).
/// - [`upsert`](Self::upsert) writes the item unless the store holds the same key at
///   the same or a higher version (a tombstone counts). It says which happened.
/// - [`initialized`](Self::initialized) is true once any process ran `init` on this
///   store (the `$inited` marker).
/// - [`is_available`](Self::is_available) never fails: it answers whether the store
///   can be reached now.
///
/// Errors are [`StoreError`]s; the caller reports them to the core, which keeps serving
/// from memory and asks again later (PROTOCOL.md B §4.5).
pub trait PersistentStore: Send + Sync + Debug + 'static {
    /// Replace all data with `items`, in this order, then mark the store initialized.
    fn init<'a>(
        &'a self,
        items: &'a [(Kind, String, Item)],
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// The item of `kind` named `key`, tombstones included; `None` if absent.
    fn get<'a>(
        &'a self,
        kind: Kind,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Option<Item>, StoreError>>;

    /// Every item of `kind` with its key, tombstones included, in no particular order.
    fn all(&self, kind: Kind) -> BoxFuture<'_, Result<Vec<(String, Item)>, StoreError>>;

    /// Write `item` under `key` unless the stored item's version is the same or higher.
    fn upsert<'a>(
        &'a self,
        kind: Kind,
        key: &'a str,
        item: &'a Item,
    ) -> BoxFuture<'a, Result<Upserted, StoreError>>;

    /// True once the store was initialized (by this or any other process).
    fn initialized(&self) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// True if the store answers now. Never fails.
    fn is_available(&self) -> BoxFuture<'_, bool>;

    /// True if the store still holds every write made through this value, as far as
    /// it can tell: false for a store that lost its data (restarted empty, or rolled
    /// back to an older save). The writer asks it between writes and, on false, writes
    /// the whole data set again. The default is [`initialized`](Self::initialized)
    /// (a store without `$inited` lost its data set); `RedisStore` also counts its own
    /// writes in the store, in the same transaction as each write.
    fn holds_writes(&self) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.initialized()
    }

    /// How many stored items could not be decoded and were skipped in the latest whole
    /// read of each kind (default 0: the store does not count). Skipped items are
    /// logged at `warn` as they are read.
    fn skipped_items(&self) -> u64 {
        0
    }

    /// [`get`](Self::get) on the calling thread, without the async runtime, answering
    /// within about `timeout`; `None` if this store cannot (the default). A read of the
    /// client that finds no live cache entry uses it to answer before it returns, as
    /// LaunchDarkly's SDKs do, on any runtime and from any thread (a runtime's worker
    /// included); without it the read waits for the runtime's fetch task instead, at
    /// most [`CacheConfig::read_wait`].
    fn get_now(
        &self,
        kind: Kind,
        key: &str,
        timeout: Duration,
    ) -> Option<Result<Option<Item>, StoreError>> {
        let _ = (kind, key, timeout);
        None
    }

    /// [`initialized`](Self::initialized) on the calling thread, as
    /// [`get_now`](Self::get_now); `None` if this store cannot (the default).
    fn initialized_now(&self, timeout: Duration) -> Option<Result<bool, StoreError>> {
        let _ = timeout;
        None
    }
}

/// What an upsert did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upserted {
    /// The item was written.
    Written,
    /// The store already held this item at the same or a higher version; it is
    /// returned, so that a cache can hold what is really stored.
    Rejected {
        /// The item the store keeps.
        stored: Item,
    },
}

/// Why a persistent-store operation failed.
///
/// Messages never contain the store's password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store could not be reached, or the connection broke or timed out.
    #[error("persistent store unreachable: {0}")]
    Unreachable(String),
    /// The store answered with an error (wrong type at a key, authentication, …).
    #[error("persistent store error: {0}")]
    Backend(String),
    /// Another writer changed the kind's data during every attempt of an upsert.
    #[error("upsert lost {attempts} optimistic-locking races")]
    Contended {
        /// Attempts made ([`MAX_UPSERT_ATTEMPTS`]).
        attempts: u32,
    },
    /// The store's settings cannot work (for example, a malformed URL, or a database
    /// that does not exist).
    #[error("invalid persistent store settings: {0}")]
    Config(String),
    /// The store refused the credentials (a wrong or missing password).
    #[error("persistent store authentication failed: {0}")]
    Auth(String),
}

impl StoreError {
    /// The failure as the data-source status reports it (kind and message; never a
    /// password).
    pub fn fault(&self) -> flagsync_core::status::StoreFault {
        use flagsync_core::status::{StoreFault, StoreFaultKind};
        let (kind, message) = match self {
            Self::Unreachable(m) => (StoreFaultKind::Unreachable, m.clone()),
            Self::Backend(m) => (StoreFaultKind::Backend, m.clone()),
            Self::Contended { .. } => (StoreFaultKind::Contended, self.to_string()),
            Self::Config(m) => (StoreFaultKind::Configuration, m.clone()),
            Self::Auth(m) => (StoreFaultKind::Authentication, m.clone()),
        };
        StoreFault { kind, message }
    }

    /// A failure that will not clear by waiting (authentication, settings).
    pub fn is_permanent(&self) -> bool {
        matches!(self, Self::Auth(_) | Self::Config(_))
    }
}

/// The bytes to store for `item`: its raw JSON, or for a tombstone the placeholder the
/// Go SDK and the Relay Proxy write, `{"key":"$deleted","version":N,"deleted":true}`.
///
/// The placeholder key satisfies readers that require a `key` (the Python SDK before
/// its tombstone fix) and cannot collide with a real key; every SDK takes the key from
/// the hash field, not from the JSON (PROTOCOL.md B §4.4, §7.8).
pub fn stored_json(item: &Item) -> Bytes {
    if item.deleted {
        Bytes::from(format!(
            r#"{{"key":"$deleted","version":{},"deleted":true}}"#,
            item.version
        ))
    } else {
        item.raw.clone()
    }
}

/// Decode stored JSON of `kind` (any of the three tombstone shapes, PROTOCOL.md A.1);
/// `None`, logged at `warn`, if it is not an item.
pub fn decode_stored(kind: Kind, key: &str, raw: Bytes) -> Option<Item> {
    match store::decode(kind, raw) {
        Ok(d) => Some(d.item),
        Err(error) => {
            tracing::warn!(%kind, key, %error, "skipping an undecodable stored item");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tombstones_are_stored_as_the_go_sdk_writes_them() {
        let t = Item::tombstone("f", 9);
        assert_eq!(
            &stored_json(&t)[..],
            br#"{"key":"$deleted","version":9,"deleted":true}"#
        );
        let d = decode_stored(Kind::Flag, "f", stored_json(&t)).unwrap();
        assert!(d.deleted);
        assert_eq!(d.version, 9);
        let live = Item {
            version: 1,
            deleted: false,
            raw: Bytes::from_static(br#"{"key":"f","version":1}"#),
        };
        assert_eq!(stored_json(&live), live.raw);
    }

    #[test]
    fn undecodable_items_are_skipped() {
        assert_eq!(
            decode_stored(Kind::Flag, "x", Bytes::from_static(b"{nope")),
            None
        );
    }
}
