//! The provider's cache of converted contexts: the flagsync [`Context`] made from an
//! OpenFeature [`EvaluationContext`], found again by the OpenFeature context's content,
//! so a context evaluated again is not converted again.
//!
//! - **Keyed by content**: a hash of the targeting key (of every field, in any order,
//!   for a context without one), then a field-by-field comparison with the entry's own
//!   copy (side by side when the fields come in the entry's order, as from the same map
//!   or a clone of it; else by name), so two contexts share an entry only when equal. A
//!   structure field is equal only to the same structure (the same `Arc`; its content is
//!   `dyn Any`), a float by its bits, a date-time by its instant and its offset.
//! - **Bounded by entries**: a table of `entries` slots (a power of two), two candidate
//!   slots per hash; a new entry replaces one of them.
//! - **Bounded in bytes**: a context whose entry would hold more than the entry limit
//!   (its copy and the converted context, estimated from its strings and structures) is
//!   converted on each call and never stored, nor is one holding a structure of a type
//!   the provider cannot read. So the cache holds at most `entries × limit` bytes.
//! - **Admitted on the second sighting**: a context seen for the first time is converted
//!   and only its hash remembered (one word per slot); it is stored the next time it is
//!   seen. A stream of contexts each seen once costs a hash and a store per call, not a
//!   copy per call.
//! - **No lock**: slots are `arc_swap` cells; readers never wait, and a slot replaced
//!   while read stays alive until its reader is done.
//!
//! Only contexts that convert are stored: one that fails is converted (and logged) on
//! every call. A context converted from the cache logs its conversion warnings only
//! when it is converted (its first two sightings).

use std::any::Any;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwapOption;
use flagsync::eval::{AttributeValue, Context};
use open_feature::{EvaluationContext, EvaluationContextFieldValue, EvaluationError, StructValue};
use rustc_hash::FxHasher;

/// The bookkeeping bytes counted for each field and each structure member on top of
/// its strings (map slots, enum tags, `String` headers), for the entry-size bound.
const PER_VALUE: usize = 64;

/// One cached conversion.
struct Entry {
    hash: u64,
    targeting_key: Option<String>,
    /// The fields in the order the OpenFeature context's map gave them.
    fields: Vec<(String, EvaluationContextFieldValue)>,
    /// Indexes into `fields`, sorted by name.
    by_name: Box<[u32]>,
    context: Context,
}

impl Entry {
    fn new(hash: u64, of: &EvaluationContext, context: Context) -> Self {
        let fields: Vec<(String, EvaluationContextFieldValue)> = of
            .custom_fields
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut by_name: Vec<u32> = (0..fields.len() as u32).collect();
        by_name.sort_unstable_by(|&a, &b| fields[a as usize].0.cmp(&fields[b as usize].0));
        Self {
            hash,
            targeting_key: of.targeting_key.clone(),
            fields,
            by_name: by_name.into(),
            context,
        }
    }

    /// True if `of` has exactly this entry's content.
    fn matches(&self, hash: u64, of: &EvaluationContext) -> bool {
        if self.hash != hash
            || self.targeting_key != of.targeting_key
            || self.fields.len() != of.custom_fields.len()
        {
            return false;
        }
        // The same map, or a clone of it, gives its fields in the same order: compare
        // side by side; else look each field up by name.
        let mut in_order = true;
        for ((k, v), (ek, ev)) in of.custom_fields.iter().zip(&self.fields) {
            if k != ek {
                in_order = false;
                break;
            }
            if !same(v, ev) {
                return false;
            }
        }
        in_order
            || of
                .custom_fields
                .iter()
                .all(|(k, v)| self.get(k).is_some_and(|w| same(v, w)))
    }

    /// The field `name`.
    fn get(&self, name: &str) -> Option<&EvaluationContextFieldValue> {
        let at = self
            .by_name
            .binary_search_by(|&i| self.fields[i as usize].0.as_str().cmp(name))
            .ok()?;
        Some(&self.fields[self.by_name[at] as usize].1)
    }
}

/// The cache (see the module's documentation).
pub(crate) struct ContextCache {
    slots: Box<[ArcSwapOption<Entry>]>,
    /// The hash last seen once at each slot (the admission filter).
    seen: Box<[AtomicU64]>,
    max_entry_bytes: usize,
}

impl std::fmt::Debug for ContextCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContextCache")
            .field("entries", &self.slots.len())
            .field("max_entry_bytes", &self.max_entry_bytes)
            .finish_non_exhaustive()
    }
}

