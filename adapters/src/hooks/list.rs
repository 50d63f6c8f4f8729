//! The registered hooks: an append-only list that an evaluation reads with one atomic
//! load (no lock, no reference count), whatever the number of threads evaluating.
//!
//! Hooks live in chunks of doubling size (1, 2, 4, … slots), each slot a `OnceLock` set
//! once; the length is published after the slot is set (release), so a reader that
//! sees a length sees every hook below it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::Hook;

/// Chunk `k` holds `2^k` hooks: room for `2^CHUNKS − 1` hooks.
const CHUNKS: usize = 32;

/// One chunk of slots.
type Chunk = Box<[OnceLock<Arc<dyn Hook>>]>;

/// The hooks of one client, in registration order.
pub(crate) struct HookList {
    len: AtomicUsize,
    chunks: [OnceLock<Chunk>; CHUNKS],
    /// Serializes registrations.
    writer: Mutex<()>,
}

/// The chunk and the index in it of hook `i`.
fn place(i: usize) -> (usize, usize) {
    let n = i + 1;
    let chunk = (usize::BITS - 1 - n.leading_zeros()) as usize;
    (chunk, n - (1 << chunk))
}

impl HookList {
    /// A list holding `hooks`.
    pub(crate) fn new(hooks: impl IntoIterator<Item = Arc<dyn Hook>>) -> Self {
        let list = Self {
            len: AtomicUsize::new(0),
            chunks: std::array::from_fn(|_| OnceLock::new()),
            writer: Mutex::new(()),
        };
        for hook in hooks {
            list.push(hook);
        }
        list
    }

    /// Register `hook` after the others.
    pub(crate) fn push(&self, hook: Arc<dyn Hook>) {
        let _writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let i = self.len.load(Ordering::Relaxed);
        let (chunk, at) = place(i);
        if chunk >= CHUNKS {
            tracing::warn!("too many hooks: this one is not registered");
            return;
        }
        let slots =
            self.chunks[chunk].get_or_init(|| (0..1 << chunk).map(|_| OnceLock::new()).collect());
        if slots[at].set(hook).is_ok() {
            self.len.store(i + 1, Ordering::Release);
        }
    }

    /// The hooks registered now, or `None` (one atomic load) when there are none.
    pub(crate) fn snapshot(&self) -> Option<Hooks<'_>> {
        let len = self.len.load(Ordering::Acquire);
        (len > 0).then_some(Hooks { list: self, len })
    }
}

/// The hooks registered when an evaluation began (later ones are not run for it).
#[derive(Clone, Copy)]
pub(crate) struct Hooks<'a> {
    list: &'a HookList,
    len: usize,
}

impl<'a> Hooks<'a> {
    /// How many.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Hook `i` (in registration order).
    pub(crate) fn get(&self, i: usize) -> Option<&'a dyn Hook> {
        if i >= self.len {
            return None;
        }
        let (chunk, at) = place(i);
        Some(&**self.list.chunks[chunk].get()?.get(at)?.get()?)
    }

    /// The hooks in registration order.
    pub(crate) fn iter(self) -> impl Iterator<Item = &'a dyn Hook> {
        (0..self.len).filter_map(move |i| self.get(i))
    }
}
