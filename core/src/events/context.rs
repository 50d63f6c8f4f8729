//! Contexts as analytics events carry them: parsed once from LaunchDarkly's context JSON,
//! written back with private attributes redacted.
//!
//! The event processor does not depend on any evaluation engine's context type. A
//! caller hands it the context in LaunchDarkly's JSON form (what every SDK's context
//! type serializes to), and [`EventContext::parse`] keeps what events need: each
//! individual context's kind, key, `anonymous`, attributes and private-attribute
//! references, and the fully qualified key the index-event cache is keyed by.

use serde_json::{Map, Value};

/// Why a context could not be used in an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContextError {
    /// Not a JSON object, or a multi-kind context without any kind.
    #[error("not a context object")]
    NotAnObject,
    /// A `kind` that is missing, empty, `kind`, or has characters outside `[a-zA-Z0-9._-]`.
    #[error("invalid context kind")]
    InvalidKind,
    /// A missing or non-string `key`.
    #[error("missing context key")]
    MissingKey,
}

/// An attribute reference (`name`, or `/a/b` with `~0`/`~1` escapes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AttrRef {
    /// As written by the user: reported in `_meta.redactedAttributes` for nested ones.
    pub(crate) text: String,
    pub(crate) path: Vec<String>,
}

impl AttrRef {
    /// Parse a reference; `None` for an invalid one (`""`, `/`, an empty component).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        if text.is_empty() {
            return None;
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Some(Self {
                text: text.to_owned(),
                path: vec![text.to_owned()],
            });
        };
        let path = rest
            .split('/')
            .map(unescape_component)
            .collect::<Result<Vec<_>, _>>()
            .ok()?;
        Some(Self {
            text: text.to_owned(),
            path,
        })
    }
}

/// Why a component of an attribute reference's path is invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComponentError {
    /// An empty component: a double or trailing `/`.
    Empty,
    /// A `~` not followed by `0` or `1`.
    InvalidEscape,
}

/// One component of an attribute reference's path (`/a~1b/c` has `a~1b` and `c`) with
/// `~0` and `~1` replaced by `~` and `/`.
pub fn unescape_component(part: &str) -> Result<String, ComponentError> {
    if part.is_empty() {
        return Err(ComponentError::Empty);
    }
    if !part.contains('~') {
        return Ok(part.to_owned());
    }
    let mut out = String::with_capacity(part.len());
    let mut chars = part.chars();
    while let Some(c) = chars.next() {
        if c != '~' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('0') => out.push('~'),
            Some('1') => out.push('/'),
            _ => return Err(ComponentError::InvalidEscape),
        }
    }
    Ok(out)
}

/// One single-kind context.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Single {
    pub(crate) kind: String,
    pub(crate) key: String,
    pub(crate) anonymous: bool,
    /// `name` and the custom attributes, in their JSON order.
    pub(crate) attributes: Vec<(String, Value)>,
    pub(crate) private: Vec<AttrRef>,
}

/// One individual context of an [`EventContext`] made with [`EventContext::from_kinds`]:
/// what its JSON form would hold, already read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextKind {
    /// Its kind (`user`, `org`, …).
    pub kind: String,
    /// Its key.
    pub key: String,
    /// `anonymous`.
    pub anonymous: bool,
    /// `name` and the custom attributes, in any order (a `null` is the same as none; of
    /// a name given twice, the first is kept).
    pub attributes: Vec<(String, Value)>,
    /// `_meta.privateAttributes`, as written (invalid references are ignored).
    pub private_attributes: Vec<String>,
}

/// A context for analytics events: single-kind or multi-kind.
#[derive(Debug, Clone, PartialEq)]
pub struct EventContext {
    multi: bool,
    parts: Vec<Single>,
    fully_qualified_key: String,
}