impl ContextCache {
    /// A cache of `entries` slots (rounded up to a power of two; 0: no cache) of at most
    /// `max_entry_bytes` each.
    pub(crate) fn new(entries: usize, max_entry_bytes: usize) -> Self {
        let entries = match entries {
            0 => 0,
            n => n.checked_next_power_of_two().unwrap_or(1 << 30).max(2),
        };
        Self {
            slots: (0..entries).map(|_| ArcSwapOption::empty()).collect(),
            seen: (0..entries).map(|_| AtomicU64::new(0)).collect(),
            max_entry_bytes,
        }
    }

    /// How many contexts the cache holds now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.load().is_some()).count()
    }

    /// Run `with` on the flagsync context for `of`: the cached one, or one made by
    /// `convert` (then cached if `of` was seen before and is small enough).
    pub(crate) fn with_context<R>(
        &self,
        of: &EvaluationContext,
        convert: impl FnOnce(&EvaluationContext) -> Result<Context, EvaluationError>,
        with: impl FnOnce(&Context) -> R,
    ) -> Result<R, EvaluationError> {
        if self.slots.is_empty() {
            return Ok(with(&convert(of)?));
        }
        let hash = content_hash(of);
        let mask = self.slots.len() - 1;
        let first = (hash as usize) & mask;
        for index in [first, first ^ 1] {
            let slot = self.slots[index].load();
            if let Some(entry) = slot.as_ref()
                && entry.matches(hash, of)
            {
                return Ok(with(&entry.context));
            }
        }
        let context = convert(of)?;
        let result = with(&context);
        self.admit(hash, first, of, context);
        Ok(result)
    }

    /// Store `context` for `of` if `of` was seen before at this slot and is small
    /// enough; otherwise remember its hash.
    fn admit(&self, hash: u64, first: usize, of: &EvaluationContext, context: Context) {
        let seen = &self.seen[first];
        if seen.load(Ordering::Relaxed) != hash {
            seen.store(hash, Ordering::Relaxed);
            return;
        }
        let fits = entry_bytes(of, self.max_entry_bytes / 2)
            .is_some_and(|b| b * 2 <= self.max_entry_bytes);
        if !fits {
            return;
        }
        let entry = Arc::new(Entry::new(hash, of, context));
        // An empty candidate first, else the one the hash picks.
        let index = if self.slots[first].load().is_none() {
            first
        } else if self.slots[first ^ 1].load().is_none() {
            first ^ 1
        } else {
            first ^ ((hash >> 63) as usize)
        };
        self.slots[index].store(Some(entry));
    }
}

/// Equality of two field values as the cache decides it (see the module's
/// documentation).
fn same(a: &EvaluationContextFieldValue, b: &EvaluationContextFieldValue) -> bool {
    use EvaluationContextFieldValue as V;
    match (a, b) {
        (V::Bool(x), V::Bool(y)) => x == y,
        (V::Int(x), V::Int(y)) => x == y,
        (V::Float(x), V::Float(y)) => x.to_bits() == y.to_bits(),
        (V::String(x), V::String(y)) => x == y,
        (V::DateTime(x), V::DateTime(y)) => x == y && x.offset() == y.offset(),
        (V::Struct(x), V::Struct(y)) => Arc::ptr_eq(x, y),
        _ => false,
    }
}

/// A finalizer (murmur3's) spreading a word's bits, so that field hashes can be added.
fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The hash that places a context: its targeting key and its number of fields when it
/// has a key (cheap, and contexts differing only in other fields share a pair of slots,
/// where the comparison tells them apart), else its whole content, in any field order.
/// Never 0, the admission filter's empty word.
fn content_hash(of: &EvaluationContext) -> u64 {
    let count = of.custom_fields.len() as u64;
    let mut h = FxHasher::default();
    match &of.targeting_key {
        Some(key) if !key.is_empty() => {
            key.hash(&mut h);
            return mix(h.finish() ^ count) | 1;
        }
        _ => of.targeting_key.hash(&mut h),
    }
    let mut sum = count;
    for (k, v) in &of.custom_fields {
        let mut h = FxHasher::default();
        k.hash(&mut h);
        hash_value(v, &mut h);
        sum = sum.wrapping_add(mix(h.finish()));
    }
    mix(h.finish() ^ sum) | 1
}

/// Hash a field value consistently with [`same`].
fn hash_value(v: &EvaluationContextFieldValue, h: &mut FxHasher) {
    use EvaluationContextFieldValue as V;
    match v {
        V::Bool(b) => (0u8, *b).hash(h),
        V::Int(i) => (1u8, *i).hash(h),
        V::Float(f) => (2u8, f.to_bits()).hash(h),
        V::String(s) => (3u8, s.as_str()).hash(h),
        V::DateTime(t) => (4u8, t.unix_timestamp_nanos(), t.offset().whole_seconds()).hash(h),
        V::Struct(a) => (5u8, Arc::as_ptr(a).cast::<()>() as usize).hash(h),
    }
}

