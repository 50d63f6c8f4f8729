//! The status rules: the store's status from its metadata, the status an evaluation
//! reports, and how often the status is polled.

use std::time::Duration;

use super::BigSegmentsStatus;

/// The default of [`poll_interval`]'s `configured`: 5 s.
pub const DEFAULT_STATUS_POLL_INTERVAL: Duration = Duration::from_secs(5);

/// The default of [`store_status`]'s `stale_after`: 2 minutes.
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(120);

/// The health of the big-segment store, as the client reports it and as LaunchDarkly's
/// SDKs name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BigSegmentStoreStatus {
    /// The store's metadata could be read.
    pub available: bool,
    /// The store's last update (`lastUpToDate`) is missing, or older than the stale
    /// threshold: the Relay Proxy (or whatever writes the store) may have stopped.
    pub stale: bool,
}

/// The store's status after a metadata query that gave `metadata`: `Err` if the query
/// failed, else the store's `lastUpToDate` (unix milliseconds), if it has one.
/// `now_unix_ms` is the wall-clock time of the query (passed in: the core reads no
/// clock).
///
/// Available when the query succeeded; stale when `lastUpToDate` is missing or at least
/// `stale_after` old (LaunchDarkly's SDKs: `age >= staleAfter`). A `lastUpToDate` in
/// the future is fresh.
pub fn store_status<E>(
    metadata: Result<Option<u64>, E>,
    now_unix_ms: u64,
    stale_after: Duration,
) -> BigSegmentStoreStatus {
    match metadata {
        Err(_) => BigSegmentStoreStatus {
            available: false,
            stale: false,
        },
        Ok(None) => BigSegmentStoreStatus {
            available: true,
            stale: true,
        },
        Ok(Some(last)) => {
            let age = Duration::from_millis(now_unix_ms.saturating_sub(last));
            BigSegmentStoreStatus {
                available: true,
                stale: age >= stale_after,
            }
        }
    }
}

/// The `bigSegmentsStatus` of an evaluation whose membership query `membership_read`
/// (false: the store failed), given the store's status as last known.
///
/// A failed membership query is `STORE_ERROR`; a successful one is `STALE` if the
/// store is known to be stale, `HEALTHY` otherwise (a store whose metadata cannot be
/// read but whose membership can still answers `HEALTHY`, as LaunchDarkly's SDKs do:
/// staleness is a property of data that was read).
pub fn evaluation_status(
    membership_read: bool,
    store: Option<BigSegmentStoreStatus>,
) -> BigSegmentsStatus {
    if !membership_read {
        return BigSegmentsStatus::StoreError;
    }
    match store {
        Some(s) if s.stale => BigSegmentsStatus::Stale,
        _ => BigSegmentsStatus::Healthy,
    }
}

/// How often to poll the store's metadata: `configured`, but never less often than
/// `stale_after` (a store cannot turn stale unnoticed for longer than that), and at
/// least every millisecond apart.
pub fn poll_interval(configured: Duration, stale_after: Duration) -> Duration {
    configured.min(stale_after).max(Duration::from_millis(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn a_failed_metadata_query_is_unavailable_and_not_stale() {
        let s = store_status::<()>(Err(()), 1_000_000, MIN);
        assert_eq!(
            s,
            BigSegmentStoreStatus {
                available: false,
                stale: false
            }
        );
    }

    #[test]
    fn staleness_starts_at_exactly_stale_after() {
        let now = 10_000_000;
        let fresh = store_status::<()>(Ok(Some(now - 59_999)), now, MIN);
        let stale = store_status::<()>(Ok(Some(now - 60_000)), now, MIN);
        assert!(fresh.available && !fresh.stale);
        assert!(stale.available && stale.stale);
    }

    #[test]
    fn a_missing_or_future_last_update() {
        assert!(store_status::<()>(Ok(None), 5, MIN).stale);
        assert!(!store_status::<()>(Ok(Some(u64::MAX)), 5, MIN).stale);
        // The harness's "stale" store: lastUpToDate = 1.
        assert!(store_status::<()>(Ok(Some(1)), 1_700_000_000_000, DEFAULT_STALE_AFTER).stale);
    }

    #[test]
    fn the_evaluation_status_rules() {
        let healthy = BigSegmentStoreStatus {
            available: true,
            stale: false,
        };
        let stale = BigSegmentStoreStatus {
            available: true,
            stale: true,
        };
        let down = BigSegmentStoreStatus {
            available: false,
            stale: false,
        };
        assert_eq!(
            evaluation_status(false, Some(healthy)),
            BigSegmentsStatus::StoreError
        );
        assert_eq!(
            evaluation_status(true, Some(healthy)),
            BigSegmentsStatus::Healthy
        );
        assert_eq!(
            evaluation_status(true, Some(stale)),
            BigSegmentsStatus::Stale
        );
        assert_eq!(
            evaluation_status(true, Some(down)),
            BigSegmentsStatus::Healthy
        );
        assert_eq!(evaluation_status(true, None), BigSegmentsStatus::Healthy);
    }

    #[test]
    fn the_poll_interval_is_capped_by_stale_after() {
        assert_eq!(
            poll_interval(Duration::from_secs(5), MIN),
            Duration::from_secs(5)
        );
        assert_eq!(poll_interval(Duration::from_secs(600), MIN), MIN);
        assert_eq!(poll_interval(Duration::ZERO, MIN), Duration::from_millis(1));
    }
}
