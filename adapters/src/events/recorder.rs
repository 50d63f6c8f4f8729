//! The evaluation side of analytics events: per-thread shards and the bounded inbox.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::eval::engine::Flag;
use crate::eval::{Context, Reason};
use concurrent_queue::ConcurrentQueue;
use flagsync_core::events::{
    Custom, Evaluation, EventContext, FlagRef, Identify, MigrationOp, Record, Summarizer,
};
use rustc_hash::FxHashSet;
use serde_json::Value;
use spin::mutex::{SpinMutex, SpinMutexGuard};
use spin::relax::Yield;

use super::Command;
use super::clock::{coarse_unix_ms, unix_ms};
use super::counts::{CellSpec, Counts};
use crate::driver::Msg;

/// A number that is whole written as an integer (`10`, not `10.0`), as LaunchDarkly's
/// SDKs write values; anything else as it is.
fn whole(v: Value) -> Value {
    match v.as_f64() {
        Some(n) if v.is_f64() && n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 =>
        {
            #[allow(clippy::cast_possible_truncation, reason = "whole and within ±2^53")]
            Value::from(n as i64)
        }
        _ => v,
    }
}

/// One thread's share of the counting.
#[derive(Debug, Default)]
struct Shard {
    summary: Summarizer,
    /// Contexts this shard handed to the processor since the last flush: the
    /// processor decides about index events, this only spares it the repeats.
    seen: FxHashSet<String>,
    /// The canonical key of the context this shard counted last, which is in `seen`
    /// (or empty): an application evaluates several flags for one context in a row,
    /// and comparing with it spares the set's hashing.
    last_seen: String,
}

impl Shard {
    /// Whether the context of canonical key `key` is new to this shard (and remember
    /// it: at most `capacity` contexts, then the set starts over).
    fn first_sight(&mut self, key: &str, capacity: usize) -> bool {
        if !self.last_seen.is_empty() && self.last_seen == key {
            return false;
        }
        let unseen = !self.seen.contains(key);
        if unseen {
            if self.seen.len() >= capacity {
                self.seen.clear();
            }
            self.seen.insert(key.to_owned());
        }
        self.last_seen.clear();
        self.last_seen.push_str(key);
        unseen
    }
}

/// What one evaluation tells the events.
pub(crate) struct EvalRecord<'a> {
    pub(crate) key: &'a str,
    pub(crate) context: &'a Context,
    /// The flag, if it was found.
    pub(crate) flag: Option<&'a Flag>,
    pub(crate) variation: Option<usize>,
    /// The value the caller got, as JSON (called only when needed).
    pub(crate) value: &'a dyn Fn() -> Value,
    /// The caller's default, as JSON (called only when needed).
    pub(crate) default: &'a dyn Fn() -> Value,
    pub(crate) reason: &'a Reason,
    /// A `*_detail` call: events carry the reason.
    pub(crate) with_reason: bool,
    pub(crate) prereq_of: Option<&'a str>,
}

/// Hands the client's records to the event processor's driver.
#[derive(Debug)]
pub(crate) struct Recorder {
    tx: async_channel::Sender<Msg<Command>>,
    /// A power of two of them, so that a thread finds its own with a mask. Each is in
    /// practice one thread's: its lock is contended only by the flush taking the
    /// summary (briefly) and by threads beyond the shard count. Uncontended, std's
    /// `Mutex` costs two atomic read-modify-writes (lock and unlock: 21 ns on this
    /// project's VM, half of what events added to an evaluation); a spin lock one
    /// (its unlock is a release store: 10.6 ns). Contended, it yields the thread.
    shards: Box<[SpinMutex<Shard, Yield>]>,
    /// Each thread's counters of the repeats (no lock at all; see `counts.rs`).
    counts: Arc<Counts>,
    seen_capacity: usize,
    /// Records sent and not yet received by the processor: the inbox's bound. The
    /// channel itself is unbounded so that a flush or a close always gets in behind
    /// the records sent before it, however full the inbox is.
    queued: AtomicUsize,
    /// At most this many records queued; more are dropped.
    limit: usize,
    warned_full: AtomicBool,
    /// Records in the order they were made, until the processor takes them
    /// ([`Recorder::take_pending`]); at most `limit` (`queued` counts them).
    pending: ConcurrentQueue<Command>,
    /// A [`Command::Drain`] is on its way: the records queued reached half the limit.
    drain_asked: AtomicBool,
}