/// The bytes an entry's copy of `of` holds (its strings, its structures, a fixed amount
/// per value), or `None` past `limit` or for a structure of a type the provider does not
/// read. The walk stops at the limit.
fn entry_bytes(of: &EvaluationContext, limit: usize) -> Option<usize> {
    let mut budget = Budget { left: limit };
    budget.take(of.targeting_key.as_ref().map_or(0, String::len))?;
    for (k, v) in &of.custom_fields {
        budget.take(PER_VALUE + k.len())?;
        budget.field(v)?;
    }
    Some(limit - budget.left)
}

/// What is left of the entry-size limit.
struct Budget {
    left: usize,
}

impl Budget {
    fn take(&mut self, bytes: usize) -> Option<()> {
        self.left = self.left.checked_sub(bytes)?;
        Some(())
    }

    fn field(&mut self, v: &EvaluationContextFieldValue) -> Option<()> {
        match v {
            EvaluationContextFieldValue::String(s) => self.take(s.len()),
            EvaluationContextFieldValue::Struct(any) => self.any(any.as_ref()),
            _ => Some(()),
        }
    }

    /// The structure types the provider reads (`context::any_to_attribute`).
    fn any(&mut self, any: &(dyn Any + Send + Sync)) -> Option<()> {
        if let Some(s) = any.downcast_ref::<StructValue>() {
            return self.fields(&s.fields, Self::value);
        }
        if let Some(v) = any.downcast_ref::<open_feature::Value>() {
            return self.value(v);
        }
        if let Some(c) = any.downcast_ref::<EvaluationContext>() {
            self.take(c.targeting_key.as_ref().map_or(0, String::len))?;
            return self.fields(&c.custom_fields, Self::field);
        }
        if let Some(m) = any.downcast_ref::<HashMap<String, EvaluationContextFieldValue>>() {
            return self.fields(m, Self::field);
        }
        if let Some(v) = any.downcast_ref::<Vec<open_feature::Value>>() {
            return v.iter().try_for_each(|v| self.value(v));
        }
        if let Some(v) = any.downcast_ref::<Vec<EvaluationContextFieldValue>>() {
            return v.iter().try_for_each(|v| self.field(v));
        }
        if let Some(v) = any.downcast_ref::<Vec<String>>() {
            return v.iter().try_for_each(|s| self.take(PER_VALUE + s.len()));
        }
        if let Some(v) = any.downcast_ref::<Vec<&'static str>>() {
            return v.iter().try_for_each(|s| self.take(PER_VALUE + s.len()));
        }
        if let Some(v) = any.downcast_ref::<serde_json::Value>() {
            return self.json(v);
        }
        if let Some(v) = any.downcast_ref::<AttributeValue>() {
            return self.attribute(v);
        }
        None
    }

    fn fields<V>(
        &mut self,
        fields: &HashMap<String, V>,
        each: impl Fn(&mut Self, &V) -> Option<()>,
    ) -> Option<()> {
        fields.iter().try_for_each(|(k, v)| {
            self.take(PER_VALUE + k.len())?;
            each(self, v)
        })
    }

    fn value(&mut self, v: &open_feature::Value) -> Option<()> {
        self.take(PER_VALUE)?;
        match v {
            open_feature::Value::String(s) => self.take(s.len()),
            open_feature::Value::Array(items) => items.iter().try_for_each(|v| self.value(v)),
            open_feature::Value::Struct(s) => self.fields(&s.fields, Self::value),
            _ => Some(()),
        }
    }

    fn json(&mut self, v: &serde_json::Value) -> Option<()> {
        self.take(PER_VALUE)?;
        match v {
            serde_json::Value::String(s) => self.take(s.len()),
            serde_json::Value::Array(items) => items.iter().try_for_each(|v| self.json(v)),
            serde_json::Value::Object(o) => o.iter().try_for_each(|(k, v)| {
                self.take(k.len())?;
                self.json(v)
            }),
            _ => Some(()),
        }
    }

    fn attribute(&mut self, v: &AttributeValue) -> Option<()> {
        self.take(PER_VALUE)?;
        match v {
            AttributeValue::String(s) => self.take(s.len()),
            AttributeValue::Array(items) => items.iter().try_for_each(|v| self.attribute(v)),
            AttributeValue::Object(o) => o.iter().try_for_each(|(k, v)| {
                self.take(k.len())?;
                self.attribute(v)
            }),
            _ => Some(()),
        }
    }
}
