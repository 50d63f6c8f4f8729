//! The JSON forms of a [`Context`], as LaunchDarkly's SDKs write and read them.
//!
//! - single-kind: `{"kind": "org", "key": "o1", "name": …, "anonymous": true, <attributes>,
//!   "_meta": {"privateAttributes": [...]}}`;
//! - multi-kind: `{"kind": "multi", "org": {<a single-kind context without "kind">}, …}`;
//! - the old user format, read only (written as a single-kind `user`): no `kind`;
//!   `key`, `name`, `anonymous`, `secondary`, `firstName`, `lastName`, `avatar`,
//!   `email`, `country`, `ip` at the top, other attributes in `custom`, private ones in
//!   `privateAttributeNames`; an empty key is allowed.
//!
//! Reading follows the official crate's serde model field by field (which types each
//! field takes, what `null` means, which fields are ignored), so the same JSON is
//! accepted or refused by both.

use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::{AttributeValue, Context, ContextBuilder, Kind, MultiContextBuilder, Reference};

impl Serialize for Context {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Some(contexts) = &self.0.contexts else {
            return Single(self, true).serialize(serializer);
        };
        let mut map = serializer.serialize_map(Some(contexts.len() + 1))?;
        map.serialize_entry("kind", "multi")?;
        for c in contexts {
            map.serialize_entry(c.0.kind.as_ref(), &Single(c, false))?;
        }
        map.end()
    }
}

/// A single-kind context, with its `kind` or (in a multi-kind context) without.
struct Single<'a>(&'a Context, bool);

impl Serialize for Single<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let Self(c, with_kind) = *self;
        let mut map = serializer.serialize_map(None)?;
        if with_kind {
            map.serialize_entry("kind", &c.0.kind)?;
        }
        map.serialize_entry("key", &c.0.key)?;
        if let Some(name) = &c.0.name {
            map.serialize_entry("name", name)?;
        }
        if c.0.anonymous {
            map.serialize_entry("anonymous", &true)?;
        }
        for (name, value) in &c.0.attributes {
            map.serialize_entry(&**name, value)?;
        }
        let private = c.0.private_attributes.as_deref().unwrap_or_default();
        if c.0.secondary.is_some() || !private.is_empty() {
            map.serialize_entry("_meta", &Meta(c.0.secondary.as_deref(), private))?;
        }
        map.end()
    }
}

/// `_meta`: the secondary key and the private attributes, each when present.
struct Meta<'a>(Option<&'a str>, &'a [Reference]);

impl Serialize for Meta<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(secondary) = self.0 {
            map.serialize_entry("secondary", secondary)?;
        }
        if !self.1.is_empty() {
            map.serialize_entry("privateAttributes", self.1)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Context {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let json = Value::deserialize(deserializer)?;
        from_json(json).map_err(serde::de::Error::custom)
    }
}

/// The context a JSON value describes, or why it describes none.
fn from_json(json: Value) -> Result<Context, String> {
    let Value::Object(mut fields) = json else {
        return Err("a context must be a JSON object".into());
    };
    match fields.remove("kind") {
        None => user(fields),
        Some(Value::Null) => Err("context kind cannot be null".into()),
        Some(Value::String(kind)) => match kind.as_str() {
            "multi" => multi(fields),
            "" => Err("context kind cannot be empty string".into()),
            _ => {
                let kind = Kind::try_from(kind)?;
                let mut builder = single(fields)?;
                builder.kind(kind).build()
            }
        },
        Some(other) => Err(format!(
            "invalid type: {}, expected a string",
            kind_of(&other)
        )),
    }
}

/// A multi-kind context: every field but `kind` is a context of that kind.
fn multi(fields: Map<String, Value>) -> Result<Context, String> {
    let mut builder = MultiContextBuilder::new();
    for (kind, value) in fields {
        let kind = Kind::try_from(kind)?;
        let Value::Object(fields) = value else {
            return Err(format!(
                "invalid type: {}, expected a context",
                kind_of(&value)
            ));
        };
        let mut single = single(fields)?;
        builder.add_context(single.kind(kind).build()?);
    }
    builder.build()
}

