//! The client-side and mobile endpoints' test pieces: sample data, base64, raw
//! requests and an event-stream reader.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use flagsync_server::{Server, ServerHandle};
use serde_json::{Value, json};

use super::{Response, read_head, read_response};

pub const T: Duration = Duration::from_secs(5);
pub const SDK_KEY: &str = "sdk-key-1";
pub const ENV_ID: &str = "env-1";
pub const MOBILE_KEY: &str = "mob-key-1";

pub fn flag(key: &str, variations: Value, availability: Value, extra: Value) -> Value {
    let mut f = json!({
        "key": key, "version": 3, "on": true, "variations": variations,
        "fallthrough": {"variation": 0}, "offVariation": 0, "salt": "s",
        "targets": [], "rules": [], "prerequisites": []
    });
    for (k, v) in availability
        .as_object()
        .unwrap()
        .iter()
        .chain(extra.as_object().unwrap())
    {
        f[k] = v.clone();
    }
    f
}

/// `cs`: everyone's, a segment rule; `mobile-only`; `server-only`; `legacy`
/// (`clientSide: true`, no `clientSideAvailability`).
pub fn sample() -> Value {
    let both =
        json!({"clientSideAvailability": {"usingEnvironmentId": true, "usingMobileKey": true}});
    let rule = json!({"rules": [{"id": "r1", "variation": 1, "clauses": [
        {"attribute": "segmentMatch", "op": "segmentMatch", "values": ["seg"], "negate": false}]}]});
    json!({
        "flags": {
            "cs": flag("cs", json!([1, 2]), both, rule),
            "mobile-only": flag("mobile-only", json!(["a", "b"]),
                json!({"clientSideAvailability": {"usingEnvironmentId": false, "usingMobileKey": true}}),
                json!({"fallthrough": {"variation": 1}})),
            "server-only": flag("server-only", json!([true, false]),
                json!({"clientSideAvailability": {"usingEnvironmentId": false, "usingMobileKey": false}}),
                json!({})),
            "legacy": flag("legacy", json!([{"x": 1}, 2.5]), json!({"clientSide": true}),
                json!({"trackEvents": true})),
        },
        "segments": {
            "seg": {"key": "seg", "version": 1, "included": ["u-in"], "excluded": [], "rules": [], "salt": "s"}
        }
    })
}

pub fn start() -> ServerHandle {
    Server::builder()
        .sdk_key(Some(SDK_KEY.into()))
        .client_side_id(Some(ENV_ID.into()))
        .mobile_key(Some(MOBILE_KEY.into()))
        .data(sample())
        .start()
        .unwrap()
}

pub fn b64(bytes: &[u8], url: bool) -> String {
    let abc: &[u8] = if url {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    } else {
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    };
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let mut n = 0u32;
        for (i, b) in chunk.iter().enumerate() {
            n |= u32::from(*b) << (16 - 8 * i);
        }
        for i in 0..=chunk.len() {
            out.push(char::from(abc[(n >> (18 - 6 * i) & 63) as usize]));
        }
        if !url {
            out.push_str(&"=".repeat(3 - chunk.len()));
        }
    }
    out
}

pub fn ctx_path(context: &Value) -> String {
    b64(context.to_string().as_bytes(), true)
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    s
}

/// One request on a fresh connection.
pub fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    let mut s = connect(addr);
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: x\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    if !body.is_empty() {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    read_response(&mut BufReader::new(s))
}

pub fn get(addr: SocketAddr, target: &str) -> Response {
    request(addr, "GET", target, &[], b"")
}

pub fn json_of(r: &Response) -> Value {
    serde_json::from_slice(&r.body)
        .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&r.body)))
}

/// The flags and segments of `sample()`, as the engine reads them.
pub struct Stream {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    r: BufReader<Chunked>,
}

pub struct Chunked {
    r: BufReader<TcpStream>,
    left: usize,
}

impl Read for Chunked {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            let mut line = String::new();
            if self.r.read_line(&mut line)? == 0 {
                return Ok(0);
            }
            self.left = usize::from_str_radix(line.trim_end(), 16).unwrap_or(0);
            if self.left == 0 {
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left);
        let n = self.r.read(&mut buf[..want])?;
        self.left -= n;
        if self.left == 0 {
            let mut crlf = [0u8; 2];
            self.r.read_exact(&mut crlf)?;
        }
        Ok(n)
    }
}

pub fn open_stream(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Stream {
    let mut s = connect(addr);
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    if !body.is_empty() {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r);
    Stream {
        status,
        headers,
        r: BufReader::new(Chunked { r, left: 0 }),
    }
}

pub fn get_stream(addr: SocketAddr, target: &str) -> Stream {
    open_stream(addr, "GET", target, &[], b"")
}

impl Stream {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn next_event(&mut self) -> (String, Value) {
        let (mut name, mut data) = (String::new(), String::new());
        let mut line = String::new();
        loop {
            line.clear();
            assert!(self.r.read_line(&mut line).unwrap() > 0, "the stream ended");
            let l = line.trim_end_matches('\n');
            if let Some(v) = l.strip_prefix("event: ") {
                name = v.to_owned();
            } else if let Some(v) = l.strip_prefix("data: ") {
                data.push_str(v);
            } else if l.is_empty() && !data.is_empty() {
                return (name, serde_json::from_str(&data).unwrap());
            }
        }
    }
}
