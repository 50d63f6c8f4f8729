//! One downstream stream of `sse-load`: a non-blocking socket (plain or TLS, a
//! [`Transport`]), the response head
//! (`httparse`), the chunked framing (the core's [`Chunked`]) and the events (the
//! core's SSE [`Parser`]), read as they arrive and discarded.
//!
//! Nothing of a payload is kept. A large `data` line (an FDv1 `put` of several MB) is
//! taken from the parser piece by piece with [`Parser::take_pending_data`] after every
//! read, so the parser never gathers it; every piece goes through a [`MarkerScan`], which
//! keeps only the last few bytes, to find the change marker that `sse-load` writes into
//! the data file.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::Instant;

use flagsync_core::http1::{self, ChunkProgress, Chunked};
use flagsync_core::sse::{self, ItemRef, Parser};
use memchr::memmem::Finder;

use crate::tls::{TlsClient, Transport, tls_error};

/// Longest response head accepted, in bytes.
const MAX_HEAD_LEN: usize = 16 * 1024;
/// Header fields parsed in a response head.
const MAX_HEADERS: usize = 32;
/// Most hex digits of one chunk size.
const MAX_CHUNK_DIGITS: usize = 16;
/// Most bytes of chunk extensions on one size line, and of the trailer section.
const MAX_CHUNK_META: usize = 4096;
/// Most digits of a change index after the marker prefix.
const MAX_DIGITS: usize = 9;

/// The prefix that marks a change in the data: `sse-load-<run id>-`, followed by the
/// change index (decimal) and the closing quote of the JSON string that holds it.
#[derive(Debug)]
pub struct Marker {
    prefix: String,
    finder: Finder<'static>,
}

impl Marker {
    /// The marker of one run: `prefix` must be unique to it (it holds a run id).
    pub fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
            finder: Finder::new(prefix.as_bytes()).into_owned(),
        }
    }

    /// The prefix followed by `index`: the string that change `index` writes.
    pub fn value(&self, index: u32) -> String {
        format!("{}{index}", self.prefix)
    }

    /// Bytes that can hold one whole marker with its closing quote.
    fn window(&self) -> usize {
        self.prefix.len() + MAX_DIGITS + 1
    }
}

/// A search for the highest change index marked in one event's data, fed in pieces of
/// any size; it keeps only the last `window - 1` bytes between pieces.
#[derive(Debug, Default)]
pub struct MarkerScan {
    tail: Vec<u8>,
    best: Option<u32>,
}

impl MarkerScan {
    /// Scan the next piece of the data.
    pub fn feed(&mut self, marker: &Marker, piece: &[u8]) {
        let keep = marker.window() - 1;
        if !self.tail.is_empty() {
            // A marker that starts in the tail ends within `window` bytes of it.
            let mut join = Vec::with_capacity(self.tail.len() + 2 * marker.window());
            join.extend_from_slice(&self.tail);
            join.extend_from_slice(&piece[..piece.len().min(2 * marker.window())]);
            for at in marker.finder.find_iter(&join) {
                if at >= self.tail.len() {
                    break;
                }
                self.found(marker, &join, at);
            }
        }
        for at in marker.finder.find_iter(piece) {
            self.found(marker, piece, at);
        }
        if piece.len() >= keep {
            self.tail.clear();
            self.tail.extend_from_slice(&piece[piece.len() - keep..]);
        } else {
            self.tail.extend_from_slice(piece);
            let excess = self.tail.len().saturating_sub(keep);
            self.tail.drain(..excess);
        }
    }

    /// The highest index marked in the data fed since the last call; starts a new event.
    pub fn finish(&mut self) -> Option<u32> {
        self.tail.clear();
        self.best.take()
    }

    /// Record the marker at `at` in `hay` if its digits and closing quote are all there
    /// (an incomplete one is still in the tail and found with the next piece).
    fn found(&mut self, marker: &Marker, hay: &[u8], at: usize) {
        let digits = &hay[at + marker.prefix.len()..];
        let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
        if n == 0 || n > MAX_DIGITS || digits.get(n) != Some(&b'"') {
            return;
        }
        let index = digits[..n]
            .iter()
            .fold(0u32, |v, d| v * 10 + u32::from(d - b'0'));
        self.best = Some(self.best.map_or(index, |b| b.max(index)));
    }
}

