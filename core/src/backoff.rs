//! Reconnect delays with seeded jitter (PROTOCOL.md A.3, B §1.9).

use std::time::{Duration, Instant};

/// Backoff settings; every value is configurable (PROTOCOL.md A.5).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffConfig {
    /// First delay of a failure streak (default 1 s). A server `retry:` replaces it,
    /// clamped to [`SERVER_RETRY_FLOOR`] (or this value, if lower) and to `max`.
    pub initial: Duration,
    /// Ceiling of the normal regime (default 30 s).
    pub max: Duration,
    /// A connection that stayed healthy this long resets the streak (default 60 s).
    pub reset_after: Duration,
    /// Fraction of each delay that jitter may subtract (default 0.5).
    pub jitter: f64,
    /// First delay of the extended regime after an unrecoverable HTTP status under the
    /// RETRY policy (default 300 s).
    pub extended_initial: Duration,
    /// Ceiling of the extended regime (default 3600 s).
    pub extended_max: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        Self {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(30),
            reset_after: Duration::from_secs(60),
            jitter: 0.5,
            extended_initial: Duration::from_secs(300),
            extended_max: Duration::from_secs(3600),
        }
    }
}

/// The lowest base delay a server's `retry:` field can set: 100 ms, or the configured
/// initial delay if that is lower. A `retry: 0` from a hostile or broken server can make
/// the client reconnect at most about ten times in its first second, then ever more
/// slowly as the streak doubles (PROTOCOL.md A.3).
pub const SERVER_RETRY_FLOOR: Duration = Duration::from_millis(100);

/// Which regime a failure belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Regime {
    /// Network errors and recoverable statuses: `initial`, doubling to `max`.
    Normal,
    /// Unrecoverable statuses under the RETRY policy: `extended_initial`, doubling to
    /// `extended_max`.
    Extended,
}

/// Exponential backoff with subtractive jitter, as a pure value.
///
/// ```
/// use std::time::{Duration, Instant};
/// use flagsync_core::backoff::{Backoff, BackoffConfig, Regime};
///
/// let mut b = Backoff::new(BackoffConfig { jitter: 0.0, ..Default::default() }, 7);
/// let now = Instant::now();
/// assert_eq!(b.next_delay(now, Regime::Normal), Duration::from_secs(1));
/// assert_eq!(b.next_delay(now, Regime::Normal), Duration::from_secs(2));
/// b.on_connected(now);
/// // A connection that lasted 60 s resets the streak.
/// assert_eq!(b.next_delay(now + Duration::from_secs(60), Regime::Normal), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone)]
pub struct Backoff {
    config: BackoffConfig,
    rng: fastrand::Rng,
    /// The base delay of a normal-regime streak: the configured initial delay, or
    /// what the server's `retry:` set it to.
    base: Duration,
    /// The current streak: its regime and how many delays it has handed out.
    streak: Option<(Regime, u32)>,
    /// When the current connection became healthy.
    connected_at: Option<Instant>,
}

impl Backoff {
    /// A backoff whose jitter is drawn from a PRNG seeded with `seed`.
    pub fn new(config: BackoffConfig, seed: u64) -> Self {
        Self {
            base: config.initial,
            config,
            rng: fastrand::Rng::with_seed(seed),
            streak: None,
            connected_at: None,
        }
    }

    /// The settings in force.
    pub fn config(&self) -> &BackoffConfig {
        &self.config
    }

    /// The base delay of a normal-regime streak now (the first delay of a streak,
    /// before jitter): the configured initial delay unless the server's `retry:`
    /// changed it.
    pub fn base(&self) -> Duration {
        self.base
    }

    /// A connection succeeded at `now`.
    pub fn on_connected(&mut self, now: Instant) {
        self.connected_at = Some(now);
        if matches!(self.streak, Some((Regime::Extended, _))) {
            // Any success leaves the extended regime.
            self.streak = None;
        }
    }

    /// The server sent `retry:` with this delay: it becomes the base delay, clamped to
    /// [`SERVER_RETRY_FLOOR`] (or the configured initial delay, if lower) and to the
    /// configured maximum (PROTOCOL.md A.3).
    ///
    /// It changes the base only: the failure streak goes on (the next delay is the new
    /// base doubled once per failure so far), the maximum stays, and jitter still
    /// applies. So a server that sends `retry:` and closes every stream is reconnected
    /// to no faster than one that sends nothing, `retry: 0` cannot make the client spin,
    /// and a huge `retry:` cannot stop it reconnecting.
    pub fn set_initial(&mut self, initial: Duration) {
        let floor = SERVER_RETRY_FLOOR.min(self.config.initial);
        self.base = initial.max(floor).min(self.config.max.max(floor));
    }

