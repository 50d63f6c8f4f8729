//! The chunked transfer coding (RFC 9112 §7.1) as a byte-at-a-time state machine.
//!
//! ```text
//! chunked-body = *chunk last-chunk trailer-section CRLF
//! chunk        = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//! chunk-size   = 1*HEXDIG
//! last-chunk   = 1*("0") [ chunk-ext ] CRLF
//! chunk-ext    = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )
//! ```
//!
//! Metadata bytes (sizes, extensions, line endings, trailers) are consumed as they arrive
//! and never buffered, so splitting the input anywhere costs nothing. Extensions and
//! trailer fields are skipped without validation. A bare LF is accepted wherever CRLF is
//! expected (RFC 9112 §2.2 allows recipients to do so); a CR not followed by LF is
//! [`Error::MalformedChunk`].
//!
//! [`ResponseReader`](super::ResponseReader) uses it for response bodies, and
//! `flagsync-server` for request bodies. Every piece of metadata is bounded: the digits
//! of a chunk size, the extensions of one size line, the whole trailer section (and so
//! the number of trailer fields, each at least two bytes), and optionally the sum of the
//! chunk sizes.
//!
//! ```
//! use flagsync_core::http1::{ChunkProgress, Chunked};
//!
//! let mut input = &b"3\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\nnext"[..];
//! let mut chunked = Chunked::new(16, 1024, Some(1 << 20));
//! let mut body = Vec::new();
//! loop {
//!     let (used, progress) = chunked.parse(input).unwrap();
//!     input = &input[used..];
//!     match progress {
//!         ChunkProgress::Data(n) => {
//!             let take = input.len().min(n as usize);
//!             body.extend_from_slice(&input[..take]);
//!             chunked.data_consumed(take as u64);
//!             input = &input[take..];
//!         }
//!         ChunkProgress::Done => break,
//!         // `NeedMore`: all of the input was metadata.
//!         _ => unreachable!("the body is complete"),
//!     }
//! }
//! assert_eq!((body.as_slice(), input), (&b"abc"[..], &b"next"[..]));
//! ```

use super::Error;

/// What the decoder needs next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChunkProgress {
    /// The next `n` bytes (`n > 0`) are chunk data: hand them on, then call
    /// [`Chunked::data_consumed`].
    Data(u64),
    /// All given bytes were metadata; more input is needed.
    NeedMore,
    /// The last chunk and the trailer section are complete: the body is done.
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// In `chunk-size`, after `digits` hex digits.
    Size { digits: usize, value: u64 },
    /// After `chunk-size`: whitespace or extensions, `ext_len` bytes so far.
    Ext {
        value: u64,
        ext_len: usize,
        in_ext: bool,
    },
    /// After the CR that ends a chunk-size line.
    SizeLf { value: u64 },
    /// Inside chunk data.
    Data { remaining: u64 },
    /// After chunk data: CR (or bare LF) expected.
    DataCr,
    /// After chunk data and CR: LF expected.
    DataLf,
    /// At the start of a trailer line, `total` trailer bytes so far.
    TrailerStart { total: usize },
    /// Inside a trailer field line.
    TrailerLine { total: usize },
    /// After the CR of the final empty line.
    TrailerEndLf,
    /// The chunked body is complete.
    Done,
}

/// Decoder of the chunked transfer coding's framing.
#[derive(Debug, Clone)]
pub struct Chunked {
    state: State,
    max_digits: usize,
    max_meta: usize,
    /// Limit on the sum of chunk sizes, when the data is not decoded further.
    max_total: Option<usize>,
    total: u64,
}

impl Chunked {
    /// Start decoding a chunked body.
    ///
    /// `max_digits` bounds the hex digits of one chunk size; `max_meta` bounds the
    /// extensions of one size line ([`Error::ChunkExtensionTooLarge`]) and the whole
    /// trailer section ([`Error::TrailerTooLarge`]).
    ///
    /// `max_total` checks the declared chunk sizes against the body limit as soon as each
    /// size line is read; pass `None` when the data is gzip (the limit then applies to
    /// the decoded bytes).
    pub fn new(max_digits: usize, max_meta: usize, max_total: Option<usize>) -> Self {
        Self {
            state: State::Size {
                digits: 0,
                value: 0,
            },
            max_digits,
            max_meta,
            max_total,
            total: 0,
        }
    }

    /// Record that `n` bytes of the current chunk's data were consumed.
    ///
    /// `n` must not exceed the count last returned in [`ChunkProgress::Data`].
    pub fn data_consumed(&mut self, n: u64) {
        if let State::Data { remaining } = self.state {
            let remaining = remaining.saturating_sub(n);
            self.state = if remaining == 0 {
                State::DataCr
            } else {
                State::Data { remaining }
            };
        }
    }

