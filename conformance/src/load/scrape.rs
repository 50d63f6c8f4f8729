//! `GET /metrics` of the server for `sse-load` (`--metrics-scrapes K`): one request on
//! a fresh connection, plain or TLS, blocking, timed from the start of the connect to
//! the last byte of the body. The load loop is not turned meanwhile (a few
//! milliseconds; the streams' bytes wait in their sockets).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::tls::{TlsClient, tls_error};

/// Longest response head accepted, in bytes.
const MAX_HEAD_LEN: usize = 16 * 1024;
/// Header fields parsed in a response head.
const MAX_HEADERS: usize = 32;

/// One scrape.
#[derive(Debug)]
pub struct Scrape {
    /// From the start of the connect to the last byte of the body.
    pub took: Duration,
    /// The body.
    pub body: String,
}

/// Where and how to scrape.
#[derive(Debug)]
pub struct Scraper {
    addr: SocketAddr,
    tls: Option<TlsClient>,
    request: Vec<u8>,
    timeout: Duration,
}

impl Scraper {
    /// Scrape `addr` (`host` for the Host header), with TLS if `tls` is given; each
    /// step of one scrape may take up to `timeout`.
    pub fn new(addr: SocketAddr, host: &str, tls: Option<TlsClient>, timeout: Duration) -> Self {
        let request = format!(
            "GET /metrics HTTP/1.1\r\nHost: {host}\r\nUser-Agent: sse-load\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
        );
        Self {
            addr,
            tls,
            request: request.into_bytes(),
            timeout,
        }
    }

    /// Scrape once.
    pub fn scrape(&self) -> Result<Scrape, String> {
        let began = Instant::now();
        let socket = TcpStream::connect_timeout(&self.addr, self.timeout)
            .map_err(|e| format!("connect: {e}"))?;
        socket
            .set_read_timeout(Some(self.timeout))
            .and_then(|()| socket.set_write_timeout(Some(self.timeout)))
            .and_then(|()| socket.set_nodelay(true))
            .map_err(|e| e.to_string())?;
        let body = match &self.tls {
            None => self.exchange(socket),
            Some(tls) => {
                let session = tls.session().map_err(|e| e.to_string())?;
                self.exchange(rustls::StreamOwned::new(session, socket))
            }
        }?;
        Ok(Scrape {
            took: began.elapsed(),
            body,
        })
    }

    /// Send the request on `stream` and read the answer until its body is complete.
    fn exchange(&self, mut stream: impl Read + Write) -> Result<String, String> {
        let fail =
            |e: io::Error| tls_error(&e).map_or_else(|| e.to_string(), |t| format!("tls: {t}"));
        stream.write_all(&self.request).map_err(fail)?;
        stream.flush().map_err(fail)?;
        let mut data = Vec::with_capacity(64 * 1024);
        let mut buf = vec![0; 64 * 1024];
        let mut body_at: Option<(usize, Option<usize>)> = None;
        loop {
            if let Some((at, Some(len))) = body_at
                && data.len() >= at + len
            {
                data.truncate(at + len);
                break;
            }
            let n = match stream.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The server closed without close_notify: the end of the body.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
                Err(e) => return Err(fail(e)),
            };
            if n == 0 {
                if matches!(body_at, Some((_, None))) {
                    break;
                }
                return Err("the server closed before the whole answer".to_owned());
            }
            data.extend_from_slice(&buf[..n]);
            if body_at.is_none() {
                body_at = head(&data)?;
            }
        }
        let at = body_at.map_or(0, |(at, _)| at);
        Ok(String::from_utf8_lossy(&data[at..]).into_owned())
    }
}

/// Where the body starts and its length (`Content-Length`, else until the close), once
/// `data` holds a whole `200` head.
fn head(data: &[u8]) -> Result<Option<(usize, Option<usize>)>, String> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let at = match response.parse(data) {
        Ok(httparse::Status::Complete(at)) => at,
        Ok(httparse::Status::Partial) if data.len() < MAX_HEAD_LEN => return Ok(None),
        Ok(httparse::Status::Partial) => return Err("response head too long".to_owned()),
        Err(e) => return Err(format!("malformed response head: {e}")),
    };
    match response.code {
        Some(200) => {}
        code => return Err(format!("status {}", code.unwrap_or(0))),
    }
    let len = response
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok());
    Ok(Some((at, len)))
}

/// The server's open request connections (not streams) in a `/metrics` body:
/// `flagsync_server_connections_open{kind="request"}`.
pub fn open_request_conns(body: &str) -> Option<u64> {
    body.lines().find_map(|line| {
        let (series, value) = line.split_once(' ')?;
        if series.ends_with("connections_open{kind=\"request\"}") {
            value.trim().parse().ok()
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_connections_are_read_from_the_exposition() {
        let body = "# TYPE flagsync_server_connections_open gauge\n\
            flagsync_server_connections_open{kind=\"request\"} 5001\n\
            flagsync_server_connections_open{kind=\"stream\"} 10000\n";
        assert_eq!(open_request_conns(body), Some(5001));
        assert_eq!(open_request_conns("x 1\n"), None);
    }

    #[test]
    fn a_head_gives_the_body_and_its_length() {
        let data = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
        assert_eq!(head(data), Ok(Some((38, Some(3)))));
        assert_eq!(head(b"HTTP/1.1 200 OK\r\n"), Ok(None));
        assert!(head(b"HTTP/1.1 503 Busy\r\n\r\n").is_err());
    }
}
