//! [`Kind`]: what a single context describes (`user`, `org`, …).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The kind of entity a [`Context`](super::Context) describes. Its meaning is up to the
/// application; [`Kind::user`] is the default, and [`Kind::try_from`] makes any other.
#[derive(Debug, Clone, Eq)]
pub struct Kind(Cow<'static, str>);

impl std::hash::Hash for Kind {
    /// The name's hash (as `str`), consistent with equality.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        str::hash(&self.0, state);
    }
}

/// The one `user` name every `user` kind borrows (a `static`, so one address).
static USER: &str = "user";

impl PartialEq for Kind {
    /// Equal names. Every `user` kind shares one static name (the constructors give it),
    /// so the common comparison is two pointers, not a `memcmp`.
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        let (a, b): (&str, &str) = (&self.0, &other.0);
        a.len() == b.len() && (std::ptr::eq(a.as_ptr(), b.as_ptr()) || a == b)
    }
}

impl Kind {
    /// True for the kind `user`, the default kind of [`ContextBuilder`](super::ContextBuilder).
    pub fn is_user(&self) -> bool {
        self.0 == "user"
    }

    /// True for the kind `multi`, which only [`MultiContextBuilder`](super::MultiContextBuilder)
    /// gives a context.
    pub fn is_multi(&self) -> bool {
        self.0 == "multi"
    }

    /// The kind `user`.
    pub fn user() -> Self {
        Self(Cow::Borrowed(USER))
    }

    /// The kind of a multi-kind context.
    pub(super) fn multi() -> Self {
        Self(Cow::Borrowed("multi"))
    }

    /// Why `kind` is not a valid kind, or `None` when it is one: not empty, not `kind` or
    /// `multi`, and only ASCII letters, digits, `-`, `.` and `_`.
    fn invalid(kind: &str) -> Option<&'static str> {
        match kind {
            "" => Some("context kind cannot be empty"),
            "kind" => Some("context kind cannot be 'kind'"),
            "multi" => Some("context kind cannot be 'multi'"),
            k if !k
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_')) =>
            {
                Some("context kind contains disallowed characters")
            }
            _ => None,
        }
    }
}

impl AsRef<str> for Kind {
    /// The kind's name.
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Ord for Kind {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.cmp(&other.0)
    }
}

impl PartialOrd for Kind {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq<&str> for Kind {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<str> for Kind {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl Default for Kind {
    /// The kind `user`.
    fn default() -> Self {
        Self::user()
    }
}

impl TryFrom<String> for Kind {
    type Error = String;

    /// The kind named `value`: it must not be empty, `kind` or `multi`, and may hold only
    /// ASCII letters, digits, `-`, `.` and `_`.
    fn try_from(value: String) -> Result<Self, Self::Error> {
        if value == "user" {
            return Ok(Self::user());
        }
        match Self::invalid(&value) {
            Some(why) => Err(why.to_owned()),
            None => Ok(Self(Cow::Owned(value))),
        }
    }
}

impl TryFrom<&str> for Kind {
    type Error = String;

    /// The kind named `value` (see [`Kind::try_from`]).
    fn try_from(value: &str) -> Result<Self, Self::Error> {
        if value == "user" {
            return Ok(Self::user());
        }
        match Self::invalid(value) {
            Some(why) => Err(why.to_owned()),
            None => Ok(Self(Cow::Owned(value.to_owned()))),
        }
    }
}

impl fmt::Display for Kind {
    /// The kind's name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<Kind> for String {
    /// The kind's name.
    fn from(k: Kind) -> Self {
        k.0.into_owned()
    }
}

impl Serialize for Kind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Self::try_from(s).map_err(serde::de::Error::custom)
    }
}
