//! The versioned flag store (DESIGN.md §3).
//!
//! Items keep their raw JSON; the store reads only what its rules need. FDv1 and FDv2
//! rules are two [`ApplyMode`]s of one [`Store`]. Readers get [`Snapshot`]s, which
//! share structure with the store and never block it.

mod change_set;
mod deps;
mod doubt;
mod init_order;
mod item;
mod kind;
mod memory;
mod scan;
mod snapshot;

pub use change_set::{ApplyMode, Change, ChangeSet, Selector, Transfer};
pub use deps::{Affected, DependencyIndex, ItemRef};
pub use doubt::{Doubts, NAMED, Named, doubts};
pub use init_order::init_order;
pub use item::{DecodeError, Decoded, Item};
pub use kind::Kind;
pub use memory::{Applied, ChangedFlags, Stale, Store};
pub(crate) use scan::DataSetScan;
pub(crate) use scan::patch as split_patch;
pub(crate) use scan::put_object as split_put_object;
pub use scan::{MAX_DEPTH, decode, split_all_data};
pub use snapshot::{Derived, Snapshot};
