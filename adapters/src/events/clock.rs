//! The wall clock of the evaluation path.
//!
//! Every evaluation with events on is counted with the time it happened (the summary's
//! `startDate`/`endDate`, a feature or debug event's `creationDate`, the comparison with
//! `debugEventsUntilDate`). A precise wall-clock read (`SystemTime::now`) costs about
//! 27 ns of CPU on the virtual machines SDKs usually run on (measured on this project's
//! 2-core VM: `clock_gettime(CLOCK_REALTIME)` through the vDSO reads a virtualized TSC,
//! which alone takes ~23 ns) — a third of what events added to an evaluation. Where the
//! system has one, the evaluation path reads the kernel's coarse real-time clock
//! instead (`CLOCK_REALTIME_COARSE`: the time of the last timer tick, 6.5 ns of CPU
//! here), whose resolution (1–4 ms, one tick) is finer than anything the events report
//! needs: dates are milliseconds, summaries span seconds. Elsewhere it is
//! `SystemTime::now`. It is read through libc (rustix's `use-libc`), whose
//! `clock_gettime` uses the vDSO too; rustix's own vDSO reader crashes under valgrind,
//! which the project's instruction counts run on.

use std::time::{SystemTime, UNIX_EPOCH};

/// The current wall-clock time in Unix milliseconds, exact to the millisecond.
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The current wall-clock time in Unix milliseconds, possibly up to one timer tick
/// (1–4 ms) behind: for the evaluation path.
#[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
pub(crate) fn coarse_unix_ms() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    match (u64::try_from(t.tv_sec), u64::try_from(t.tv_nsec)) {
        (Ok(s), Ok(ns)) => s.saturating_mul(1000).saturating_add(ns / 1_000_000),
        // Before 1970: as `unix_ms` answers.
        _ => 0,
    }
}

/// The current wall-clock time in Unix milliseconds: for the evaluation path.
#[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
pub(crate) fn coarse_unix_ms() -> u64 {
    unix_ms()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coarse_clock_is_the_wall_clock_within_a_tick() {
        for _ in 0..100 {
            let before = unix_ms();
            let coarse = coarse_unix_ms();
            let after = unix_ms();
            // One tick is at most 10 ms (HZ=100); allow scheduling noise around it.
            assert!(coarse + 50 >= before, "{coarse} vs {before}");
            assert!(coarse <= after, "{coarse} after {after}");
        }
    }
}