/// The flag, if an evaluation of it for `context` can be counted as a repeat in the
/// thread's own cell: a flag that needs only counts, and a single-kind context.
fn repeatable<'f>(flag: Option<&'f Flag>, context: &Context) -> Option<&'f Flag> {
    flag.filter(|f| f.summary_only() && !context.is_multi())
}

/// Per thread, at most this many (flag version, variation, kind) counters of its own.
const MAX_CELLS: usize = 1_024;

static NEXT_THREAD: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static THREAD_INDEX: Cell<Option<usize>> = const { Cell::new(None) };
}

fn thread_index() -> usize {
    THREAD_INDEX.with(|i| match i.get() {
        Some(n) => n,
        None => {
            let n = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
            i.set(Some(n));
            n
        }
    })
}

/// Stands for an evaluation's context until the processor's task converts the real
/// one (see [`Command::Evaluation`]).
fn placeholder_context() -> Arc<EventContext> {
    static PLACEHOLDER: std::sync::LazyLock<Arc<EventContext>> = std::sync::LazyLock::new(|| {
        Arc::new(
            EventContext::parse(&serde_json::json!({"kind": "user", "key": ""}))
                .unwrap_or_else(|_| unreachable!("a valid context")),
        )
    });
    PLACEHOLDER.clone()
}

/// The context as the event processor reads it.
pub(crate) fn event_context(context: &Context) -> Option<Arc<EventContext>> {
    match context.to_event_context() {
        Ok(c) => Some(Arc::new(c)),
        Err(e) => {
            tracing::warn!(error = %e, "a context that cannot be reported in events");
            None
        }
    }
}

impl Recorder {
    /// A recorder sending to `tx` at most `limit` records not yet received;
    /// `seen_capacity` bounds each shard's set of contexts.
    pub(crate) fn new(
        tx: async_channel::Sender<Msg<Command>>,
        limit: usize,
        seen_capacity: usize,
    ) -> Self {
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        let shards = (0..(threads * 2).clamp(4, 64).next_power_of_two())
            .map(|_| SpinMutex::new(Shard::default()))
            .collect();
        Self {
            tx,
            shards,
            counts: Arc::new(Counts::new(MAX_CELLS)),
            seen_capacity: seen_capacity.max(1),
            queued: AtomicUsize::new(0),
            limit: limit.max(1),
            warned_full: AtomicBool::new(false),
            pending: ConcurrentQueue::unbounded(),
            drain_asked: AtomicBool::new(false),
        }
    }

    /// Whether the inbox holds as many records as it may.
    fn is_full(&self) -> bool {
        self.queued.load(Ordering::Relaxed) >= self.limit
    }

    /// Take a place in the inbox for one record: the records queued with it, or `None`
    /// if there is no place.
    fn reserve(&self) -> Option<usize> {
        if self.is_full() {
            return None;
        }
        let before = self.queued.fetch_add(1, Ordering::Relaxed);
        if before >= self.limit {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(before + 1)
    }

    /// The processor received a record ([`Command::is_record`]): its place is free.
    pub(crate) fn received(&self) {
        // Saturating: a record sent before this recorder counted cannot underflow it.
        let _ = self
            .queued
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    fn shard(&self) -> SpinMutexGuard<'_, Shard, Yield> {
        // `shards.len()` is a power of two.
        let i = thread_index() & (self.shards.len() - 1);
        self.shards[i].lock()
    }

    /// Every shard's summary since the last call (and their contexts forgotten), and
    /// what the threads' own counters added.
    pub(crate) fn take_summaries(&self) -> Vec<Summarizer> {
        let mut summaries: Vec<_> = self
            .shards
            .iter()
            .filter_map(|s| {
                let mut shard = s.lock();
                shard.seen.clear();
                shard.last_seen.clear();
                (!shard.summary.is_empty()).then(|| std::mem::take(&mut shard.summary))
            })
            .collect();
        // After the seen sets are cleared (see `counts.rs`).
        let counted = self.counts.take();
        if !counted.is_empty() {
            summaries.push(counted);
        }
        summaries
    }

    /// Hand a command to the processor; false if it is a record and the inbox is
    /// full, or if the processor is gone. Flushes and closes are never refused.
    ///
    /// Records wait in a queue of their own, in order, and are not sent one by one:
    /// waking the processor's task for each would cost the evaluating thread a system
    /// call per record whenever the task is idle. The processor takes them before
    /// anything that may flush ([`Command::Flush`], [`Command::Close`], its timers), and
    /// is asked to ([`Command::Drain`]) once half the limit is queued.
    pub(crate) fn command(&self, command: Command) -> bool {
        if matches!(command, Command::Record(_) | Command::Evaluation(_)) {
            return self.hold(command);
        }
        let record = command.is_record();
        if record && self.reserve().is_none() {
            if !self.tx.is_closed() {
                self.dropped();
            }
            return false;
        }
        match self.tx.try_send(Msg::Command(command)) {
            Ok(()) => true,
            Err(_) => {
                if record {
                    self.received();
                }
                false
            }
        }
    }

    /// Queue a record (see [`Recorder::command`]).
    fn hold(&self, record: Command) -> bool {
        if self.tx.is_closed() {
            return false;
        }
        let Some(queued) = self.reserve() else {
            self.dropped();
            return false;
        };
        if self.pending.push(record).is_err() {
            // Only a closed queue refuses, and this one is never closed.
            self.received();
            return false;
        }
        if queued >= (self.limit / 2).max(1) && !self.drain_asked.swap(true, Ordering::AcqRel) {
            // Never refused while the processor runs (the channel is unbounded).
            let _ = self.tx.try_send(Msg::Command(Command::Drain));
        }
        true
    }

    /// Every record queued, in order, their places in the inbox freed.
    pub(crate) fn take_pending(&self) -> Vec<Command> {
        // Before taking: a record queued after this asks again.
        self.drain_asked.store(false, Ordering::Release);
        let taken: Vec<_> = self.pending.try_iter().collect();
        let n = taken.len();
        let _ = self
            .queued
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| {
                Some(q.saturating_sub(n))
            });
        taken
    }

