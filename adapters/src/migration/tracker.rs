//! The measurements of one migration operation (PROTOCOL.md B §6.4–6.5).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::eval::engine::Flag;
use crate::eval::{Context, Detail};

use super::{EventSink, MigrationOpEvent, Operation, Origin, PerOrigin, Stage};

/// Why an [`OpTracker`] could not make an event. The checks run in the order of the
/// variants, and the first failure is returned (PROTOCOL.md B §6.5; the messages are
/// the reference SDK's).
///
/// The reference's "provided context was invalid" cannot happen: a
/// [`Context`] is valid by construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TrackerError {
    /// [`OpTracker::operation`] was never called.
    #[error("operation not provided")]
    NoOperation,
    /// The flag key is empty.
    #[error("migration operation cannot contain an empty key")]
    EmptyKey,
    /// No origin was recorded as invoked.
    #[error("no origins were invoked")]
    NothingInvoked,
    /// A latency was recorded for an origin that was not invoked.
    #[error("provided latency for origin '{0}' without recording invocation")]
    LatencyWithoutInvocation(Origin),
    /// An error was recorded for an origin that was not invoked.
    #[error("provided error for origin '{0}' without recording invocation")]
    ErrorWithoutInvocation(Origin),
    /// A consistency result was recorded but not both origins were invoked.
    #[error("provided consistency without recording both invocations")]
    ConsistencyWithoutBothInvocations,
}

/// Collects what one migration read or write did, then builds its
/// [`MigrationOpEvent`]. Returned by
/// [`Client::migration_variation`](crate::Client::migration_variation) with the stage;
/// the [`Migrator`](super::Migrator) fills it in for you.
///
/// ```no_run
/// # async fn demo(client: &flagsync::Client) {
/// use std::time::Instant;
/// use flagsync::eval::ContextBuilder;
/// use flagsync::migration::{MemorySink, Operation, Origin, Stage};
///
/// let context = ContextBuilder::new("user-1").build().expect("valid");
/// let (stage, mut tracker) = client.migration_variation("db-migration", &context, Stage::Off);
/// tracker.operation(Operation::Read);
/// let started = Instant::now();
/// // … read from the origin that `stage` says …
/// tracker.invoked(Origin::Old);
/// tracker.latency(Origin::Old, started.elapsed());
/// let sink = MemorySink::new();
/// tracker.track(&sink).expect("a complete tracker");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct OpTracker {
    key: String,
    flag: Option<Arc<Flag>>,
    context: Context,
    detail: Detail<Stage>,
    default_stage: Stage,
    operation: Option<Operation>,
    invoked: PerOrigin<bool>,
    consistent: Option<bool>,
    errors: PerOrigin<bool>,
    latencies: PerOrigin<Option<Duration>>,
    pub(super) rng: fastrand::Rng,
}

impl OpTracker {
    /// A tracker for flag `key` evaluated as `detail` (whose value is the stage used).
    pub(crate) fn new(
        key: &str,
        flag: Option<Arc<Flag>>,
        context: Context,
        detail: Detail<Stage>,
        default_stage: Stage,
    ) -> Self {
        Self {
            key: key.to_owned(),
            flag,
            context,
            detail,
            default_stage,
            operation: None,
            invoked: PerOrigin::default(),
            consistent: None,
            errors: PerOrigin::default(),
            latencies: PerOrigin::default(),
            rng: fastrand::Rng::new(),
        }
    }

    /// Use `rng` to sample consistency checks (default: seeded from the global
    /// generator).
    pub fn with_rng(mut self, rng: fastrand::Rng) -> Self {
        self.rng = rng;
        self
    }

    /// The stage the flag gave (or the default).
    pub fn stage(&self) -> Stage {
        self.detail.value.unwrap_or(self.default_stage)
    }

    /// The flag's evaluation: stage, variation index, reason.
    pub fn detail(&self) -> &Detail<Stage> {
        &self.detail
    }

