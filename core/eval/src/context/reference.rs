//! [`Reference`]: an attribute name, or a slash-delimited path into a context's
//! attributes, parsed once.

use std::fmt;

use flagsync_core::events::ComponentError;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a reference is invalid.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
enum Error {
    Empty,
    InvalidEscapeSequence,
    DoubleOrTrailingSlash,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Empty => "Reference cannot be empty",
            Self::InvalidEscapeSequence => "Reference contains invalid escape sequence",
            Self::DoubleOrTrailingSlash => "Reference contains double or trailing slash",
        })
    }
}

/// An attribute name or a path to a value inside a [`Context`](super::Context)'s
/// attributes, as [`Context::get_value`](super::Context::get_value),
/// [`ContextBuilder::add_private_attribute`](super::ContextBuilder::add_private_attribute)
/// and flag rules use them.
///
/// A string starting with `/` is a path: its first component names an attribute, the
/// next ones properties of nested JSON objects, and `~0` and `~1` stand for `~` and `/`
/// inside a component. Any other string is the literal name of an attribute.
///
/// ```
/// use flagsync_eval::{AttributeValue, Context, Reference};
///
/// let context: Context = serde_json::from_value(serde_json::json!({
///     "kind": "user", "key": "123", "name": "xyz",
///     "address": {"street": "99 Main St.", "city": "Westview"},
///     "a/b": "ok",
/// }))?;
/// assert_eq!(context.get_value(&Reference::new("name")), Some(AttributeValue::from("xyz")));
/// assert_eq!(
///     context.get_value(&Reference::new("/address/street")),
///     Some(AttributeValue::from("99 Main St."))
/// );
/// assert_eq!(context.get_value(&Reference::new("a/b")), Some(AttributeValue::from("ok")));
/// assert_eq!(context.get_value(&Reference::new("/a~1b")), Some(AttributeValue::from("ok")));
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Hash, PartialEq, Eq)]
pub struct Reference {
    variant: Variant,
    /// The string it was made from (what it serializes to).
    input: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq)]
enum Variant {
    /// A top-level attribute name (no leading `/`): the input.
    Plain,
    /// A path (leading `/`), its components unescaped.
    Pointer(Vec<String>),
    Invalid(Error),
}

impl Reference {
    /// The reference `value` stands for. An invalid one is kept with its error (see
    /// [`Reference::is_valid`]) and still serializes to `value`.
    pub fn new<S: AsRef<str>>(value: S) -> Self {
        let input = value.as_ref().to_owned();
        let variant = match input.strip_prefix('/') {
            _ if input.is_empty() || input == "/" => Variant::Invalid(Error::Empty),
            None => Variant::Plain,
            Some(path) => path
                .split('/')
                .map(unescape)
                .collect::<Result<Vec<_>, _>>()
                .map_or_else(Variant::Invalid, Variant::Pointer),
        };
        Self { variant, input }
    }

    /// The reference to the top-level attribute named `name`, escaped when it starts
    /// with `/` so that it is not read as a path.
    pub(crate) fn from_literal_name(name: &str) -> Self {
        if name.starts_with('/') {
            Self::new(format!("/{}", name.replace('~', "~0").replace('/', "~1")))
        } else {
            Self::new(name)
        }
    }

    /// True unless the string was empty, `/`, had an empty path component or a `~` not
    /// followed by `0` or `1`.
    pub fn is_valid(&self) -> bool {
        !matches!(self.variant, Variant::Invalid(_))
    }

    /// Why the reference is invalid; empty for a valid one.
    pub fn error(&self) -> String {
        match &self.variant {
            Variant::Invalid(e) => e.to_string(),
            _ => String::new(),
        }
    }

    /// The number of components: 1 for an attribute name, the number of components after
    /// the leading `/` for a path, 0 for an invalid reference.
    ///
    /// ```
    /// # use flagsync_eval::Reference;
    /// assert_eq!(Reference::new("a").depth(), 1);
    /// assert_eq!(Reference::new("/a/b").depth(), 2);
    /// ```
    pub fn depth(&self) -> usize {
        match &self.variant {
            Variant::Plain => 1,
            Variant::Pointer(components) => components.len(),
            Variant::Invalid(_) => 0,
        }
    }

    /// Component `index` (unescaped), or `None` past [`Reference::depth`].
    ///
    /// ```
    /// # use flagsync_eval::Reference;
    /// assert_eq!(Reference::new("a").component(0), Some("a"));
    /// assert_eq!(Reference::new("/a/b").component(1), Some("b"));
    /// assert_eq!(Reference::new("/a/b").component(2), None);
    /// ```
    pub fn component(&self, index: usize) -> Option<&str> {
        match &self.variant {
            Variant::Plain if index == 0 => Some(&self.input),
            Variant::Pointer(components) => components.get(index).map(String::as_str),
            _ => None,
        }
    }

    /// The first component and the rest, for a valid reference.
    pub(super) fn split_first(&self) -> Option<(&str, &[String])> {
        match &self.variant {
            Variant::Plain => Some((&self.input, &[])),
            Variant::Pointer(components) => components
                .split_first()
                .map(|(first, rest)| (first.as_str(), rest)),
            Variant::Invalid(_) => None,
        }
    }
}

/// A path component with `~0` and `~1` replaced by `~` and `/` (the grammar the
/// events' redaction reads too).
fn unescape(part: &str) -> Result<String, Error> {
    flagsync_core::events::unescape_component(part).map_err(|e| match e {
        ComponentError::Empty => Error::DoubleOrTrailingSlash,
        ComponentError::InvalidEscape => Error::InvalidEscapeSequence,
    })
}

impl Default for Reference {
    /// The empty, invalid reference.
    fn default() -> Self {
        Self::new("")
    }
}

impl fmt::Display for Reference {
    /// The string the reference was made from.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.input)
    }
}

impl<S: AsRef<str>> From<S> for Reference {
    /// [`Reference::new`].
    fn from(reference: S) -> Self {
        Self::new(reference)
    }
}

impl From<Reference> for String {
    /// The string the reference was made from.
    fn from(r: Reference) -> Self {
        r.input
    }
}

impl Serialize for Reference {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.input)
    }
}

impl<'de> Deserialize<'de> for Reference {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::new)
    }
}
