//! [`BigSegmentsOptions`]: the store and its cache and status settings.

use std::sync::Arc;
use std::time::Duration;

use flagsync_core::bigseg::{
    DEFAULT_CACHE_CAPACITY, DEFAULT_CACHE_TTL, DEFAULT_STALE_AFTER, DEFAULT_STATUS_POLL_INTERVAL,
};

use super::BigSegmentStore;

/// Big-segment settings for [`crate::ClientBuilder::big_segments`]: the store, and how
/// memberships are cached and the store's status polled.
///
/// ```
/// use std::time::Duration;
/// # use flagsync::bigseg::{Membership, StoreError, StoreMetadata};
/// # use flagsync::runtime::BoxFuture;
/// # #[derive(Debug)] struct MyStore;
/// # impl flagsync::bigseg::BigSegmentStore for MyStore {
/// #     fn metadata(&self) -> BoxFuture<'_, Result<StoreMetadata, StoreError>> { Box::pin(async { Ok(Default::default()) }) }
/// #     fn membership<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Option<Membership>, StoreError>> { Box::pin(async { Ok(None) }) }
/// # }
/// use flagsync::bigseg::BigSegmentsOptions;
///
/// let options = BigSegmentsOptions::new(std::sync::Arc::new(MyStore))
///     .context_cache_size(10_000)
///     .context_cache_time(Duration::from_secs(30));
/// let client = flagsync::Client::builder("sdk-key").big_segments(options).build()?;
/// # Ok::<(), flagsync::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct BigSegmentsOptions {
    pub(crate) store: Arc<dyn BigSegmentStore>,
    pub(crate) context_cache_size: usize,
    pub(crate) context_cache_time: Duration,
    pub(crate) status_poll_interval: Duration,
    pub(crate) stale_after: Duration,
}

impl BigSegmentsOptions {
    /// Read big segments from `store`, with the defaults below.
    pub fn new(store: Arc<dyn BigSegmentStore>) -> Self {
        Self {
            store,
            context_cache_size: DEFAULT_CACHE_CAPACITY,
            context_cache_time: DEFAULT_CACHE_TTL,
            status_poll_interval: DEFAULT_STATUS_POLL_INTERVAL,
            stale_after: DEFAULT_STALE_AFTER,
        }
    }

    /// How many contexts' memberships are cached at most (default 1,000; the least
    /// recently used goes first; 0 caches none).
    pub fn context_cache_size(mut self, size: usize) -> Self {
        self.context_cache_size = size;
        self
    }

    /// How long a cached membership is used before the store is asked again (default
    /// 5 s).
    pub fn context_cache_time(mut self, time: Duration) -> Self {
        self.context_cache_time = time;
        self
    }

    /// How often the store's metadata is read for its status (default 5 s; never
    /// less often than [`BigSegmentsOptions::stale_after`]).
    pub fn status_poll_interval(mut self, interval: Duration) -> Self {
        self.status_poll_interval = interval;
        self
    }

    /// How old the store's last update may be before the store is stale (default 2
    /// minutes); evaluations then report `STALE`.
    pub fn stale_after(mut self, stale_after: Duration) -> Self {
        self.stale_after = stale_after;
        self
    }
}