fn valid_kind(kind: &str) -> bool {
    !kind.is_empty()
        && kind != "kind"
        && kind
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `%` and `:` escaped, as in the fully qualified key of a multi-kind or non-user context.
fn escape_key(key: &str, out: &mut String) {
    for c in key.chars() {
        match c {
            '%' => out.push_str("%25"),
            ':' => out.push_str("%3A"),
            c => out.push(c),
        }
    }
}

impl Single {
    fn parse(kind: String, object: &Map<String, Value>) -> Result<Self, ContextError> {
        if !valid_kind(&kind) {
            return Err(ContextError::InvalidKind);
        }
        let key = match object.get("key") {
            Some(Value::String(k)) => k.clone(),
            _ => return Err(ContextError::MissingKey),
        };
        let anonymous = matches!(object.get("anonymous"), Some(Value::Bool(true)));
        let mut attributes = Vec::new();
        let mut private = Vec::new();
        for (name, value) in object {
            match name.as_str() {
                "kind" | "key" | "anonymous" => {}
                "_meta" => {
                    if let Some(Value::Array(refs)) = value.get("privateAttributes") {
                        private.extend(
                            refs.iter()
                                .filter_map(Value::as_str)
                                .filter_map(AttrRef::parse),
                        );
                    }
                }
                // An attribute set to null is the same as no attribute.
                _ if value.is_null() => {}
                _ => attributes.push((name.clone(), value.clone())),
            }
        }
        Ok(Self {
            kind,
            key,
            anonymous,
            attributes,
            private,
        })
    }
}

impl EventContext {
    /// Read a context from LaunchDarkly's context JSON (`{"kind":"user","key":…}` or
    /// `{"kind":"multi","org":{…},…}`).
    pub fn parse(json: &Value) -> Result<Self, ContextError> {
        let Value::Object(object) = json else {
            return Err(ContextError::NotAnObject);
        };
        let kind = match object.get("kind") {
            Some(Value::String(k)) => k.clone(),
            _ => return Err(ContextError::InvalidKind),
        };
        let (multi, mut parts) = if kind == "multi" {
            let mut parts = Vec::new();
            for (kind, value) in object {
                if kind == "kind" {
                    continue;
                }
                let Value::Object(inner) = value else {
                    return Err(ContextError::NotAnObject);
                };
                parts.push(Single::parse(kind.clone(), inner)?);
            }
            if parts.is_empty() {
                return Err(ContextError::NotAnObject);
            }
            (parts.len() > 1, parts)
        } else {
            (false, vec![Single::parse(kind, object)?])
        };
        parts.sort_by(|a, b| a.kind.cmp(&b.kind));
        Ok(Self::from_parts(multi, parts))
    }

    /// A context from its individual contexts, without going through its JSON: the
    /// same as [`EventContext::parse`] of the JSON they stand for (a multi-kind context
    /// when there are several).
    ///
    /// # Errors
    /// [`ContextError::NotAnObject`] without any part, [`ContextError::InvalidKind`] for a
    /// kind `parse` refuses (or `multi`, or a kind twice).
    pub fn from_kinds(kinds: Vec<ContextKind>) -> Result<Self, ContextError> {
        if kinds.is_empty() {
            return Err(ContextError::NotAnObject);
        }
        let mut parts = Vec::with_capacity(kinds.len());
        for k in kinds {
            if !valid_kind(&k.kind) || k.kind == "multi" {
                return Err(ContextError::InvalidKind);
            }
            let mut attributes: Vec<_> = k
                .attributes
                .into_iter()
                .filter(|(_, v)| !v.is_null())
                .collect();
            // In name order, as a JSON object is read; a name twice counts once.
            attributes.sort_by(|a, b| a.0.cmp(&b.0));
            attributes.dedup_by(|b, a| a.0 == b.0);
            parts.push(Single {
                kind: k.kind,
                key: k.key,
                anonymous: k.anonymous,
                attributes,
                private: k
                    .private_attributes
                    .iter()
                    .filter_map(|p| AttrRef::parse(p))
                    .collect(),
            });
        }
        parts.sort_by(|a, b| a.kind.cmp(&b.kind));
        if parts.windows(2).any(|w| w[0].kind == w[1].kind) {
            return Err(ContextError::InvalidKind);
        }
        Ok(Self::from_parts(parts.len() > 1, parts))
    }

    fn from_parts(multi: bool, parts: Vec<Single>) -> Self {
        let mut fully_qualified_key = String::new();
        match parts.as_slice() {
            [one] if !multi && one.kind == "user" => fully_qualified_key.push_str(&one.key),
            _ => {
                for (i, part) in parts.iter().enumerate() {
                    if i > 0 {
                        fully_qualified_key.push(':');
                    }
                    fully_qualified_key.push_str(&part.kind);
                    fully_qualified_key.push(':');
                    escape_key(&part.key, &mut fully_qualified_key);
                }
            }
        }
        Self {
            multi,
            parts,
            fully_qualified_key,
        }
    }

    /// The key that identifies this context for index events: the key of a `user`
    /// context, otherwise `kind:key` pairs (`%` and `:` escaped) joined by `:` in kind
    /// order.
    pub fn fully_qualified_key(&self) -> &str {
        &self.fully_qualified_key
    }

    /// The kinds of this context, in kind order.
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().map(|p| p.kind.as_str())
    }

    /// Whether this is a multi-kind context.
    pub fn is_multi(&self) -> bool {
        self.multi
    }

    /// This context without its anonymous parts, or `None` if every part is anonymous
    /// (`omitAnonymousContexts`).
    pub fn without_anonymous(&self) -> Option<Self> {
        if self.parts.iter().all(|p| !p.anonymous) {
            return Some(self.clone());
        }
        let parts: Vec<Single> = self
            .parts
            .iter()
            .filter(|p| !p.anonymous)
            .cloned()
            .collect();
        if parts.is_empty() {
            return None;
        }
        let multi = parts.len() > 1;
        Some(Self::from_parts(multi, parts))
    }

    /// The `contextKeys` object: kind → key.
    pub fn context_keys(&self) -> Value {
        Value::Object(
            self.parts
                .iter()
                .map(|p| (p.kind.clone(), Value::String(p.key.clone())))
                .collect(),
        )
    }
}

