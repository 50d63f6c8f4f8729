//! [`EvaluationSeriesData`]: what a hook carries from `before_evaluation` to
//! `after_evaluation`.

use std::any::Any;
use std::borrow::Cow;
use std::sync::Arc;

/// One named value.
type Item = (Cow<'static, str>, Arc<dyn Any + Send + Sync>);

/// A hook's data for one evaluation series: named values of any type, handed from its
/// `before_evaluation` to its `after_evaluation`. Cheap to clone (values are shared);
/// empty data allocates nothing, and a `&'static str` key is not copied.
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
    /// Sorted by key, no key twice (a few keys per hook: a vector, whose empty form
    /// costs nothing to make, move or drop).
    values: Vec<Item>,
}

impl std::fmt::Debug for EvaluationSeriesData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.keys()).finish()
    }
}

impl EvaluationSeriesData {
    /// Empty data.
    pub fn new() -> Self {
        Self::default()
    }

    /// This data with `key` set to `value` (replacing an earlier value of `key`).
    #[must_use]
    pub fn with(
        mut self,
        key: impl Into<Cow<'static, str>>,
        value: impl Any + Send + Sync,
    ) -> Self {
        let key = key.into();
        let value: Arc<dyn Any + Send + Sync> = Arc::new(value);
        match self.find(&key) {
            Ok(i) => self.values[i].1 = value,
            Err(i) => self.values.insert(i, (key, value)),
        }
        self
    }

    /// The value of `key`, if it is set and of type `T`.
    pub fn get<T: Any>(&self, key: &str) -> Option<&T> {
        let i = self.find(key).ok()?;
        self.values[i].1.downcast_ref()
    }

    /// True if `key` is set (to a value of any type).
    pub fn contains(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &str> + '_ {
        self.values.iter().map(|(k, _)| &**k)
    }

    /// Where `key` is, or would be.
    fn find(&self, key: &str) -> Result<usize, usize> {
        self.values.binary_search_by(|(k, _)| (**k).cmp(key))
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