    /// The connection that became healthy at the last [`Backoff::on_connected`] (if
    /// any) ended at `now` without a failure (its owner was stopped): a healthy run of
    /// `reset_after` resets the streak, and from now on the connection no longer counts,
    /// so time spent stopped is never taken for a healthy connection.
    pub fn settle(&mut self, now: Instant) {
        if let Some(at) = self.connected_at.take()
            && now.saturating_duration_since(at) >= self.config.reset_after
        {
            self.streak = None;
        }
    }

    /// Forget the streak.
    pub fn reset(&mut self) {
        self.streak = None;
    }

    /// The delay before the next attempt after a failure at `now`, measured from `now`.
    pub fn next_delay(&mut self, now: Instant, regime: Regime) -> Duration {
        if let Some(at) = self.connected_at.take()
            && now.saturating_duration_since(at) >= self.config.reset_after
        {
            self.streak = None;
        }
        let (initial, max) = match regime {
            Regime::Normal => (self.base, self.config.max.max(self.base)),
            Regime::Extended => (self.config.extended_initial, self.config.extended_max),
        };
        let failures = match self.streak {
            Some((r, n)) if r == regime => n,
            _ => 0,
        };
        self.streak = Some((regime, failures.saturating_add(1)));
        let base = initial.saturating_mul(1u32 << failures.min(31)).min(max);
        let jitter = self.config.jitter.clamp(0.0, 1.0) * self.rng.f64();
        base.mul_f64(1.0 - jitter)
    }
}

/// A synchronizer's retry timing, handed from the instance the FDv2 coordinator stops
/// to the one it starts later for the same source (see `system::coordinator`).
///
/// LaunchDarkly's Python SDK builds a new synchronizer, with a new SSE client and a
/// fresh backoff, at every fallback, and its first attempt is immediate. Under a long
/// outage the coordinator restarts a failing synchronizer every 10 s, so each restart
/// began a new streak (1 s, 2 s, 4 s, …) and sent a request at once. flagsync keeps the
/// streak and the time the next attempt was due instead: a restarted synchronizer waits
/// until then, and its next failure waits the next longer delay. It never sends more
/// requests than the reference; the streak still ends only on success (a healthy
/// connection of `reset_after`, or a poll that succeeds).
#[derive(Debug, Clone)]
pub struct RetryState {
    /// The backoff, its streak and jitter generator included.
    pub(crate) backoff: Backoff,
    /// No attempt before this instant (the retry or poll the stopped instance had
    /// scheduled), if any.
    pub(crate) not_before: Option<Instant>,
}

impl RetryState {
    /// The state of `backoff` as its source stops at `now`, with the next attempt that
    /// source had scheduled.
    pub fn new(mut backoff: Backoff, now: Instant, not_before: Option<Instant>) -> Self {
        backoff.settle(now);
        Self {
            backoff,
            not_before,
        }
    }

