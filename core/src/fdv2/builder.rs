//! The change-set builder (PROTOCOL.md B §5.3) and the protocol state machine that
//! drives it (B §5.4 message handling, E 28–32).

use crate::store::{ApplyMode, Change, ChangeSet, Item, Kind, Selector, Transfer};

use super::{Error, Event, IntentCode};

/// Collects the changes of one payload until it is complete (PROTOCOL.md B §5.3).
///
/// ```
/// use flagsync_core::fdv2::{ChangeSetBuilder, IntentCode};
/// use flagsync_core::store::{Kind, Selector, Transfer};
///
/// let mut b = ChangeSetBuilder::new();
/// b.start(IntentCode::TransferFull);
/// b.add_delete(Kind::Flag, "f", 3);
/// let cs = b.finish(Selector { state: "s".into(), version: 1 }).unwrap();
/// assert_eq!(cs.transfer, Transfer::Full);
/// assert!(cs.changes[0].item.deleted);
/// // Later payloads on the same connection are changes.
/// assert_eq!(b.intent(), Some(IntentCode::TransferChanges));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeSetBuilder {
    intent: Option<IntentCode>,
    changes: Vec<Change>,
}

impl ChangeSetBuilder {
    /// A builder with no intent and no changes.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current intent, if any.
    pub fn intent(&self) -> Option<IntentCode> {
        self.intent
    }

    /// The changes collected so far (not yet visible to anyone).
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// Set the intent and clear the changes.
    pub fn start(&mut self, intent: IntentCode) {
        self.intent = Some(intent);
        self.changes.clear();
    }

    /// Expect changes to follow: an intent of `none` becomes
    /// [`IntentCode::TransferChanges`]; any other intent is kept.
    ///
    /// # Errors
    /// [`Error::MissingIntent`] if there is no intent.
    pub fn expect_changes(&mut self) -> Result<(), Error> {
        match self.intent {
            None => Err(Error::MissingIntent),
            Some(IntentCode::None) => {
                self.intent = Some(IntentCode::TransferChanges);
                Ok(())
            }
            Some(_) => Ok(()),
        }
    }

    /// Clear the changes and keep the intent.
    pub fn reset(&mut self) {
        self.changes.clear();
    }

    /// Append an upsert. Does not check that there is an intent.
    pub fn add_put(&mut self, change: Change) {
        self.changes.push(change);
    }

    /// Append a delete: a tombstone at the envelope `version`. Does not check that
    /// there is an intent.
    pub fn add_delete(&mut self, kind: Kind, key: &str, version: u64) {
        self.changes.push(Change {
            kind,
            key: key.to_owned(),
            item: Item::tombstone(key, version),
            depends_on: Vec::new(),
        });
    }

    /// Complete the payload with `selector`: return the change set and clear the
    /// changes. An intent of `xfer-full` becomes `xfer-changes` for later payloads.
    ///
    /// # Errors
    /// [`Error::MissingIntent`] if there is no intent.
    pub fn finish(&mut self, selector: Selector) -> Result<ChangeSet, Error> {
        let intent = self.intent.ok_or(Error::MissingIntent)?;
        if intent == IntentCode::TransferFull {
            self.intent = Some(IntentCode::TransferChanges);
        }
        Ok(ChangeSet {
            mode: ApplyMode::Fdv2,
            transfer: transfer(intent),
            changes: std::mem::take(&mut self.changes),
            selector: Some(selector),
        })
    }

    /// The change set of an up-to-date client: intent `none`, no changes, the empty
    /// selector. Applying it changes nothing.
    pub fn no_changes() -> ChangeSet {
        ChangeSet {
            mode: ApplyMode::Fdv2,
            transfer: Transfer::None,
            changes: Vec::new(),
            selector: Some(Selector::default()),
        }
    }

    /// A full transfer of nothing with `selector`: applying it empties the store.
    pub fn empty(selector: Selector) -> ChangeSet {
        ChangeSet {
            mode: ApplyMode::Fdv2,
            transfer: Transfer::Full,
            changes: Vec::new(),
            selector: Some(selector),
        }
    }
}

fn transfer(intent: IntentCode) -> Transfer {
    match intent {
        IntentCode::TransferFull => Transfer::Full,
        IntentCode::TransferChanges => Transfer::Changes,
        IntentCode::None => Transfer::None,
    }
}

/// What to do after an FDv2 event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// A payload is complete (or the server said the client is up to date): apply it.
    Apply(ChangeSet),
    /// The server said goodbye; the connection is about to close. Nothing else changes.
    Goodbye {
        /// Why.
        reason: String,
    },
    /// The server failed while serving a payload; the uncommitted changes were dropped
    /// and the stream continues.
    ServerError {
        /// The payload that failed.
        payload_id: String,
        /// Why.
        reason: String,
    },
    /// Nothing to do: a change was collected, or the event is ignored (heartbeat,
    /// unknown event, unknown object kind).
    Ignore,
}

/// The FDv2 protocol state machine: one per stream (it lives across reconnects) or per
/// polling response.
///
/// Changes become visible only at `payload-transferred`, or at once for an intent of
/// `none` (PROTOCOL.md E 28).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protocol {
    builder: ChangeSetBuilder,
}

impl Protocol {
    /// A machine that has seen no intent yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The builder, for inspection.
    pub fn builder(&self) -> &ChangeSetBuilder {
        &self.builder
    }

    /// Consume one event.
    ///
    /// # Errors
    /// [`Error::MissingIntent`] for a `put-object`, `delete-object` or
    /// `payload-transferred` before any `server-intent`: the data source is interrupted.
    pub fn handle_event(&mut self, event: Event) -> Result<Action, Error> {
        match event {
            Event::ServerIntent(intent) => {
                self.builder.start(intent.code);
                if intent.code == IntentCode::None {
                    self.builder.expect_changes()?;
                    return Ok(Action::Apply(ChangeSetBuilder::no_changes()));
                }
            }
            Event::PutObject(put) => {
                self.require_intent()?;
                self.builder.add_put(put.change);
            }
            Event::DeleteObject(del) => {
                self.require_intent()?;
                self.builder.add_delete(del.kind, &del.key, del.version);
            }
            Event::PayloadTransferred(selector) => {
                return self.builder.finish(selector).map(Action::Apply);
            }
            Event::Goodbye { reason } => return Ok(Action::Goodbye { reason }),
            Event::Error { payload_id, reason } => {
                self.builder.reset();
                return Ok(Action::ServerError { payload_id, reason });
            }
            Event::UnknownObjectKind { kind } => {
                tracing::debug!(kind, "fdv2: ignoring an object of unknown kind");
            }
            Event::Heartbeat | Event::Unknown(_) => {}
        }
        Ok(Action::Ignore)
    }

    /// Drop the uncommitted changes and keep the intent (the FDv2 `goodbye`: the
    /// connection closes before the payload completes).
    pub fn reset(&mut self) {
        self.builder.reset();
    }

    fn require_intent(&self) -> Result<(), Error> {
        match self.builder.intent() {
            Some(_) => Ok(()),
            None => Err(Error::MissingIntent),
        }
    }
}