/// The builder of a single-kind context (its kind aside): `key`, `name`, `anonymous`,
/// `_meta`, and every other field an attribute.
fn single(mut fields: Map<String, Value>) -> Result<ContextBuilder, String> {
    let key = required_string(&mut fields, "key")?;
    let name = string(fields.remove("name"), "name")?;
    let anonymous = boolean(fields.remove("anonymous"), "anonymous")?;
    let meta = meta(fields.remove("_meta"))?;
    let mut builder = ContextBuilder::new(key);
    for (name, value) in &fields {
        builder.set_value(name, AttributeValue::from(value));
    }
    if let Some(anonymous) = anonymous {
        builder.anonymous(anonymous);
    }
    if let Some(name) = name {
        builder.name(name);
    }
    if let Some(secondary) = meta.secondary {
        builder.secondary(secondary);
    }
    for private in meta.private_attributes {
        builder.add_private_attribute(private);
    }
    Ok(builder)
}

/// The fields of `_meta` a context keeps.
#[derive(Default)]
struct MetaFields {
    secondary: Option<String>,
    private_attributes: Vec<String>,
}

/// `_meta`: absent or `null`, an object (unknown fields ignored), or (as serde reads
/// a struct) the array `[secondary, privateAttributes]`.
fn meta(value: Option<Value>) -> Result<MetaFields, String> {
    let (secondary, private) = match value {
        None | Some(Value::Null) => return Ok(MetaFields::default()),
        Some(Value::Object(mut fields)) => (
            fields.remove("secondary"),
            fields.remove("privateAttributes"),
        ),
        Some(Value::Array(items)) if items.len() == 2 => {
            let mut items = items.into_iter();
            (items.next(), items.next())
        }
        Some(other) => return Err(format!("invalid type: {}, expected _meta", kind_of(&other))),
    };
    Ok(MetaFields {
        secondary: string(secondary, "secondary")?,
        private_attributes: strings(private, "privateAttributes")?,
    })
}

/// A context in the old user format.
fn user(mut fields: Map<String, Value>) -> Result<Context, String> {
    let key = required_string(&mut fields, "key")?;
    let mut builder = ContextBuilder::new(key);
    builder.allow_empty_key();
    if let Some(name) = string(fields.remove("name"), "name")? {
        builder.name(name);
    }
    if let Some(secondary) = string(fields.remove("secondary"), "secondary")? {
        builder.secondary(secondary);
    }
    if let Some(anonymous) = boolean(fields.remove("anonymous"), "anonymous")? {
        builder.anonymous(anonymous);
    }
    for field in ["avatar", "firstName", "lastName", "country", "email", "ip"] {
        if let Some(value) = string(fields.remove(field), field)? {
            builder.set_string(field, value);
        }
    }
    let custom = match fields.remove("custom") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(custom)) => custom,
        Some(other) => return Err(format!("invalid type: {}, expected a map", kind_of(&other))),
    };
    let private = strings(
        fields.remove("privateAttributeNames"),
        "privateAttributeNames",
    )?;
    // After the top-level attributes: a custom one of the same name overrides them.
    for (name, value) in &custom {
        if !matches!(
            name.as_str(),
            "kind" | "key" | "name" | "anonymous" | "_meta"
        ) {
            builder.set_value(name, AttributeValue::from(value));
        }
    }
    for name in private {
        builder.add_private_attribute(Reference::from_literal_name(&name));
    }
    builder.build()
}

/// Field `name`, which must be a string.
fn required_string(fields: &mut Map<String, Value>, name: &str) -> Result<String, String> {
    match fields.remove(name) {
        Some(Value::String(s)) => Ok(s),
        None => Err(format!("missing field `{name}`")),
        Some(other) => Err(format!(
            "invalid type: {}, expected a string for `{name}`",
            kind_of(&other)
        )),
    }
}

/// An optional string field: absent or `null` is `None`.
fn string(value: Option<Value>, name: &str) -> Result<Option<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("invalid type: {} for `{name}`", kind_of(&other))),
    }
}

/// An optional boolean field: absent or `null` is `None`.
fn boolean(value: Option<Value>, name: &str) -> Result<Option<bool>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(other) => Err(format!("invalid type: {} for `{name}`", kind_of(&other))),
    }
}

/// An optional array of strings.
fn strings(value: Option<Value>, name: &str) -> Result<Vec<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|item| match item {
                Value::String(s) => Ok(s),
                other => Err(format!("invalid type: {} in `{name}`", kind_of(&other))),
            })
            .collect(),
        Some(other) => Err(format!("invalid type: {} for `{name}`", kind_of(&other))),
    }
}

/// The JSON type of `value`, for error messages.
fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
