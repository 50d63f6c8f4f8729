//! Deadlines on a fixed grid, for the periodic timers of the coordinator and the
//! persistent store.

use std::time::{Duration, Instant};

/// The first point of the grid `start + k·interval` that is after `now` (`start <= now`),
/// in one step however long the gap (a loop would stall after a long sleep).
pub(crate) fn next_on_grid(start: Instant, interval: Duration, now: Instant) -> Instant {
    let interval = interval.max(Duration::from_nanos(1));
    let steps = (now.saturating_duration_since(start).as_nanos() / interval.as_nanos()) + 1;
    let steps = u32::try_from(steps).unwrap_or(u32::MAX);
    start
        .checked_add(interval.saturating_mul(steps))
        .filter(|t| *t > now)
        .unwrap_or(now + interval)
}