    /// No attempt before this instant, if any.
    pub fn not_before(&self) -> Option<Instant> {
        self.not_before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn no_jitter() -> Backoff {
        Backoff::new(
            BackoffConfig {
                jitter: 0.0,
                ..Default::default()
            },
            1,
        )
    }

    #[test]
    fn doubles_up_to_the_cap() {
        let mut b = no_jitter();
        let t = crate::testing::origin();
        let got: Vec<_> = (0..7)
            .map(|_| b.next_delay(t, Regime::Normal).as_secs())
            .collect();
        assert_eq!(got, [1, 2, 4, 8, 16, 30, 30]);
    }

    #[test]
    fn jitter_subtracts_at_most_half() {
        let mut b = Backoff::new(BackoffConfig::default(), 42);
        let t = crate::testing::origin();
        for base in [1, 2, 4, 8, 16, 30, 30, 30] {
            let d = b.next_delay(t, Regime::Normal);
            assert!(
                d > secs(base) / 2 && d <= secs(base),
                "{d:?} for base {base}"
            );
        }
    }

    #[test]
    fn same_seed_same_delays() {
        let t = crate::testing::origin();
        let run = |seed| {
            let mut b = Backoff::new(BackoffConfig::default(), seed);
            (0..5)
                .map(|_| b.next_delay(t, Regime::Normal))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(9), run(9));
        assert_ne!(run(9), run(10));
    }

    #[test]
    fn short_connection_does_not_reset_but_long_one_does() {
        let mut b = no_jitter();
        let t = crate::testing::origin();
        b.next_delay(t, Regime::Normal);
        b.next_delay(t, Regime::Normal);
        b.on_connected(t);
        assert_eq!(b.next_delay(t + secs(59), Regime::Normal), secs(4));
        b.on_connected(t);
        assert_eq!(b.next_delay(t + secs(60), Regime::Normal), secs(1));
    }

    #[test]
    fn extended_regime_starts_at_five_minutes_and_caps_at_an_hour() {
        let mut b = no_jitter();
        let t = crate::testing::origin();
        let got: Vec<_> = (0..6)
            .map(|_| b.next_delay(t, Regime::Extended).as_secs())
            .collect();
        assert_eq!(got, [300, 600, 1200, 2400, 3600, 3600]);
        b.on_connected(t);
        assert_eq!(b.next_delay(t, Regime::Normal), secs(1));
    }

    #[test]
    fn server_retry_becomes_the_base_of_the_next_streak() {
        let mut b = no_jitter();
        let t = crate::testing::origin();
        b.set_initial(Duration::from_millis(5000));
        assert_eq!(b.next_delay(t, Regime::Normal), secs(5));
        assert_eq!(b.next_delay(t, Regime::Normal), secs(10));
    }

    /// A `retry:` in the middle of a streak changes its base, not its length: the
    /// third failure waits four times the base, as it would have without it.
    #[test]
    fn server_retry_never_resets_the_streak() {
        let mut b = no_jitter();
        let t = crate::testing::origin();
        assert_eq!(b.next_delay(t, Regime::Normal), secs(1));
        b.set_initial(secs(1));
        assert_eq!(b.next_delay(t, Regime::Normal), secs(2));
        b.set_initial(secs(1));
        assert_eq!(b.next_delay(t, Regime::Normal), secs(4));
    }

    /// `retry: 0` is raised to the floor, and the streak still doubles from there.
    #[test]
    fn server_retry_of_zero_is_raised_to_the_floor() {
        let mut b = no_jitter();
        let t = crate::testing::origin();
        b.set_initial(Duration::ZERO);
        let got: Vec<_> = (0..4).map(|_| b.next_delay(t, Regime::Normal)).collect();
        assert_eq!(got, [100, 200, 400, 800].map(Duration::from_millis));
        // A configured initial delay below the floor is the floor.
        let mut b = Backoff::new(
            BackoffConfig {
                initial: Duration::from_millis(10),
                jitter: 0.0,
                ..Default::default()
            },
            1,
        );
        b.set_initial(Duration::ZERO);
        assert_eq!(b.next_delay(t, Regime::Normal), Duration::from_millis(10));
    }

    /// Time after the owner stopped does not count as a healthy connection; a healthy
    /// minute before it stopped still ends the streak.
    #[test]
    fn settle_ends_the_connection_at_the_stop() {
        let t = crate::testing::origin();
        let mut b = no_jitter();
        b.next_delay(t, Regime::Normal);
        b.next_delay(t, Regime::Normal);
        b.on_connected(t);
        let mut state = RetryState::new(b.clone(), t + secs(10), None);
        assert_eq!(
            state.backoff.next_delay(t + secs(600), Regime::Normal),
            secs(4)
        );
        b.on_connected(t);
        let mut state = RetryState::new(b, t + secs(60), Some(t + secs(61)));
        assert_eq!(state.not_before(), Some(t + secs(61)));
        assert_eq!(
            state.backoff.next_delay(t + secs(600), Regime::Normal),
            secs(1)
        );
    }

    /// A huge `retry:` is capped at the configured maximum: it never raises the cap.
    #[test]
    fn server_retry_never_raises_the_cap() {
        let mut b = no_jitter();
        let t = crate::testing::origin();
        b.set_initial(Duration::from_millis(1_000_000_000_000));
        assert_eq!(b.next_delay(t, Regime::Normal), secs(30));
        assert_eq!(b.next_delay(t, Regime::Normal), secs(30));
        assert_eq!(b.config().max, secs(30));
    }
}
