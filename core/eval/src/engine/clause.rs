//! Clauses: operators over context attributes, with the clause values parsed for their
//! operator when the flag is compiled (Go's `evaluator_clause.go` semantics).
//!
//! A context value that is an array matches if any element matches. A missing
//! attribute (or a context without the clause's kind) never matches, negated or not.
//! Values of the wrong type for the operator never match.

use crate::{AttributeRef, AttributeValue, Context, ContextKind as Kind, Reference};
use regex::Regex;
use rustc_hash::FxHashSet;
use serde_json::Value;

use super::values::{Nanos, SemVer, millis, rfc3339};

/// The attribute a clause reads.
#[derive(Debug)]
pub(crate) enum Attr {
    /// `kind`: the context's kinds.
    Kind,
    /// `key`: read without copying.
    Key,
    /// A top-level attribute that is not a built-in one: found by name directly.
    Custom(Box<str>),
    /// Any other attribute: read borrowed ([`Context::attribute`]).
    Ref(Reference),
    /// Empty or invalid: the clause is an error (`MALFORMED_FLAG`) unless it is a
    /// `segmentMatch`.
    Invalid,
}

/// A clause operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    In,
    EndsWith,
    StartsWith,
    Matches,
    Contains,
    LessThan,
    LessThanOrEqual,
    GreaterThan,
    GreaterThanOrEqual,
    Before,
    After,
    SemVerEqual,
    SemVerLessThan,
    SemVerGreaterThan,
    SegmentMatch,
    /// An operator this SDK does not know: never matches.
    Unknown,
}

impl Op {
    pub(crate) fn parse(s: &str) -> Self {
        match s {
            "in" => Self::In,
            "endsWith" => Self::EndsWith,
            "startsWith" => Self::StartsWith,
            "matches" => Self::Matches,
            "contains" => Self::Contains,
            "lessThan" => Self::LessThan,
            "lessThanOrEqual" => Self::LessThanOrEqual,
            "greaterThan" => Self::GreaterThan,
            "greaterThanOrEqual" => Self::GreaterThanOrEqual,
            "before" => Self::Before,
            "after" => Self::After,
            "semVerEqual" => Self::SemVerEqual,
            "semVerLessThan" => Self::SemVerLessThan,
            "semVerGreaterThan" => Self::SemVerGreaterThan,
            "segmentMatch" => Self::SegmentMatch,
            _ => Self::Unknown,
        }
    }
}

/// A clause's values, parsed for its operator. Values of a type the operator cannot
/// use are dropped: they could never match.
#[derive(Debug)]
pub(crate) enum Values {
    In(InValues),
    Strings(Vec<Box<str>>),
    Regexes(Vec<Regex>),
    Numbers(Vec<f64>),
    Times(Vec<Nanos>),
    SemVers(Vec<SemVer>),
    Segments(Vec<Box<str>>),
    None,
}

/// The values of an `in` clause, by type.
#[derive(Debug, Default)]
pub(crate) struct InValues {
    strings: FxHashSet<Box<str>>,
    numbers: Vec<f64>,
    bools: [bool; 2],
    /// Arrays and objects.
    others: Vec<AttributeValue>,
}

/// A timestamp clause value or context value: RFC 3339 string or Unix milliseconds.
fn time(v: &Value) -> Option<Nanos> {
    match v {
        Value::String(s) => rfc3339(s),
        Value::Number(n) => n.as_f64().map(millis),
        _ => None,
    }
}

impl Values {
    pub(crate) fn parse(op: Op, values: Vec<Value>) -> Self {
        let strings = |values: Vec<Value>| -> Vec<Box<str>> {
            values
                .into_iter()
                .filter_map(|v| match v {
                    Value::String(s) => Some(s.into_boxed_str()),
                    _ => None,
                })
                .collect()
        };
        match op {
            Op::In => {
                let mut set = InValues::default();
                for v in values {
                    match v {
                        Value::String(s) => {
                            set.strings.insert(s.into_boxed_str());
                        }
                        Value::Number(n) => set.numbers.extend(n.as_f64()),
                        Value::Bool(b) => set.bools[usize::from(b)] = true,
                        Value::Null => {}
                        other => set.others.push(AttributeValue::from(&other)),
                    }
                }
                Self::In(set)
            }
            Op::EndsWith | Op::StartsWith | Op::Contains => Self::Strings(strings(values)),
            Op::Matches => Self::Regexes(
                strings(values)
                    .iter()
                    .filter_map(|s| Regex::new(s).ok())
                    .collect(),
            ),
            Op::LessThan | Op::LessThanOrEqual | Op::GreaterThan | Op::GreaterThanOrEqual => {
                Self::Numbers(values.iter().filter_map(Value::as_f64).collect())
            }
            Op::Before | Op::After => Self::Times(values.iter().filter_map(time).collect()),
            Op::SemVerEqual | Op::SemVerLessThan | Op::SemVerGreaterThan => Self::SemVers(
                strings(values)
                    .iter()
                    .filter_map(|s| SemVer::parse(s))
                    .collect(),
            ),
            Op::SegmentMatch => Self::Segments(strings(values)),
            Op::Unknown => Self::None,
        }
    }
}

