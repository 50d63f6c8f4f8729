//! The stream hub: one thread holding every open stream on non-blocking sockets (a
//! `mio` event loop), writing each change to all of them from one shared encoding.
//!
//! A stream costs a small record here (its socket, its environment and protocol, a
//! queue of pieces to write), not a thread: the first payload and every change are
//! encoded once per data version ([`Frame`]) and queued to each stream as a shared
//! reference, so 10,000 streams hold one copy of a 5 MB payload, not 10,000. A stream
//! whose client does not read is dropped when its queue holds more than
//! [`MAX_QUEUED_PIECES`] pieces or makes no progress for [`WRITE_TIMEOUT`]; the client
//! reconnects and gets the current data. Heartbeats go to every idle stream at once,
//! every heartbeat interval.
//!
//! Client-side and mobile streams hold their context: each change comes as the data
//! for the engine and the flags it changed ([`Evaluation`]), and the hub evaluates
//! those flags for each such stream of the environment, off the server's lock (see
//! `client_side`). Their events are their own, so such a stream is also dropped once
//! [`MAX_EVALUATED_QUEUED_BYTES`] of them wait.
//!
//! Commands reach the hub through a channel and a `mio` waker, in the order they are
//! sent: a stream is added (under the server's lock, right after its first payload is
//! rendered) before any change that follows it, so no change falls between.

use std::collections::{HashMap, VecDeque};
use std::io::{self, IoSlice, Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token, Waker};

use crate::client_side::eval::{EvalStart, EvalStream, Evaluation, change_events};
use crate::http::{LAST_CHUNK, WRITE_TIMEOUT};
use crate::metrics::{Metrics, StreamKind};
use crate::transport::Transport;

/// The most commands waiting for the hub: past it, whoever changes the data waits for
/// the hub to catch up (backpressure), so the queue never grows without bound. The
/// hub never takes the server's lock, so the wait always ends.
const MAX_COMMANDS: usize = 1024;

/// The most pieces (a few per event) a stream may have queued.
pub(crate) const MAX_QUEUED_PIECES: usize = 3 * 4096;

/// The most bytes a client-side or mobile stream may have queued when a change comes:
/// its events are evaluated for it alone, not shared, so a client that stops reading
/// is dropped (it reconnects and gets a new `put`) before it holds more.
pub(crate) const MAX_EVALUATED_QUEUED_BYTES: usize = 16 << 20;

const WAKER: Token = Token(0);

/// The most pieces written by one system call.
const MAX_IOVECS: usize = 64;

/// An event stream's text (one or more SSE events), encoded once and shared by every
/// stream it goes to: its pieces (a large payload's body is shared with the data it
/// renders, not copied), and the chunk-size line that frames them as one chunk.
#[derive(Debug, Clone)]
pub(crate) struct Frame {
    size_line: Arc<[u8]>,
    pieces: Arc<[Arc<[u8]>]>,
}

impl Frame {
    pub(crate) fn new(text: impl Into<Arc<[u8]>>) -> Self {
        Self::from_pieces(vec![text.into()])
    }

    /// The concatenation of `pieces`, without copying them.
    pub(crate) fn from_pieces(pieces: Vec<Arc<[u8]>>) -> Self {
        let len: usize = pieces.iter().map(|p| p.len()).sum();
        Self {
            size_line: format!("{len:x}\r\n").into_bytes().into(),
            pieces: pieces.into_iter().filter(|p| !p.is_empty()).collect(),
        }
    }

    fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// The text, in one piece (tests).
    #[cfg(test)]
    pub(crate) fn concat(&self) -> Vec<u8> {
        self.pieces.iter().flat_map(|p| p.iter().copied()).collect()
    }
}

