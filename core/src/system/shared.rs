//! [`Shared`]: the store, status and outputs that the FDv1 source and the FDv2
//! coordinator both write to.

use std::collections::VecDeque;
use std::time::Instant;

use super::interface::{Event, Output};
use super::persist::{self, Persist, Persistence};
use crate::status::{ErrorInfo, State, StatusTracker};
use crate::store::{ApplyMode, ChangeSet, Doubts, Item, Kind, Stale, Store, Transfer, doubts};

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
        warn_doubts(&doubts(&cs.changes));
        let mode = cs.mode;
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
        report_not_newer(mode, &applied.not_newer);
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

/// `kind:key` for each named item, and how many more there are.
fn key_list<T>(named: &[T], count: usize, each: impl Fn(&T) -> String) -> String {
    let mut list: Vec<String> = named.iter().map(each).collect();
    if count > named.len() {
        list.push(format!("and {} more", count - named.len()));
    }
    list.join(", ")
}

/// Doubtful data the store takes anyway is a warning with the keys
/// (`crate::store::doubts` says why it is taken). Flag and segment keys are not
/// secrets; they are printed with escapes, so a U+FFFD shows.
fn warn_doubts(d: &Doubts) {
    if !d.replaced_keys.is_empty() {
        let keys = key_list(&d.replaced_keys.first, d.replaced_keys.count, |(k, key)| {
            format!("{}:{key:?}", k.namespace())
        });
        tracing::warn!(
            count = d.replaced_keys.count,
            %keys,
            "data: keys that were not valid UTF-8 are stored with U+FFFD in place of the invalid bytes"
        );
    }
    if !d.other_body_keys.is_empty() {
        let keys = key_list(
            &d.other_body_keys.first,
            d.other_body_keys.count,
            |(k, key, body)| format!("{}:{key:?} (body key {body:?})", k.namespace()),
        );
        tracing::warn!(
            count = d.other_body_keys.count,
            %keys,
            "data: items whose body names another key are stored under the key they were sent under"
        );
    }
}

/// Changes no newer than the stored items. FDv1 ignores them, and replays older
/// patches in normal operation (a reconnect's `put` crossing a `patch`): a debug line.
/// FDv2 writes them (the payload's state wins, as the contract harness requires: see
/// `ApplyMode::Fdv2`), so an older item may replace a newer one: a warning with the
/// keys, never silence.
fn report_not_newer(mode: ApplyMode, stale: &[Stale]) {
    if stale.is_empty() {
        return;
    }
    let named = &stale[..stale.len().min(crate::store::NAMED)];
    let deletions = stale.iter().filter(|s| s.deleted).count();
    let keys = key_list(named, stale.len(), |s| {
        format!(
            "{}:{:?} ({} v{} <= stored v{})",
            s.kind.namespace(),
            s.key,
            if s.deleted { "delete" } else { "put" },
            s.version,
            s.stored
        )
    });
    match mode {
        ApplyMode::Fdv2 => tracing::warn!(
            count = stale.len(),
            deletions,
            %keys,
            "fdv2: changes no newer than the stored items were applied (the payload's state wins)"
        ),
        ApplyMode::Fdv1 => tracing::debug!(
            count = stale.len(),
            deletions,
            %keys,
            "fdv1: changes no newer than the stored items were ignored"
        ),
    }
}
