//! Errors of the HTTP/1.1 response reader.

/// Why a response head could not be parsed: mirrors [`httparse::Error`] minus
/// `TooManyHeaders`, which is reported as [`Error::TooManyHeaders`] with its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeadError {
    /// Invalid byte in a header name.
    #[error("invalid header name")]
    HeaderName,
    /// Invalid byte in a header value.
    #[error("invalid header value")]
    HeaderValue,
    /// Invalid byte where a line ending was expected.
    #[error("invalid line ending")]
    NewLine,
    /// Invalid status code or reason phrase.
    #[error("invalid status")]
    Status,
    /// Invalid byte where a token was expected.
    #[error("invalid token")]
    Token,
    /// Invalid HTTP version.
    #[error("invalid version")]
    Version,
}

/// A fatal error of a [`ResponseReader`](super::ResponseReader).
///
/// Errors are delivered in-band by `poll_event`, after every event decoded from the bytes
/// before the fault, and are sticky: the reader ignores all later input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The response head did not end within `limit` bytes.
    #[error("response head longer than {limit} bytes")]
    HeadTooLarge {
        /// [`Config::max_head_len`](super::Config::max_head_len).
        limit: usize,
    },
    /// The response head has more than `limit` header fields.
    #[error("more than {limit} header fields")]
    TooManyHeaders {
        /// [`Config::max_headers`](super::Config::max_headers).
        limit: usize,
    },
    /// The response head is not valid HTTP/1.x.
    #[error("malformed response head: {0}")]
    MalformedHead(HeadError),
    /// `Content-Length` is not a decimal number, or several values differ.
    #[error("invalid content-length")]
    InvalidContentLength,
    /// `Transfer-Encoding` names a coding other than a single final `chunked`.
    #[error("unsupported transfer-encoding")]
    UnsupportedTransferEncoding,
    /// `Content-Encoding` names a coding other than `gzip`, `x-gzip` or `identity`.
    #[error("unsupported content-encoding")]
    UnsupportedEncoding,
    /// A chunk-size line does not start with a hexadecimal number.
    #[error("invalid chunk size")]
    InvalidChunkSize,
    /// A chunk size has more than `max_chunk_size_digits` digits or overflows `u64`.
    #[error("chunk size too large")]
    ChunkSizeTooLarge,
    /// The chunk extensions of one chunk-size line are longer than `limit` bytes.
    #[error("chunk extensions longer than {limit} bytes")]
    ChunkExtensionTooLarge {
        /// [`Config::max_trailer_len`](super::Config::max_trailer_len), which bounds
        /// every piece of chunked-coding metadata the reader discards.
        limit: usize,
    },
    /// Chunk data is not followed by a line ending, or a line ending is broken.
    #[error("malformed chunk")]
    MalformedChunk,
    /// The trailer section is longer than `limit` bytes.
    #[error("trailer section longer than {limit} bytes")]
    TrailerTooLarge {
        /// [`Config::max_trailer_len`](super::Config::max_trailer_len).
        limit: usize,
    },
    /// The decoded body is longer than `limit` bytes.
    #[error("body longer than {limit} bytes")]
    BodyTooLarge {
        /// [`Config::max_body_len`](super::Config::max_body_len).
        limit: usize,
    },
    /// The gzip body is corrupt (bad header, deflate data, checksum or length) or ends
    /// inside a gzip member.
    ///
    /// For corrupt *deflate data* only, how many of the bytes decoded just before the
    /// fault were delivered can depend on how the input was split (the decompressor drops
    /// its undelivered window on a data error); everything else in the transcript cannot.
    #[error("corrupt gzip body")]
    Gzip,
    /// The connection closed before the response was complete.
    #[error("connection closed before the response was complete")]
    UnexpectedEof,
}

impl Error {
    /// Map an [`httparse::Error`] to the reader's error, given the header limit.
    pub(super) fn from_httparse(err: httparse::Error, max_headers: usize) -> Self {
        Self::MalformedHead(match err {
            httparse::Error::TooManyHeaders => {
                return Self::TooManyHeaders { limit: max_headers };
            }
            httparse::Error::HeaderName => HeadError::HeaderName,
            httparse::Error::HeaderValue => HeadError::HeaderValue,
            httparse::Error::NewLine => HeadError::NewLine,
            httparse::Error::Status => HeadError::Status,
            httparse::Error::Token => HeadError::Token,
            httparse::Error::Version => HeadError::Version,
        })
    }
}
