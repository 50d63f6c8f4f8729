//! The migrator: reads and writes against two origins as a migration flag's stage
//! says, with measurements (PROTOCOL.md B §6.1–6.4, 6.7).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::eval::Context;

use super::tracker::sample;
use super::{EventSink, ExecutionOrder, OpTracker, Operation, Origin, Stage};
use crate::Client;

/// A boxed, sendable future (what origin functions are stored as).
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
/// A read or write function of one origin.
type OriginFn<P, T, E> = Box<dyn Fn(P) -> BoxFuture<Result<T, E>> + Send + Sync>;
/// A consistency check of two successful reads (authoritative, other).
type CompareFn<T> = Box<dyn Fn(&T, &T) -> bool + Send + Sync>;

/// The read functions and the optional consistency check.
struct Reads<P, T, E> {
    old: OriginFn<P, T, E>,
    new: OriginFn<P, T, E>,
    compare: Option<CompareFn<T>>,
}

/// The write functions.
struct Writes<P, T, E> {
    old: OriginFn<P, T, E>,
    new: OriginFn<P, T, E>,
}

/// The result of one origin.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OriginResult<T, E> {
    /// Which origin produced it.
    pub origin: Origin,
    /// What the origin function returned.
    pub result: Result<T, E>,
}

/// The results of a migration write.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WriteResult<T, E> {
    /// The authoritative write (always run).
    pub authoritative: OriginResult<T, E>,
    /// The other write: `None` when the stage writes to one origin only, or when the
    /// authoritative write failed (then it is not attempted).
    pub nonauthoritative: Option<OriginResult<T, E>>,
}

/// Why a [`MigratorBuilder`] could not build (PROTOCOL.md B §6.7; the messages are the
/// reference SDK's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// [`MigratorBuilder::read`] (or `read_with_comparison`) was never called.
    #[error("read configuration not provided")]
    NoReadConfig,
    /// [`MigratorBuilder::write`] was never called.
    #[error("write configuration not provided")]
    NoWriteConfig,
}

/// Settings for a [`Migrator`]; made by [`Migrator::builder`].
///
/// `P` is the payload each operation gets (cloned when both origins run), `T` what an
/// origin returns on success and `E` its error. Origin functions take the payload by
/// value and return a `Send` future, so the migrator's own futures are `Send` too.
#[must_use]
pub struct MigratorBuilder<P, T, E> {
    client: Client,
    order: ExecutionOrder,
    track_latency: bool,
    track_errors: bool,
    read: Option<Reads<P, T, E>>,
    write: Option<Writes<P, T, E>>,
    sink: Arc<dyn EventSink>,
    rng: fastrand::Rng,
}

impl<P, T, E> std::fmt::Debug for MigratorBuilder<P, T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MigratorBuilder")
            .field("order", &self.order)
            .field("track_latency", &self.track_latency)
            .field("track_errors", &self.track_errors)
            .field("read", &self.read.is_some())
            .field("write", &self.write.is_some())
            .finish_non_exhaustive()
    }
}

fn boxed<P, T, E, F, Fut>(f: F) -> OriginFn<P, T, E>
where
    F: Fn(P) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T, E>> + Send + 'static,
{
    Box::new(move |p| Box::pin(f(p)))
}

impl<P, T, E> MigratorBuilder<P, T, E>
where
    P: Clone + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    /// How the two reads of `shadow` and `live` run (default [`ExecutionOrder::Parallel`]).
    pub fn read_execution_order(mut self, order: ExecutionOrder) -> Self {
        self.order = order;
        self
    }

    /// Record each origin's latency (default on).
    pub fn track_latency(mut self, on: bool) -> Self {
        self.track_latency = on;
        self
    }

    /// Record which origins fail (default on).
    pub fn track_errors(mut self, on: bool) -> Self {
        self.track_errors = on;
        self
    }

    /// The read functions of the old and the new origin (required). No consistency
    /// check.
    pub fn read<FO, FutO, FN, FutN>(mut self, old: FO, new: FN) -> Self
    where
        FO: Fn(P) -> FutO + Send + Sync + 'static,
        FutO: Future<Output = Result<T, E>> + Send + 'static,
        FN: Fn(P) -> FutN + Send + Sync + 'static,
        FutN: Future<Output = Result<T, E>> + Send + 'static,
    {
        self.read = Some(Reads {
            old: boxed(old),
            new: boxed(new),
            compare: None,
        });
        self
    }

    /// The read functions and a consistency check: when both reads of a `shadow` or
    /// `live` read succeed, `compare(authoritative, other)` runs (for one read in the
    /// flag's `checkRatio`) and its answer is recorded.
    pub fn read_with_comparison<FO, FutO, FN, FutN, C>(
        mut self,
        old: FO,
        new: FN,
        compare: C,
    ) -> Self
    where
        FO: Fn(P) -> FutO + Send + Sync + 'static,
        FutO: Future<Output = Result<T, E>> + Send + 'static,
        FN: Fn(P) -> FutN + Send + Sync + 'static,
        FutN: Future<Output = Result<T, E>> + Send + 'static,
        C: Fn(&T, &T) -> bool + Send + Sync + 'static,
    {
        self.read = Some(Reads {
            old: boxed(old),
            new: boxed(new),
            compare: Some(Box::new(compare)),
        });
        self
    }

    /// The write functions of the old and the new origin (required).
    pub fn write<FO, FutO, FN, FutN>(mut self, old: FO, new: FN) -> Self
    where
        FO: Fn(P) -> FutO + Send + Sync + 'static,
        FutO: Future<Output = Result<T, E>> + Send + 'static,
        FN: Fn(P) -> FutN + Send + Sync + 'static,
        FutN: Future<Output = Result<T, E>> + Send + 'static,
    {
        self.write = Some(Writes {
            old: boxed(old),
            new: boxed(new),
        });
        self
    }

    /// Where each operation's [`MigrationOpEvent`](super::MigrationOpEvent) goes
    /// (default: nowhere).
    pub fn event_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sink = sink;
        self
    }

    /// The random generator for `random` execution order and `checkRatio` sampling
    /// (default: seeded from the global generator). Seed it for reproducible runs.
    pub fn rng(mut self, rng: fastrand::Rng) -> Self {
        self.rng = rng;
        self
    }

    /// Check the settings and make the migrator.
    pub fn build(self) -> Result<Migrator<P, T, E>, BuildError> {
        let reads = self.read.ok_or(BuildError::NoReadConfig)?;
        let writes = self.write.ok_or(BuildError::NoWriteConfig)?;
        Ok(Migrator {
            client: self.client,
            order: self.order,
            track_latency: self.track_latency,
            track_errors: self.track_errors,
            reads,
            writes,
            sink: self.sink,
            rng: Mutex::new(self.rng),
        })
    }
}