    /// A record is dropped because the inbox is full: warn once until one gets through.
    fn dropped(&self) {
        if !self.warned_full.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "analytics events are produced faster than they can be processed: some are dropped"
            );
        }
    }

    fn send(&self, record: Record) {
        if self.command(Command::Record(Box::new(record))) {
            self.warned_full.store(false, Ordering::Relaxed);
        }
    }

    /// Count an evaluation; hand it to the processor when it needs more than a count.
    pub(crate) fn evaluation(&self, r: &EvalRecord<'_>) {
        if !self.count_repeat(r.flag, r.variation, r.context) {
            self.count_through_shard(r);
        }
    }

    /// Count an evaluation that is a repeat of a counter this thread counted, for the
    /// context it counted last, of a flag that needs nothing but counts: in its own
    /// cell, without a lock (see `counts.rs`). False: [`Recorder::count_through_shard`].
    #[inline]
    pub(crate) fn count_repeat(
        &self,
        flag: Option<&Flag>,
        variation: Option<usize>,
        context: &Context,
    ) -> bool {
        repeatable(flag, context).is_some_and(|f| {
            self.counts
                .try_count(f.id(), variation, context.canonical_key(), context.kind())
        })
    }

    /// Count an evaluation in this thread's shard (and its cell for the repeats), and
    /// hand it to the processor when it needs more than a count.
    pub(crate) fn count_through_shard(&self, r: &EvalRecord<'_>) {
        let cell = repeatable(r.flag, r.context);
        let now = coarse_unix_ms();
        let experiment = r
            .flag
            .is_some_and(|f| f.is_experimentation_enabled(r.reason));
        let track = experiment || r.flag.is_some_and(|f| f.track_events);
        let debug_until = r.flag.and_then(|f| f.debug_events_until_date);
        let debugging = debug_until.is_some_and(|d| d > now);
        let exclude = r.flag.is_some_and(|f| f.exclude_from_summaries);
        let version = r.flag.map(|f| f.version);
        let epoch = self.counts.epoch();
        let (value, default) = (|| whole((r.value)()), || whole((r.default)()));
        let unseen = {
            let mut shard = self.shard();
            if !exclude {
                let flag = FlagRef {
                    key: r.key,
                    // An id stands for one key: only for a flag known by one (its
                    // JSON's `key` is its store key; evaluated directly it is counted
                    // under the store key, as a prerequisite under the JSON's).
                    id: r.flag.filter(|f| f.known_by_one_key()).map(|f| f.id()),
                };
                if r.context.is_multi() {
                    let kinds = r.context.kinds();
                    let kinds = kinds.iter().map(|k| k.as_ref());
                    let s = &mut shard.summary;
                    s.record(now, flag, kinds, r.variation, version, value, default);
                } else {
                    let kinds = [r.context.kind().as_ref()];
                    let s = &mut shard.summary;
                    s.record(now, flag, kinds, r.variation, version, value, default);
                }
            }
            shard.first_sight(r.context.canonical_key(), self.seen_capacity)
        };
        if !r.context.is_multi() {
            self.counts.remember(
                epoch,
                r.context.canonical_key(),
                cell.map(|f| CellSpec {
                    flag_key: r.key,
                    flag_id: f.id(),
                    kind: r.context.kind(),
                    variation: r.variation,
                    version,
                    value: &value,
                    default: &default,
                }),
            );
        }
        if !(track || debugging || unseen) {
            return;
        }
        // A full inbox would drop the record: do not build it. Its context's event
        // form (serialized, then parsed) is most of the cost of a record on this
        // thread, and while evaluations outpace the processor almost every record
        // would be built only to be dropped.
        if self.is_full() {
            if !self.tx.is_closed() {
                self.dropped();
            }
            return;
        }
        let reason = (r.with_reason || experiment)
            .then(|| serde_json::to_value(r.reason).ok())
            .flatten();
        // The context's event form is made on the processor's task: here it is only
        // copied (its JSON round trip was most of a record's cost on this thread).
        let evaluation = Evaluation {
            creation_date: now,
            context: placeholder_context(),
            key: r.key.to_owned(),
            version,
            variation: r.variation,
            value: whole((r.value)()),
            default: whole((r.default)()),
            reason,
            prereq_of: r.prereq_of.map(str::to_owned),
            track_events: track,
            debug_events_until_date: debug_until,
            sampling_ratio: r.flag.and_then(|f| f.sampling_ratio).map(u64::from),
            exclude_from_summaries: exclude,
            summarized: true,
        };
        let pending = Box::new((r.context.clone(), evaluation));
        if self.command(Command::Evaluation(pending)) {
            self.warned_full.store(false, Ordering::Relaxed);
        }
    }

    /// `track`.
    pub(crate) fn custom(
        &self,
        key: &str,
        context: &Context,
        data: Option<Value>,
        metric_value: Option<f64>,
    ) {
        let Some(context) = event_context(context) else {
            return;
        };
        self.send(Record::Custom(Custom {
            creation_date: unix_ms(),
            context,
            key: key.to_owned(),
            data,
            metric_value,
        }));
    }

    /// `identify`.
    pub(crate) fn identify(&self, context: &Context) {
        let Some(context) = event_context(context) else {
            return;
        };
        self.send(Record::Identify(Identify {
            creation_date: unix_ms(),
            context,
        }));
    }

    /// A migration operation event, from its JSON.
    pub(crate) fn migration_op(
        &self,
        context: &Context,
        sampling_ratio: Option<u32>,
        event: Value,
    ) {
        let Some(context) = event_context(context) else {
            return;
        };
        let Value::Object(mut body) = event else {
            return;
        };
        let creation_date = body
            .remove("creationDate")
            .and_then(|d| d.as_u64())
            .unwrap_or_else(unix_ms);
        for k in ["kind", "context", "samplingRatio"] {
            body.remove(k);
        }
        self.send(Record::MigrationOp(MigrationOp {
            creation_date,
            context,
            sampling_ratio: sampling_ratio.map(u64::from),
            body,
        }));
    }
}