/// What a new stream is sent first.
#[derive(Debug)]
pub(crate) struct NewStream {
    pub(crate) socket: Transport,
    pub(crate) env: usize,
    /// What the stream carries: its frames (FDv2 or the rest) and its metrics label.
    pub(crate) kind: StreamKind,
    /// Framed with the chunked transfer coding (HTTP/1.1) or bare (HTTP/1.0).
    pub(crate) chunked: bool,
    /// The response head.
    pub(crate) head: Vec<u8>,
    /// The first payload, if there is one yet.
    pub(crate) first: Option<Frame>,
    /// Close once `first` is written (an FDv2 `goodbye`).
    pub(crate) close_after: bool,
    /// A client-side or mobile stream: its context, and the data of its first `put`
    /// (evaluated here, off the server's lock; `first` is then `None`).
    pub(crate) evaluated: Option<Box<EvalStart>>,
}

enum Command {
    Add(Box<NewStream>),
    Broadcast {
        env: usize,
        fdv1: Frame,
        fdv2: Frame,
    },
    /// A change, for the evaluating streams of its environment.
    Evaluate(Box<Evaluation>),
    CloseAll {
        done: Sender<()>,
    },
    Shutdown,
}

/// The server's handle on its hub thread.
#[derive(Debug)]
pub(crate) struct Hub {
    tx: SyncSender<Command>,
    waker: Arc<Waker>,
    open: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
    thread: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// An evaluating stream was ever opened: changes are then evaluated for them.
    evaluating: AtomicBool,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Add(_) => "Add",
            Self::Broadcast { .. } => "Broadcast",
            Self::Evaluate(_) => "Evaluate",
            Self::CloseAll { .. } => "CloseAll",
            Self::Shutdown => "Shutdown",
        })
    }
}