/// Why a stream failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The TCP connection could not be made.
    Connect(io::ErrorKind),
    /// Reading or writing failed.
    Io(io::ErrorKind, Stage),
    /// The response status was not 200.
    Status(u16),
    /// The response head was malformed or too long.
    BadHead,
    /// The chunked framing was broken.
    Http(http1::Error),
    /// The TLS handshake or a record failed.
    Tls(String),
    /// An SSE limit was exceeded.
    Sse(sse::Error),
    /// The server ended the stream (end of the body or of the connection).
    Closed(Stage),
    /// No initial payload within the initial timeout.
    Timeout,
}

impl Failure {
    /// A short label to count failures by.
    pub fn label(&self) -> String {
        match self {
            Self::Connect(kind) => format!("connect: {kind}"),
            Self::Io(kind, stage) => format!("io {}: {kind}", stage.label()),
            Self::Status(status) => format!("status {status}"),
            Self::BadHead => "malformed response head".to_owned(),
            Self::Http(e) => format!("http: {e}"),
            Self::Tls(e) => format!("tls: {e}"),
            Self::Sse(e) => format!("sse: {e}"),
            Self::Closed(stage) => format!("closed by the server {}", stage.label()),
            Self::Timeout => "no initial payload in time".to_owned(),
        }
    }

    /// A failed read or write at `stage`: TLS failures by their message.
    fn io(e: &io::Error, stage: Stage) -> Self {
        tls_error(e).map_or(Self::Io(e.kind(), stage), Self::Tls)
    }
}

/// Where in the exchange a stream failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Sending the request.
    Request,
    /// Waiting for the response head (the server had not answered yet).
    Head,
    /// Reading the event stream.
    Stream,
}

impl Stage {
    fn label(self) -> &'static str {
        match self {
            Self::Request => "sending the request",
            Self::Head => "before the response head",
            Self::Stream => "while streaming",
        }
    }
}

/// What a stream reports to the load loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Happening {
    /// The first full payload arrived (FDv1 `put`, FDv2 `payload-transferred`).
    Initialized,
    /// An applied event carried the data of change `index` (or of a later state).
    Reached(u32),
    /// A heartbeat: an SSE comment (FDv1) or a `heart-beat` event (FDv2).
    Heartbeat,
    /// The stream failed and is closed.
    Failed(Failure),
}

/// Where a stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for the TCP connection.
    Connecting,
    /// Connected; `written` bytes of the request sent.
    Writing { written: usize },
    /// Reading the response head.
    Head,
    /// Reading the event stream.
    Body,
    /// Failed; the socket is to be dropped.
    Done,
}

/// How the body is framed.
#[derive(Debug)]
enum Framing {
    /// `Transfer-Encoding: chunked`.
    Chunked(Chunked),
    /// Until the connection closes.
    Close,
}

/// The event types `sse-load` acts on (FDv1 and FDv2 names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EventName {
    /// FDv1 `put`.
    Put,
    /// FDv1 `patch`.
    Patch,
    /// FDv2 `server-intent`.
    ServerIntent,
    /// FDv2 `put-object`.
    PutObject,
    /// FDv2 `payload-transferred`.
    PayloadTransferred,
    /// FDv2 `heart-beat`.
    HeartBeat,
    /// FDv2 `error`.
    Error,
    /// Anything else (`delete`, `delete-object`, `goodbye`, …).
    Other,
}

impl EventName {
    fn of(name: &str) -> Self {
        match name {
            "put" => Self::Put,
            "patch" => Self::Patch,
            "server-intent" => Self::ServerIntent,
            "put-object" => Self::PutObject,
            "payload-transferred" => Self::PayloadTransferred,
            "heart-beat" => Self::HeartBeat,
            "error" => Self::Error,
            _ => Self::Other,
        }
    }
}

/// The events of one stream: parsed, scanned for markers and dropped.
#[derive(Debug)]
struct Events {
    parser: Parser,
    scan: MarkerScan,
    fdv2: bool,
    /// FDv2: the highest marker in the objects since the last `server-intent`.
    pending: Option<u32>,
    initialized: bool,
}

