//! Reading successive requests from one connection: the head (httparse), then the body
//! as HTTP/1.1 frames it (RFC 9112 §6.3): `Content-Length`, or the chunked transfer
//! coding (RFC 9112 §7.1, decoded by `flagsync_core::http1::Chunked`, trailers skipped).
//!
//! Head and body are read in two steps so that the connection can answer
//! `Expect: 100-continue` (or refuse the request) between them.

use std::io::{self, Read};

use flagsync_core::http1::{self as core_http, ChunkProgress, Chunked};

use crate::http::{Framing, Request};

/// The largest request head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// The most header fields in a request head.
const MAX_HEADERS: usize = 64;
/// The most hex digits in one chunk size (enough for any `u64`: the body limit decides).
const MAX_CHUNK_DIGITS: usize = 16;
/// The longest extensions of one chunk-size line, and the longest trailer section (which
/// bounds the number of trailer fields too: each takes at least two bytes). Both are
/// skipped, never kept.
const MAX_CHUNK_META: usize = 8 * 1024;
/// The most bytes taken from the socket in one read.
const READ_SIZE: usize = 16 * 1024;

/// Why no request (or no body) was read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The peer closed the connection cleanly between requests.
    Eof,
    /// The request was malformed or too large; answer with this status, then close.
    Bad(u16),
    /// An I/O error, a timeout, or the peer closed inside a request.
    Io,
    /// A non-blocking source has no more bytes now: call again once it is readable
    /// (what was read so far is kept).
    Pending,
}

/// Reads successive requests from one connection, keeping bytes that arrive early
/// (pipelined requests).
///
/// It holds at most one head (64 KiB), one body (`max_body`, counted after de-chunking)
/// and one read's worth of bytes: a longer head is refused with 431, a `Content-Length`
/// above `max_body` with 413 before any of the body is read, and a chunked body with 413
/// as soon as its chunk sizes add up to more than `max_body`. Chunk metadata is never
/// buffered (see `MAX_CHUNK_META`); a malformed chunk is a 400.
#[derive(Debug)]
pub(crate) struct RequestReader {
    buf: Vec<u8>,
    max_body: usize,
    /// A chunked body being decoded across reads that returned `Pending`.
    chunked: Option<(Chunked, Vec<u8>)>,
}

impl Default for RequestReader {
    fn default() -> Self {
        Self::new(crate::http::DEFAULT_MAX_BODY)
    }
}

impl RequestReader {
    /// A reader that refuses bodies longer than `max_body` bytes.
    pub(crate) fn new(max_body: usize) -> Self {
        Self {
            buf: Vec::new(),
            max_body,
            chunked: None,
        }
    }

    /// Whether bytes of a next request (or of a body) have arrived.
    pub(crate) fn has_partial(&self) -> bool {
        !self.buf.is_empty() || self.chunked.is_some()
    }

    /// Give back the memory of the last request once nothing is buffered, so an idle
    /// keep-alive connection holds no buffer.
    pub(crate) fn release(&mut self) {
        if self.buf.is_empty() {
            self.buf = Vec::new();
        }
    }

    /// Read a whole request: head, then body.
    #[cfg(test)]
    pub(crate) fn read(&mut self, stream: &mut impl Read) -> Result<Request, ReadError> {
        let mut req = self.read_head(stream)?;
        self.read_body(stream, &mut req)?;
        Ok(req)
    }

    /// Read the next request's head. Its body, if `req.framing` says there is one, must
    /// be read with [`read_body`](Self::read_body) before the next head (or the
    /// connection closed).
    pub(crate) fn read_head(&mut self, stream: &mut impl Read) -> Result<Request, ReadError> {
        loop {
            if let Some(req) = self.parse_head()? {
                return Ok(req);
            }
            if self.buf.len() > MAX_HEAD {
                return Err(ReadError::Bad(431));
            }
            if !self.fill(stream)? {
                return Err(if self.buf.is_empty() {
                    ReadError::Eof
                } else {
                    ReadError::Io
                });
            }
        }
    }