impl Hub {
    /// Start the hub thread; `heartbeats[fdv2 as usize]` is each protocol's heartbeat.
    /// A stream is ended after `lifetime` (each its own, between three quarters of it
    /// and all of it), if given.
    pub(crate) fn start(
        heartbeat: Duration,
        heartbeats: [Frame; 2],
        lifetime: Option<Duration>,
        metrics: Arc<Metrics>,
    ) -> io::Result<Self> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (tx, rx) = mpsc::sync_channel(MAX_COMMANDS);
        let open = Arc::new(AtomicUsize::new(0));
        let mut state = Loop {
            poll,
            rx,
            conns: HashMap::new(),
            next_token: 1,
            open: open.clone(),
            heartbeat,
            heartbeats,
            lifetime,
            metrics: metrics.clone(),
            scratch: vec![0; 4096],
        };
        let thread = thread::Builder::new()
            .name("flagsync-server-streams".into())
            .spawn(move || state.run())?;
        Ok(Self {
            tx,
            waker,
            open,
            metrics,
            thread: std::sync::Mutex::new(Some(thread)),
            evaluating: AtomicBool::new(false),
        })
    }

    fn send(&self, command: Command) {
        // A full queue waits for the hub, which drains it without the server's lock.
        if self.tx.send(command).is_ok() {
            let _ = self.waker.wake();
        }
    }

    /// Hand a stream to the hub; it counts as open from now on.
    pub(crate) fn add(&self, stream: NewStream) {
        if stream.evaluated.is_some() {
            self.evaluating.store(true, Ordering::SeqCst);
        }
        if !stream.close_after {
            self.open.fetch_add(1, Ordering::SeqCst);
            self.metrics.stream_opened(stream.kind);
        }
        self.send(Command::Add(Box::new(stream)));
    }

    /// Send `fdv1` to every FDv1 stream of `env` and `fdv2` to every FDv2 one.
    pub(crate) fn broadcast(&self, env: usize, fdv1: Frame, fdv2: Frame) {
        self.send(Command::Broadcast { env, fdv1, fdv2 });
    }

    /// Whether a client-side or mobile stream was ever opened (changes need evaluating).
    pub(crate) fn has_evaluated_streams(&self) -> bool {
        self.evaluating.load(Ordering::SeqCst)
    }

    /// Evaluate a change for every client-side and mobile stream of its environment:
    /// on the hub's thread, off the server's lock, each stream its own events.
    pub(crate) fn evaluate(&self, change: Evaluation) {
        self.send(Command::Evaluate(Box::new(change)));
    }

    /// Tell the hub to end every stream; the receiver answers once they no longer
    /// count as open.
    pub(crate) fn close_all(&self) -> Receiver<()> {
        let (done, rx) = mpsc::channel();
        self.send(Command::CloseAll { done });
        rx
    }

    /// The streams open now.
    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// End every stream and stop the thread.
    pub(crate) fn shutdown(&self) {
        self.send(Command::Shutdown);
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

struct Conn {
    socket: Transport,
    env: usize,
    kind: StreamKind,
    chunked: bool,
    queue: VecDeque<(Arc<[u8]>, usize)>,
    /// Ending: close once the queue is written.
    closing: bool,
    /// When a write last made progress (or the queue was last empty).
    progress: Instant,
    /// When the stream is ended (its maximum lifetime).
    expires: Option<Instant>,
    /// A client-side or mobile stream's context (it gets evaluated flags).
    evaluated: Option<Box<EvalStream>>,
}

impl Conn {
    fn push(&mut self, frame: &Frame) {
        if frame.is_empty() {
            return;
        }
        if self.queue.is_empty() {
            self.progress = Instant::now();
        }
        if self.chunked {
            self.queue.push_back((frame.size_line.clone(), 0));
        }
        for piece in frame.pieces.iter() {
            self.queue.push_back((piece.clone(), 0));
        }
        if self.chunked {
            self.queue.push_back((CRLF.with(Clone::clone), 0));
        }
    }

    fn end(&mut self) {
        if self.chunked {
            self.queue.push_back((LAST.with(Clone::clone), 0));
        }
        self.closing = true;
    }

    /// Write what the socket takes, many pieces a system call. `Err`: the connection is
    /// dead (or done).
    fn flush(&mut self) -> Result<(), ()> {
        if !self.socket.write_pending().map_err(drop)? {
            return Ok(());
        }
        while !self.queue.is_empty() {
            // On the stack: a broadcast flushes every stream.
            let mut slices = [IoSlice::new(&[]); MAX_IOVECS];
            let pieces = self.queue.len().min(MAX_IOVECS);
            for ((bytes, off), slice) in self.queue.iter().zip(&mut slices) {
                *slice = IoSlice::new(&bytes[*off..]);
            }
            match self.socket.write_vectored(&slices[..pieces]) {
                Ok(0) => return Err(()),
                Ok(mut written) => {
                    self.progress = Instant::now();
                    while written > 0 {
                        let Some((bytes, off)) = self.queue.front_mut() else {
                            break;
                        };
                        let left = bytes.len() - *off;
                        if written >= left {
                            written -= left;
                            self.queue.pop_front();
                        } else {
                            *off += written;
                            written = 0;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(()),
            }
        }
        let all_out = self.socket.write_pending().map_err(drop)?;
        if self.closing && all_out {
            Err(())
        } else {
            Ok(())
        }
    }
}

thread_local! {
    static CRLF: Arc<[u8]> = Arc::from(&b"\r\n"[..]);
    static LAST: Arc<[u8]> = Arc::from(LAST_CHUNK);
}

struct Loop {
    poll: Poll,
    rx: Receiver<Command>,
    conns: HashMap<usize, Conn>,
    next_token: usize,
    open: Arc<AtomicUsize>,
    heartbeat: Duration,
    heartbeats: [Frame; 2],
    lifetime: Option<Duration>,
    metrics: Arc<Metrics>,
    scratch: Vec<u8>,
}

impl Loop {
    fn run(&mut self) {
        let mut events = Events::with_capacity(1024);
        let mut next_beat = Instant::now() + self.heartbeat;
        let mut next_check = Instant::now() + Duration::from_secs(1);
        loop {
            let now = Instant::now();
            let timeout = next_beat
                .saturating_duration_since(now)
                .min(Duration::from_secs(1));
            if self.poll.poll(&mut events, Some(timeout)).is_err() {
                thread::sleep(Duration::from_millis(10));
            }
            for event in &events {
                let token = event.token();
                if token == WAKER {
                    continue;
                }
                if event.is_readable() && !self.drain_input(token.0) {
                    self.remove(token.0);
                    continue;
                }
                if event.is_writable() {
                    self.flush(token.0);
                }
            }
            loop {
                match self.rx.try_recv() {
                    Ok(Command::Shutdown) | Err(mpsc::TryRecvError::Disconnected) => {
                        self.shutdown();
                        return;
                    }
                    Ok(command) => self.handle(command),
                    Err(mpsc::TryRecvError::Empty) => break,
                }
            }
            let now = Instant::now();
            if now >= next_beat {
                next_beat = now + self.heartbeat;
                self.beat();
            }
            if now >= next_check {
                next_check = now + Duration::from_secs(1);
                self.drop_stalled(now);
            }
        }
    }

    fn handle(&mut self, command: Command) {
        match command {
            Command::Add(new) => self.add(*new),
            Command::Broadcast { env, fdv1, fdv2 } => {
                let started = Instant::now();
                let tokens: Vec<usize> = self
                    .conns
                    .iter_mut()
                    .filter(|(_, c)| c.env == env && !c.closing && c.evaluated.is_none())
                    .map(|(t, c)| {
                        c.push(if c.kind.fdv2() { &fdv2 } else { &fdv1 });
                        *t
                    })
                    .collect();
                for t in tokens {
                    self.flush(t);
                }
                self.metrics.fanout_written(started.elapsed());
            }
            Command::Evaluate(change) => {
                let tokens: Vec<(usize, bool)> = self
                    .conns
                    .iter_mut()
                    .filter(|(_, c)| c.env == change.env && !c.closing)
                    .filter_map(|(t, c)| {
                        let stream = c.evaluated.as_deref()?;
                        // Its events are its own (not shared): a client that does not
                        // read is dropped before they hold more than this.
                        let queued: usize = c.queue.iter().map(|(b, off)| b.len() - off).sum();
                        if queued > MAX_EVALUATED_QUEUED_BYTES {
                            return Some((*t, true));
                        }
                        let events = change_events(stream, &change);
                        c.push(&Frame::new(events.into_bytes()));
                        Some((*t, false))
                    })
                    .collect();
                for (t, drop) in tokens {
                    if drop {
                        self.remove(t);
                    } else {
                        self.flush(t);
                    }
                }
            }
            Command::CloseAll { done } => {
                let tokens: Vec<usize> = self
                    .conns
                    .iter_mut()
                    .filter(|(_, c)| !c.closing)
                    .map(|(t, c)| {
                        c.end();
                        *t
                    })
                    .collect();
                self.open.fetch_sub(tokens.len(), Ordering::SeqCst);
                for t in tokens {
                    self.flush(t);
                }
                let _ = done.send(());
            }
            Command::Shutdown => {}
        }
    }

    fn add(&mut self, new: NewStream) {
        let counted = !new.close_after;
        let uncount = |open: &AtomicUsize| {
            if counted {
                open.fetch_sub(1, Ordering::SeqCst);
            }
        };
        let mut socket = new.socket;
        let token = self.next_token;
        self.next_token += 1;
        let interest = Interest::READABLE | Interest::WRITABLE;
        if self
            .poll
            .registry()
            .register(socket.socket(), Token(token), interest)
            .is_err()
        {
            uncount(&self.open);
            return;
        }
        let mut conn = Conn {
            socket,
            env: new.env,
            kind: new.kind,
            chunked: new.chunked,
            queue: VecDeque::new(),
            closing: false,
            progress: Instant::now(),
            expires: self.lifetime.map(|l| {
                // Spread over the last quarter, so streams opened together (after a
                // restart) do not all end together.
                Instant::now() + l.mul_f64(0.75 + fastrand::f64() * 0.25)
            }),
            evaluated: None,
        };
        conn.queue.push_back((Arc::from(new.head), 0));
        if let Some(first) = &new.first {
            conn.push(first);
        }
        if let Some(start) = new.evaluated {
            conn.push(&Frame::new(start.put_event().into_bytes()));
            conn.evaluated = Some(Box::new(start.stream));
        }
        if new.close_after {
            conn.end();
        }
        self.conns.insert(token, conn);
        self.flush(token);
    }

    /// Read and discard what the client sends; `false` once it has closed.
    fn drain_input(&mut self, token: usize) -> bool {
        let Some(conn) = self.conns.get_mut(&token) else {
            return true;
        };
        loop {
            match conn.socket.read(&mut self.scratch) {
                Ok(0) => return false,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }

    fn flush(&mut self, token: usize) {
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        let dead = conn.flush().is_err() || conn.queue.len() > MAX_QUEUED_PIECES;
        if dead {
            self.remove(token);
        }
    }

    fn remove(&mut self, token: usize) {
        if let Some(mut conn) = self.conns.remove(&token) {
            if !conn.closing {
                self.open.fetch_sub(1, Ordering::SeqCst);
                self.metrics.stream_closed(conn.kind);
            }
            let _ = self.poll.registry().deregister(conn.socket.socket());
            conn.socket.close();
        }
    }

    fn beat(&mut self) {
        let [fdv1, fdv2] = &self.heartbeats;
        let tokens: Vec<usize> = self
            .conns
            .iter_mut()
            .filter(|(_, c)| c.queue.is_empty() && !c.closing)
            .map(|(t, c)| {
                c.push(if c.kind.fdv2() { fdv2 } else { fdv1 });
                *t
            })
            .collect();
        for t in tokens {
            self.flush(t);
        }
    }

    fn drop_stalled(&mut self, now: Instant) {
        let stalled: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                !c.queue.is_empty() && now.saturating_duration_since(c.progress) > WRITE_TIMEOUT
            })
            .map(|(t, _)| *t)
            .collect();
        for t in stalled {
            self.remove(t);
        }
        let expired: Vec<usize> = self
            .conns
            .iter_mut()
            .filter(|(_, c)| !c.closing && c.expires.is_some_and(|e| now >= e))
            .map(|(t, c)| {
                c.end();
                *t
            })
            .collect();
        for t in expired {
            self.open.fetch_sub(1, Ordering::SeqCst);
            if let Some(c) = self.conns.get(&t) {
                self.metrics.stream_closed(c.kind);
            }
            self.flush(t);
        }
    }

    fn shutdown(&mut self) {
        let tokens: Vec<usize> = self.conns.keys().copied().collect();
        for t in tokens {
            if let Some(c) = self.conns.get_mut(&t) {
                if !c.closing {
                    c.end();
                    self.open.fetch_sub(1, Ordering::SeqCst);
                    self.metrics.stream_closed(c.kind);
                }
                let _ = c.flush();
            }
            self.remove(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream as StdStream};

    fn pair() -> (StdStream, StdStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = StdStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (server, client)
    }

    fn read_until_closed(mut client: StdStream) -> Vec<u8> {
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut out = Vec::new();
        client.read_to_end(&mut out).unwrap();
        out
    }

    /// A chunked FDv1 stream of environment 0 on `socket`.
    fn stream(socket: StdStream, head: &[u8], first: Option<Frame>) -> NewStream {
        socket.set_nonblocking(true).unwrap();
        NewStream {
            socket: Transport::Plain(mio::net::TcpStream::from_std(socket)),
            env: 0,
            kind: StreamKind::Fdv1,
            chunked: true,
            head: head.to_vec(),
            first,
            close_after: false,
            evaluated: None,
        }
    }

    fn hub() -> Hub {
        let beats = [
            Frame::new(&b":\n"[..]),
            Frame::new(&b"event: heart-beat\n\n"[..]),
        ];
        Hub::start(Duration::from_secs(60), beats, None, Arc::default()).unwrap()
    }

    #[test]
    fn frames_chunks_shares_payloads_and_ends_streams() {
        let hub = hub();
        let (server, client) = pair();
        let first = Frame::from_pieces(vec![
            Arc::from(&b"event: put\ndata: "[..]),
            Arc::from(&b""[..]),
            Arc::from(&b"{}\n\n"[..]),
        ]);
        hub.add(stream(server, b"HEAD\r\n\r\n", Some(first.clone())));
        assert_eq!(hub.open(), 1);
        let big = Frame::new(vec![b'x'; 300]);
        hub.broadcast(0, big.clone(), Frame::new(&b"unused"[..]));
        hub.broadcast(
            1,
            Frame::new(&b"other env"[..]),
            Frame::new(&b"other env"[..]),
        );
        hub.close_all()
            .recv_timeout(Duration::from_secs(5))
            .unwrap();
        assert_eq!(hub.open(), 0);
        let mut want = b"HEAD\r\n\r\n15\r\nevent: put\ndata: {}\n\n\r\n12c\r\n".to_vec();
        want.extend_from_slice(&[b'x'; 300]);
        want.extend_from_slice(b"\r\n0\r\n\r\n");
        assert_eq!(read_until_closed(client), want);
        // The payloads were shared, not copied, and are released once written.
        assert_eq!(Arc::strong_count(&big.pieces), 1);
        assert_eq!(Arc::strong_count(&first.pieces), 1);
        hub.shutdown();
    }

    #[test]
    fn unframed_streams_and_goodbyes() {
        let hub = hub();
        let (server, client) = pair();
        hub.add(NewStream {
            kind: StreamKind::Fdv2,
            chunked: false,
            close_after: true,
            ..stream(server, b"H\r\n\r\n", Some(Frame::new(&b"data: x\n\n"[..])))
        });
        assert_eq!(
            hub.open(),
            0,
            "a stream that closes after its first payload is not open"
        );
        assert_eq!(read_until_closed(client), b"H\r\n\r\ndata: x\n\n");
        hub.shutdown();
    }

    #[test]
    fn an_evaluated_stream_that_is_not_read_is_dropped() {
        use crate::client_side::eval::{EvalStart, EvalStream, Evaluation, Sdk};
        use flagsync_core::store::{ChangeSet, Kind, Store};
        let hub = hub();
        let (server, client) = pair();
        // One client-side flag serving a 1 MB string: each `put` is that large.
        let big = "x".repeat(1 << 20);
        let flag = serde_json::json!({"key": "big", "version": 1, "on": true,
            "variations": [big], "fallthrough": {"variation": 0},
            "clientSideAvailability": {"usingEnvironmentId": true}});
        let raw = bytes::Bytes::from(flag.to_string());
        let mut store = Store::new();
        let change = crate::evaluated::live_change(Kind::Flag, "big", 1, &raw);
        store.apply(ChangeSet::fdv1_full(vec![change]));
        let stream = EvalStream {
            context: flagsync_eval::ContextBuilder::new("u").build().unwrap(),
            sdk: Sdk::ClientSide,
            with_reasons: false,
        };
        hub.add(NewStream {
            evaluated: Some(Box::new(EvalStart {
                stream,
                snapshot: store.snapshot(),
                version: 1,
            })),
            ..stream_of(server)
        });
        assert_eq!(hub.open(), 1);
        for version in 2..60 {
            hub.evaluate(Evaluation {
                env: 0,
                snapshot: store.snapshot(),
                changed: None,
                version,
            });
        }
        // Before the write timeout would drop it as stalled.
        let deadline = Instant::now() + WRITE_TIMEOUT / 2;
        while hub.open() > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(hub.open(), 0, "dropped before it held 58 MB");
        drop(client);
        hub.shutdown();
    }

    /// A chunked stream of environment 0 on `socket` with no head or first payload.
    fn stream_of(socket: StdStream) -> NewStream {
        stream(socket, b"H\r\n\r\n", None)
    }

    #[test]
    fn a_closed_client_is_forgotten() {
        let hub = hub();
        let (server, client) = pair();
        hub.add(stream(server, b"H\r\n\r\n", None));
        drop(client);
        let deadline = Instant::now() + Duration::from_secs(5);
        while hub.open() > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(hub.open(), 0);
        hub.shutdown();
    }
}
