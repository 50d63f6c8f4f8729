//! The two kinds of item a flag store holds.

use std::fmt;

/// The kind of a stored item: a feature flag or a segment.
///
/// The namespaces are the ones every LaunchDarkly SDK and the Relay Proxy use in
/// persistent stores (PROTOCOL.md B §4.2): `features` and `segments`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A segment (`segments`). Segments sort first: a persistent store writes them
    /// before the flags that reference them.
    Segment,
    /// A feature flag (`features`).
    Flag,
}

impl Kind {
    /// Both kinds, in persistent-store init order (segments before flags).
    pub const ALL: [Self; 2] = [Self::Segment, Self::Flag];

    /// The persistent-store namespace: `features` or `segments`.
    pub fn namespace(self) -> &'static str {
        match self {
            Self::Flag => "features",
            Self::Segment => "segments",
        }
    }

    /// The FDv1 stream path prefix: `/flags/` or `/segments/`.
    pub fn fdv1_path_prefix(self) -> &'static str {
        match self {
            Self::Flag => "/flags/",
            Self::Segment => "/segments/",
        }
    }

    /// The FDv2 object kind: `flag` or `segment`.
    pub fn fdv2_name(self) -> &'static str {
        match self {
            Self::Flag => "flag",
            Self::Segment => "segment",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.namespace())
    }
}
