//! [`ErrorKind`]: the kind of a data-source failure (PROTOCOL.md B §1.7), on its own so
//! that the FDv1 and FDv2 errors, which [`Cause`](super::Cause) holds, can name their kind.

/// What kind of failure an [`ErrorInfo`](super::ErrorInfo) describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Anything else: a schema mismatch, an unexpected content type.
    Unknown,
    /// The connection failed, dropped, or timed out.
    NetworkError,
    /// The server answered with an HTTP error status.
    ErrorResponse,
    /// The server sent data that is not valid JSON.
    InvalidData,
    /// The persistent store failed.
    StoreError,
}

impl ErrorKind {
    /// The wire name: `unknown`, `network_error`, `error_response`, `invalid_data`, `store_error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::NetworkError => "network_error",
            Self::ErrorResponse => "error_response",
            Self::InvalidData => "invalid_data",
            Self::StoreError => "store_error",
        }
    }
}
