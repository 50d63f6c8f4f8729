//! [`Context`]: one entity (or several, of different kinds) that flags are evaluated
//! for, and [`AttributeRef`], an attribute read without copying.

use std::collections::HashMap;
use std::sync::Arc;

use super::{AttributeValue, Kind, Reference};

/// The attributes of one entity (a single-kind context) or of several of different
/// kinds (a multi-kind context), as flag rules and analytics events see them.
///
/// A single-kind context is made with [`ContextBuilder`](super::ContextBuilder), a
/// multi-kind one with [`MultiContextBuilder`](super::MultiContextBuilder); both also
/// deserialize from the JSON forms LaunchDarkly's SDKs write, including the old user
/// format.
///
/// The API is that of the official `launchdarkly-server-sdk-evaluation` crate's
/// `Context`. Its representation is made for evaluations: the built-in attributes
/// (`kind`, `key`, `name`, `anonymous`) are fields, the others a list sorted by name,
/// and [`Context::attribute`] reads any of them without copying. It is shared, not
/// copied: a clone is a reference count (the analytics events keep the contexts they
/// report that way).
#[derive(Debug, Clone, PartialEq)]
pub struct Context(pub(super) Arc<Data>);

/// What a [`Context`] holds (its fields read through it).
#[derive(Debug, PartialEq)]
pub(super) struct Data {
    /// `multi` for a multi-kind context.
    pub(super) kind: Kind,
    /// Empty for a multi-kind context.
    pub(super) key: String,
    pub(super) canonical_key: String,
    pub(super) name: Option<String>,
    pub(super) anonymous: bool,
    /// Every other attribute, sorted by name, no name twice, no `null` value.
    pub(super) attributes: Box<[(Box<str>, AttributeValue)]>,
    /// `None` when there are none.
    pub(super) private_attributes: Option<Vec<Reference>>,
    /// The old user format's `secondary` (deserialized only; never evaluated).
    pub(super) secondary: Option<String>,
    /// The contexts of a multi-kind context, sorted by kind.
    pub(super) contexts: Option<Vec<Context>>,
}

impl Context {
    /// The context holding `data`.
    pub(super) fn new(data: Data) -> Self {
        Self(Arc::new(data))
    }
}

/// The value of an attribute of a [`Context`], borrowed from it: what
/// [`Context::attribute`] returns.
///
/// The built-in attributes are fields of a context, not [`AttributeValue`]s, so they
/// come as [`AttributeRef::Str`] (`kind`, `key`, `name`) or [`AttributeRef::Bool`]
/// (`anonymous`); every other attribute, and every value inside one, as
/// [`AttributeRef::Value`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AttributeRef<'a> {
    /// A built-in string attribute.
    Str(&'a str),
    /// The built-in `anonymous`.
    Bool(bool),
    /// Any other attribute, or a value inside one.
    Value(&'a AttributeValue),
}

impl<'a> AttributeRef<'a> {
    /// The string, for a string.
    pub fn as_str(&self) -> Option<&'a str> {
        match *self {
            Self::Str(s) => Some(s),
            Self::Value(AttributeValue::String(s)) => Some(s),
            _ => None,
        }
    }

    /// The boolean, for a boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Self::Bool(b) | Self::Value(&AttributeValue::Bool(b)) => Some(b),
            _ => None,
        }
    }

    /// The number, for a number.
    pub fn to_f64(&self) -> Option<f64> {
        match *self {
            Self::Value(AttributeValue::Number(n)) => Some(*n),
            _ => None,
        }
    }

    /// An owned copy, as [`Context::get_value`] returns it.
    pub fn to_value(&self) -> AttributeValue {
        match *self {
            Self::Str(s) => AttributeValue::String(s.to_owned()),
            Self::Bool(b) => AttributeValue::Bool(b),
            Self::Value(v) => v.clone(),
        }
    }
}

impl From<AttributeRef<'_>> for AttributeValue {
    fn from(r: AttributeRef<'_>) -> Self {
        r.to_value()
    }
}

