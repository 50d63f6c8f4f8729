//! [`IntentCode`], on its own: the events of `super` carry it and `wire` reads it.

/// The intent code of a `server-intent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IntentCode {
    /// A full payload follows; it replaces what is stored.
    TransferFull,
    /// Changes follow; they merge into what is stored.
    TransferChanges,
    /// The client is up to date; nothing follows.
    None,
}
