//! Minimal HTTP/1.1 request reading and response writing over a blocking stream.

use std::io::{self, Write};
use std::time::{SystemTime, UNIX_EPOCH};

/// The default largest request body (see `ServerBuilder::max_body`).
pub(super) const DEFAULT_MAX_BODY: usize = 8 * 1024 * 1024;

/// A parsed request head.
#[derive(Debug, Clone, Default)]
pub(super) struct Request {
    pub(super) method: String,
    /// Path and query, as sent.
    pub(super) target: String,
    pub(super) headers: Vec<(String, String)>,
    /// HTTP/1.0, or `Connection: close`.
    pub(super) close: bool,
    /// HTTP/1.0: no chunked transfer coding in the response.
    pub(super) http10: bool,
    /// How the body is framed (RFC 9112 §6.3).
    pub(super) framing: Framing,
    /// `Expect: 100-continue` in an HTTP/1.1 request (HTTP/1.0 ones are ignored, RFC 9110
    /// §10.1.1): the client may wait for `100 Continue` before sending the body.
    pub(super) expects_continue: bool,
    /// The body, de-chunked once read (still content-coded: see `events::accept`).
    pub(super) body: Vec<u8>,
}

/// How a request's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Framing {
    /// No body.
    #[default]
    None,
    /// `Content-Length` bytes (more than zero).
    Length(usize),
    /// The chunked transfer coding.
    Chunked,
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

/// The reason phrase for the statuses this server sends.
pub(super) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
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
        415 => "Unsupported Media Type",
        417 => "Expectation Failed",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
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
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nDate: {}\r\n",
        reason(status),
        http_date(SystemTime::now())
    );
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

/// The head of a `text/event-stream` response. `chunked`: framed with the chunked
/// transfer coding, as LaunchDarkly's streaming service frames it (SDK stream readers,
/// urllib3 in the Python SDK for one, hand events on as each chunk arrives, while a
/// response without framing may be held until a read buffer fills); otherwise (for an
/// HTTP/1.0 client, which knows no chunks) the body ends when the connection does.
/// `extra` headers follow the standard ones.
pub(super) fn stream_head(chunked: bool, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut head = format!(
        "HTTP/1.1 200 OK\r\nDate: {}\r\nContent-Type: text/event-stream; charset=utf-8\r\n\
         Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\nConnection: close\r\n",
        http_date(SystemTime::now())
    );
    if chunked {
        head.push_str("Transfer-Encoding: chunked\r\n");
    }
    for (n, v) in extra {
        head.push_str(n);
        head.push_str(": ");
        head.push_str(v);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    head.into_bytes()
}

/// How long a write to a slow client may make no progress before the connection is
/// dropped.
pub(crate) const WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The end of a chunked body: the last chunk, no trailers.
pub(super) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Format a time as an HTTP date (RFC 7231 IMF-fixdate, e.g. `Sun, 06 Nov 1994
/// 08:49:37 GMT`), as the `Date` header carries it. Times before 1970 print as 1970.
pub(super) fn http_date(time: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = secs / 86_400;
    let (year, month, day) = civil_from_days(days);
    let rem = secs % 86_400;
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The proleptic Gregorian `(year, month 1-12, day 1-31)` of a day count since
/// 1970-01-01 (Howard Hinnant's `civil_from_days`, for non-negative counts).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn stream_heads() {
        let head = String::from_utf8(stream_head(true, &[("X-LD-EnvID", "e")])).unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK\r\nDate: "), "{head}");
        for line in [
            "\r\nContent-Type: text/event-stream; charset=utf-8\r\n",
            "\r\nCache-Control: no-cache\r\n",
            "\r\nTransfer-Encoding: chunked\r\n",
            "\r\nX-LD-EnvID: e\r\n\r\n",
        ] {
            assert!(head.contains(line), "{line:?} in {head}");
        }
        assert!(!head.contains("Content-Length"));
        let unframed = String::from_utf8(stream_head(false, &[])).unwrap();
        assert!(!unframed.contains("Transfer-Encoding"), "{unframed}");
        assert!(unframed.contains("\r\nConnection: close\r\n"), "{unframed}");
    }

    #[test]
    fn http_dates() {
        let at = |secs| http_date(UNIX_EPOCH + std::time::Duration::from_secs(secs));
        assert_eq!(at(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(at(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(at(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(at(1_798_761_599), "Thu, 31 Dec 2026 23:59:59 GMT");
        assert_eq!(at(4_107_542_400), "Mon, 01 Mar 2100 00:00:00 GMT");
    }
}
