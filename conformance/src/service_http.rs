//! The plain HTTP/1.1 of the contract-test services: a blocking server (one std thread
//! per connection, one request per connection) and a blocking client for the harness's
//! callback endpoints.
//!
//! The harnesses speak simple JSON over loopback; a service needs no more than this,
//! and keeping it on std threads means the service's own I/O never runs on the runtime
//! under test.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// The largest request head and body a service reads (1 MiB each).
const MAX_REQUEST: usize = 1 << 20;

/// One request to a service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, `DELETE`, …
    pub method: String,
    /// The request target, e.g. `/clients/3`.
    pub path: String,
    /// The body (`Content-Length` bytes).
    pub body: Vec<u8>,
}

/// A service's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Headers besides `Content-Length` and `Connection`.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// A response with no body.
    pub fn empty(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A plain-text response (errors: the harness logs the text).
    pub fn text(status: u16, text: &str) -> Self {
        Self {
            status,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: text.as_bytes().to_vec(),
        }
    }

    /// A `200` JSON response.
    pub fn json(value: &serde_json::Value) -> Self {
        Self {
            status: 200,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: value.to_string().into_bytes(),
        }
    }

    /// This response with one more header.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// What the handler wants after answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Keep serving.
    Continue,
    /// Exit the process (the harness's `DELETE /`).
    Exit,
}

/// Listen on `127.0.0.1:port` (port 0: one the system chooses) and answer each request
/// with `handler`, each connection on a thread of its own, until a handler answers
/// [`After::Exit`]. The port is printed to standard error as
/// `<name>: listening on 127.0.0.1:<port>`. Returns only if the port cannot be bound.
pub fn serve<H>(name: &str, port: u16, handler: H) -> io::Error
where
    H: Fn(&Request) -> (Response, After) + Send + Sync + 'static,
{
    let listener = match TcpListener::bind(("127.0.0.1", port)) {
        Ok(l) => l,
        Err(e) => return e,
    };
    // The port bound (the one asked for, or the system's choice for port 0): tests read
    // it from this line.
    let port = listener.local_addr().map_or(port, |a| a.port());
    eprintln!("{name}: listening on 127.0.0.1:{port}");
    let handler = Arc::new(handler);
    let name: Arc<str> = name.into();
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let handler = handler.clone();
        let name = name.clone();
        std::thread::spawn(move || answer(stream, &*handler, &name));
    }
    io::Error::other("the listener stopped")
}

fn answer(
    mut stream: TcpStream,
    handler: &(dyn Fn(&Request) -> (Response, After) + Send + Sync),
    name: &str,
) {
    let Some(req) = read_request(&mut stream) else {
        return;
    };
    let (resp, after) = handler(&req);
    let mut out = format!("HTTP/1.1 {} X\r\n", resp.status);
    for (n, v) in &resp.headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    out.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        resp.body.len()
    ));
    let _ = stream.write_all(out.as_bytes());
    let _ = stream.write_all(&resp.body);
    let _ = stream.flush();
    if after == After::Exit {
        let _ = stream.shutdown(std::net::Shutdown::Both);
        eprintln!("{name}: stopping (DELETE /)");
        std::process::exit(0);
    }
}

/// Read one request: its head, then `Content-Length` bytes of body. `None` if the
/// connection ends first or the request is too large or malformed.
pub fn read_request(stream: &mut impl Read) -> Option<Request> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let content_length = content_length(req.headers)?;
                if content_length > MAX_REQUEST {
                    return None;
                }
                let method = req.method?.to_owned();
                let path = req.path?.to_owned();
                let mut body = buf[len..].to_vec();
                while body.len() < content_length {
                    let n = stream.read(&mut chunk).ok()?;
                    if n == 0 {
                        break;
                    }
                    body.extend_from_slice(&chunk[..n]);
                }
                body.truncate(content_length);
                return Some(Request { method, path, body });
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_REQUEST => {}
            _ => return None,
        }
    }
}

/// The `Content-Length` of a head (0 without one; `None` if it is not a number).
fn content_length(headers: &[httparse::Header<'_>]) -> Option<usize> {
    match headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
    {
        None => Some(0),
        Some(h) => std::str::from_utf8(h.value).ok()?.trim().parse().ok(),
    }
}

/// The answer to a [`post`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The body (read to the end of the connection, or `Content-Length` bytes).
    pub body: Vec<u8>,
}

/// POST `body` to `url` (`http://host[:port]/path`, no TLS) with a plain std socket and
/// read the whole answer. `content_type` names the body's type.
pub fn post(url: &str, content_type: &str, body: &[u8], timeout: Duration) -> io::Result<Reply> {
    let bad = || io::Error::new(io::ErrorKind::InvalidInput, "not an http:// URL");
    let rest = url.strip_prefix("http://").ok_or_else(bad)?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    read_reply(&mut stream)
}

/// Read a response: its head, then its body (`Content-Length`, chunked is not used by
/// the harness, else to the end of the connection).
fn read_reply(stream: &mut impl Read) -> io::Result<Reply> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(invalid("the connection closed before the response head"));
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let status = resp.code.ok_or_else(|| invalid("no status"))?;
                let length = resp
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                    .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok());
                let mut body = buf[len..].to_vec();
                loop {
                    if length.is_some_and(|l: usize| body.len() >= l) || body.len() > MAX_REQUEST {
                        break;
                    }
                    let n = stream.read(&mut chunk)?;
                    if n == 0 {
                        break;
                    }
                    body.extend_from_slice(&chunk[..n]);
                }
                if let Some(l) = length {
                    body.truncate(l);
                }
                return Ok(Reply { status, body });
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_REQUEST => {}
            _ => return Err(invalid("a malformed response head")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_read_with_its_body() {
        let raw = b"POST /clients HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcdEXTRA";
        let req = read_request(&mut &raw[..]).expect("a request");
        assert_eq!(req.method, "POST");
        assert_eq!(req.path, "/clients");
        assert_eq!(req.body, b"abcd");
    }

    #[test]
    fn a_bad_content_length_is_no_request() {
        let raw = b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n";
        assert_eq!(read_request(&mut &raw[..]), None);
        let huge = format!(
            "POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            MAX_REQUEST + 1
        );
        assert_eq!(read_request(&mut huge.as_bytes()), None);
    }

    #[test]
    fn a_reply_is_read_by_length_or_to_the_end() {
        let raw = b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nokMORE";
        let reply = read_reply(&mut &raw[..]).expect("a reply");
        assert_eq!((reply.status, reply.body.as_slice()), (201, &b"ok"[..]));
        let raw = b"HTTP/1.1 500 X\r\n\r\nto the end";
        let reply = read_reply(&mut &raw[..]).expect("a reply");
        assert_eq!(
            (reply.status, reply.body.as_slice()),
            (500, &b"to the end"[..])
        );
    }

    #[test]
    fn post_reaches_a_local_server() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            let req = read_request(&mut s).expect("request");
            let body = format!("got {}", String::from_utf8_lossy(&req.body));
            let out = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            s.write_all(out.as_bytes()).expect("write");
            req.path
        });
        let url = format!("http://127.0.0.1:{port}/old/path");
        let reply = post(&url, "text/plain", b"hi", Duration::from_secs(5)).expect("post");
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body, b"got hi");
        assert_eq!(server.join().expect("join"), "/old/path");
    }
}
