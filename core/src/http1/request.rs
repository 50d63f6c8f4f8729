//! Request heads: serialised straight into the caller's output buffer.

/// The request methods flagsync sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Method {
    /// `GET`: streaming and polling requests.
    Get,
    /// `POST`: event delivery.
    Post,
    /// `REPORT`: requests that carry a context in the body.
    Report,
}

impl Method {
    /// Return the method token as sent on the wire, e.g. `"GET"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Report => "REPORT",
        }
    }
}

/// True for the header fields whose values are credentials (`Authorization`,
/// `Proxy-Authorization`): never shown in `Debug` output or logs.
pub(crate) fn is_credential_header(name: &str) -> bool {
    name.eq_ignore_ascii_case("authorization") || name.eq_ignore_ascii_case("proxy-authorization")
}

/// Header fields for `Debug` output: the values of `Authorization` and
/// `Proxy-Authorization` are printed as `<redacted>`, so that no SDK key or proxy
/// credential ever reaches a log through a `{:?}`.
pub struct RedactedHeaders<'a>(pub &'a [(String, String)]);

impl std::fmt::Debug for RedactedHeaders<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(name, value)| {
                let secret = is_credential_header(name);
                (
                    name.as_str(),
                    if secret { "<redacted>" } else { value.as_str() },
                )
            }))
            .finish()
    }
}

/// An HTTP/1.1 request head in origin form. Its `Debug` output never shows the values
/// of `Authorization` and `Proxy-Authorization` ([`RedactedHeaders`]).
#[derive(Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// The request method.
    pub method: Method,
    /// Path and query in origin form, e.g. `"/all?filter=x"`.
    pub target: String,
    /// The `Host` header value: `"host"` or `"host:port"`.
    pub host: String,
    /// Further header fields, written in order. Do not include `Host` or
    /// `Content-Length`: [`write_to`](Self::write_to) writes those.
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Debug for RequestHead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestHead")
            .field("method", &self.method)
            .field("target", &self.target)
            .field("host", &self.host)
            .field("headers", &RedactedHeaders(&self.headers))
            .finish()
    }
}

impl RequestHead {
    /// Append the request head and then `body` to `out`.
    ///
    /// Writes the request line, `Host`, every header in order, `Content-Length` when `body`
    /// is `Some`, the empty line, and the body. Nothing is allocated except growth of
    /// `out`. CR, LF and NUL bytes in any field are written as spaces, so a hostile value
    /// (say, a configured key) cannot inject header lines.
    pub fn write_to(&self, body: Option<&[u8]>, out: &mut Vec<u8>) {
        let body_len = body.map_or(0, <[u8]>::len);
        out.reserve(self.head_len_hint() + body_len);
        out.extend_from_slice(self.method.as_str().as_bytes());
        out.push(b' ');
        push_field(out, &self.target);
        out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
        push_field(out, &self.host);
        out.extend_from_slice(b"\r\n");
        for (name, value) in &self.headers {
            push_field(out, name);
            out.extend_from_slice(b": ");
            push_field(out, value);
            out.extend_from_slice(b"\r\n");
        }
        if let Some(body) = body {
            out.extend_from_slice(b"Content-Length: ");
            push_decimal(out, body.len());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if let Some(body) = body {
            out.extend_from_slice(body);
        }
    }

    /// An upper bound of the head's length, used to reserve `out` once.
    fn head_len_hint(&self) -> usize {
        let fixed =
            "REPORT  HTTP/1.1\r\nHost: \r\nContent-Length: 18446744073709551615\r\n\r\n\r\n";
        self.headers.iter().fold(
            fixed.len() + self.target.len() + self.host.len(),
            |n, (k, v)| n + k.len() + v.len() + 4,
        )
    }
}

/// Append `field`, writing CR, LF and NUL as spaces.
fn push_field(out: &mut Vec<u8>, field: &str) {
    let bytes = field.as_bytes();
    if memchr::memchr3(b'\r', b'\n', 0, bytes).is_none() {
        out.extend_from_slice(bytes);
    } else {
        out.extend(bytes.iter().map(|&b| match b {
            b'\r' | b'\n' | 0 => b' ',
            b => b,
        }));
    }
}

/// Append `n` in decimal without allocating.
fn push_decimal(out: &mut Vec<u8>, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        #[allow(clippy::cast_possible_truncation, reason = "n % 10 < 10")]
        let digit = (n % 10) as u8;
        if let Some(slot) = digits.get_mut(start) {
            *slot = b'0' + digit;
        }
        n /= 10;
        if n == 0 || start == 0 {
            break;
        }
    }
    out.extend_from_slice(digits.get(start..).unwrap_or_default());
}
