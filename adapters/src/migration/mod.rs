//! Technology migrations guided by a migration flag (PROTOCOL.md B §6).
//!
//! A migration flag serves one of six [`Stage`]s, from `off` (only the old system) to
//! `complete` (only the new one). [`Client::migration_variation`] gives the stage for a
//! context and an [`OpTracker`] that records what an operation did; a [`Migrator`]
//! does all of it for you: it reads from and writes to the origins the stage names,
//! compares shadow reads, times each origin, and hands a
//! [`MigrationOpEvent`] per operation to your [`EventSink`].
//!
//! The migrator is runtime-agnostic: its reads and writes are plain futures built
//! from the futures your origin functions return. Nothing is spawned and no timer is
//! used; latencies come from [`std::time::Instant`], and the randomness of the
//! `random` execution order and of `checkRatio` sampling from a `fastrand::Rng` you
//! can seed ([`MigratorBuilder::rng`]).
//!
//! Sending events to LaunchDarkly is out of scope: implement [`EventSink`] to queue
//! them for your event pipeline; [`MemorySink`] collects them for tests.

mod event;
mod migrator;
mod sink;
mod stage;
#[cfg(test)]
mod tests;
mod tracker;

use crate::eval::{Context, Detail, EvalError, FlagValue};

pub use event::{MigrationOpEvent, PerOrigin};
pub use migrator::{BuildError, Migrator, MigratorBuilder, OriginResult, WriteResult};
pub use sink::{DiscardSink, EventSink, MemorySink};
pub use stage::{ExecutionOrder, Operation, Origin, Stage, UnknownStage};
pub use tracker::{OpTracker, TrackerError};

use crate::Client;
use serde_json::Value;

impl Client {
    /// The migration stage of flag `key` for `context`, and a tracker for the
    /// operation about to run (PROTOCOL.md B §6.2).
    ///
    /// The flag is evaluated with `default_stage`'s name as the default. A string that
    /// names a stage is the stage; any other value gives `default_stage`, with the
    /// reason `ERROR`/`WRONG_TYPE`. An unknown flag, or a client without data, gives
    /// `default_stage` with `FLAG_NOT_FOUND` or `CLIENT_NOT_READY`.
    ///
    /// ```no_run
    /// # fn demo(client: &flagsync::Client) {
    /// use flagsync::eval::ContextBuilder;
    /// use flagsync::migration::{Origin, Stage};
    ///
    /// let context = ContextBuilder::new("user-1").build().expect("valid");
    /// let (stage, tracker) = client.migration_variation("db-migration", &context, Stage::Off);
    /// if stage.authoritative() == Origin::New {
    ///     // read from the new database
    /// }
    /// # }
    /// ```
    pub fn migration_variation(
        &self,
        key: &str,
        context: &Context,
        default_stage: Stage,
    ) -> (Stage, OpTracker) {
        let prerequisites = crate::eval::Prerequisites::default();
        let evaluate = |default_stage: std::borrow::Cow<'_, Stage>| {
            let default_stage = *default_stage;
            self.evaluate_with(key, context, Some(&prerequisites), |flag, d| {
                let detail = match d.value {
                    None => Detail {
                        value: Some(default_stage),
                        variation_index: None,
                        reason: d.reason,
                    },
                    Some(value) => match value {
                        FlagValue::Str(s) => match s.parse::<Stage>() {
                            Ok(stage) => Detail {
                                value: Some(stage),
                                variation_index: d.variation_index,
                                reason: d.reason,
                            },
                            Err(_) => Detail::err_default(EvalError::WrongType, default_stage),
                        },
                        _ => Detail::err_default(EvalError::WrongType, default_stage),
                    },
                };
                (flag.cloned(), detail)
            })
        };
        let (flag, detail) = self.evaluation_series(
            key,
            context,
            "MigrationVariation",
            default_stage,
            |s| s.as_str().into(),
            evaluate,
            |(_, detail)| detail,
            &|s: &Stage| s.as_str().into(),
        );
        self.record_evaluation(
            key,
            context,
            flag.as_ref(),
            detail.variation_index,
            &detail.reason,
            &|| detail.value.map_or(Value::Null, |s| s.as_str().into()),
            &|| default_stage.as_str().into(),
            false,
            &prerequisites,
        );
        let tracker = OpTracker::new(key, flag, context.clone(), detail, default_stage);
        (tracker.stage(), tracker)
    }
}
