//! Response heads: finding the end of the head, parsing it with httparse, and reading
//! the framing headers.

use super::Error;

/// A parsed response head (status line and header fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status code, e.g. `200`.
    pub status: u16,
    /// The reason phrase, possibly empty.
    pub reason: String,
    /// Header fields in order of appearance. Names are as sent; values are decoded as
    /// UTF-8 with invalid bytes replaced by U+FFFD.
    pub headers: Vec<(String, String)>,
}

impl ResponseHead {
    /// Return the value of the first header named `name`, compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Return the values of every header named `name` (case-insensitive), in order.
    pub fn headers_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Return the `Content-Type` header value.
    pub fn content_type(&self) -> Option<&str> {
        self.header("content-type")
    }

    /// Return the `ETag` header value.
    pub fn etag(&self) -> Option<&str> {
        self.header("etag")
    }

    /// Return the `Location` header value.
    pub fn location(&self) -> Option<&str> {
        self.header("location")
    }

    /// Whether the status never has a body (1xx, 204, 304; RFC 9112 §6.3 rule 1).
    pub(super) fn status_has_no_body(&self) -> bool {
        self.status < 200 || self.status == 204 || self.status == 304
    }

    /// The comma-separated list elements of every header named `name`, trimmed and
    /// without empty elements.
    pub(super) fn list<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers_named(name)
            .flat_map(|v| v.split(','))
            .map(|e| e.trim_matches([' ', '\t']))
            .filter(|e| !e.is_empty())
    }
}

/// Incremental search for the empty line that ends a head.
///
/// Remembers where the last search stopped, so feeding a head byte by byte costs linear
/// time in total. Accepts CRLF and bare LF line endings, as httparse does.
#[derive(Debug, Clone, Default)]
pub(super) struct HeadScanner {
    pos: usize,
}

impl HeadScanner {
    /// Find the end (exclusive) of the first empty line in `buf` not reported before.
    pub(super) fn find_end(&mut self, buf: &[u8]) -> Option<usize> {
        while let Some(off) = memchr::memchr(b'\n', buf.get(self.pos..).unwrap_or_default()) {
            let i = self.pos + off;
            match (buf.get(i + 1), buf.get(i + 2)) {
                (None, _) | (Some(b'\r'), None) => {
                    self.pos = i;
                    return None;
                }
                (Some(b'\n'), _) => {
                    self.pos = i + 1;
                    return Some(i + 2);
                }
                (Some(b'\r'), Some(b'\n')) => {
                    self.pos = i + 2;
                    return Some(i + 3);
                }
                _ => self.pos = i + 1,
            }
        }
        self.pos = buf.len();
        None
    }

    /// Start over for a new head at the front of the buffer.
    pub(super) fn reset(&mut self) {
        self.pos = 0;
    }
}

/// Parse a complete head with httparse, using `headers` as the header array.
///
/// Returns `Ok(None)` if httparse wants more bytes (only possible for leading empty
/// lines, which httparse skips), else the head and its length.
pub(super) fn parse_head<'b>(
    buf: &'b [u8],
    headers: &mut [httparse::Header<'b>],
) -> Result<Option<(ResponseHead, usize)>, Error> {
    let max_headers = headers.len();
    let mut response = httparse::Response::new(headers);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(Error::from_httparse(e, max_headers)),
    };
    let head = ResponseHead {
        status: response.code.unwrap_or_default(),
        reason: response.reason.unwrap_or_default().to_owned(),
        headers: response
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_owned(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect(),
    };
    Ok(Some((head, len)))
}

/// How the body of a response is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body: 1xx, 204, 304.
    Empty,
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// `Content-Length`.
    Length(u64),
    /// Read until the connection closes.
    Close,
}

/// Decide the body framing of `head`.
pub(super) fn framing(head: &ResponseHead) -> Result<Framing, Error> {
    if head.status_has_no_body() {
        return Ok(Framing::Empty);
    }
    if head.header("transfer-encoding").is_some() {
        // Rule 3: Transfer-Encoding overrides Content-Length. Only a lone `chunked` is
        // supported; other transfer codings are never sent to flagsync's requests.
        let mut codings = head.list("transfer-encoding");
        return match (codings.next(), codings.next()) {
            (Some(c), None) if c.eq_ignore_ascii_case("chunked") => Ok(Framing::Chunked),
            _ => Err(Error::UnsupportedTransferEncoding),
        };
    }
    let mut length = None;
    for value in head.list("content-length") {
        // Rule 5: identical repeated values are one value; anything else is an error.
        let n = parse_decimal(value).ok_or(Error::InvalidContentLength)?;
        if length.is_some_and(|l| l != n) {
            return Err(Error::InvalidContentLength);
        }
        length = Some(n);
    }
    if length.is_none() && head.header("content-length").is_some() {
        return Err(Error::InvalidContentLength);
    }
    Ok(length.map_or(Framing::Close, Framing::Length))
}

/// Parse `1*DIGIT` into a `u64`, rejecting signs, spaces and overflow.
fn parse_decimal(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The content coding the reader must undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Coding {
    /// Pass the body through.
    Identity,
    /// Gunzip the body.
    Gzip,
}

/// Decide the content coding of `head`: `identity` entries are ignored, one `gzip` or
/// `x-gzip` is decoded, anything else is unsupported.
pub(super) fn coding(head: &ResponseHead) -> Result<Coding, Error> {
    let mut coding = Coding::Identity;
    for c in head.list("content-encoding") {
        if c.eq_ignore_ascii_case("identity") {
            continue;
        }
        let gzip = c.eq_ignore_ascii_case("gzip") || c.eq_ignore_ascii_case("x-gzip");
        if !gzip || coding == Coding::Gzip {
            return Err(Error::UnsupportedEncoding);
        }
        coding = Coding::Gzip;
    }
    Ok(coding)
}
