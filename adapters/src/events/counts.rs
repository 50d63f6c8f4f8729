//! Summary counters kept by each evaluating thread, counted without any atomic
//! read-modify-write.
//!
//! An application evaluates the same flags for the same context again and again: after
//! the first time, such an evaluation only adds one to a summary counter. Counting it in
//! the thread's shard takes the shard's lock, and on the virtual machines SDKs run on an
//! atomic read-modify-write costs about 10 ns, a tenth of an evaluation. Here each
//! thread keeps, for each (compiled flag, variation, context kind) it counted, a
//! [`Cell`] that only that thread writes: a running total advanced with a plain atomic
//! store. A flush reads the totals and reports what each added since the last one.
//!
//! ```text
//!  evaluating thread                         flush (the event processor's task)
//!  ─────────────────                         ──────────────────────────────────
//!  repeat of its last context, same epoch,   shards: summaries taken, seen sets cleared
//!  a cell for (flag id, variation), kind =   epoch += 1  (every thread's next evaluation
//!    → total.store(total + 1), last_at         goes through its shard once)
//!  anything else → the shard (locked),       each cell: total − reported → the summary;
//!    then this thread remembers the            a cell its thread let go of is counted a
//!    context and makes the cell                last time and forgotten
//! ```
//!
//! The epoch keeps the memo of the last context honest: that context is in the shard's
//! set of contexts seen since the flush that began the epoch (the shards are cleared
//! before the epoch moves), so no index event is missed. Counts are never lost: an
//! increment that lands after a flush read its cell is reported by the next flush.
//!
//! A thread finds its cell in a direct-mapped table of `slots` cells (a power of two)
//! by a mix of the flag id and the variation: a few instructions, no probing. Two
//! counters that map to one slot take turns (the one replaced is let go of: a flush
//! counts it a last time and forgets it). Bounds: at most `slots` cells per thread and
//! client, and `16 × slots` per client in all; when a client has that many, evaluations
//! without a cell are counted through the shards, as they would be without this.

use std::cell::RefCell;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex, Weak};

use crate::eval::ContextKind as Kind;
use flagsync_core::events::{FlagRef, Summarizer};

use super::clock::coarse_unix_ms;
use serde_json::Value;

/// One summary counter of one thread: a running total only that thread advances.
#[derive(Debug)]
struct Cell {
    flag_key: Box<str>,
    flag_id: u64,
    kind: Kind,
    variation: Option<usize>,
    version: Option<u64>,
    value: Value,
    default: Value,
    /// Evaluations counted, ever (its thread loads and stores; nobody else writes).
    total: AtomicU64,
    /// When the last of them happened, Unix milliseconds.
    last_at: AtomicU64,
    /// The total the flushes reported so far (only they touch it, under the registry's
    /// lock).
    reported: AtomicU64,
}

/// What a new cell counts (its key in the thread's map is its flag id and variation).
pub(crate) struct CellSpec<'a> {
    pub(crate) flag_key: &'a str,
    pub(crate) flag_id: u64,
    pub(crate) kind: &'a Kind,
    pub(crate) variation: Option<usize>,
    pub(crate) version: Option<u64>,
    pub(crate) value: &'a dyn Fn() -> Value,
    pub(crate) default: &'a dyn Fn() -> Value,
}

/// One client's per-thread counters: the registry the flushes read.
#[derive(Debug)]
pub(crate) struct Counts {
    /// Moved on by every flush (see the module's documentation).
    epoch: AtomicU64,
    /// Every cell a thread made and the flushes have not forgotten.
    cells: Mutex<Vec<Arc<Cell>>>,
    /// The size of each thread's table: a power of two.
    slots: usize,
}

/// A thread's side of one client's counters.
struct Local {
    counts: Weak<Counts>,
    /// The address of `counts`, which is this client's while `counts` keeps the
    /// allocation (a `Weak` does): found with one comparison.
    owner: usize,
    /// The epoch in which `context` was counted through the shard.
    epoch: u64,
    /// The canonical key of the context this thread last counted through the shard.
    context: String,
    /// Direct-mapped by [`slot`]; empty until the first cell.
    cells: Box<[Option<Arc<Cell>>]>,
}