/// Runs migration reads and writes against an old and a new origin, as the stage of a
/// migration flag says, and reports what happened to an [`EventSink`].
///
/// Runtime-agnostic: [`Migrator::read`] and [`Migrator::write`] are plain futures.
/// Nothing is spawned; the two reads of a parallel read are polled together by the
/// read's own future, on whatever executor awaits it.
///
/// ```no_run
/// # async fn demo(client: flagsync::Client) -> Result<(), flagsync::migration::BuildError> {
/// use std::sync::Arc;
/// use flagsync::eval::ContextBuilder;
/// use flagsync::migration::{MemorySink, Migrator, Stage};
///
/// let sink = Arc::new(MemorySink::new());
/// let migrator = Migrator::builder(client)
///     .read_with_comparison(
///         |id: u64| async move { Ok::<_, String>(format!("old row {id}")) },
///         |id: u64| async move { Ok::<_, String>(format!("new row {id}")) },
///         |a: &String, b: &String| a == b,
///     )
///     .write(
///         |id: u64| async move { Ok::<_, String>(format!("wrote {id} to old")) },
///         |id: u64| async move { Ok::<_, String>(format!("wrote {id} to new")) },
///     )
///     .event_sink(sink.clone())
///     .build()?;
/// let context = ContextBuilder::new("user-1").build().expect("valid");
/// let row = migrator.read("db-migration", &context, Stage::Off, 42).await;
/// println!("{:?} from {}", row.result, row.origin);
/// # Ok(())
/// # }
/// ```
pub struct Migrator<P, T, E> {
    client: Client,
    order: ExecutionOrder,
    track_latency: bool,
    track_errors: bool,
    reads: Reads<P, T, E>,
    writes: Writes<P, T, E>,
    sink: Arc<dyn EventSink>,
    rng: Mutex<fastrand::Rng>,
}

impl<P, T, E> std::fmt::Debug for Migrator<P, T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Migrator")
            .field("order", &self.order)
            .field("track_latency", &self.track_latency)
            .field("track_errors", &self.track_errors)
            .field("compare", &self.reads.compare.is_some())
            .finish_non_exhaustive()
    }
}

/// One origin call, measured.
struct Measured<T, E> {
    origin: Origin,
    result: Result<T, E>,
    latency: Duration,
}

impl<T, E> Measured<T, E> {
    fn into_result(self) -> OriginResult<T, E> {
        OriginResult {
            origin: self.origin,
            result: self.result,
        }
    }
}

