//! Raw TCP clients of `flagsync serve` for the network tests: thousands of idle
//! connections, slow senders of a request head driven from one thread over
//! non-blocking sockets, plain polls, and a look at the server process (its threads,
//! its descriptor limit).

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

/// How long a read of a whole response may take before the test calls it hung.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Raises this process's soft descriptor limit to its hard limit and fails, saying
/// why, when that is below `needed`. Returns the hard limit.
pub fn raise_fd_limit(needed: u64) -> u64 {
    let (before, after) = flagsync_server::raise_fd_limit()
        .unwrap_or_else(|e| panic!("cannot raise the test's descriptor limit: {e}"));
    let hard = after.hard.unwrap_or(u64::MAX);
    let soft = after.soft.unwrap_or(u64::MAX);
    assert!(
        soft >= needed,
        "this test opens {needed} sockets at once but the descriptor limit is {soft} \
         (hard limit {hard}, soft limit before {:?}): raise the hard limit \
         (`ulimit -Hn`, systemd LimitNOFILE, docker --ulimit nofile=…) to run it",
        before.soft
    );
    hard
}

/// A program the tests run: fails with how to install it when it is missing.
pub fn require_tool(program: &str, package: &str) {
    let found = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "`{program}` is missing (or `{program} --version` fails): install the \
         `{package}` package (.ci/test does)"
    );
}

/// The number of threads of process `pid` (`Threads:` in `/proc/PID/status`).
pub fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Threads: line in /proc/{pid}/status"))
}

/// The soft and hard "Max open files" of process `pid` (`/proc/PID/limits`).
pub fn open_files_limit(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/limits: {e}"));
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap_or_else(|| panic!("no Max open files in {limits}"));
    let mut words = line["Max open files".len()..].split_whitespace();
    let soft = words.next().unwrap_or_default().to_owned();
    let hard = words.next().unwrap_or_default().to_owned();
    (soft, hard)
}

/// A response read off a connection.
#[derive(Debug)]
pub struct Response {
    /// The status code (0: none could be parsed).
    pub status: u16,
    /// The head, status line included.
    pub head: String,
    /// The body (empty for a stream, whose head alone is read).
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A request to send: `GET`/`POST` of `path` with SDK key `key`.
pub fn request(method: &str, path: &str, key: &str, body: &str, close: bool) -> String {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: flagsync\r\nAuthorization: {key}\r\n");
    if !body.is_empty() {
        r.push_str("Content-Type: application/json\r\n");
        r.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    if close {
        r.push_str("Connection: close\r\n");
    }
    r.push_str("\r\n");
    r.push_str(body);
    r
}

/// Reads one response off `s` (blocking, at most [`RESPONSE_TIMEOUT`]): the head,
/// then the `Content-Length` bytes of body unless `head_only`.
pub fn read_response(s: &mut TcpStream, head_only: bool) -> std::io::Result<Response> {
    s.set_read_timeout(Some(RESPONSE_TIMEOUT))?;
    let mut got = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let end = loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        got.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&got[..end]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut body = got[end..].to_vec();
    if !head_only {
        let length = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())?
            })
            .unwrap_or(0);
        while body.len() < length {
            let n = s.read(&mut buf)?;
            if n == 0 {
                return Err(ErrorKind::UnexpectedEof.into());
            }
            body.extend_from_slice(&buf[..n]);
        }
    }
    Ok(Response { status, head, body })
}

/// `method path` with `key` on a fresh connection to `addr` (closed after): the
/// response and how long connecting, asking and reading it all took.
pub fn fresh(addr: &str, method: &str, path: &str, key: &str, body: &str) -> (Response, Duration) {
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    s.write_all(request(method, path, key, body, true).as_bytes())
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let r = read_response(&mut s, false).unwrap_or_else(|e| {
        panic!(
            "{method} {path}: no response after {:?}: {e}",
            start.elapsed()
        )
    });
    (r, start.elapsed())
}

/// `GET /sdk/latest-all` with `key` on a fresh connection.
pub fn poll(addr: &str, key: &str) -> (Response, Duration) {
    fresh(addr, "GET", "/sdk/latest-all", key, "")
}