    /// Consume framing bytes from the front of `input`.
    ///
    /// Returns how many bytes were consumed and what comes next. Stops at chunk data,
    /// at the end of the body, or when `input` is exhausted. After
    /// [`ChunkProgress::Data`], hand on up to that many of the bytes that follow the
    /// consumed ones and report them with [`data_consumed`](Self::data_consumed) before
    /// calling again. An error is final: the body cannot be framed any further.
    pub fn parse(&mut self, input: &[u8]) -> Result<(usize, ChunkProgress), Error> {
        for (i, &b) in input.iter().enumerate() {
            match self.state {
                State::Data { remaining } => return Ok((i, ChunkProgress::Data(remaining))),
                State::Done => return Ok((i, ChunkProgress::Done)),
                _ => self.state = self.next(b)?,
            }
        }
        let progress = match self.state {
            State::Data { remaining } => ChunkProgress::Data(remaining),
            State::Done => ChunkProgress::Done,
            _ => ChunkProgress::NeedMore,
        };
        Ok((input.len(), progress))
    }

    /// The state after byte `b`, in any state but `Data` and `Done`.
    fn next(&mut self, b: u8) -> Result<State, Error> {
        Ok(match self.state {
            State::Size { digits, value } => match hex_value(b) {
                Some(d) => {
                    if digits >= self.max_digits {
                        return Err(Error::ChunkSizeTooLarge);
                    }
                    let value = value
                        .checked_mul(16)
                        .and_then(|v| v.checked_add(u64::from(d)))
                        .ok_or(Error::ChunkSizeTooLarge)?;
                    State::Size {
                        digits: digits + 1,
                        value,
                    }
                }
                None if digits == 0 => return Err(Error::InvalidChunkSize),
                None => self.after_size(value, 0, false, b)?,
            },
            State::Ext {
                value,
                ext_len,
                in_ext,
            } => self.after_size(value, ext_len, in_ext, b)?,
            State::SizeLf { value } => match b {
                b'\n' => self.chunk_start(value)?,
                _ => return Err(Error::MalformedChunk),
            },
            State::DataCr => match b {
                b'\r' => State::DataLf,
                b'\n' => State::Size {
                    digits: 0,
                    value: 0,
                },
                _ => return Err(Error::MalformedChunk),
            },
            State::DataLf => match b {
                b'\n' => State::Size {
                    digits: 0,
                    value: 0,
                },
                _ => return Err(Error::MalformedChunk),
            },
            State::TrailerStart { total } => {
                let total = self.trailer_byte(total)?;
                match b {
                    b'\r' => State::TrailerEndLf,
                    b'\n' => State::Done,
                    _ => State::TrailerLine { total },
                }
            }
            State::TrailerLine { total } => {
                let total = self.trailer_byte(total)?;
                match b {
                    b'\n' => State::TrailerStart { total },
                    _ => State::TrailerLine { total },
                }
            }
            State::TrailerEndLf => match b {
                b'\n' => State::Done,
                _ => return Err(Error::MalformedChunk),
            },
            state @ (State::Data { .. } | State::Done) => state,
        })
    }

    /// Handle byte `b` after the chunk-size digits: BWS, extensions, or the line end.
    fn after_size(
        &mut self,
        value: u64,
        ext_len: usize,
        in_ext: bool,
        b: u8,
    ) -> Result<State, Error> {
        match b {
            b'\n' => return self.chunk_start(value),
            b'\r' if !in_ext => return Ok(State::SizeLf { value }),
            b' ' | b'\t' | b';' => {}
            _ if in_ext => {}
            _ => return Err(Error::InvalidChunkSize),
        }
        let ext_len = ext_len + 1;
        if ext_len > self.max_meta {
            return Err(Error::ChunkExtensionTooLarge {
                limit: self.max_meta,
            });
        }
        Ok(State::Ext {
            value,
            ext_len,
            in_ext: in_ext || b == b';',
        })
    }

    /// Begin a chunk of `size` bytes after its size line (or the trailers for size 0).
    fn chunk_start(&mut self, size: u64) -> Result<State, Error> {
        if size == 0 {
            return Ok(State::TrailerStart { total: 0 });
        }
        self.total = self.total.saturating_add(size);
        if let Some(limit) = self.max_total
            && self.total > u64::try_from(limit).unwrap_or(u64::MAX)
        {
            return Err(Error::BodyTooLarge { limit });
        }
        Ok(State::Data { remaining: size })
    }

    /// Count one trailer byte against the limit.
    fn trailer_byte(&self, total: usize) -> Result<usize, Error> {
        let total = total + 1;
        if total > self.max_meta {
            return Err(Error::TrailerTooLarge {
                limit: self.max_meta,
            });
        }
        Ok(total)
    }
}

/// The value of an ASCII hex digit (either case).
fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}