    /// The flag's `migration.checkRatio`: a consistency check runs for one operation
    /// in this many (1, the default, is every one; 0 is never).
    pub fn check_ratio(&self) -> u32 {
        self.flag
            .as_ref()
            .and_then(|f| f.migration_settings.as_ref())
            .and_then(|m| m.check_ratio)
            .unwrap_or(1)
    }

    /// Set the operation (required).
    pub fn operation(&mut self, operation: Operation) {
        self.operation = Some(operation);
    }

    /// Record that `origin` was called.
    pub fn invoked(&mut self, origin: Origin) {
        *self.invoked.get_mut(origin) = true;
    }

    /// Record that `origin` failed.
    pub fn error(&mut self, origin: Origin) {
        *self.errors.get_mut(origin) = true;
    }

    /// Record how long `origin` took.
    pub fn latency(&mut self, origin: Origin, latency: Duration) {
        *self.latencies.get_mut(origin) = Some(latency);
    }

    /// Run the consistency check `check` if the check ratio samples this operation,
    /// and record its result. Returns whether it ran.
    pub fn consistent(&mut self, check: impl FnOnce() -> bool) -> bool {
        let ratio = self.check_ratio();
        let sampled = sample(&mut self.rng, ratio);
        if sampled {
            self.consistent = Some(check());
        }
        sampled
    }

    /// Build the event, dated now.
    pub fn build(&self) -> Result<MigrationOpEvent, TrackerError> {
        self.build_at(SystemTime::now())
    }

    /// Build the event with `creation_date` as its date.
    pub fn build_at(&self, creation_date: SystemTime) -> Result<MigrationOpEvent, TrackerError> {
        let operation = self.operation.ok_or(TrackerError::NoOperation)?;
        if self.key.is_empty() {
            return Err(TrackerError::EmptyKey);
        }
        if !(self.invoked.old || self.invoked.new) {
            return Err(TrackerError::NothingInvoked);
        }
        for (origin, latency) in self.latencies.iter() {
            if latency.is_some() && !self.invoked.get(origin) {
                return Err(TrackerError::LatencyWithoutInvocation(origin));
            }
        }
        for (origin, failed) in self.errors.iter() {
            if *failed && !self.invoked.get(origin) {
                return Err(TrackerError::ErrorWithoutInvocation(origin));
            }
        }
        if self.consistent.is_some() && !(self.invoked.old && self.invoked.new) {
            return Err(TrackerError::ConsistencyWithoutBothInvocations);
        }
        let creation_date = creation_date
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Ok(MigrationOpEvent {
            creation_date,
            operation,
            context: self.context.clone(),
            key: self.key.clone(),
            value: self.stage(),
            default: self.default_stage,
            version: self.flag.as_ref().map(|f| f.version),
            variation: self.detail.variation_index,
            reason: self.detail.reason.clone(),
            sampling_ratio: self.flag.as_ref().and_then(|f| f.sampling_ratio),
            invoked: self.invoked,
            consistent: self.consistent,
            check_ratio: self.check_ratio(),
            errors: self.errors,
            latencies: self.latencies,
        })
    }

    /// Build the event and hand it to `sink`. A tracker that fails to build is logged
    /// (at debug) and dropped, as the reference's `track_migration_op` does; the error
    /// is returned too.
    pub fn track(&self, sink: &dyn EventSink) -> Result<(), TrackerError> {
        match self.build() {
            Ok(event) => {
                sink.migration_op(event);
                Ok(())
            }
            Err(e) => {
                tracing::debug!(flag = self.key, error = %e, "migration op not tracked");
                Err(e)
            }
        }
    }
}

/// One in `ratio` (PROTOCOL.md B §6.4): 0 never, 1 always, `n` with probability 1/n.
pub(crate) fn sample(rng: &mut fastrand::Rng, ratio: u32) -> bool {
    match ratio {
        0 => false,
        1 => true,
        n => rng.u32(..n) == 0,
    }
}
