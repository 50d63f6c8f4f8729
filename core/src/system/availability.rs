//! How fresh the data a client evaluates against is (PROTOCOL.md B §4.6, §5.10).

use std::fmt;

/// How much the stored data can be trusted, from least to most.
///
/// ```
/// use flagsync_core::DataAvailability;
///
/// assert!(DataAvailability::Refreshed.at_least(DataAvailability::Cached));
/// assert!(DataAvailability::Cached.at_least(DataAvailability::Defaults));
/// assert!(!DataAvailability::Defaults.at_least(DataAvailability::Cached));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DataAvailability {
    /// No data: evaluations return the application's defaults.
    Defaults,
    /// Data from a cache or persistent store, or from a source without a selector (FDv1
    /// fallback), not known to be current.
    Cached,
    /// Data the flag delivery service sent and vouched for.
    Refreshed,
}

impl DataAvailability {
    /// True if `self` is at least as good as `other`.
    pub fn at_least(self, other: Self) -> bool {
        self >= other
    }

    /// The lower-case name (`defaults`, `cached`, `refreshed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Defaults => "defaults",
            Self::Cached => "cached",
            Self::Refreshed => "refreshed",
        }
    }
}

impl fmt::Display for DataAvailability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
