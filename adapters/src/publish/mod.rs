//! What the driver publishes for readers: the newest snapshot, the status, the
//! environment id, readiness, and change subscriptions. Readers take a lock only to
//! clone an `Arc`-like value, so they never hold up the driver.
//!
//! `status.rs`: the public status and change types and the clock that dates them;
//! `subscription.rs`: subscriptions and their bounded, coalescing queues;
//! `published.rs`: [`Published`], what readers see; `sink.rs`: [`DataSink`], the
//! driver's side that publishes the data system's events; `diff.rs`: which flags a
//! first full data set changed from what the persistent store served.

mod diff;
mod published;
mod sink;
mod status;
mod subscription;

pub(crate) use published::Published;
pub(crate) use sink::{DataSink, StoreLink};
pub(crate) use status::Clock;
pub use status::{DataSourceError, DataSourceStatus, FlagChange};
#[cfg(feature = "eval")]
pub(crate) use subscription::{Coalesce, Subscribers};
pub use subscription::{DEFAULT_SUBSCRIPTION_CAPACITY, Subscription};
