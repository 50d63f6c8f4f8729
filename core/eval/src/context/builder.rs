//! [`ContextBuilder`]: builds a single-kind context and checks it.

use super::context::{Data, canonical_key};
use super::{AttributeValue, Context, Kind, Reference};

/// Builds a single-kind [`Context`]; [`MultiContextBuilder`](super::MultiContextBuilder)
/// combines several.
///
/// Unless changed, a context has kind `user`, the key given to [`ContextBuilder::new`],
/// is not anonymous and has no other attributes. The setters take `&mut self` and
/// return it, so calls chain; [`ContextBuilder::build`] checks the kind and the key.
///
/// ```
/// use flagsync_eval::ContextBuilder;
///
/// let org = ContextBuilder::new("org-7")
///     .kind("org")
///     .name("Acme")
///     .set_string("plan", "gold")
///     .add_private_attribute("plan")
///     .build()?;
/// assert_eq!(org.canonical_key(), "org:org-7");
/// assert!(ContextBuilder::new("").build().is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone)]
pub struct ContextBuilder {
    kind: String,
    key: String,
    name: Option<String>,
    anonymous: bool,
    secondary: Option<String>,
    private_attributes: Vec<Reference>,
    /// Sorted by name, no name twice.
    attributes: Vec<(Box<str>, AttributeValue)>,
    /// The old user format allows an empty key.
    allow_empty_key: bool,
}

impl ContextBuilder {
    /// A builder of a `user` context with key `key`.
    pub fn new(key: impl Into<String>) -> Self {
        Self {
            kind: "user".to_owned(),
            key: key.into(),
            name: None,
            anonymous: false,
            secondary: None,
            private_attributes: Vec::new(),
            attributes: Vec::new(),
            allow_empty_key: false,
        }
    }

    /// Set the kind (`user` by default). [`ContextBuilder::build`] fails unless it is
    /// a valid kind: not empty, not `kind` or `multi`, only ASCII letters, digits, `.`,
    /// `_` and `-` ([`Kind::try_from`] checks a kind ahead).
    pub fn kind(&mut self, kind: impl Into<String>) -> &mut Self {
        self.kind = kind.into();
        self
    }

    /// Set the key, which must not be empty. Flag targets, rules and segments can
    /// refer to it.
    pub fn key(&mut self, key: impl Into<String>) -> &mut Self {
        self.key = key.into();
        self
    }

    /// Set the `name` attribute: always a string; the LaunchDarkly dashboard shows it.
    pub fn name(&mut self, name: impl Into<String>) -> &mut Self {
        self.name = Some(name.into());
        self
    }

    /// Set attribute `attribute_name` to a boolean (see [`ContextBuilder::set_value`]).
    pub fn set_bool(&mut self, attribute_name: &str, value: bool) -> &mut Self {
        self.set_value(attribute_name, AttributeValue::Bool(value))
    }

    /// Set attribute `attribute_name` to a number (see [`ContextBuilder::set_value`]).
    pub fn set_float(&mut self, attribute_name: &str, value: f64) -> &mut Self {
        self.set_value(attribute_name, AttributeValue::Number(value))
    }

    /// Set attribute `attribute_name` to a string (see [`ContextBuilder::set_value`]).
    pub fn set_string(&mut self, attribute_name: &str, value: impl Into<String>) -> &mut Self {
        self.set_value(attribute_name, AttributeValue::String(value.into()))
    }

    /// Set attribute `attribute_name` to `value`, of any JSON type; values of different
    /// types never equal each other in flag rules.
    ///
    /// Some names are special, and a value of the wrong type for them is ignored:
    /// `kind`, `key` and `name` take strings (`name` also `null`, which unsets it),
    /// `anonymous` a boolean. `_meta` and the empty name are ignored. For any other
    /// name, [`AttributeValue::Null`] removes the attribute. These attributes are not
    /// the private-attribute list: that is [`ContextBuilder::add_private_attribute`].
    pub fn set_value(&mut self, attribute_name: &str, value: AttributeValue) -> &mut Self {
        self.try_set_value(attribute_name, value);
        self
    }

    /// [`ContextBuilder::set_value`], telling whether the value was taken (false for a
    /// value of the wrong type for a special name, `_meta` or the empty name).
    pub fn try_set_value(&mut self, attribute_name: &str, value: AttributeValue) -> bool {
        match (attribute_name, value) {
            ("" | "_meta", _) => false,
            ("kind", AttributeValue::String(s)) => {
                self.kind = s;
                true
            }
            ("key", AttributeValue::String(s)) => {
                self.key = s;
                true
            }
            ("name", AttributeValue::String(s)) => {
                self.name = Some(s);
                true
            }
            ("name", AttributeValue::Null) => {
                self.name = None;
                true
            }
            ("anonymous", AttributeValue::Bool(b)) => {
                self.anonymous = b;
                true
            }
            ("kind" | "key" | "name" | "anonymous", _) => false,
            (name, value) => {
                let at = self.attributes.binary_search_by(|(n, _)| (**n).cmp(name));
                match (at, value) {
                    (Ok(i), AttributeValue::Null) => {
                        self.attributes.remove(i);
                    }
                    (Err(_), AttributeValue::Null) => {}
                    (Ok(i), value) => self.attributes[i].1 = value,
                    (Err(i), value) => self.attributes.insert(i, (name.into(), value)),
                }
                true
            }
        }
    }

    /// Set the old user format's `secondary` key (deserialization only).
    pub(super) fn secondary(&mut self, value: impl Into<String>) -> &mut Self {
        self.secondary = Some(value.into());
        self
    }

    /// Make an attribute, or a value inside one, private: left out of the analytics
    /// events of this context. `kind`, `key` and `anonymous` cannot be private. (The
    /// events configuration makes attributes private in every context.)
    pub fn add_private_attribute<R: Into<Reference>>(&mut self, reference: R) -> &mut Self {
        self.private_attributes.push(reference.into());
        self
    }

    /// Undo [`ContextBuilder::add_private_attribute`] for every reference equal to
    /// `reference`.
    pub fn remove_private_attribute<R: Into<Reference>>(&mut self, reference: R) -> &mut Self {
        let reference = reference.into();
        self.private_attributes.retain(|p| *p != reference);
        self
    }

    /// Mark the context anonymous (false by default): it still takes part in
    /// evaluations and events, but the LaunchDarkly dashboard does not list it. Flag
    /// rules can read it as the attribute `anonymous`.
    pub fn anonymous(&mut self, value: bool) -> &mut Self {
        self.anonymous = value;
        self
    }

    /// Allow an empty key (the old user format does).
    pub(super) fn allow_empty_key(&mut self) -> &mut Self {
        self.allow_empty_key = true;
        self
    }

    /// The context. `Err` with a description for an invalid kind or an empty key. The
    /// builder can be changed and used again afterwards.
    pub fn build(&self) -> Result<Context, String> {
        let kind = Kind::try_from(self.kind.as_str())?;
        if !self.allow_empty_key && self.key.is_empty() {
            return Err("key cannot be empty".to_owned());
        }
        Ok(Context::new(Data {
            canonical_key: canonical_key(&kind, &self.key, true),
            kind,
            key: self.key.clone(),
            name: self.name.clone(),
            anonymous: self.anonymous,
            attributes: self.attributes.clone().into_boxed_slice(),
            private_attributes: (!self.private_attributes.is_empty())
                .then(|| self.private_attributes.clone()),
            secondary: self.secondary.clone(),
            contexts: None,
        }))
    }
}