/// Polls `addr` until it answers 200 (a relay answers once its upstream data came).
pub fn wait_until_served(addr: &str, key: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let (r, _) = poll(addr, key);
        if r.status == 200 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{addr} still answers {} after {timeout:?}: {}{}",
            r.status,
            r.head,
            r.text()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `n` connections to `addr` that send nothing, opened from `threads` threads; each
/// with the time its connect returned, or the error connecting (after up to 5 s).
pub fn connect_many(
    addr: &str,
    n: usize,
    threads: usize,
) -> Vec<std::io::Result<(TcpStream, Instant)>> {
    let sock: std::net::SocketAddr = addr.parse().expect("an IP address and port");
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let count = n / threads + usize::from(t < n % threads);
                scope.spawn(move || {
                    (0..count)
                        .map(|_| {
                            TcpStream::connect_timeout(&sock, RESPONSE_TIMEOUT)
                                .map(|s| (s, Instant::now()))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a connecting thread"))
            .collect()
    })
}

/// What a connection that sends nothing looks like from this end now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Open, nothing to read.
    Open,
    /// Bytes arrived (a response).
    Data(Vec<u8>),
    /// Closed by the server without a word.
    Closed,
    /// Reset, or another error reading.
    Error(ErrorKind),
}

/// A non-blocking look at `s` (switched to non-blocking).
pub fn look(mut s: &TcpStream) -> Seen {
    s.set_nonblocking(true).expect("non-blocking");
    let mut buf = [0u8; 4096];
    match s.read(&mut buf) {
        Ok(0) => Seen::Closed,
        Ok(n) => Seen::Data(buf[..n].to_vec()),
        Err(e) if e.kind() == ErrorKind::WouldBlock => Seen::Open,
        Err(e) => Seen::Error(e.kind()),
    }
}

/// Slow senders of a request head: each sends `GET /sdk/latest-all HTTP/1.1\r\n`,
/// then one byte of a header line a second, all from the thread that steps them.
pub struct Trickle {
    conns: Vec<Slow>,
}

struct Slow {
    s: TcpStream,
    /// When the request line went out.
    first: Instant,
    next_byte: Instant,
    sent: usize,
    got: Vec<u8>,
    /// When the server answered or closed.
    ended: Option<Instant>,
    closed: bool,
}

/// How the slow senders ended.
#[derive(Debug)]
pub struct TrickleReport {
    /// Senders.
    pub senders: usize,
    /// Answered `408`.
    pub answered_408: usize,
    /// Answered something else (the first line of each kind).
    pub answered_other: Vec<String>,
    /// Closed without an answer.
    pub closed_silently: usize,
    /// Never ended.
    pub still_open: usize,
    /// The earliest and latest end, after the sender's first byte.
    pub fastest: Duration,
    pub slowest: Duration,
    /// The earliest end of all.
    pub first_end: Option<Instant>,
    /// Header bytes sent after the request line, at most by one sender.
    pub most_bytes_trickled: usize,
}

const HEADER: &[u8] = b"X-Trickle: one-byte-a-second-until-the-server-gives-up\r\n";

impl Trickle {
    /// `n` slow senders to `addr`, connected and sending their request line now.
    pub fn start(addr: &str, n: usize) -> Self {
        let conns = (0..n)
            .map(|i| {
                let mut s = TcpStream::connect(addr)
                    .unwrap_or_else(|e| panic!("slow sender {i} of {n}: connect: {e}"));
                s.write_all(b"GET /sdk/latest-all HTTP/1.1\r\n")
                    .unwrap_or_else(|e| panic!("slow sender {i} of {n}: write: {e}"));
                let first = Instant::now();
                s.set_nonblocking(true).expect("non-blocking");
                Slow {
                    s,
                    first,
                    next_byte: first + Duration::from_secs(1),
                    sent: 0,
                    got: Vec::new(),
                    ended: None,
                    closed: false,
                }
            })
            .collect();
        Self { conns }
    }

    /// Steps every sender (read what came, send a byte where one is due) every 10 ms
    /// until each has ended or `until`.
    pub fn run(&mut self, until: Instant) {
        let mut buf = [0u8; 4096];
        while Instant::now() < until && self.conns.iter().any(|c| !c.closed) {
            for c in self.conns.iter_mut().filter(|c| !c.closed) {
                loop {
                    match c.s.read(&mut buf) {
                        Ok(0) => c.closed = true,
                        Ok(n) => {
                            c.got.extend_from_slice(&buf[..n]);
                            continue;
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                        Err(_) => c.closed = true,
                    }
                    break;
                }
                if (c.closed || !c.got.is_empty()) && c.ended.is_none() {
                    c.ended = Some(Instant::now());
                }
                let now = Instant::now();
                if !c.closed && c.got.is_empty() && now >= c.next_byte {
                    let byte = HEADER[c.sent % HEADER.len()];
                    match c.s.write(&[byte]) {
                        Ok(_) => c.sent += 1,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                        Err(_) => {} // closed: the next read says so
                    }
                    c.next_byte += Duration::from_secs(1);
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// How they ended.
    pub fn report(&self) -> TrickleReport {
        let mut r = TrickleReport {
            senders: self.conns.len(),
            answered_408: 0,
            answered_other: Vec::new(),
            closed_silently: 0,
            still_open: 0,
            fastest: Duration::MAX,
            slowest: Duration::ZERO,
            first_end: None,
            most_bytes_trickled: 0,
        };
        for c in &self.conns {
            r.most_bytes_trickled = r.most_bytes_trickled.max(c.sent);
            let Some(ended) = c.ended else {
                r.still_open += 1;
                continue;
            };
            let took = ended - c.first;
            r.fastest = r.fastest.min(took);
            r.slowest = r.slowest.max(took);
            r.first_end = Some(r.first_end.map_or(ended, |e| e.min(ended)));
            let text = String::from_utf8_lossy(&c.got);
            let line = text.lines().next().unwrap_or_default();
            if line.starts_with("HTTP/1.1 408 ") {
                r.answered_408 += 1;
            } else if c.got.is_empty() {
                r.closed_silently += 1;
            } else if !r.answered_other.iter().any(|l| l == line) {
                r.answered_other.push(line.to_owned());
            }
        }
        r
    }
}
