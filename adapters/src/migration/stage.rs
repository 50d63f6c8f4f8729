//! Stages, origins, operations and read execution orders (PROTOCOL.md B §6.1, §6.3).

use std::fmt;
use std::str::FromStr;

/// Where a migration stands; a migration flag's variations are these names.
///
/// `off` → `dualwrite` → `shadow` → `live` → `rampdown` → `complete`.
///
/// | stage | read executes (authoritative first) | write order (authoritative first) |
/// | --- | --- | --- |
/// | `off` | old | old |
/// | `dualwrite` | old | old, then new |
/// | `shadow` | old **and** new (old returned) | old, then new |
/// | `live` | new **and** old (new returned) | new, then old |
/// | `rampdown` | new | new, then old |
/// | `complete` | new | new |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Not started: only the old origin is used.
    Off,
    /// Writes go to both origins; reads use old.
    DualWrite,
    /// Reads run on both (old is returned, new is compared); writes go to both, old first.
    Shadow,
    /// Reads run on both (new is returned, old is compared); writes go to both, new first.
    Live,
    /// Reads use new; writes go to both, new first.
    Rampdown,
    /// Done: only the new origin is used.
    Complete,
}

/// One side of a migration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    /// The system being migrated away from.
    Old,
    /// The system being migrated to.
    New,
}

/// The kind of a migration operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// A read.
    Read,
    /// A write.
    Write,
}

/// How the two reads of the `shadow` and `live` stages run (PROTOCOL.md B §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ExecutionOrder {
    /// Both at once (polled together by one future; nothing is spawned). The default.
    #[default]
    Parallel,
    /// The authoritative read, then the other.
    Serial,
    /// One after the other, the non-authoritative first with probability ½.
    Random,
}

/// A string that names no [`Stage`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown migration stage")]
pub struct UnknownStage;

impl Stage {
    /// Every stage, in migration order.
    pub const ALL: [Self; 6] = [
        Self::Off,
        Self::DualWrite,
        Self::Shadow,
        Self::Live,
        Self::Rampdown,
        Self::Complete,
    ];

    /// The stage's name, as in flag variations and events (`"dualwrite"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::DualWrite => "dualwrite",
            Self::Shadow => "shadow",
            Self::Live => "live",
            Self::Rampdown => "rampdown",
            Self::Complete => "complete",
        }
    }

    /// The origin whose result a read or write returns.
    pub fn authoritative(self) -> Origin {
        match self {
            Self::Off | Self::DualWrite | Self::Shadow => Origin::Old,
            Self::Live | Self::Rampdown | Self::Complete => Origin::New,
        }
    }

    /// The origins a read runs: the authoritative one, and the other one in `shadow`
    /// and `live`.
    ///
    /// ```
    /// use flagsync::migration::{Origin, Stage};
    ///
    /// assert_eq!(Stage::Live.read_origins(), (Origin::New, Some(Origin::Old)));
    /// assert_eq!(Stage::DualWrite.read_origins(), (Origin::Old, None));
    /// ```
    pub fn read_origins(self) -> (Origin, Option<Origin>) {
        let auth = self.authoritative();
        match self {
            Self::Shadow | Self::Live => (auth, Some(auth.other())),
            _ => (auth, None),
        }
    }

    /// The origins a write runs, in order: the authoritative one, then (from
    /// `dualwrite` to `rampdown`) the other one.
    pub fn write_origins(self) -> (Origin, Option<Origin>) {
        let auth = self.authoritative();
        match self {
            Self::Off | Self::Complete => (auth, None),
            _ => (auth, Some(auth.other())),
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Stage {
    type Err = UnknownStage;

    /// Parse a stage name (exact, lowercase).
    fn from_str(s: &str) -> Result<Self, UnknownStage> {
        Self::ALL
            .into_iter()
            .find(|stage| stage.as_str() == s)
            .ok_or(UnknownStage)
    }
}

/// A stage as a flag variation's value (`"dualwrite"`, …), as the official SDK converts it.
impl From<Stage> for crate::eval::FlagValue {
    fn from(stage: Stage) -> Self {
        Self::Str(stage.as_str().to_owned())
    }
}

/// The stage a flag variation's value names; any other value is an [`UnknownStage`].
impl TryFrom<crate::eval::FlagValue> for Stage {
    type Error = UnknownStage;

    fn try_from(value: crate::eval::FlagValue) -> Result<Self, UnknownStage> {
        match value {
            crate::eval::FlagValue::Str(name) => name.parse(),
            _ => Err(UnknownStage),
        }
    }
}

impl Origin {
    /// `"old"` or `"new"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Old => "old",
            Self::New => "new",
        }
    }

    /// The other origin.
    pub fn other(self) -> Self {
        match self {
            Self::Old => Self::New,
            Self::New => Self::Old,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Operation {
    /// `"read"` or `"write"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