#[cfg(test)]
mod tests {
    use crate::eval::ContextBuilder;
    use serde_json::json;

    use super::*;

    /// Record an evaluation of a plain flag (no `trackEvents`) for user `key`.
    fn evaluate(recorder: &Recorder, flag: &Flag, key: &str) {
        let context = ContextBuilder::new(key).build().unwrap();
        let reason = Reason::fallthrough();
        recorder.evaluation(&EvalRecord {
            key: "f",
            context: &context,
            flag: Some(flag),
            variation: Some(0),
            value: &|| json!(true),
            default: &|| json!(false),
            reason: &reason,
            with_reason: false,
            prereq_of: None,
        });
    }

    #[test]
    fn a_full_inbox_drops_records_but_every_evaluation_is_counted() {
        let flag = Flag::from_json(
            json!({
                "key": "f", "version": 3, "on": true, "salt": "s", "variations": [true, false],
                "targets": [], "rules": [], "prerequisites": [],
                "fallthrough": {"variation": 0}, "offVariation": 1
            })
            .to_string()
            .as_bytes(),
            "f",
        )
        .unwrap();
        let (tx, rx) = async_channel::unbounded();
        let recorder = Recorder::new(tx, 1, 1_000);
        // An unseen context goes to the processor (the processor is asked to take it:
        // half the limit is queued); the second finds the inbox full.
        evaluate(&recorder, &flag, "a");
        evaluate(&recorder, &flag, "b");
        assert!(recorder.warned_full.load(Ordering::Relaxed));
        assert!(matches!(rx.try_recv(), Ok(Msg::Command(Command::Drain))));
        assert!(rx.is_empty());
        let mut pending = recorder.take_pending();
        assert_eq!(pending.len(), 1);
        let Some(Command::Evaluation(pending)) = pending.pop() else {
            panic!("an evaluation");
        };
        let (context, evaluation) = *pending;
        assert_eq!(context.key(), "a");
        assert_eq!(
            (evaluation.key.as_str(), evaluation.version),
            ("f", Some(3))
        );
        assert!(evaluation.summarized);
        // Room again: the next unseen context gets through, the warning is re-armed,
        // and the processor is asked again.
        evaluate(&recorder, &flag, "c");
        assert_eq!(recorder.take_pending().len(), 1);
        assert!(!recorder.warned_full.load(Ordering::Relaxed));
        assert!(matches!(rx.try_recv(), Ok(Msg::Command(Command::Drain))));
        // The summaries count all three.
        let summaries = recorder.take_summaries();
        let mut total = Summarizer::default();
        for s in summaries {
            total.merge(s);
        }
        assert_eq!(total.total(), 3);
    }