/// The slot of the counter of flag `id` and `variation` in a table of `mask + 1`.
fn slot(id: u64, variation: Option<usize>, mask: usize) -> usize {
    // Fibonacci hashing of the id (consecutive ids spread out), the variation mixed in.
    let v = variation.map_or(0, |v| v.wrapping_add(1));
    #[allow(
        clippy::cast_possible_truncation,
        reason = "only the bits under the mask"
    )]
    let h = (id.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize;
    (h ^ v.wrapping_mul(0x9E37)) & mask
}

/// Whether two kinds are the same, without comparing the bytes when they are the same
/// string (`user`, the usual one, is one static string).
fn same_kind(a: &Kind, b: &Kind) -> bool {
    let (a, b) = (a.as_ref(), b.as_ref());
    a.len() == b.len() && (ptr::eq(a.as_ptr(), b.as_ptr()) || a == b)
}

thread_local! {
    /// Each client's counters of this thread (in practice, one client).
    static LOCAL: RefCell<Vec<Local>> = const { RefCell::new(Vec::new()) };
}

impl Counts {
    /// Counters keeping at most `slots` cells per thread (rounded up to a power of
    /// two).
    pub(crate) fn new(slots: usize) -> Self {
        Self {
            epoch: AtomicU64::new(0),
            cells: Mutex::new(Vec::new()),
            slots: slots.clamp(1, 1 << 16).next_power_of_two(),
        }
    }

    /// The current epoch: read before counting through a shard, and handed to
    /// [`Counts::remember`] after.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Count an evaluation of the flag of `flag_id` giving `variation` to the context of
    /// canonical key `context` and kind `kind` now, if this thread counted the same
    /// context through its shard in this epoch and has a cell for the counter. False: it
    /// goes through the shard.
    #[inline]
    pub(crate) fn try_count(
        &self,
        flag_id: u64,
        variation: Option<usize>,
        context: &str,
        kind: &Kind,
    ) -> bool {
        LOCAL
            .try_with(|locals| {
                let Ok(locals) = locals.try_borrow() else {
                    return false;
                };
                let owner = ptr::from_ref(self).addr();
                let Some(local) = locals.iter().find(|l| l.owner == owner) else {
                    return false;
                };
                if local.epoch != self.epoch.load(Ordering::Acquire) || local.context != context {
                    return false;
                }
                let i = slot(flag_id, variation, local.cells.len().wrapping_sub(1));
                let Some(Some(cell)) = local.cells.get(i) else {
                    return false;
                };
                if cell.flag_id != flag_id
                    || cell.variation != variation
                    || !same_kind(&cell.kind, kind)
                {
                    return false;
                }
                cell.last_at.store(coarse_unix_ms(), Ordering::Relaxed);
                // Only this thread writes `total`: a load and a store, no
                // read-modify-write. Release: a flush that sees the new total sees
                // `last_at` too.
                let total = cell.total.load(Ordering::Relaxed);
                cell.total.store(total + 1, Ordering::Release);
                true
            })
            .unwrap_or(false)
    }

    /// After an evaluation was counted through the shard, with the epoch read before:
    /// remember its context and, given `cell`, make sure this thread has a cell for its
    /// counter, so that its repeats are counted by [`Counts::try_count`].
    pub(crate) fn remember(
        self: &Arc<Self>,
        epoch: u64,
        context: &str,
        cell: Option<CellSpec<'_>>,
    ) {
        let _ = LOCAL.try_with(|locals| {
            let Ok(mut locals) = locals.try_borrow_mut() else {
                return;
            };
            let i = match locals
                .iter()
                .position(|l| l.owner == Arc::as_ptr(self).addr())
            {
                Some(i) => i,
                None => {
                    // The counters of clients that are gone are let go of here.
                    locals.retain(|l| l.counts.strong_count() > 0);
                    locals.push(Local {
                        counts: Arc::downgrade(self),
                        owner: Arc::as_ptr(self).addr(),
                        epoch,
                        context: String::new(),
                        cells: Box::default(),
                    });
                    locals.len() - 1
                }
            };
            let local = &mut locals[i];
            local.epoch = epoch;
            local.context.clear();
            local.context.push_str(context);
            let Some(spec) = cell else {
                return;
            };
            if local.cells.is_empty() {
                local.cells = vec![None; self.slots].into_boxed_slice();
            }
            let i = slot(spec.flag_id, spec.variation, self.slots - 1);
            if local.cells[i].as_ref().is_some_and(|c| {
                c.flag_id == spec.flag_id
                    && c.variation == spec.variation
                    && same_kind(&c.kind, spec.kind)
            }) {
                return;
            }
            let mut registry = self.cells.lock().unwrap_or_else(|e| e.into_inner());
            if registry.len() >= self.slots.saturating_mul(16) {
                return;
            }
            let new = Arc::new(Cell {
                flag_key: spec.flag_key.into(),
                flag_id: spec.flag_id,
                kind: spec.kind.clone(),
                variation: spec.variation,
                version: spec.version,
                value: (spec.value)(),
                default: (spec.default)(),
                total: AtomicU64::new(0),
                last_at: AtomicU64::new(0),
                reported: AtomicU64::new(0),
            });
            registry.push(new.clone());
            // The cell it replaces, if any, is let go of: a flush counts it a last time.
            local.cells[i] = Some(new);
        });
    }