    /// Read the body that `req`'s head announced into `req.body` (de-chunked); then
    /// `req.framing` is `None`. After `Pending`, call again with the same `req`.
    pub(crate) fn read_body(
        &mut self,
        stream: &mut impl Read,
        req: &mut Request,
    ) -> Result<(), ReadError> {
        match req.framing {
            Framing::None => {}
            Framing::Length(n) => {
                while self.buf.len() < n {
                    if !self.fill(stream)? {
                        return Err(ReadError::Io);
                    }
                }
                req.body = self.buf.drain(..n).collect();
            }
            Framing::Chunked => {
                let (mut chunked, mut body) = self.chunked.take().unwrap_or_else(|| {
                    let limit = Some(self.max_body);
                    (
                        Chunked::new(MAX_CHUNK_DIGITS, MAX_CHUNK_META, limit),
                        Vec::new(),
                    )
                });
                match self.read_chunked(stream, &mut chunked, &mut body) {
                    Ok(()) => req.body = body,
                    Err(ReadError::Pending) => {
                        self.chunked = Some((chunked, body));
                        return Err(ReadError::Pending);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        req.framing = Framing::None;
        Ok(())
    }

    /// Decode a chunked body into `body`, reading as needed, and leave what follows it
    /// in `buf`.
    fn read_chunked(
        &mut self,
        stream: &mut impl Read,
        chunked: &mut Chunked,
        body: &mut Vec<u8>,
    ) -> Result<(), ReadError> {
        loop {
            let (used, progress) = chunked.parse(&self.buf).map_err(chunk_status)?;
            let taken = match progress {
                ChunkProgress::Data(n) => {
                    let take = usize::try_from(n)
                        .unwrap_or(usize::MAX)
                        .min(self.buf.len() - used);
                    body.extend_from_slice(&self.buf[used..used + take]);
                    chunked.data_consumed(take as u64);
                    take
                }
                ChunkProgress::Done => {
                    self.buf.drain(..used);
                    return Ok(());
                }
                _ => 0,
            };
            self.buf.drain(..used + taken);
            // Framing consumes all the metadata it is given and data is taken as far as
            // it goes, so an empty buffer is the only way to be stuck.
            if self.buf.is_empty() && !self.fill(stream)? {
                return Err(ReadError::Io);
            }
        }
    }

    /// Append one read's worth of bytes to `buf`: `false` at the end of the stream.
    fn fill(&mut self, stream: &mut impl Read) -> Result<bool, ReadError> {
        let mut chunk = [0u8; READ_SIZE];
        loop {
            match stream.read(&mut chunk) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Err(ReadError::Pending),
                Err(_) => return Err(ReadError::Io),
            }
        }
    }

    /// Parse a complete head at the front of `buf` and remove it, if there is one.
    fn parse_head(&mut self) -> Result<Option<Request>, ReadError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Request::new(&mut headers);
        let head_len = match parsed.parse(&self.buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(ReadError::Bad(431)),
            Err(_) => return Err(ReadError::Bad(400)),
        };
        let version = parsed.version.unwrap_or(1);
        let mut req = Request {
            method: parsed.method.unwrap_or("").to_owned(),
            target: parsed.path.unwrap_or("").to_owned(),
            headers: parsed
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_owned(),
                        String::from_utf8_lossy(h.value).trim().to_owned(),
                    )
                })
                .collect(),
            close: version == 0,
            http10: version == 0,
            ..Request::default()
        };
        self.buf.drain(..head_len);
        let has = |name: &str, token: &str| {
            header_tokens(&req, name).any(|t| t.eq_ignore_ascii_case(token))
        };
        let (close, keep_alive) = (has("connection", "close"), has("connection", "keep-alive"));
        let expects_continue = !req.http10 && has("expect", "100-continue");
        let (framing, must_close) = framing(&req, self.max_body)?;
        req.close = close || (req.close && !keep_alive) || must_close;
        req.expects_continue = expects_continue;
        req.framing = framing;
        Ok(Some(req))
    }
}

/// The comma-separated tokens of every `name` header of `req`, trimmed, empty ones left
/// out (RFC 9110 §5.6.1).
fn header_tokens<'r>(req: &'r Request, name: &'r str) -> impl Iterator<Item = &'r str> + 'r {
    req.headers
        .iter()
        .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
        .flat_map(|(_, v)| v.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

/// How `req`'s body is framed (RFC 9112 §6.1, §6.3), and whether the connection must
/// close after the response; or the status to refuse it with.
///
/// `Transfer-Encoding` must be exactly `chunked` (another final coding cannot be framed:
/// 400; `chunked` after another coding, which this server does not decode: 501). It wins
/// over `Content-Length`, and then the connection closes after the response, as it does
/// for an HTTP/1.0 request with `Transfer-Encoding` (400: its framing is faulty).
/// `Content-Length` values must be one decimal number (repeated values must agree).
fn framing(req: &Request, max_body: usize) -> Result<(Framing, bool), ReadError> {
    let codings: Vec<&str> = header_tokens(req, "transfer-encoding").collect();
    let lengths: Vec<&str> = header_tokens(req, "content-length").collect();
    if req.header("transfer-encoding").is_some() {
        if req.http10 {
            return Err(ReadError::Bad(400));
        }
        return match codings.as_slice() {
            [only] if only.eq_ignore_ascii_case("chunked") => {
                Ok((Framing::Chunked, !lengths.is_empty()))
            }
            [.., last] if last.eq_ignore_ascii_case("chunked") => Err(ReadError::Bad(501)),
            _ => Err(ReadError::Bad(400)),
        };
    }
    if req.header("content-length").is_none() {
        return Ok((Framing::None, false));
    }
    let mut length = None;
    for value in lengths {
        let n = value
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| value.parse::<usize>());
        match (n, length) {
            (Some(Ok(n)), None) => length = Some(n),
            (Some(Ok(n)), Some(m)) if n == m => {}
            // Too many digits for a `usize`: far above any limit.
            (Some(Err(_)), _) => return Err(ReadError::Bad(413)),
            _ => return Err(ReadError::Bad(400)),
        }
    }
    match length {
        None => Err(ReadError::Bad(400)),
        Some(0) => Ok((Framing::None, false)),
        Some(n) if n > max_body => Err(ReadError::Bad(413)),
        Some(n) => Ok((Framing::Length(n), false)),
    }
}

/// The status for a chunked body that cannot be decoded.
fn chunk_status(err: core_http::Error) -> ReadError {
    match err {
        core_http::Error::BodyTooLarge { .. } => ReadError::Bad(413),
        _ => ReadError::Bad(400),
    }
}

#[cfg(test)]
mod tests;