    #[test]
    fn records_wait_in_their_queue_and_the_processor_is_asked_once_at_half_the_limit() {
        let (tx, rx) = async_channel::unbounded();
        let recorder = Recorder::new(tx, 10, 1_000);
        let identify = |n: usize| {
            for i in 0..n {
                recorder.identify(&ContextBuilder::new(format!("u{i}")).build().unwrap());
            }
        };
        identify(4);
        assert!(rx.is_empty(), "no message per record");
        identify(4);
        assert!(matches!(rx.try_recv(), Ok(Msg::Command(Command::Drain))));
        assert!(rx.is_empty(), "asked once");
        assert_eq!(recorder.take_pending().len(), 8);
        assert_eq!(recorder.queued.load(Ordering::Relaxed), 0);
        // One after the other from two threads: taken in that order.
        std::thread::scope(|s| {
            s.spawn(|| recorder.identify(&ContextBuilder::new("first").build().unwrap()));
        });
        recorder.identify(&ContextBuilder::new("second").build().unwrap());
        let order: Vec<_> = recorder
            .take_pending()
            .into_iter()
            .map(|c| match c {
                Command::Record(r) => match *r {
                    Record::Identify(i) => i.context.fully_qualified_key().to_owned(),
                    other => panic!("an identify, not {other:?}"),
                },
                other => panic!("unexpected {other:?}"),
            })
            .collect();
        assert_eq!(order, ["first", "second"]);
        // Gone, the processor is handed nothing more.
        drop(rx);
        identify(1);
        assert!(recorder.take_pending().is_empty());
    }

