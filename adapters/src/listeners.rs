//! Flag value-change listeners: the evaluated value of one flag for one context,
//! reported each time it changes.
//!
//! [`Client::flag_changes`] says that a flag's *data* changed (a new version, a deleted
//! flag, a changed prerequisite or segment). A value-change listener narrows that to
//! what an application usually wants: did the value *this* context gets change? It is
//! built on `flag_changes` alone, with no task of its own: each change of the flag is
//! evaluated when the stream is polled, and reported only when the value differs from
//! the last one reported (or, at first, from the value when the listener was made).
//! Its evaluations send no analytics events.

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context as TaskContext, Poll};

use crate::eval::{Context, FlagValue};
use serde_json::Value;

use futures_core::Stream;

use crate::client::Inner;
use crate::{Client, FlagChange, Subscription};

/// A change of one flag's evaluated value for one context (see
/// [`Client::flag_value_changes`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct FlagValueChange {
    /// The flag key.
    pub key: String,
    /// The value before the change.
    pub old_value: Value,
    /// The value after it.
    pub new_value: Value,
}

/// The changes of one flag's value for one context: a [`futures_core::Stream`] of
/// [`FlagValueChange`] usable on any runtime, made by [`Client::flag_value_changes`].
/// It ends when the client is closed (or dropped); dropping it unregisters it.
#[derive(Debug)]
pub struct FlagValueChanges {
    client: Weak<Inner>,
    changes: Subscription<FlagChange>,
    key: String,
    context: Context,
    default: Value,
    last: Value,
}

impl Client {
    /// Every later change of the value flag `key` has for `context` (`default` when the
    /// flag is missing, off without an off variation, or the client has no data yet).
    ///
    /// The value is evaluated now, and again after each change of the flag's data
    /// (including changes of its prerequisites and segments, as [`Client::flag_changes`]
    /// reports them); a change is reported only when the new value differs from the
    /// last one. Changes are evaluated when the stream is read, so a reader that falls
    /// behind sees the newest value, not every intermediate one. These evaluations send
    /// no analytics events.
    ///
    /// ```no_run
    /// # async fn demo(client: flagsync::Client) {
    /// use flagsync::eval::ContextBuilder;
    /// use serde_json::json;
    ///
    /// let context = ContextBuilder::new("user-123").build().expect("valid");
    /// let mut changes = client.flag_value_changes("banner", &context, json!(false));
    /// while let Some(change) = changes.recv().await {
    ///     println!("banner: {} -> {}", change.old_value, change.new_value);
    /// }
    /// # }
    /// ```
    pub fn flag_value_changes(
        &self,
        key: &str,
        context: &Context,
        default: Value,
    ) -> FlagValueChanges {
        // Subscribe first, so that no change between the evaluation and the
        // subscription is missed.
        let changes = self.flag_changes();
        let last = self.current_value(key, context, &default);
        FlagValueChanges {
            client: Arc::downgrade(&self.inner),
            changes,
            key: key.to_owned(),
            context: context.clone(),
            default,
            last,
        }
    }

    /// The value of `key` for `context` as JSON, or `default`; no events.
    fn current_value(&self, key: &str, context: &Context, default: &Value) -> Value {
        self.evaluate_with(key, context, None, |_, detail| {
            detail.value.and_then(FlagValue::as_json)
        })
        .unwrap_or_else(|| default.clone())
    }
}

impl FlagValueChanges {
    /// The flag this listener watches.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The next change of the value, or `None` once the client is closed.
    pub async fn recv(&mut self) -> Option<FlagValueChange> {
        poll_fn(|cx| Pin::new(&mut *self).poll_change(cx)).await
    }

    /// The next change if one is ready now (its flag change already arrived).
    pub fn try_recv(&mut self) -> Option<FlagValueChange> {
        while let Some(change) = self.changes.try_recv() {
            if let Some(c) = self.check(&change) {
                return Some(c);
            }
        }
        None
    }

    /// The value change that `change` makes, if it is this flag's and the value moved.
    fn check(&mut self, change: &FlagChange) -> Option<FlagValueChange> {
        if change.key != self.key {
            return None;
        }
        let client = Client {
            inner: self.client.upgrade()?,
        };
        let value = client.current_value(&self.key, &self.context, &self.default);
        if value == self.last {
            return None;
        }
        let old_value = std::mem::replace(&mut self.last, value.clone());
        Some(FlagValueChange {
            key: self.key.clone(),
            old_value,
            new_value: value,
        })
    }

    fn poll_change(&mut self, cx: &mut TaskContext<'_>) -> Poll<Option<FlagValueChange>> {
        loop {
            match Pin::new(&mut self.changes).poll_next(cx) {
                Poll::Ready(Some(change)) => {
                    if let Some(c) = self.check(&change) {
                        return Poll::Ready(Some(c));
                    }
                }
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl futures_core::Stream for FlagValueChanges {
    type Item = FlagValueChange;
    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut TaskContext<'_>,
    ) -> Poll<Option<FlagValueChange>> {
        self.poll_change(cx)
    }
}
