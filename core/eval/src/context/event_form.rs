//! A [`Context`] as analytics events carry it ([`EventContext`]), made field by field:
//! the same as parsing its JSON form, without writing and reading that JSON.

use serde_json::{Map, Number, Value};

use flagsync_core::events::{ContextError, ContextKind, EventContext};

use super::{AttributeValue, Context};

impl AttributeValue {
    /// This value as JSON (a number that JSON cannot hold is `null`, as serde writes it).
    pub(crate) fn to_json(&self) -> Value {
        match self {
            Self::String(s) => Value::String(s.clone()),
            Self::Array(values) => Value::Array(values.iter().map(Self::to_json).collect()),
            Self::Number(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Self::Bool(b) => Value::Bool(*b),
            Self::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect::<Map<_, _>>(),
            ),
            Self::Null => Value::Null,
        }
    }
}

impl Context {
    /// This context in the form analytics events carry
    /// ([`flagsync_core::events::EventProcessor`] takes it), built field by field.
    ///
    /// # Errors
    /// A context the event form cannot hold (e.g. an invalid kind).
    pub fn to_event_context(&self) -> Result<EventContext, ContextError> {
        let kinds = match &self.0.contexts {
            Some(contexts) => contexts.iter().map(Self::event_kind).collect(),
            None => vec![self.event_kind()],
        };
        EventContext::from_kinds(kinds)
    }

    /// A single-kind context's part of its event form.
    fn event_kind(&self) -> ContextKind {
        let name = self
            .0
            .name
            .as_ref()
            .map(|n| ("name".to_owned(), Value::String(n.clone())));
        ContextKind {
            kind: self.0.kind.as_ref().to_owned(),
            key: self.0.key.clone(),
            anonymous: self.0.anonymous,
            attributes: name
                .into_iter()
                .chain(
                    self.0
                        .attributes
                        .iter()
                        .map(|(n, v)| (n.to_string(), v.to_json())),
                )
                .collect(),
            private_attributes: self
                .0
                .private_attributes
                .iter()
                .flatten()
                .map(ToString::to_string)
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Both ways to the event form agree: through the JSON, and field by field.
    fn agree(context: &Context) {
        let json = serde_json::to_value(context).unwrap();
        assert_eq!(
            context.to_event_context(),
            EventContext::parse(&json),
            "{json}"
        );
    }

    #[test]
    fn the_event_form_is_the_json_forms() {
        for json in [
            json!({"kind": "user", "key": "u"}),
            json!({"kind": "org", "key": "o:1", "name": "Org", "anonymous": true,
                "n": 3, "f": 1.5, "b": false, "a": [1, "x", {"y": null}], "o": {"p": {"q": 2}},
                "_meta": {"privateAttributes": ["n", "/o/p", "/bad~2"]}}),
            json!({"kind": "multi", "user": {"key": "u", "email": "e"},
                "org": {"key": "o", "_meta": {"privateAttributes": ["name"]}, "name": "N"}}),
            json!({"key": "", "custom": {"c": 1}, "privateAttributeNames": ["c"],
                "secondary": "s", "email": "e"}),
        ] {
            let context: Context = serde_json::from_value(json.clone()).unwrap();
            agree(&context);
        }
    }
}
