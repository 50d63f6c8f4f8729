//! Records into the queue: summary counts, `index` events for contexts not seen lately,
//! full and debug events, sampling and the queue's capacity; and the JSON each queued
//! event becomes at flush time.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::{Event, EventProcessor, Output, Queued};
use crate::events::context::ContextFormatter;
use crate::events::record::Record;

impl EventProcessor {
    pub(super) fn record(&mut self, record: Record) {
        if self.disabled || self.closed {
            return;
        }
        let creation_date = record.creation_date();
        let context = record.context().clone();
        let mut full: Option<Queued> = None;
        let mut debug: Option<Queued> = None;
        let mut sampling_ratio = None;
        let mut inline = false;
        match record {
            Record::Evaluation(eval) => {
                sampling_ratio = eval.sampling_ratio;
                if !eval.exclude_from_summaries && !eval.summarized {
                    let ctx = &eval.context;
                    self.summary.record(
                        eval.creation_date,
                        eval.key.as_str(),
                        ctx.kinds(),
                        eval.variation,
                        eval.version,
                        || eval.value.clone(),
                        || eval.default.clone(),
                    );
                }
                let debugging = eval.debug_events_until_date.is_some_and(|until| {
                    until > self.last_known_past_time && until > eval.creation_date
                });
                if debugging {
                    debug = Some(Queued::Feature {
                        eval: eval.clone(),
                        debug: true,
                    });
                }
                if eval.track_events {
                    full = Some(Queued::Feature { eval, debug: false });
                }
            }
            Record::Identify(identify) => {
                inline = true;
                let context = if self.config.omit_anonymous_contexts {
                    match identify.context.without_anonymous() {
                        Some(c) => Arc::new(c),
                        None => return,
                    }
                } else {
                    identify.context
                };
                full = Some(Queued::Identify {
                    creation_date: identify.creation_date,
                    context,
                });
            }
            Record::Custom(custom) => full = Some(Queued::Custom(custom)),
            Record::MigrationOp(op) => {
                inline = true;
                sampling_ratio = op.sampling_ratio;
                full = Some(Queued::MigrationOp(op));
            }
        }
        // The index event comes before the event that brought the context.
        let indexable = if self.config.omit_anonymous_contexts {
            context.without_anonymous().map(Arc::new)
        } else {
            Some(context)
        };
        if let Some(indexable) = indexable {
            if self.seen.add(indexable.fully_qualified_key()) {
                self.deduplicated += 1;
            } else if !inline {
                self.enqueue(Queued::Index {
                    creation_date,
                    context: indexable,
                });
            }
        }
        let ratio = sampling_ratio.unwrap_or(1);
        if let Some(full) = full
            && self.sample(ratio)
        {
            self.enqueue(full);
        }
        if let Some(debug) = debug
            && self.sample(ratio)
        {
            self.enqueue(debug);
        }
    }

    fn sample(&mut self, ratio: u64) -> bool {
        match ratio {
            0 => false,
            1 => true,
            n => self.rng.u64(..n) == 0,
        }
    }

    fn enqueue(&mut self, event: Queued) {
        if self.outbox.len() >= self.config.capacity {
            self.dropped += 1;
            if !self.queue_full {
                self.queue_full = true;
                tracing::warn!(
                    capacity = self.config.capacity,
                    "the analytics event queue is full: events are dropped until the next flush"
                );
                self.outputs.push_back(Output::Event(Event::QueueFull {
                    capacity: self.config.capacity,
                }));
            }
            return;
        }
        self.queue_full = false;
        self.outbox.push(event);
    }
}

fn insert_sampling_ratio(out: &mut Map<String, Value>, ratio: Option<u64>) {
    if let Some(r) = ratio
        && r != 1
    {
        out.insert("samplingRatio".into(), r.into());
    }
}

pub(super) fn format_event(formatter: &ContextFormatter, q: Queued) -> Value {
    let mut out = Map::new();
    match q {
        Queued::Feature { eval, debug } => {
            out.insert(
                "kind".into(),
                if debug { "debug" } else { "feature" }.into(),
            );
            out.insert("creationDate".into(), eval.creation_date.into());
            out.insert("key".into(), eval.key.into());
            if let Some(v) = eval.version {
                out.insert("version".into(), v.into());
            }
            // Debug events show the context as identify events do; feature events
            // redact an anonymous context.
            out.insert("context".into(), formatter.format(&eval.context, !debug));
            if let Some(v) = eval.variation {
                out.insert("variation".into(), v.into());
            }
            out.insert("value".into(), eval.value);
            out.insert("default".into(), eval.default);
            if let Some(r) = eval.reason {
                out.insert("reason".into(), r);
            }
            if let Some(p) = eval.prereq_of {
                out.insert("prereqOf".into(), p.into());
            }
            insert_sampling_ratio(&mut out, eval.sampling_ratio);
        }
        Queued::Index {
            creation_date,
            context,
        } => {
            out.insert("kind".into(), "index".into());
            out.insert("creationDate".into(), creation_date.into());
            out.insert("context".into(), formatter.format(&context, false));
        }
        Queued::Identify {
            creation_date,
            context,
        } => {
            out.insert("kind".into(), "identify".into());
            out.insert("creationDate".into(), creation_date.into());
            out.insert("context".into(), formatter.format(&context, false));
        }
        Queued::Custom(c) => {
            out.insert("kind".into(), "custom".into());
            out.insert("creationDate".into(), c.creation_date.into());
            out.insert("key".into(), c.key.into());
            out.insert("context".into(), formatter.format(&c.context, true));
            if let Some(d) = c.data
                && !d.is_null()
            {
                out.insert("data".into(), d);
            }
            if let Some(m) = c.metric_value {
                out.insert("metricValue".into(), m.into());
            }
        }
        Queued::MigrationOp(op) => {
            out.insert("kind".into(), "migration_op".into());
            out.insert("creationDate".into(), op.creation_date.into());
            out.insert("context".into(), formatter.format(&op.context, true));
            insert_sampling_ratio(&mut out, op.sampling_ratio);
            for (k, v) in op.body {
                out.entry(k).or_insert(v);
            }
        }
    }
    Value::Object(out)
}