    /// What the cells counted since the last call, and a new epoch. Call it after the
    /// shards' seen sets are cleared.
    pub(crate) fn take(&self) -> Summarizer {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        let mut summary = Summarizer::new();
        let mut registry = self.cells.lock().unwrap_or_else(|e| e.into_inner());
        registry.retain(|cell| {
            // Whether its thread still holds it, read before its total: a thread that
            // let go of it counts nothing more (the fence pairs with the release of
            // the thread's `Arc` drop), so its last total is read below.
            let held = Arc::strong_count(cell) > 1;
            fence(Ordering::Acquire);
            let total = cell.total.load(Ordering::Acquire);
            let reported = cell.reported.load(Ordering::Relaxed);
            if total > reported {
                summary.record_many(
                    cell.last_at.load(Ordering::Relaxed),
                    FlagRef {
                        key: &cell.flag_key,
                        id: Some(cell.flag_id),
                    },
                    [cell.kind.as_ref()],
                    cell.variation,
                    cell.version,
                    total - reported,
                    || cell.value.clone(),
                    || cell.default.clone(),
                );
                cell.reported.store(total, Ordering::Relaxed);
            }
            held
        });
        summary
    }

    /// Cells not yet forgotten (for tests).
    #[cfg(test)]
    fn registered(&self) -> usize {
        self.cells.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec<'a>(flag_id: u64, kind: &'a Kind, variation: usize) -> CellSpec<'a> {
        CellSpec {
            flag_key: "f",
            flag_id,
            kind,
            variation: Some(variation),
            version: Some(7),
            value: &|| json!(true),
            default: &|| json!(false),
        }
    }

    /// Count like the recorder: the cell if it can, else "the shard" (`shard`).
    fn count(counts: &Arc<Counts>, shard: &mut Summarizer, context: &str, kind: &str) {
        let kind = Kind::try_from(kind).unwrap();
        if counts.try_count(1, Some(0), context, &kind) {
            return;
        }
        let epoch = counts.epoch();
        let at = super::coarse_unix_ms();
        shard.record(
            at,
            "f",
            [kind.as_ref()],
            Some(0),
            Some(7),
            || json!(true),
            || json!(false),
        );
        counts.remember(epoch, context, Some(spec(1, &kind, 0)));
    }

    #[test]
    fn repeats_are_counted_by_the_cell_and_reported_once() {
        let counts = Arc::new(Counts::new(8));
        let mut shard = Summarizer::new();
        let before = super::super::clock::unix_ms();
        for _ in 1..=5 {
            count(&counts, &mut shard, "u", "user");
        }
        assert_eq!(shard.total(), 1, "only the first goes through the shard");
        let first = counts.take();
        assert_eq!(first.total(), 4);
        let event = first.to_event().unwrap();
        let end = event["endDate"].as_u64().unwrap();
        assert!(
            end + 50 >= before && end <= super::super::clock::unix_ms(),
            "{end}"
        );
        assert_eq!(event["features"]["f"]["counters"][0]["version"], 7);
        // Nothing new: nothing reported; a new epoch sends the next one to the shard.
        assert!(counts.take().is_empty());
        count(&counts, &mut shard, "u", "user");
        count(&counts, &mut shard, "u", "user");
        assert_eq!(shard.total(), 2);
        assert_eq!(counts.take().total(), 1);
    }

    #[test]
    fn another_context_or_kind_goes_through_the_shard() {
        let counts = Arc::new(Counts::new(8));
        let mut shard = Summarizer::new();
        count(&counts, &mut shard, "u", "user");
        count(&counts, &mut shard, "v", "user");
        // The same canonical key as another kind's: its own counter.
        count(&counts, &mut shard, "v", "org");
        count(&counts, &mut shard, "v", "org");
        assert_eq!(shard.total(), 3);
        let cells = counts.take();
        assert_eq!(cells.total(), 1);
        assert_eq!(
            cells.to_event().unwrap()["features"]["f"]["contextKinds"],
            json!(["org"])
        );
    }

    #[test]
    fn a_thread_that_ends_is_counted_a_last_time_and_forgotten() {
        let counts = Arc::new(Counts::new(8));
        let c = counts.clone();
        std::thread::spawn(move || {
            let mut shard = Summarizer::new();
            for _ in 0..10 {
                count(&c, &mut shard, "u", "user");
            }
        })
        .join()
        .unwrap();
        assert_eq!(counts.registered(), 1);
        assert_eq!(counts.take().total(), 9);
        assert_eq!(counts.registered(), 0);
    }

    #[test]
    fn cells_are_bounded_per_thread_and_per_client() {
        let counts = Arc::new(Counts::new(4));
        for id in 0..10 {
            counts.remember(counts.epoch(), "u", Some(spec(id, &Kind::default(), 0)));
        }
        // Ten cells made; the thread holds at most its 4 slots' worth, and a flush
        // forgets the ones it let go of.
        assert_eq!(counts.registered(), 10);
        assert!(counts.take().is_empty());
        let held = counts.registered();
        assert!((1..=4).contains(&held), "{held}");
        // Per client: at most 16 × 4 at once, whatever the threads do.
        let threads: Vec<_> = (0..20)
            .map(|t| {
                let c = counts.clone();
                std::thread::spawn(move || {
                    for id in 0..4 {
                        let kind = Kind::default();
                        c.remember(c.epoch(), "u", Some(spec(100 + t * 4 + id, &kind, 0)));
                    }
                    // Stay alive until the count below.
                    std::thread::sleep(std::time::Duration::from_millis(200));
                })
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert_eq!(counts.registered(), 64);
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn counters_that_share_a_slot_take_turns_and_lose_nothing() {
        let counts = Arc::new(Counts::new(1));
        let kind = Kind::default();
        let mut shard = Summarizer::new();
        let mut count = |flag_id: u64| {
            if counts.try_count(flag_id, Some(0), "u", &kind) {
                return;
            }
            let epoch = counts.epoch();
            let key = if flag_id == 1 { "f" } else { "g" };
            shard.record(
                1,
                key,
                ["user"],
                Some(0),
                Some(7),
                || json!(true),
                || json!(false),
            );
            let spec = CellSpec {
                flag_key: key,
                ..spec(flag_id, &kind, 0)
            };
            counts.remember(epoch, "u", Some(spec));
        };
        for i in 0..30 {
            // Runs of three of one flag, then of the other.
            count(1 + (i / 3) % 2);
        }
        let mut all = counts.take();
        all.merge(shard);
        assert_eq!(all.total(), 30);
        let event = all.to_event().unwrap();
        assert_eq!(event["features"]["f"]["counters"][0]["count"], 15);
        assert_eq!(event["features"]["g"]["counters"][0]["count"], 15);
        assert_eq!(counts.registered(), 1, "only the cell in the slot is kept");
    }

    #[test]
    fn two_clients_on_one_thread_keep_their_own_cells() {
        let (a, b) = (Arc::new(Counts::new(8)), Arc::new(Counts::new(8)));
        let (mut sa, mut sb) = (Summarizer::new(), Summarizer::new());
        for _ in 0..3 {
            count(&a, &mut sa, "u", "user");
            count(&b, &mut sb, "u", "user");
        }
        assert_eq!((a.take().total(), b.take().total()), (2, 2));
        drop(a);
        // A new client on this thread lets the gone one's cells go.
        let c = Arc::new(Counts::new(8));
        count(&c, &mut Summarizer::new(), "u", "user");
        assert_eq!(LOCAL.with(|l| l.borrow().len()), 2);
    }
}
