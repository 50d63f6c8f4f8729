//! [`FlagBuilder`] and [`RuleBuilder`]: a flag's configuration in a few calls, built
//! into the flag JSON LaunchDarkly's `TestData` builders make for the same calls.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The context kind of a user.
const USER: &str = "user";

/// The configuration of one flag, for [`TestData::update`](super::TestData::update).
/// Made by [`TestData::flag`](super::TestData::flag); each method takes and returns
/// the builder.
///
/// A new flag is a boolean flag: variations `[true, false]`, on, serving `true`
/// (variation 0) by its fallthrough and `false` (variation 1) when off. The boolean
/// methods (`variation_for_all(bool)`, `fallthrough_variation(bool)`, `then_return(bool)`,
/// …) make the flag boolean again if it was not; the `*_index` methods pick a variation
/// of any flag by its index.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub struct FlagBuilder {
    key: String,
    on: bool,
    variations: Vec<Value>,
    off_variation: Option<usize>,
    fallthrough_variation: Option<usize>,
    /// Context kind → variation → keys, in the order they were added.
    targets: BTreeMap<String, BTreeMap<usize, Vec<String>>>,
    rules: Vec<Rule>,
}

#[derive(Debug, Clone, PartialEq)]
struct Rule {
    variation: usize,
    clauses: Vec<Value>,
}

fn variation_for(value: bool) -> usize {
    if value { 0 } else { 1 }
}

impl FlagBuilder {
    /// A new boolean flag `key`.
    pub(crate) fn new(key: &str) -> Self {
        Self {
            key: key.to_owned(),
            on: true,
            variations: Vec::new(),
            off_variation: None,
            fallthrough_variation: None,
            targets: BTreeMap::new(),
            rules: Vec::new(),
        }
        .boolean_flag()
    }

    /// The flag's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    fn is_boolean(&self) -> bool {
        self.variations == [Value::Bool(true), Value::Bool(false)]
    }

    /// Make it a boolean flag (variations `[true, false]`, serving `true` by its
    /// fallthrough, `false` when off) unless it is one already.
    pub fn boolean_flag(self) -> Self {
        if self.is_boolean() {
            return self;
        }
        self.variations([true, false])
            .fallthrough_variation_index(0)
            .off_variation_index(1)
    }

    /// Set the variations (the indices of the other methods refer to them).
    pub fn variations<V: Into<Value>>(mut self, values: impl IntoIterator<Item = V>) -> Self {
        self.variations = values.into_iter().map(Into::into).collect();
        self
    }

    /// Turn targeting on or off (off: everyone gets the off variation).
    pub fn on(mut self, on: bool) -> Self {
        self.on = on;
        self
    }

    /// A boolean flag whose fallthrough (no target or rule matched) serves `value`.
    pub fn fallthrough_variation(self, value: bool) -> Self {
        self.boolean_flag()
            .fallthrough_variation_index(variation_for(value))
    }

    /// The fallthrough serves variation `index`.
    pub fn fallthrough_variation_index(mut self, index: usize) -> Self {
        self.fallthrough_variation = Some(index);
        self
    }

    /// A boolean flag that serves `value` when off.
    pub fn off_variation(self, value: bool) -> Self {
        self.boolean_flag()
            .off_variation_index(variation_for(value))
    }

    /// Serve variation `index` when off.
    pub fn off_variation_index(mut self, index: usize) -> Self {
        self.off_variation = Some(index);
        self
    }

    /// A boolean flag that is on, with no targets or rules, and serves `value` to
    /// everyone.
    pub fn variation_for_all(self, value: bool) -> Self {
        self.boolean_flag()
            .variation_for_all_index(variation_for(value))
    }

    /// On, no targets or rules: everyone gets variation `index`.
    pub fn variation_for_all_index(self, index: usize) -> Self {
        self.on(true)
            .clear_rules()
            .clear_targets()
            .fallthrough_variation_index(index)
    }

    /// Serve `value` to everyone: the flag's only variation, on, no targets or rules.
    pub fn value_for_all(self, value: impl Into<Value>) -> Self {
        self.variations([value.into()]).variation_for_all_index(0)
    }

    /// A boolean flag that serves `value` to the user `key` (a context of kind
    /// `user`).
    pub fn variation_for_user(self, key: &str, value: bool) -> Self {
        self.variation_for_context(USER, key, value)
    }

    /// Variation `index` for the user `key`.
    pub fn variation_index_for_user(self, key: &str, index: usize) -> Self {
        self.variation_index_for_context(USER, key, index)
    }

    /// A boolean flag that serves `value` to the context of kind `kind` (empty means
    /// `user`) and key `key`.
    pub fn variation_for_context(self, kind: &str, key: &str, value: bool) -> Self {
        self.boolean_flag()
            .variation_index_for_context(kind, key, variation_for(value))
    }

    /// Variation `index` for the context of kind `kind` (empty means `user`) and key
    /// `key`; it is removed from any other variation's targets.
    pub fn variation_index_for_context(mut self, kind: &str, key: &str, index: usize) -> Self {
        let kind = if kind.is_empty() { USER } else { kind };
        let by_variation = self.targets.entry(kind.to_owned()).or_default();
        for (variation, keys) in by_variation.iter_mut() {
            if *variation != index {
                keys.retain(|k| k != key);
            }
        }
        let keys = by_variation.entry(index).or_default();
        if !keys.iter().any(|k| k == key) {
            keys.push(key.to_owned());
        }
        by_variation.retain(|_, keys| !keys.is_empty());
        self
    }

    /// Remove every individual target.
    pub fn clear_targets(mut self) -> Self {
        self.targets.clear();
        self
    }

    /// Remove every rule.
    pub fn clear_rules(mut self) -> Self {
        self.rules.clear();
        self
    }

    /// Start a rule matching users whose `attribute` is one of `values`; finish it
    /// with [`RuleBuilder::then_return`].
    pub fn if_match<V: Into<Value>>(
        self,
        attribute: &str,
        values: impl IntoIterator<Item = V>,
    ) -> RuleBuilder {
        self.if_match_context(USER, attribute, values)
    }

    /// Start a rule matching contexts of kind `kind` whose `attribute` is one of
    /// `values`.
    pub fn if_match_context<V: Into<Value>>(
        self,
        kind: &str,
        attribute: &str,
        values: impl IntoIterator<Item = V>,
    ) -> RuleBuilder {
        RuleBuilder {
            flag: self,
            clauses: Vec::new(),
        }
        .and_match_context(kind, attribute, values)
    }

    /// Start a rule matching users whose `attribute` is none of `values`.
    pub fn if_not_match<V: Into<Value>>(
        self,
        attribute: &str,
        values: impl IntoIterator<Item = V>,
    ) -> RuleBuilder {
        self.if_not_match_context(USER, attribute, values)
    }

    /// Start a rule matching contexts of kind `kind` whose `attribute` is none of
    /// `values`.
    pub fn if_not_match_context<V: Into<Value>>(
        self,
        kind: &str,
        attribute: &str,
        values: impl IntoIterator<Item = V>,
    ) -> RuleBuilder {
        RuleBuilder {
            flag: self,
            clauses: Vec::new(),
        }
        .and_not_match_context(kind, attribute, values)
    }

    /// The flag's JSON at `version`, as the flag delivery service would send it.
    pub fn build(&self, version: u64) -> Value {
        let mut targets = Vec::new();
        let mut context_targets = Vec::new();
        for (kind, by_variation) in &self.targets {
            for (variation, keys) in by_variation {
                if kind == USER {
                    // Users are listed in `targets`; `contextTargets` keeps their place.
                    targets.push(json!({"variation": variation, "values": keys}));
                    context_targets
                        .push(json!({"contextKind": kind, "variation": variation, "values": []}));
                } else {
                    context_targets
                        .push(json!({"contextKind": kind, "variation": variation, "values": keys}));
                }
            }
        }
        let rules: Vec<Value> = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, rule)| {
                json!({"id": format!("rule{i}"), "variation": rule.variation, "clauses": rule.clauses})
            })
            .collect();
        let mut flag = json!({
            "key": self.key,
            "version": version,
            "on": self.on,
            "variations": self.variations,
            "targets": targets,
            "contextTargets": context_targets,
            "rules": rules,
            "prerequisites": [],
            "salt": "",
        });
        if let Some(off) = self.off_variation {
            flag["offVariation"] = json!(off);
        }
        if let Some(fallthrough) = self.fallthrough_variation {
            flag["fallthrough"] = json!({ "variation": fallthrough });
        }
        flag
    }
}