/// A compiled clause.
#[derive(Debug)]
pub(crate) struct Clause {
    pub attr: Attr,
    /// The context kind whose attribute is read; `None`: a kind no context has.
    pub kind: Option<Kind>,
    pub op: Op,
    pub values: Values,
    pub negate: bool,
}

/// A context value as a clause sees it, borrowed where possible.
enum Val<'a> {
    Str(&'a str),
    Num(f64),
    Bool(bool),
    /// An object or a nested array (only `in` can match it).
    Other(&'a AttributeValue),
}

impl<'a> Val<'a> {
    fn of(v: &'a AttributeValue) -> Option<Self> {
        Some(match v {
            AttributeValue::String(s) => Self::Str(s),
            AttributeValue::Number(n) => Self::Num(*n),
            AttributeValue::Bool(b) => Self::Bool(*b),
            AttributeValue::Null => return None,
            other => Self::Other(other),
        })
    }
}

impl Clause {
    /// Whether `context` matches this clause (not a `segmentMatch`, which the evaluator
    /// decides); `Err(())` for a clause that cannot be evaluated (an invalid attribute).
    pub(crate) fn matches_context(&self, context: &Context) -> Result<bool, ()> {
        match &self.attr {
            Attr::Invalid => Err(()),
            Attr::Kind => {
                let any = context
                    .singles()
                    .iter()
                    .any(|c| self.matches(&Val::Str(c.kind().as_ref())));
                Ok(any != self.negate)
            }
            Attr::Key => {
                let Some(c) = self.kind.as_ref().and_then(|k| context.as_kind(k)) else {
                    return Ok(false);
                };
                Ok(self.matches(&Val::Str(c.key())) != self.negate)
            }
            Attr::Custom(name) => {
                let Some(c) = self.kind.as_ref().and_then(|k| context.as_kind(k)) else {
                    return Ok(false);
                };
                Ok(self.matches_value(c.custom(name).map(AttributeRef::Value)))
            }
            Attr::Ref(r) => {
                let Some(c) = self.kind.as_ref().and_then(|k| context.as_kind(k)) else {
                    return Ok(false);
                };
                Ok(self.matches_value(c.attribute(r)))
            }
        }
    }

    /// Whether an attribute's value (`None`: missing) matches, negation applied; a
    /// missing attribute never matches.
    #[inline(always)]
    pub(crate) fn matches_value(&self, value: Option<AttributeRef<'_>>) -> bool {
        let any = match value {
            None | Some(AttributeRef::Value(AttributeValue::Null)) => return false,
            Some(AttributeRef::Str(s)) => self.matches(&Val::Str(s)),
            Some(AttributeRef::Bool(b)) => self.matches(&Val::Bool(b)),
            Some(AttributeRef::Value(AttributeValue::Array(items))) => {
                items.iter().filter_map(Val::of).any(|v| self.matches(&v))
            }
            Some(AttributeRef::Value(v)) => Val::of(v).is_some_and(|v| self.matches(&v)),
        };
        any != self.negate
    }

    /// Whether one (non-array) context value matches any clause value.
    #[inline(always)]
    fn matches(&self, v: &Val<'_>) -> bool {
        match (&self.values, v) {
            (Values::In(set), v) => match v {
                Val::Str(s) => set.strings.contains(*s),
                Val::Num(n) => set.numbers.contains(n),
                Val::Bool(b) => set.bools[usize::from(*b)],
                Val::Other(o) => set.others.contains(o),
            },
            (Values::Strings(values), Val::Str(s)) => values.iter().any(|c| match self.op {
                Op::EndsWith => s.ends_with(&**c),
                Op::StartsWith => s.starts_with(&**c),
                _ => s.contains(&**c),
            }),
            (Values::Regexes(values), Val::Str(s)) => values.iter().any(|r| r.is_match(s)),
            (Values::Numbers(values), Val::Num(n)) => values.iter().any(|c| match self.op {
                Op::LessThan => n < c,
                Op::LessThanOrEqual => n <= c,
                Op::GreaterThan => n > c,
                _ => n >= c,
            }),
            (Values::Times(values), v) => {
                let t = match v {
                    Val::Str(s) => rfc3339(s),
                    Val::Num(n) => Some(millis(*n)),
                    _ => None,
                };
                t.is_some_and(|t| {
                    values.iter().any(|c| match self.op {
                        Op::Before => t < *c,
                        _ => t > *c,
                    })
                })
            }
            (Values::SemVers(values), Val::Str(s)) => SemVer::parse(s).is_some_and(|v| {
                let want = match self.op {
                    Op::SemVerEqual => std::cmp::Ordering::Equal,
                    Op::SemVerLessThan => std::cmp::Ordering::Less,
                    _ => std::cmp::Ordering::Greater,
                };
                values.iter().any(|c| v.precedence(c) == want)
            }),
            _ => false,
        }
    }
}