/// Writes contexts into events with the configured private attributes redacted.
#[derive(Debug, Clone, Default)]
pub struct ContextFormatter {
    all_private: bool,
    global: Vec<AttrRef>,
}

impl ContextFormatter {
    /// A formatter: `all_private` redacts every attribute but `key`, `kind` and
    /// `anonymous`; `private` are attribute references private in every context.
    /// Invalid references are ignored.
    pub fn new(all_private: bool, private: &[String]) -> Self {
        Self {
            all_private,
            global: private.iter().filter_map(|p| AttrRef::parse(p)).collect(),
        }
    }

    /// The context as JSON, private attributes removed and listed in
    /// `_meta.redactedAttributes`. With `redact_anonymous`, an anonymous context keeps
    /// only `key`, `kind` and `anonymous` (feature, custom and migration events).
    pub fn format(&self, context: &EventContext, redact_anonymous: bool) -> Value {
        if context.multi {
            let mut out = Map::new();
            out.insert("kind".into(), Value::String("multi".into()));
            for part in &context.parts {
                out.insert(
                    part.kind.clone(),
                    Value::Object(self.single(part, false, redact_anonymous)),
                );
            }
            Value::Object(out)
        } else {
            match context.parts.first() {
                Some(part) => Value::Object(self.single(part, true, redact_anonymous)),
                None => Value::Object(Map::new()),
            }
        }
    }

    fn single(&self, part: &Single, with_kind: bool, redact_anonymous: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if with_kind {
            out.insert("kind".into(), Value::String(part.kind.clone()));
        }
        out.insert("key".into(), Value::String(part.key.clone()));
        if part.anonymous {
            out.insert("anonymous".into(), Value::Bool(true));
        }
        let redact_all = self.all_private || (redact_anonymous && part.anonymous);
        let mut redacted: Vec<String> = Vec::new();
        let private: Vec<&AttrRef> = self.global.iter().chain(part.private.iter()).collect();
        for (name, value) in &part.attributes {
            if redact_all
                || private
                    .iter()
                    .any(|p| p.path.len() == 1 && p.path.first().is_some_and(|c| c == name))
            {
                redacted.push(top_level_reference(name));
                continue;
            }
            let mut path = vec![name.as_str()];
            let value = redact_value(&mut path, value, &private, &mut redacted);
            out.insert(name.clone(), value);
        }
        if !redacted.is_empty() {
            let mut meta = Map::new();
            meta.insert(
                "redactedAttributes".into(),
                Value::Array(redacted.into_iter().map(Value::String).collect()),
            );
            out.insert("_meta".into(), Value::Object(meta));
        }
        out
    }
}

