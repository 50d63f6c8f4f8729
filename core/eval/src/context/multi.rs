//! [`MultiContextBuilder`]: combines single-kind contexts into a multi-kind one.

use super::Context;
use super::context::combine;

/// Builds a multi-kind [`Context`] out of single-kind ones, at most one per kind.
///
/// ```
/// use flagsync_eval::{ContextBuilder, ContextKind, MultiContextBuilder};
///
/// let user = ContextBuilder::new("u1").build()?;
/// let org = ContextBuilder::new("o1").kind("org").build()?;
/// let both = MultiContextBuilder::new().add_context(user).add_context(org).build()?;
/// assert!(both.is_multi());
/// assert_eq!(both.canonical_key(), "org:o1:user:u1");
/// assert_eq!(both.as_kind(&ContextKind::user()).map(|c| c.key()), Some("u1"));
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct MultiContextBuilder {
    contexts: Vec<Context>,
}

impl MultiContextBuilder {
    /// An empty builder: [`MultiContextBuilder::build`] needs at least one context.
    pub fn new() -> Self {
        Self {
            contexts: Vec::with_capacity(3),
        }
    }

    /// A builder holding `contexts` (see [`MultiContextBuilder::add_context`]).
    pub fn of(contexts: Vec<Context>) -> Self {
        let mut builder = Self::new();
        for c in contexts {
            builder.add_context(c);
        }
        builder
    }

    /// Add `context`; a multi-kind context adds each of its contexts. Two contexts of
    /// the same kind make [`MultiContextBuilder::build`] fail.
    pub fn add_context(&mut self, context: Context) -> &mut Self {
        match &context.0.contexts {
            Some(contexts) => self.contexts.extend(contexts.iter().cloned()),
            None => self.contexts.push(context),
        }
        self
    }

    /// The context: the one context added if there is only one, otherwise a
    /// multi-kind context. `Err` without contexts or with two of the same kind.
    pub fn build(&self) -> Result<Context, String> {
        combine(&self.contexts)
    }
}
