//! What the SDK reports to the event processor.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::context::EventContext;

/// One analytics input.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Record {
    /// A flag evaluation (or a prerequisite's, with `prereq_of`).
    Evaluation(Evaluation),
    /// `track`: a custom event.
    Custom(Custom),
    /// `identify`.
    Identify(Identify),
    /// A migration operation's measurements.
    MigrationOp(MigrationOp),
}

/// A flag evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// When it happened, Unix milliseconds.
    pub creation_date: u64,
    /// Who asked.
    pub context: Arc<EventContext>,
    /// The flag key.
    pub key: String,
    /// The flag's version; `None` if the flag was not found.
    pub version: Option<u64>,
    /// The variation index, if a variation was chosen.
    pub variation: Option<usize>,
    /// The value the caller got.
    pub value: Value,
    /// The caller's default.
    pub default: Value,
    /// The reason, when events carry it (a `*_detail` call, or an experiment).
    pub reason: Option<Value>,
    /// The flag this one was a prerequisite of.
    pub prereq_of: Option<String>,
    /// A full `feature` event is wanted: the flag's `trackEvents`, or the matched
    /// rule's or fallthrough's tracking, or an experiment.
    pub track_events: bool,
    /// The flag's `debugEventsUntilDate`, Unix milliseconds.
    pub debug_events_until_date: Option<u64>,
    /// The flag's `samplingRatio` (1 in N full events kept; 0 keeps none).
    pub sampling_ratio: Option<u64>,
    /// The flag's `excludeFromSummaries`.
    pub exclude_from_summaries: bool,
    /// The evaluation was already counted in a [`super::Summarizer`] that the caller
    /// merges in with [`super::Input::Summary`]: do not count it again.
    pub summarized: bool,
}

/// A custom event (`track`).
#[derive(Debug, Clone, PartialEq)]
pub struct Custom {
    /// When it happened, Unix milliseconds.
    pub creation_date: u64,
    /// Who did it.
    pub context: Arc<EventContext>,
    /// The event key.
    pub key: String,
    /// Optional data.
    pub data: Option<Value>,
    /// Optional metric value.
    pub metric_value: Option<f64>,
}

/// An identify event.
#[derive(Debug, Clone, PartialEq)]
pub struct Identify {
    /// When it happened, Unix milliseconds.
    pub creation_date: u64,
    /// The context.
    pub context: Arc<EventContext>,
}

/// A migration operation event (`migration_op`).
#[derive(Debug, Clone, PartialEq)]
pub struct MigrationOp {
    /// When it happened, Unix milliseconds.
    pub creation_date: u64,
    /// Who it was for.
    pub context: Arc<EventContext>,
    /// The flag's `samplingRatio`.
    pub sampling_ratio: Option<u64>,
    /// Every other property of the event: `operation`, `evaluation`, `measurements`
    /// (not `kind`, `creationDate`, `context` nor `samplingRatio`, which the processor
    /// writes).
    pub body: Map<String, Value>,
}

impl Record {
    /// The context of this record.
    pub fn context(&self) -> &Arc<EventContext> {
        match self {
            Self::Evaluation(e) => &e.context,
            Self::Custom(e) => &e.context,
            Self::Identify(e) => &e.context,
            Self::MigrationOp(e) => &e.context,
        }
    }

    /// When it happened, Unix milliseconds.
    pub fn creation_date(&self) -> u64 {
        match self {
            Self::Evaluation(e) => e.creation_date,
            Self::Custom(e) => e.creation_date,
            Self::Identify(e) => e.creation_date,
            Self::MigrationOp(e) => e.creation_date,
        }
    }
}
