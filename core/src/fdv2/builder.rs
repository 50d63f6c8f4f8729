//! The change-set builder (PROTOCOL.md B §5.3) and the protocol state machine that
//! drives it (B §5.4 message handling, E 28–32).

use crate::store::{ApplyMode, Change, ChangeSet, Item, Kind, Selector, Transfer};

use super::{Error, Event, IntentCode, PayloadLimits};

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
    /// The raw JSON plus key of every change held.
    held_bytes: usize,
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

    /// The bytes of the changes collected so far: the raw JSON plus the key of each
    /// (what [`PayloadLimits::max_bytes`] bounds).
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Set the intent and clear the changes.
    pub fn start(&mut self, intent: IntentCode) {
        self.intent = Some(intent);
        self.reset();
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

    /// Clear the changes and keep the intent. The memory they held is given back.
    pub fn reset(&mut self) {
        self.changes = Vec::new();
        self.held_bytes = 0;
    }

    /// Append an upsert. Does not check that there is an intent.
    pub fn add_put(&mut self, change: Change) {
        self.hold(change);
    }

    /// Append a delete: a tombstone at the envelope `version`. Does not check that
    /// there is an intent.
    pub fn add_delete(&mut self, kind: Kind, key: &str, version: u64) {
        self.hold(Change {
            kind,
            key: key.to_owned(),
            item: Item::tombstone(key, version),
            depends_on: Vec::new(),
        });
    }

    fn hold(&mut self, change: Change) {
        self.held_bytes = self
            .held_bytes
            .saturating_add(change.key.len())
            .saturating_add(change.item.raw.len());
        self.changes.push(change);
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
        self.held_bytes = 0;
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
/// `none` (PROTOCOL.md E 28). What is held until then is bounded by [`PayloadLimits`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protocol {
    builder: ChangeSetBuilder,
    limits: PayloadLimits,
}

impl Protocol {
    /// A machine that has seen no intent yet, with the default [`PayloadLimits`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A machine that has seen no intent yet and holds at most `limits` of an
    /// uncommitted payload.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use flagsync_core::fdv2::{self, Error, PayloadLimits, Protocol};
    ///
    /// let mut p = Protocol::with_limits(PayloadLimits { max_bytes: 64, max_objects: 10 });
    /// let intent = r#"{"payloads":[{"intentCode":"xfer-full"}]}"#;
    /// p.handle_event(fdv2::parse_event("server-intent", &Bytes::from(intent)).unwrap()).unwrap();
    /// let put = r#"{"version":1,"kind":"flag","key":"f","object":{"key":"f","version":1}}"#;
    /// let put = fdv2::parse_event("put-object", &Bytes::from(put)).unwrap();
    /// p.handle_event(put.clone()).unwrap(); // 1 + 23 bytes
    /// p.handle_event(put.clone()).unwrap(); // 48
    /// assert_eq!(p.handle_event(put), Err(Error::PayloadTooLarge { limit: 64 }));
    /// assert!(p.builder().changes().is_empty()); // the partial payload is dropped
    /// ```
    pub fn with_limits(limits: PayloadLimits) -> Self {
        Self {
            builder: ChangeSetBuilder::new(),
            limits,
        }
    }

    /// The bound on the uncommitted payload.
    pub fn limits(&self) -> PayloadLimits {
        self.limits
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
    /// [`Error::PayloadTooLarge`] or [`Error::TooManyObjects`] for a `put-object` or
    /// `delete-object` that takes the uncommitted payload past the [`PayloadLimits`]:
    /// the partial payload is dropped, and its intent with it, so that nothing but a
    /// new `server-intent` starts a payload again (a `payload-transferred` that
    /// followed the cut-off payload would otherwise commit an empty full transfer).
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
                self.check_limits()?;
            }
            Event::DeleteObject(del) => {
                self.require_intent()?;
                self.builder.add_delete(del.kind, &del.key, del.version);
                self.check_limits()?;
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

    /// Past a bound, drop the partial payload and its intent (issue 33).
    fn check_limits(&mut self) -> Result<(), Error> {
        let limits = self.limits;
        let err = if self.builder.held_bytes() > limits.max_bytes {
            Error::PayloadTooLarge {
                limit: limits.max_bytes,
            }
        } else if self.builder.changes().len() > limits.max_objects {
            Error::TooManyObjects {
                limit: limits.max_objects,
            }
        } else {
            return Ok(());
        };
        self.builder = ChangeSetBuilder::new();
        Err(err)
    }

    fn require_intent(&self) -> Result<(), Error> {
        match self.builder.intent() {
            Some(_) => Ok(()),
            None => Err(Error::MissingIntent),
        }
    }
}