/// Up to this many attributes a lookup scans them in order; beyond, it bisects.
const SCAN_LIMIT: usize = 8;

impl Context {
    /// True for a multi-kind context.
    pub fn is_multi(&self) -> bool {
        self.0.contexts.is_some()
    }

    /// This context without its anonymous contexts: a multi-kind context of the
    /// others (a single-kind one if one is left), the context itself if it is a
    /// single-kind context that is not anonymous. `Err` when nothing is left.
    pub fn without_anonymous_contexts(&self) -> Result<Self, String> {
        let kept = match &self.0.contexts {
            Some(contexts) => contexts
                .iter()
                .filter(|c| !c.0.anonymous)
                .cloned()
                .collect(),
            None if self.0.anonymous => Vec::new(),
            None => vec![self.clone()],
        };
        combine(&kept)
    }

    /// An owned copy of the value `reference` addresses: a built-in attribute (`kind`,
    /// `key`, `name`, `anonymous`), another attribute, or with a path a value inside an
    /// object attribute. Private-attribute metadata is not addressable. A multi-kind
    /// context has only `kind` (`multi`): use [`Context::as_kind`] first.
    ///
    /// [`Context::attribute`] reads the same values without copying them.
    pub fn get_value(&self, reference: &Reference) -> Option<AttributeValue> {
        self.attribute(reference).map(|v| v.to_value())
    }

    /// The value `reference` addresses, borrowed: the same values as
    /// [`Context::get_value`] without copying them.
    ///
    /// ```
    /// use flagsync_eval::{AttributeRef, AttributeValue, ContextBuilder, Reference};
    ///
    /// let context = ContextBuilder::new("k").name("Ann").set_float("age", 42.0).build()?;
    /// assert_eq!(context.attribute(&Reference::new("name")), Some(AttributeRef::Str("Ann")));
    /// assert_eq!(
    ///     context.attribute(&Reference::new("age")),
    ///     Some(AttributeRef::Value(&AttributeValue::Number(42.0)))
    /// );
    /// # Ok::<(), String>(())
    /// ```
    pub fn attribute(&self, reference: &Reference) -> Option<AttributeRef<'_>> {
        let (first, rest) = reference.split_first()?;
        if self.is_multi() {
            return (rest.is_empty() && first == "kind").then_some(AttributeRef::Str("multi"));
        }
        let top = match first {
            "kind" => AttributeRef::Str(self.0.kind.as_ref()),
            "key" => AttributeRef::Str(&self.0.key),
            "name" => AttributeRef::Str(self.0.name.as_deref()?),
            "anonymous" => AttributeRef::Bool(self.0.anonymous),
            other => AttributeRef::Value(self.custom(other)?),
        };
        if rest.is_empty() {
            return Some(top);
        }
        let AttributeRef::Value(mut value) = top else {
            return None;
        };
        for name in rest {
            let AttributeValue::Object(map) = value else {
                return None;
            };
            value = map.get(name)?;
        }
        Some(AttributeRef::Value(value))
    }

    /// The attribute (not a built-in one: not `kind`, `key`, `name` or `anonymous`)
    /// named `name` of a single-kind context, as [`Context::attribute`] finds it.
    #[inline]
    pub(crate) fn custom(&self, name: &str) -> Option<&AttributeValue> {
        let attributes = &*self.0.attributes;
        let found = if attributes.len() <= SCAN_LIMIT {
            attributes.iter().find(|(n, _)| **n == *name)
        } else {
            attributes
                .binary_search_by(|(n, _)| (**n).cmp(name))
                .ok()
                .map(|i| &attributes[i])
        };
        found.map(|(_, v)| v)
    }

    /// The `key` attribute; empty for a multi-kind context (see [`Context::as_kind`]).
    pub fn key(&self) -> &str {
        &self.0.key
    }

    /// The canonical key: the key for a `user`, `kind:key` for another kind (with `%`
    /// and `:` in the key escaped as `%25` and `%3A`), and for a multi-kind context the
    /// `kind:key` of each context, sorted by kind, joined with `:` (`user` included).
    pub fn canonical_key(&self) -> &str {
        &self.0.canonical_key
    }

    /// The `kind` attribute: `multi` for a multi-kind context.
    pub fn kind(&self) -> &Kind {
        &self.0.kind
    }

    /// The `name` attribute, if it is set (never for a multi-kind context).
    pub fn name(&self) -> Option<&str> {
        self.0.name.as_deref()
    }

    /// The `anonymous` attribute (false for a multi-kind context).
    pub fn anonymous(&self) -> bool {
        self.0.anonymous
    }

    /// The single-kind context of `kind`: this one if it has that kind, or the one of
    /// a multi-kind context that has it.
    pub fn as_kind(&self, kind: &Kind) -> Option<&Self> {
        match &self.0.contexts {
            None => (self.0.kind == *kind).then_some(self),
            Some(contexts) => contexts.iter().find(|c| c.0.kind == *kind),
        }
    }

    /// The key of each kind.
    pub fn context_keys(&self) -> HashMap<&Kind, &str> {
        match &self.0.contexts {
            None => HashMap::from([(&self.0.kind, self.0.key.as_str())]),
            Some(contexts) => contexts
                .iter()
                .map(|c| (&c.0.kind, c.0.key.as_str()))
                .collect(),
        }
    }

    /// The kinds of the context: one for a single-kind context, each context's for a
    /// multi-kind one.
    pub fn kinds(&self) -> Vec<&Kind> {
        match &self.0.contexts {
            None => vec![&self.0.kind],
            Some(contexts) => contexts.iter().map(|c| &c.0.kind).collect(),
        }
    }

    /// The single-kind contexts: this one, or those of a multi-kind context.
    pub(crate) fn singles(&self) -> &[Self] {
        match &self.0.contexts {
            None => std::slice::from_ref(self),
            Some(contexts) => contexts,
        }
    }
}