/// A rule being built (from [`FlagBuilder::if_match`] and friends): more clauses with
/// `and_*`, then [`RuleBuilder::then_return`] adds it to the flag and gives the flag
/// back. All clauses must match for the rule to match.
#[derive(Debug, Clone)]
#[must_use]
pub struct RuleBuilder {
    flag: FlagBuilder,
    clauses: Vec<Value>,
}

impl RuleBuilder {
    /// Users whose `attribute` is one of `values`, too.
    pub fn and_match<V: Into<Value>>(
        self,
        attribute: &str,
        values: impl IntoIterator<Item = V>,
    ) -> Self {
        self.and_match_context(USER, attribute, values)
    }

    /// Contexts of kind `kind` whose `attribute` is one of `values`, too.
    pub fn and_match_context<V: Into<Value>>(
        self,
        kind: &str,
        attribute: &str,
        values: impl IntoIterator<Item = V>,
    ) -> Self {
        self.clause(kind, attribute, values, false)
    }

    /// Users whose `attribute` is none of `values`, too.
    pub fn and_not_match<V: Into<Value>>(
        self,
        attribute: &str,
        values: impl IntoIterator<Item = V>,
    ) -> Self {
        self.and_not_match_context(USER, attribute, values)
    }

    /// Contexts of kind `kind` whose `attribute` is none of `values`, too.
    pub fn and_not_match_context<V: Into<Value>>(
        self,
        kind: &str,
        attribute: &str,
        values: impl IntoIterator<Item = V>,
    ) -> Self {
        self.clause(kind, attribute, values, true)
    }

    fn clause<V: Into<Value>>(
        mut self,
        kind: &str,
        attribute: &str,
        values: impl IntoIterator<Item = V>,
        negate: bool,
    ) -> Self {
        let values: Vec<Value> = values.into_iter().map(Into::into).collect();
        self.clauses.push(json!({
            "contextKind": kind,
            "attribute": attribute,
            "op": "in",
            "values": values,
            "negate": negate,
        }));
        self
    }

    /// Matching contexts get `value` (the flag is made boolean); the flag, with the
    /// rule added after the others.
    pub fn then_return(self, value: bool) -> FlagBuilder {
        let Self { flag, clauses } = self;
        Self {
            flag: flag.boolean_flag(),
            clauses,
        }
        .then_return_index(variation_for(value))
    }

    /// Matching contexts get variation `index`.
    pub fn then_return_index(self, index: usize) -> FlagBuilder {
        let mut flag = self.flag;
        flag.rules.push(Rule {
            variation: index,
            clauses: self.clauses,
        });
        flag
    }
}
