//! Minimal HTTP/1.1 request reading and response writing over a blocking stream.

use std::io::{self, Read, Write};

/// The largest request head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// The largest request body read (and discarded).
const MAX_BODY: usize = 1024 * 1024;

/// A parsed request head.
#[derive(Debug, Clone)]
pub(super) struct Request {
    pub(super) method: String,
    /// Path and query, as sent.
    pub(super) target: String,
    pub(super) headers: Vec<(String, String)>,
    /// HTTP/1.0, or `Connection: close`.
    pub(super) close: bool,
}

impl Request {
    /// The first value of header `name` (case-insensitive).
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The path without the query.
    pub(super) fn path(&self) -> &str {
        self.target.split(['?', '#']).next().unwrap_or("")
    }

    /// The first value of query parameter `name`, percent-decoded (`+` is a space).
    pub(super) fn query(&self, name: &str) -> Option<String> {
        query_param(&self.target, name)
    }

    /// Whether `Accept-Encoding` allows gzip.
    pub(super) fn accepts_gzip(&self) -> bool {
        self.header("accept-encoding").is_some_and(|v| {
            v.split(',').any(|part| {
                let mut it = part.split(';');
                let coding = it.next().unwrap_or("").trim();
                let q_zero = it.any(|p| {
                    let p = p.trim();
                    p == "q=0" || p == "q=0.0" || p == "q=0.00" || p == "q=0.000"
                });
                (coding.eq_ignore_ascii_case("gzip") || coding == "*") && !q_zero
            })
        })
    }
}

/// The first value of query parameter `name` in a request target, percent-decoded.
pub(super) fn query_param(target: &str, name: &str) -> Option<String> {
    let query = target.split('#').next()?.split_once('?')?.1;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(k) == name).then(|| percent_decode(v))
    })
}

/// Decode `%XX` escapes and `+`; a malformed escape is kept as it is.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The value of one hex digit.
fn hex(digit: u8) -> Option<u8> {
    (digit as char).to_digit(16).map(|d| d as u8)
}

/// Why no request was read.
#[derive(Debug)]
pub(super) enum ReadError {
    /// The peer closed the connection cleanly between requests.
    Eof,
    /// The request was malformed or too large; answer with this status, then close.
    Bad(u16),
    /// An I/O error or timeout.
    Io,
}

/// Reads successive requests from one connection, keeping bytes that arrive early.
#[derive(Debug, Default)]
pub(super) struct RequestReader {
    buf: Vec<u8>,
}

impl RequestReader {
    pub(super) fn read(&mut self, stream: &mut impl Read) -> Result<Request, ReadError> {
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(req) = self.try_parse()? {
                return Ok(req);
            }
            if self.buf.len() > MAX_HEAD {
                return Err(ReadError::Bad(431));
            }
            match stream.read(&mut chunk) {
                Ok(0) if self.buf.is_empty() => return Err(ReadError::Eof),
                Ok(0) => return Err(ReadError::Io),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(ReadError::Io),
            }
        }
    }

    fn try_parse(&mut self) -> Result<Option<Request>, ReadError> {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Request::new(&mut headers);
        let head_len = match parsed.parse(&self.buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(ReadError::Bad(431)),
            Err(_) => return Err(ReadError::Bad(400)),
        };
        let version = parsed.version.unwrap_or(1);
        let req_headers: Vec<(String, String)> = parsed
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_owned(),
                    String::from_utf8_lossy(h.value).trim().to_owned(),
                )
            })
            .collect();
        let mut req = Request {
            method: parsed.method.unwrap_or("").to_owned(),
            target: parsed.path.unwrap_or("").to_owned(),
            headers: req_headers,
            close: version == 0,
        };
        if let Some(c) = req.header("connection") {
            if c.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")) {
                req.close = true;
            } else if c
                .split(',')
                .any(|t| t.trim().eq_ignore_ascii_case("keep-alive"))
            {
                req.close = false;
            }
        }
        if req.header("transfer-encoding").is_some() {
            // Request bodies are never needed; refuse chunked ones rather than desync.
            return Err(ReadError::Bad(411));
        }
        let body_len = match req.header("content-length") {
            None => 0,
            Some(v) => match v.parse::<usize>() {
                Ok(n) if n <= MAX_BODY => n,
                Ok(_) => return Err(ReadError::Bad(413)),
                Err(_) => return Err(ReadError::Bad(400)),
            },
        };
        if self.buf.len() < head_len + body_len {
            return Ok(None);
        }
        self.buf.drain(..head_len + body_len);
        Ok(Some(req))
    }
}

/// The reason phrase for the statuses this server sends.
pub(super) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// Write a complete response with `Content-Length` framing.
pub(super) fn write_response(
    out: &mut impl Write,
    status: u16,
    headers: &[(&str, &str)],
    body: &[u8],
    close: bool,
) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (n, v) in headers {
        head.push_str(n);
        head.push_str(": ");
        head.push_str(v);
        head.push_str("\r\n");
    }
    // 1xx, 204 and 304 responses carry no body and no framing.
    if !(status == 204 || status == 304 || status < 200) {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut all = head.into_bytes();
    if !(status == 204 || status == 304 || status < 200) {
        all.extend_from_slice(body);
    }
    out.write_all(&all)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pipelined_requests() {
        let raw = b"GET /all?filter=x HTTP/1.1\r\nHost: h\r\nAuthorization: k\r\n\r\nGET /sdk/latest-all HTTP/1.0\r\nAccept-Encoding: br, gzip;q=1\r\n\r\n";
        let mut r = RequestReader::default();
        let mut src = &raw[..];
        let a = r.read(&mut src).unwrap();
        assert_eq!(a.path(), "/all");
        assert_eq!(a.header("AUTHORIZATION"), Some("k"));
        assert!(!a.close);
        let b = r.read(&mut src).unwrap();
        assert_eq!(b.path(), "/sdk/latest-all");
        assert!(b.close && b.accepts_gzip());
        assert!(matches!(r.read(&mut src), Err(ReadError::Eof)));
    }

    #[test]
    fn query_parameters() {
        let t = "/sdk/stream?filter=a%20b&basis=e-1%3A2&x&basis=second";
        assert_eq!(query_param(t, "basis").as_deref(), Some("e-1:2"));
        assert_eq!(query_param(t, "filter").as_deref(), Some("a b"));
        assert_eq!(query_param(t, "x").as_deref(), Some(""));
        assert_eq!(query_param(t, "y"), None);
        assert_eq!(query_param("/sdk/stream", "basis"), None);
        assert_eq!(query_param("/p?a=%zz%4", "a").as_deref(), Some("%zz%4"));
        assert_eq!(query_param("/p?a=%+1", "a").as_deref(), Some("% 1"));
        assert_eq!(query_param("/p?a=1+2#basis=3", "a").as_deref(), Some("1 2"));
    }

    #[test]
    fn gzip_q0_is_refused() {
        let raw = b"GET / HTTP/1.1\r\nAccept-Encoding: gzip;q=0\r\n\r\n";
        let req = RequestReader::default().read(&mut &raw[..]).unwrap();
        assert!(!req.accepts_gzip());
    }

    #[test]
    fn garbage_is_400() {
        let raw = b"\x00\x01 nonsense\r\n\r\n";
        assert!(matches!(
            RequestReader::default().read(&mut &raw[..]),
            Err(ReadError::Bad(400))
        ));
    }
}
