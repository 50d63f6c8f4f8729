//! [`EvaluationSeriesData`]: what a hook carries from `before_evaluation` to
//! `after_evaluation`.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A hook's data for one evaluation series: named values of any type, handed from its
/// `before_evaluation` to its `after_evaluation`. Cheap to clone (values are shared).
///
/// ```
/// use flagsync::hooks::EvaluationSeriesData;
///
/// let data = EvaluationSeriesData::new().with("attempt", 2u32).with("note", "x".to_owned());
/// assert_eq!(data.get::<u32>("attempt"), Some(&2));
/// assert_eq!(data.get::<String>("attempt"), None); // another type
/// assert_eq!(data.len(), 2);
/// ```
#[derive(Clone, Default)]
pub struct EvaluationSeriesData {
    values: BTreeMap<String, Arc<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for EvaluationSeriesData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.values.keys()).finish()
    }
}

impl EvaluationSeriesData {
    /// Empty data.
    pub fn new() -> Self {
        Self::default()
    }

    /// This data with `key` set to `value` (replacing an earlier value of `key`).
    #[must_use]
    pub fn with(mut self, key: impl Into<String>, value: impl Any + Send + Sync) -> Self {
        self.values.insert(key.into(), Arc::new(value));
        self
    }

    /// The value of `key`, if it is set and of type `T`.
    pub fn get<T: Any>(&self, key: &str) -> Option<&T> {
        self.values.get(key)?.downcast_ref()
    }

    /// True if `key` is set (to a value of any type).
    pub fn contains(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.values.keys().map(String::as_str)
    }

    /// How many keys are set.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True if no key is set.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}