impl Events {
    /// Parse `bytes` of the event stream; an SSE limit exceeded fails the stream.
    fn handle_bytes(
        &mut self,
        marker: &Marker,
        bytes: &[u8],
        out: &mut Vec<Happening>,
    ) -> Result<(), Failure> {
        self.parser.handle_bytes(bytes);
        while let Some(item) = self.parser.poll_ref() {
            match item {
                Ok(ItemRef::Event(event)) => {
                    self.scan.feed(marker, event.data());
                    let found = self.scan.finish();
                    let name = EventName::of(event.event_type());
                    self.handle_event(name, found, out);
                }
                Ok(ItemRef::Comment(_)) => out.push(Happening::Heartbeat),
                Ok(_) => {}
                Err(e) => return Err(Failure::Sse(e)),
            }
        }
        // The first data line of the next event, while it arrives (a `put` of MBs).
        if let Some(piece) = self.parser.take_pending_data() {
            self.scan.feed(marker, &piece);
        }
        Ok(())
    }

    /// Handle one complete event whose data carried marker `found`.
    fn handle_event(&mut self, name: EventName, found: Option<u32>, out: &mut Vec<Happening>) {
        let reached = match (self.fdv2, name) {
            (false, EventName::Put) => {
                self.initialize(out);
                found
            }
            (false, EventName::Patch) => found,
            (true, EventName::PutObject) => {
                self.pending = self.pending.max(found);
                None
            }
            (true, EventName::ServerIntent | EventName::Error) => {
                // A new payload begins, or the partial one is dropped.
                self.pending = None;
                None
            }
            (true, EventName::PayloadTransferred) => {
                self.initialize(out);
                self.pending.take()
            }
            (true, EventName::HeartBeat) => {
                out.push(Happening::Heartbeat);
                None
            }
            _ => None,
        };
        if let Some(index) = reached {
            out.push(Happening::Reached(index));
        }
    }

    fn initialize(&mut self, out: &mut Vec<Happening>) {
        if !self.initialized {
            self.initialized = true;
            out.push(Happening::Initialized);
        }
    }
}

/// One stream: its socket and where it is in the response.
#[derive(Debug)]
pub struct Conn {
    /// The connection; its socket is registered with the load loop's poll.
    pub stream: Transport,
    /// When the connection was started.
    pub started: Instant,
    /// The highest change index this stream has reached.
    pub reached: u32,
    phase: Phase,
    head: Vec<u8>,
    framing: Framing,
    events: Events,
}

impl Conn {
    /// Start connecting to `addr`, with TLS if `tls` is given; `fdv2` picks how events
    /// are read.
    pub fn connect(
        now: Instant,
        addr: SocketAddr,
        tls: Option<&TlsClient>,
        fdv2: bool,
    ) -> io::Result<Self> {
        Ok(Self {
            stream: Transport::connect(addr, tls)?,
            started: now,
            reached: 0,
            phase: Phase::Connecting,
            head: Vec::new(),
            framing: Framing::Close,
            events: Events {
                parser: Parser::new(sse::Config::default()),
                scan: MarkerScan::default(),
                fdv2,
                pending: None,
                initialized: false,
            },
        })
    }

    /// True until the request has been sent (the connect is in flight).
    pub fn is_connecting(&self) -> bool {
        matches!(self.phase, Phase::Connecting | Phase::Writing { .. })
    }

    /// True once the first full payload arrived.
    pub fn is_initialized(&self) -> bool {
        self.events.initialized
    }

