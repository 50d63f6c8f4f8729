//! [`Shared`]: the store, status and outputs that the FDv1 source and the FDv2
//! coordinator both write to.

use std::collections::VecDeque;
use std::time::Instant;

use super::interface::{Event, Output};
use super::persist::{self, Persist, Persistence};
use crate::status::{ErrorInfo, State, StatusTracker};
use crate::store::{ChangeSet, Item, Kind, Store, Transfer};

/// What the FDv1 source and the FDv2 coordinator both write to.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: Store,
    pub(crate) status: StatusTracker,
    pub(crate) out: VecDeque<Output>,
    pub(crate) ready: bool,
    pub(crate) environment_id: Option<String>,
    pub(super) persist: Option<Persistence>,
}

impl Shared {
    /// Apply a change set, write it through to the persistent store, and report what
    /// changed.
    pub(crate) fn apply(&mut self, mut cs: ChangeSet) {
        // The store keeps each item in a buffer of its own, not a slice of the read it
        // came in (which one small item would keep alive whole); a full transfer's
        // unchanged items share the stored ones' buffers.
        let full = cs.transfer == Transfer::Full;
        if full {
            cs.compact_against(self.store.data());
        } else {
            cs.compact();
        }
        let persist = self
            .persist
            .as_mut()
            .is_some_and(Persistence::accepts_writes);
        // Writes to persist: the items of a delta that the store takes (FDv1 may reject
        // stale ones), identified afterwards by their shared buffer.
        let candidates: Vec<(Kind, String, Item)> = if persist && !full {
            cs.changes
                .iter()
                .map(|c| (c.kind, c.key.clone(), c.item.clone()))
                .collect()
        } else {
            Vec::new()
        };
        let applied = self.store.apply(cs);
        if persist {
            if full {
                self.out
                    .push_back(Output::Persist(Persist::Init(self.store.persist_order())));
            } else {
                let data = self.store.data();
                for (kind, key, item) in candidates {
                    let stored = data.get_including_deleted(kind, &key).is_some_and(|s| {
                        s.version == item.version && s.raw.as_ptr() == item.raw.as_ptr()
                    });
                    if stored {
                        self.out
                            .push_back(Output::Persist(Persist::Upsert(kind, key, item)));
                    }
                }
            }
        }
        // Change events follow the memory write whatever the persistent store does
        // (PROTOCOL.md A.4.9).
        if applied.written > 0 || full {
            self.out.push_back(Output::Event(Event::StoreChanged {
                changed_flags: applied.changed_flags,
            }));
        }
    }

    pub(super) fn persist_effects(&mut self, now: Instant, fx: persist::Effects) {
        for w in fx.writes {
            self.out.push_back(Output::Persist(w));
        }
        if fx.rewrite && self.store.initialized() {
            // A.4.8: the store missed writes; give it the whole data set again.
            self.out
                .push_back(Output::Persist(Persist::Init(self.store.persist_order())));
        }
        if let Some(st) = fx.status {
            self.out
                .push_back(Output::Event(Event::StoreStatusChanged(st)));
            if st.available {
                // The failure that interrupted the data source is over.
                let status = self.status.status();
                let store_error = status
                    .error
                    .as_ref()
                    .is_some_and(|e| e.kind == crate::ErrorKind::StoreError);
                if status.state == State::Interrupted && store_error && self.store.initialized() {
                    self.report(now, State::Valid, None);
                }
            }
        }
    }

    /// Report a state through the status rules.
    pub(crate) fn report(&mut self, now: Instant, state: State, error: Option<ErrorInfo>) {
        if let Some(st) = self.status.update(now, state, error) {
            self.out
                .push_back(Output::Event(Event::StatusChanged(st.clone())));
        }
    }

    /// Waiting for initialization can end.
    pub(crate) fn set_ready(&mut self) {
        if !self.ready {
            self.ready = true;
            self.out.push_back(Output::Event(Event::Ready));
        }
    }

    /// Record the environment id (non-empty only).
    pub(crate) fn set_environment_id(&mut self, id: String) {
        if !id.is_empty() && self.environment_id.as_deref() != Some(id.as_str()) {
            self.environment_id = Some(id.clone());
            self.out.push_back(Output::Event(Event::EnvironmentId(id)));
        }
    }
}