    #[test]
    fn a_full_inbox_keeps_the_first_records_and_still_takes_a_flush_behind_them() {
        let (tx, rx) = async_channel::unbounded();
        let recorder = Recorder::new(tx, 2, 1_000);
        for key in ["a", "b", "c"] {
            recorder.identify(&ContextBuilder::new(key).build().unwrap());
        }
        recorder.command(Command::Flush);
        // What the processor sees: the records taken at a drain and before a flush.
        let mut got = Vec::new();
        while let Ok(Msg::Command(command)) = rx.try_recv() {
            for record in recorder.take_pending() {
                got.push(match record {
                    Command::Record(r) => match *r {
                        Record::Identify(i) => i.context.fully_qualified_key().to_owned(),
                        other => panic!("an identify, not {other:?}"),
                    },
                    other => panic!("unexpected {other:?}"),
                });
            }
            match command {
                Command::Drain => {}
                Command::Flush => got.push("flush".to_owned()),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(got, ["a", "b", "flush"]);
        // Taken, the places are free again; a close is never refused either.
        recorder.identify(&ContextBuilder::new("d").build().unwrap());
        assert!(recorder.command(Command::Close));
        assert_eq!(recorder.take_pending().len(), 1);
        assert!(matches!(rx.try_recv(), Ok(Msg::Command(Command::Drain))));
        assert!(matches!(rx.try_recv(), Ok(Msg::Command(Command::Close))));
    }

    #[test]
    fn every_evaluation_is_counted_once_whatever_the_flushes_in_between() {
        let flag = |key: &str| {
            let json = json!({"key": key, "version": 3, "on": true, "variations": [true, false],
                              "fallthrough": {"variation": 0}, "offVariation": 1});
            Flag::from_json(json.to_string().as_bytes(), key).unwrap()
        };
        let flags = [flag("f"), flag("g")];
        let (tx, rx) = async_channel::unbounded();
        let recorder = Recorder::new(tx, 100_000, 1_000);
        let contexts: Vec<Context> = ["a", "b"]
            .iter()
            .map(|k| ContextBuilder::new(*k).build().unwrap())
            .chain([ContextBuilder::new("a").kind("org").build().unwrap()])
            .collect();
        let reason = Reason::fallthrough();
        const THREADS: usize = 4;
        const EACH: usize = 20_000;
        let done = AtomicUsize::new(0);
        let mut total = Summarizer::default();
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                let (recorder, flags, contexts, reason, done) =
                    (&recorder, &flags, &contexts, &reason, &done);
                scope.spawn(move || {
                    for i in 0..EACH {
                        // Runs of repeats, then a change of flag or context.
                        let flag = &flags[(i / 7 + t) % 2];
                        let context = &contexts[(i / 50) % 3];
                        recorder.evaluation(&EvalRecord {
                            key: &flag.key,
                            context,
                            flag: Some(flag),
                            variation: Some(0),
                            value: &|| json!(true),
                            default: &|| json!(false),
                            reason,
                            with_reason: false,
                            prereq_of: None,
                        });
                    }
                    done.fetch_add(1, Ordering::Release);
                });
            }
            let mut flushes = 0;
            while done.load(Ordering::Acquire) < THREADS {
                for s in recorder.take_summaries() {
                    total.merge(s);
                }
                flushes += 1;
                std::thread::yield_now();
            }
            assert!(flushes > 0);
        });
        for s in recorder.take_summaries() {
            total.merge(s);
        }
        assert_eq!(total.total(), (THREADS * EACH) as u64);
        let event = total.to_event().unwrap();
        for key in ["f", "g"] {
            let mut kinds: Vec<_> = event["features"][key]["contextKinds"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k.as_str().unwrap().to_owned())
                .collect();
            kinds.sort();
            assert_eq!(kinds, ["org", "user"]);
        }
        // Every context was handed over at least once for its index event.
        let mut handed = FxHashSet::default();
        for record in recorder.take_pending() {
            if let Command::Evaluation(pending) = record {
                handed.insert(pending.0.canonical_key().to_owned());
            }
        }
        drop(rx);
        assert_eq!(handed.len(), 3, "{handed:?}");
    }

    #[test]
    fn a_flag_known_by_two_keys_is_counted_under_each() {
        // Stored under "s", its JSON says "j": evaluated directly it is "s", as a
        // prerequisite it is "j" (as the SDKs report it).
        let json = json!({"key": "j", "version": 1, "on": true, "variations": [true],
                          "fallthrough": {"variation": 0}});
        let flag = Flag::from_json(json.to_string().as_bytes(), "s").unwrap();
        let same = Flag::from_json(json.to_string().as_bytes(), "j").unwrap();
        assert!(!flag.known_by_one_key() && same.known_by_one_key());
        let (tx, _rx) = async_channel::unbounded();
        let recorder = Recorder::new(tx, 100, 1_000);
        let context = ContextBuilder::new("u").build().unwrap();
        let reason = Reason::fallthrough();
        for key in ["s", "j", "s"] {
            recorder.evaluation(&EvalRecord {
                key,
                context: &context,
                flag: Some(&flag),
                variation: Some(0),
                value: &|| json!(true),
                default: &|| json!(false),
                reason: &reason,
                with_reason: false,
                prereq_of: (key == "j").then_some("parent"),
            });
        }
        let mut total = Summarizer::default();
        for s in recorder.take_summaries() {
            total.merge(s);
        }
        let event = total.to_event().unwrap();
        assert_eq!(event["features"]["s"]["counters"][0]["count"], 2);
        assert_eq!(event["features"]["j"]["counters"][0]["count"], 1);
    }
}