/// The attribute reference of top-level attribute `name`, as `redactedAttributes` lists
/// it: the name itself, unless it begins with `/` and would read as a path; then the
/// one-component path, with `~` and `/` escaped (`/ssn` is `/~1ssn`).
fn top_level_reference(name: &str) -> String {
    if !name.starts_with('/') {
        return name.to_owned();
    }
    let mut out = String::with_capacity(name.len() + 3);
    out.push('/');
    for c in name.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

/// `value` at `path` with the properties that `private` names removed (recorded in
/// `redacted`).
fn redact_value<'a>(
    path: &mut Vec<&'a str>,
    value: &'a Value,
    private: &[&AttrRef],
    redacted: &mut Vec<String>,
) -> Value {
    let Value::Object(object) = value else {
        return value.clone();
    };
    // Only references that go deeper than `path` and start with it matter here.
    let deeper: Vec<&AttrRef> = private
        .iter()
        .copied()
        .filter(|p| {
            p.path.len() > path.len() && p.path.iter().zip(path.iter()).all(|(a, b)| a == b)
        })
        .collect();
    if deeper.is_empty() {
        return value.clone();
    }
    let mut out = Map::new();
    for (name, inner) in object {
        if let Some(p) = deeper
            .iter()
            .find(|p| p.path.len() == path.len() + 1 && p.path.last().is_some_and(|l| l == name))
        {
            redacted.push(p.text.clone());
            continue;
        }
        path.push(name);
        let inner = redact_value(path, inner, &deeper, redacted);
        path.pop();
        out.insert(name.clone(), inner);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ctx(v: Value) -> EventContext {
        EventContext::parse(&v).expect("a valid context")
    }

    fn kind(kind: &str, key: &str) -> ContextKind {
        ContextKind {
            kind: kind.into(),
            key: key.into(),
            ..ContextKind::default()
        }
    }

    #[test]
    fn a_context_from_its_kinds_is_the_context_its_json_gives() {
        let single = ContextKind {
            anonymous: true,
            attributes: vec![
                ("name".into(), json!("Ann")),
                ("email".into(), json!("a@x")),
                ("gone".into(), Value::Null),
                ("address".into(), json!({"city": "Oslo"})),
            ],
            private_attributes: vec!["email".into(), "/address/city".into(), "".into()],
            ..kind("user", "u:1")
        };
        assert_eq!(
            EventContext::from_kinds(vec![single.clone()]),
            Ok(ctx(
                json!({"kind": "user", "key": "u:1", "anonymous": true, "name": "Ann",
                "email": "a@x", "gone": null, "address": {"city": "Oslo"},
                "_meta": {"privateAttributes": ["email", "/address/city", ""]}})
            ))
        );
        let multi = EventContext::from_kinds(vec![kind("org", "o%1"), single]).unwrap();
        assert_eq!(
            multi,
            ctx(json!({"kind": "multi",
                "user": {"key": "u:1", "anonymous": true, "name": "Ann", "email": "a@x",
                    "address": {"city": "Oslo"},
                    "_meta": {"privateAttributes": ["email", "/address/city"]}},
                "org": {"key": "o%1"}}))
        );
        assert_eq!(multi.fully_qualified_key(), "org:o%251:user:u%3A1");
        // One kind in a multi-kind JSON is a single-kind context.
        assert_eq!(
            EventContext::from_kinds(vec![kind("org", "o")]),
            Ok(ctx(json!({"kind": "multi", "org": {"key": "o"}})))
        );
    }

    #[test]
    fn a_context_from_kinds_refuses_what_its_json_would() {
        assert_eq!(
            EventContext::from_kinds(vec![]),
            Err(ContextError::NotAnObject)
        );
        for bad in ["", "kind", "multi", "a b", "é"] {
            assert_eq!(
                EventContext::from_kinds(vec![kind(bad, "k")]),
                Err(ContextError::InvalidKind),
                "{bad:?}"
            );
        }
        assert_eq!(
            EventContext::from_kinds(vec![kind("org", "a"), kind("org", "b")]),
            Err(ContextError::InvalidKind)
        );
    }

    #[test]
    fn fully_qualified_keys_follow_the_spec() {
        assert_eq!(
            ctx(json!({"kind":"user","key":"a:b"})).fully_qualified_key(),
            "a:b"
        );
        assert_eq!(
            ctx(json!({"kind":"org","key":"a:b%"})).fully_qualified_key(),
            "org:a%3Ab%25"
        );
        let multi = ctx(json!({"kind":"multi","user":{"key":"u"},"org":{"key":"o"}}));
        assert_eq!(multi.fully_qualified_key(), "org:o:user:u");
        assert_eq!(multi.kinds().collect::<Vec<_>>(), ["org", "user"]);
    }

    #[test]
    fn invalid_contexts_are_refused() {
        assert_eq!(
            EventContext::parse(&json!(3)),
            Err(ContextError::NotAnObject)
        );
        assert_eq!(
            EventContext::parse(&json!({"key":"k"})),
            Err(ContextError::InvalidKind)
        );
        assert_eq!(
            EventContext::parse(&json!({"kind":"us er","key":"k"})),
            Err(ContextError::InvalidKind)
        );
        assert_eq!(
            EventContext::parse(&json!({"kind":"user"})),
            Err(ContextError::MissingKey)
        );
    }

    #[test]
    fn private_attributes_are_redacted_at_any_depth() {
        let c = ctx(json!({
            "kind": "user", "key": "k", "name": "a",
            "b": {"prop1": true, "prop2": 3},
            "c": {"prop1": {"sub1": true}, "prop2": {"sub1": 4, "sub2": 5}},
            "_meta": {"privateAttributes": ["/b/prop1"]}
        }));
        let f = ContextFormatter::new(false, &["/c/prop2/sub1".into()]);
        let out = f.format(&c, false);
        assert_eq!(out["b"], json!({"prop2": 3}));
        assert_eq!(
            out["c"],
            json!({"prop1": {"sub1": true}, "prop2": {"sub2": 5}})
        );
        assert_eq!(out["name"], json!("a"));
        let mut redacted = out["_meta"]["redactedAttributes"]
            .as_array()
            .unwrap()
            .clone();
        redacted.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
        assert_eq!(redacted, vec![json!("/b/prop1"), json!("/c/prop2/sub1")]);
    }

    #[test]
    fn all_private_and_anonymous_redaction_keep_key_kind_and_anonymous() {
        let c = ctx(json!({"kind":"user","key":"k","anonymous":true,"name":"n","x":1}));
        let all = ContextFormatter::new(true, &[]).format(&c, false);
        assert_eq!(all["key"], "k");
        assert_eq!(all["kind"], "user");
        assert_eq!(all["anonymous"], true);
        assert!(all.get("name").is_none() && all.get("x").is_none());
        let plain = ContextFormatter::new(false, &[]);
        assert_eq!(plain.format(&c, false)["x"], 1);
        let anon = plain.format(&c, true);
        assert!(anon.get("x").is_none());
        assert_eq!(anon["_meta"]["redactedAttributes"], json!(["name", "x"]));
    }

    #[test]
    fn a_redacted_slash_prefixed_name_is_listed_as_its_reference() {
        let c = ctx(json!({"kind":"user","key":"k","/ssn":"1","a~b":2,"name":"n"}));
        let all = ContextFormatter::new(true, &[]).format(&c, false);
        let mut listed: Vec<&str> = all["_meta"]["redactedAttributes"]
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        listed.sort_unstable();
        assert_eq!(listed, ["/~1ssn", "a~b", "name"]);
        let one = ContextFormatter::new(false, &["/~1ssn".to_owned()]).format(&c, false);
        assert_eq!(one["_meta"]["redactedAttributes"], json!(["/~1ssn"]));
        assert!(one.get("/ssn").is_none());
    }

    #[test]
    fn without_anonymous_drops_anonymous_parts() {
        let c = ctx(json!({"kind":"multi","user":{"key":"u","anonymous":true},"org":{"key":"o"}}));
        let rest = c.without_anonymous().expect("the org remains");
        assert!(!rest.is_multi());
        assert_eq!(rest.fully_qualified_key(), "org:o");
        let anon = ctx(json!({"kind":"user","key":"u","anonymous":true}));
        assert!(anon.without_anonymous().is_none());
    }

    #[test]
    fn attribute_references_unescape() {
        let r = AttrRef::parse("/a~1b/c~0d").unwrap();
        assert_eq!(r.path, ["a/b", "c~d"]);
        assert!(AttrRef::parse("/").is_none());
        assert!(AttrRef::parse("/a//b").is_none());
        assert_eq!(AttrRef::parse("plain/name").unwrap().path, ["plain/name"]);
    }
}