    /// The socket is writable: finish connecting and send `request`; later, send what
    /// TLS still has queued.
    pub fn handle_writable(&mut self, request: &[u8], out: &mut Vec<Happening>) {
        if self.phase == Phase::Connecting {
            let socket = self.stream.socket();
            match (socket.take_error(), socket.peer_addr()) {
                (Ok(Some(e)) | Err(e), _) => return self.fail(Failure::Connect(e.kind()), out),
                (Ok(None), Err(e)) if e.kind() == io::ErrorKind::NotConnected => return,
                (Ok(None), Err(e)) => return self.fail(Failure::Connect(e.kind()), out),
                (Ok(None), Ok(_)) => self.phase = Phase::Writing { written: 0 },
            }
        }
        while let Phase::Writing { written } = self.phase {
            match self.stream.write(&request[written..]) {
                Ok(n) if written + n == request.len() => self.phase = Phase::Head,
                Ok(0) => {
                    let failure = Failure::Io(io::ErrorKind::WriteZero, Stage::Request);
                    return self.fail(failure, out);
                }
                Ok(n) => {
                    self.phase = Phase::Writing {
                        written: written + n,
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(Failure::io(&e, Stage::Request), out),
            }
        }
        if matches!(self.phase, Phase::Head | Phase::Body)
            && let Err(e) = self.stream.flush()
        {
            self.fail(Failure::io(&e, self.stage()), out);
        }
    }

    /// The socket is readable: read until it would block, using `buf` for each read.
    pub fn handle_readable(&mut self, buf: &mut [u8], marker: &Marker, out: &mut Vec<Happening>) {
        if self.phase == Phase::Connecting {
            // A refused connect is reported as readable too.
            if let Ok(Some(e)) | Err(e) = self.stream.socket().take_error() {
                self.fail(Failure::Connect(e.kind()), out);
            }
            return;
        }
        while matches!(self.phase, Phase::Head | Phase::Body) {
            match self.stream.read(buf) {
                Ok(0) => self.fail(Failure::Closed(self.stage()), out),
                Ok(n) => self.handle_bytes(&buf[..n], marker, out),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => self.fail(Failure::io(&e, self.stage()), out),
            }
        }
    }

    /// Where the exchange is, for a failure of reading.
    fn stage(&self) -> Stage {
        match self.phase {
            Phase::Connecting | Phase::Writing { .. } => Stage::Request,
            Phase::Head => Stage::Head,
            Phase::Body | Phase::Done => Stage::Stream,
        }
    }

    /// Mark the stream failed (and report it once).
    pub fn fail(&mut self, failure: Failure, out: &mut Vec<Happening>) {
        if self.phase != Phase::Done {
            self.phase = Phase::Done;
            out.push(Happening::Failed(failure));
        }
    }

    /// Handle one read.
    fn handle_bytes(&mut self, bytes: &[u8], marker: &Marker, out: &mut Vec<Happening>) {
        let body = if self.phase == Phase::Head {
            match self.handle_head(bytes) {
                Ok(Some(used)) => &bytes[used..],
                Ok(None) => return,
                Err(failure) => return self.fail(failure, out),
            }
        } else {
            bytes
        };
        let result = match &mut self.framing {
            Framing::Close => self.events.handle_bytes(marker, body, out),
            Framing::Chunked(chunked) => dechunk(chunked, body, |data| {
                self.events.handle_bytes(marker, data, out)
            }),
        };
        if let Err(failure) = result {
            self.fail(failure, out);
        }
    }

    /// Add `bytes` to the head; once it is complete, check it and return how many of
    /// `bytes` it used.
    fn handle_head(&mut self, bytes: &[u8]) -> Result<Option<usize>, Failure> {
        let before = self.head.len();
        let take = bytes.len().min(MAX_HEAD_LEN - before);
        self.head.extend_from_slice(&bytes[..take]);
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let len = match response.parse(&self.head) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if self.head.len() < MAX_HEAD_LEN => return Ok(None),
            Ok(httparse::Status::Partial) | Err(_) => return Err(Failure::BadHead),
        };
        let status = response.code.unwrap_or(0);
        if status != 200 {
            return Err(Failure::Status(status));
        }
        let chunked = response.headers.iter().any(|h| {
            h.name.eq_ignore_ascii_case("transfer-encoding")
                && String::from_utf8_lossy(h.value)
                    .to_ascii_lowercase()
                    .contains("chunked")
        });
        if chunked {
            self.framing = Framing::Chunked(Chunked::new(MAX_CHUNK_DIGITS, MAX_CHUNK_META, None));
        }
        self.head = Vec::new();
        self.phase = Phase::Body;
        Ok(Some(len - before))
    }
}

/// Pass the chunk data in `input` to `data`; the end of the body is
/// [`Failure::Closed`].
fn dechunk(
    chunked: &mut Chunked,
    mut input: &[u8],
    mut data: impl FnMut(&[u8]) -> Result<(), Failure>,
) -> Result<(), Failure> {
    while !input.is_empty() {
        match chunked.parse(input).map_err(Failure::Http)? {
            (used, ChunkProgress::Data(n)) => {
                input = &input[used..];
                let take = input.len().min(usize::try_from(n).unwrap_or(usize::MAX));
                data(&input[..take])?;
                chunked.data_consumed(take as u64);
                input = &input[take..];
            }
            (_, ChunkProgress::Done) => return Err(Failure::Closed(Stage::Stream)),
            _ => break,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_split(marker: &Marker, text: &[u8], cuts: &[usize]) -> Option<u32> {
        let mut scan = MarkerScan::default();
        let mut from = 0;
        for &cut in cuts.iter().chain([text.len()].iter()) {
            scan.feed(marker, &text[from..cut]);
            from = cut;
        }
        scan.finish()
    }

    #[test]
    fn a_marker_is_found_however_the_data_is_split() {
        let marker = Marker::new("sse-load-00ff-");
        let text = br#"{"flags":{"a":{"salt":"sse-load-00ff-7"},"load-flag":{"salt":"sse-load-00ff-42","x":1}}}"#;
        for i in 0..=text.len() {
            assert_eq!(scan_split(&marker, text, &[i]), Some(42), "cut at {i}");
            for j in i..=text.len() {
                assert_eq!(scan_split(&marker, text, &[i, j]), Some(42), "cuts {i} {j}");
            }
        }
        let bytes: Vec<usize> = (1..text.len()).collect();
        assert_eq!(scan_split(&marker, text, &bytes), Some(42));
    }

    #[test]
    fn other_runs_and_unterminated_markers_are_not_changes() {
        let marker = Marker::new("sse-load-00ff-");
        for text in [
            &br#"{"salt":"sse-load-00fe-3"}"#[..],
            br#"{"salt":"sse-load-00ff-"}"#,
            br#"{"salt":"sse-load-00ff-3x"}"#,
            br#"{"salt":"sse-load-00ff-1234567890"}"#,
            b"sse-load-00ff-3",
        ] {
            for i in 0..=text.len() {
                assert_eq!(scan_split(&marker, text, &[i]), None, "{text:?} cut at {i}");
            }
        }
    }

    #[test]
    fn each_event_starts_a_new_scan() {
        let marker = Marker::new("m-");
        let mut scan = MarkerScan::default();
        scan.feed(&marker, b"\"m-5\"");
        assert_eq!(scan.finish(), Some(5));
        scan.feed(&marker, b"\"m-");
        assert_eq!(scan.finish(), None);
        scan.feed(&marker, b"6\"");
        assert_eq!(scan.finish(), None);
    }

    fn events(fdv2: bool, stream: &[u8], split: usize) -> Vec<Happening> {
        let marker = Marker::new("sse-load-1-");
        let mut events = Events {
            parser: Parser::new(sse::Config::default()),
            scan: MarkerScan::default(),
            fdv2,
            pending: None,
            initialized: false,
        };
        let mut out = Vec::new();
        for piece in stream.chunks(split) {
            events.handle_bytes(&marker, piece, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn fdv1_put_initializes_and_patches_reach_changes() {
        let stream = b"event: put\ndata: {\"data\":{\"flags\":{\"load-flag\":{\"salt\":\"x\"}}}}\n\n:\n\
            event: patch\ndata: {\"path\":\"/flags/load-flag\",\"data\":{\"salt\":\"sse-load-1-1\"}}\n\n\
            event: put\ndata: {\"data\":{\"flags\":{\"load-flag\":{\"salt\":\"sse-load-1-2\"}}}}\n\n";
        for split in [1, 3, 7, 64, stream.len()] {
            assert_eq!(
                events(false, stream, split),
                [
                    Happening::Initialized,
                    Happening::Heartbeat,
                    Happening::Reached(1),
                    Happening::Reached(2)
                ],
                "split {split}"
            );
        }
    }

    #[test]
    fn fdv2_changes_count_at_payload_transferred() {
        let stream = b"event: server-intent\ndata: {}\n\nevent: put-object\ndata: {\"object\":{}}\n\n\
            event: payload-transferred\ndata: {}\n\nevent: heart-beat\ndata: {}\n\n\
            event: server-intent\ndata: {}\n\nevent: put-object\ndata: {\"salt\":\"sse-load-1-3\"}\n\n\
            event: error\ndata: {}\n\nevent: payload-transferred\ndata: {}\n\n\
            event: put-object\ndata: {\"salt\":\"sse-load-1-4\"}\n\n\
            event: payload-transferred\ndata: {}\n\n";
        for split in [1, 5, 64, stream.len()] {
            assert_eq!(
                events(true, stream, split),
                [
                    Happening::Initialized,
                    Happening::Heartbeat,
                    Happening::Reached(4)
                ],
                "split {split}"
            );
        }
    }
}