/// The context made of single-kind `contexts`: the one context if there is only one,
/// otherwise a multi-kind context. `Err` without contexts or with two of the same kind.
/// [`MultiContextBuilder::build`](super::MultiContextBuilder::build) returns it, and
/// [`Context::without_anonymous_contexts`] for what is left.
pub(super) fn combine(contexts: &[Context]) -> Result<Context, String> {
    match contexts {
        [] => return Err("multi-kind context must contain at least one nested context".into()),
        [one] => return Ok(one.clone()),
        _ => {}
    }
    let mut contexts = contexts.to_vec();
    contexts.sort_by(|a, b| a.0.kind.cmp(&b.0.kind));
    if contexts.windows(2).any(|w| w[0].0.kind == w[1].0.kind) {
        return Err("multi-kind context cannot have same kind more than once".into());
    }
    let canonical_key = contexts
        .iter()
        .map(|c| canonical_key(&c.0.kind, &c.0.key, false))
        .collect::<Vec<_>>()
        .join(":");
    Ok(Context::new(Data {
        kind: Kind::multi(),
        key: String::new(),
        canonical_key,
        name: None,
        anonymous: false,
        attributes: Box::default(),
        private_attributes: None,
        secondary: None,
        contexts: Some(contexts),
    }))
}

/// The canonical key of a single-kind context: `key` alone for a `user` when
/// `omit_user_kind`, otherwise `kind:key` with `%` and `:` in the key escaped.
pub(super) fn canonical_key(kind: &Kind, key: &str, omit_user_kind: bool) -> String {
    if omit_user_kind && kind.is_user() {
        return key.to_owned();
    }
    let kind = kind.as_ref();
    let mut out = String::with_capacity(kind.len() + 1 + key.len());
    out.push_str(kind);
    out.push(':');
    for c in key.chars() {
        match c {
            '%' => out.push_str("%25"),
            ':' => out.push_str("%3A"),
            c => out.push(c),
        }
    }
    out
}