impl<P, T, E> Migrator<P, T, E>
where
    P: Clone + Send + 'static,
    T: Send + 'static,
    E: Send + 'static,
{
    /// Settings for a migrator that evaluates its migration flags with `client`.
    /// `read` and `write` must be given; the defaults are parallel reads, latency and
    /// error tracking on, and the client's analytics events as the event sink.
    pub fn builder(client: Client) -> MigratorBuilder<P, T, E> {
        let sink = client.migration_sink();
        MigratorBuilder {
            client,
            order: ExecutionOrder::Parallel,
            track_latency: true,
            track_errors: true,
            read: None,
            write: None,
            sink,
            rng: fastrand::Rng::new(),
        }
    }

    /// Read `payload` as migration flag `key` says for `context` (`default_stage` when
    /// the flag cannot say): from the authoritative origin, and in `shadow` and `live`
    /// from the other one too, in the configured execution order. Returns the
    /// authoritative result and reports the operation to the event sink.
    ///
    /// Dropping the future midway reports nothing (as the reference does for reads).
    pub async fn read(
        &self,
        key: &str,
        context: &Context,
        default_stage: Stage,
        payload: P,
    ) -> OriginResult<T, E> {
        let mut tracker = self.tracker(key, context, default_stage, Operation::Read);
        let (auth, other) = tracker.stage().read_origins();
        let result = match other {
            None => {
                let measured = self.run(Operation::Read, auth, payload).await;
                self.record(&mut tracker, &measured);
                measured.into_result()
            }
            Some(other) => {
                let (a, o) = match self.order {
                    ExecutionOrder::Parallel => {
                        let a = self.run(Operation::Read, auth, payload.clone());
                        let o = self.run(Operation::Read, other, payload);
                        futures_lite::future::zip(a, o).await
                    }
                    ExecutionOrder::Random if self.sample(2) => {
                        let o = self.run(Operation::Read, other, payload.clone()).await;
                        let a = self.run(Operation::Read, auth, payload).await;
                        (a, o)
                    }
                    ExecutionOrder::Serial | ExecutionOrder::Random => {
                        let a = self.run(Operation::Read, auth, payload.clone()).await;
                        let o = self.run(Operation::Read, other, payload).await;
                        (a, o)
                    }
                };
                self.record(&mut tracker, &a);
                self.record(&mut tracker, &o);
                if let (Some(compare), Ok(a), Ok(o)) = (&self.reads.compare, &a.result, &o.result) {
                    tracker.consistent(|| compare(a, o));
                }
                a.into_result()
            }
        };
        let _ = tracker.track(&*self.sink);
        result
    }

    /// Write `payload` as migration flag `key` says for `context`: to the authoritative
    /// origin, then (from `dualwrite` to `rampdown`) to the other one, unless the
    /// authoritative write failed. Reports the operation to the event sink.
    ///
    /// Dropping the future midway (cancellation) still reports what ran so far; if
    /// nothing finished, the event cannot be built and nothing is reported (PROTOCOL.md
    /// B §6.7).
    pub async fn write(
        &self,
        key: &str,
        context: &Context,
        default_stage: Stage,
        payload: P,
    ) -> WriteResult<T, E> {
        let tracker = self.tracker(key, context, default_stage, Operation::Write);
        let (auth, other) = tracker.stage().write_origins();
        let mut report = Report {
            tracker,
            sink: &*self.sink,
            done: false,
        };
        let (first, second) = match other {
            Some(other) => (payload.clone(), Some((other, payload))),
            None => (payload, None),
        };
        let authoritative = self.run(Operation::Write, auth, first).await;
        self.record(&mut report.tracker, &authoritative);
        let nonauthoritative = match second {
            Some((other, payload)) if authoritative.result.is_ok() => {
                let measured = self.run(Operation::Write, other, payload).await;
                self.record(&mut report.tracker, &measured);
                Some(measured.into_result())
            }
            _ => None,
        };
        report.finish();
        WriteResult {
            authoritative: authoritative.into_result(),
            nonauthoritative,
        }
    }

    fn tracker(&self, key: &str, context: &Context, default: Stage, op: Operation) -> OpTracker {
        let (_, mut tracker) = self.client.migration_variation(key, context, default);
        tracker.operation(op);
        tracker.rng = self.lock_rng().fork();
        tracker
    }

    fn lock_rng(&self) -> std::sync::MutexGuard<'_, fastrand::Rng> {
        self.rng.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn sample(&self, ratio: u32) -> bool {
        sample(&mut self.lock_rng(), ratio)
    }

    /// Call one origin and time it (PROTOCOL.md B §6.4).
    async fn run(&self, op: Operation, origin: Origin, payload: P) -> Measured<T, E> {
        let f = match (op, origin) {
            (Operation::Read, Origin::Old) => &self.reads.old,
            (Operation::Read, Origin::New) => &self.reads.new,
            (Operation::Write, Origin::Old) => &self.writes.old,
            (Operation::Write, Origin::New) => &self.writes.new,
        };
        let started = Instant::now();
        let result = f(payload).await;
        Measured {
            origin,
            result,
            latency: started.elapsed(),
        }
    }

    fn record(&self, tracker: &mut OpTracker, measured: &Measured<T, E>) {
        if self.track_latency {
            tracker.latency(measured.origin, measured.latency);
        }
        if self.track_errors && measured.result.is_err() {
            tracker.error(measured.origin);
        }
        tracker.invoked(measured.origin);
    }
}

/// Reports a write's tracker once: when the write finishes, or when its future is
/// dropped first (the reference's `finally`).
struct Report<'a> {
    tracker: OpTracker,
    sink: &'a dyn EventSink,
    done: bool,
}

impl Report<'_> {
    fn finish(mut self) {
        self.done = true;
        let _ = self.tracker.track(self.sink);
    }
}

impl Drop for Report<'_> {
    fn drop(&mut self) {
        if !self.done {
            tracing::debug!("migration write cancelled; tracking what ran");
            let _ = self.tracker.track(self.sink);
        }
    }
}
