//! The request loop: one thread holding every listening socket and every connection
//! that is not a stream, on non-blocking sockets (a `mio` event loop). It accepts,
//! reads and answers requests ([`Conn`]), hands streams to the stream hub, and closes
//! connections whose deadline passed: however many connections there are, the server
//! runs on this thread and the hub's.
//!
//! Limits: at most `max_connections` connections (streams included) are served;
//! past it a connection is accepted and answered `503` with `Retry-After` at once,
//! whether it sent a request yet or not, then closed: after lingering to read what it
//! sends (at most [`MAX_REFUSING`] such at once, each for at most a couple of seconds,
//! so refusals never use up the descriptors kept spare), or at once beyond that. On a
//! TLS port the refusal is the connection closed (no handshake is spent on it). When the process runs out of file descriptors anyway, a descriptor
//! kept in reserve is given up to accept and refuse the waiting connections, and
//! accepting pauses briefly; connections already open keep being served.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use crate::conn::{Conn, Cx, Limits, Next};
use crate::listen;
use crate::metrics::RefusedBy;
use crate::state::Shared;
use crate::tls::TlsAcceptor;
use crate::transport::Transport;

/// The loop's waker.
pub(crate) const WAKE: Token = Token(0);
/// The first connection token; listeners take the ones below it (from 1).
const FIRST_CONN: usize = 1 << 16;
/// The most listening addresses.
pub(crate) const MAX_LISTENERS: usize = FIRST_CONN - 2;
/// How often deadlines, held connections and the TLS files are looked at.
const TICK: Duration = Duration::from_millis(250);
/// Refused connections lingering at once (well below the descriptors kept spare).
pub(crate) const MAX_REFUSING: usize = 16;
/// How long accepting pauses once descriptors ran out.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// The most waiting connections refused in one round once descriptors ran out.
const REFUSE_ROUND: usize = 256;

/// The answer to a connection refused because descriptors ran out.
const NO_DESCRIPTORS: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\
Content-Length: 0\r\nConnection: close\r\n\r\n";

/// The answer to a connection over the connection limit.
const TOO_MANY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\
Content-Type: application/json\r\nContent-Length: 53\r\nConnection: close\r\n\r\n\
{\"message\":\"too many connections; try again shortly\"}";

/// The request loop's state (moved to its thread).
pub(crate) struct RequestLoop {
    pub(crate) poll: Poll,
    pub(crate) listeners: Vec<TcpListener>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) limits: Limits,
    pub(crate) max_connections: usize,
    pub(crate) tls: Option<TlsAcceptor>,
    conns: HashMap<usize, Conn>,
    next_token: usize,
    refusing: usize,
    paused_until: Option<Instant>,
    /// A descriptor given up to refuse connections when none is left.
    reserve: Option<std::fs::File>,
}

impl RequestLoop {
    pub(crate) fn new(
        poll: Poll,
        listeners: Vec<TcpListener>,
        shared: Arc<Shared>,
        limits: Limits,
        max_connections: usize,
        tls: Option<TlsAcceptor>,
    ) -> Self {
        Self {
            poll,
            listeners,
            shared,
            limits,
            max_connections,
            tls,
            conns: HashMap::new(),
            next_token: FIRST_CONN,
            refusing: 0,
            paused_until: None,
            reserve: std::fs::File::open("/dev/null").ok(),
        }
    }

    pub(crate) fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        let mut next_tick = Instant::now() + TICK;
        loop {
            let now = Instant::now();
            let mut timeout = next_tick.saturating_duration_since(now);
            if let Some(p) = self.paused_until {
                timeout = timeout.min(p.saturating_duration_since(now));
            }
            if let Err(e) = self.poll.poll(&mut events, Some(timeout))
                && e.kind() != std::io::ErrorKind::Interrupted
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            if self.shared.is_shutting_down() {
                self.close_all();
                return;
            }
            let now = Instant::now();
            let mut woken = false;
            for event in &events {
                match event.token() {
                    WAKE => woken = true,
                    Token(t) if t < FIRST_CONN => self.accept(t - 1, now),
                    Token(t) => self.drive(t, now),
                }
            }
            if self.paused_until.is_some_and(|p| now >= p) {
                self.paused_until = None;
                for i in 0..self.listeners.len() {
                    self.accept(i, now);
                }
            }
            if woken {
                self.release_held();
            }
            if now >= next_tick {
                next_tick = now + TICK;
                self.time_out(now);
                self.release_held();
                if let Some(tls) = &mut self.tls {
                    tls.reload_if_changed(now);
                }
            }
            let open = self.conns.len();
            (self.shared.metrics.request_conns).store(open, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn accept(&mut self, listener: usize, now: Instant) {
        loop {
            if self.paused_until.is_some() {
                return;
            }
            let Some(l) = self.listeners.get(listener) else {
                return;
            };
            match l.accept() {
                Ok((socket, _)) => self.admit(socket, now),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::Interrupted | std::io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) if listen::out_of_descriptors(&e) => {
                    self.refuse_waiting(listener);
                    self.paused_until = Some(now + ACCEPT_PAUSE);
                    return;
                }
                Err(_) => {
                    self.paused_until = Some(now + ACCEPT_PAUSE);
                    return;
                }
            }
        }
    }

    /// Out of descriptors: give up the reserve one to accept and refuse waiting
    /// connections (so they are told, not left hanging in the backlog).
    fn refuse_waiting(&mut self, listener: usize) {
        let metrics = &self.shared.metrics;
        for _ in 0..REFUSE_ROUND {
            let Some(reserve) = self.reserve.take() else {
                metrics.refused(RefusedBy::Descriptors);
                return;
            };
            drop(reserve);
            let accepted = match self.listeners[listener].accept() {
                Ok((mut socket, _)) => {
                    metrics.refused(RefusedBy::Descriptors);
                    let _ = socket.write(NO_DESCRIPTORS);
                    true
                }
                Err(_) => false,
            };
            self.reserve = std::fs::File::open("/dev/null").ok();
            if !accepted {
                return;
            }
        }
    }

    fn admit(&mut self, mut socket: TcpStream, now: Instant) {
        let _ = socket.set_nodelay(true);
        let metrics = &self.shared.metrics;
        let open = self.conns.len() - self.refusing + self.shared.hub.open();
        if open >= self.max_connections {
            metrics.refused(RefusedBy::Limit);
            if self.tls.is_none() {
                // A fresh socket's buffer takes the whole answer.
                let _ = socket.write(TOO_MANY);
            }
            if self.refusing < MAX_REFUSING && self.tls.is_none() {
                let conn = Conn::refused(Transport::Plain(socket), now);
                self.register(conn);
            } else {
                drain(&mut socket);
            }
            return;
        }
        let io = match &self.tls {
            Some(tls) => match tls.session() {
                Ok(session) => Transport::tls(socket, session),
                Err(_) => return,
            },
            None => Transport::Plain(socket),
        };
        metrics.accepted(io.is_tls());
        self.register(Conn::new(io, self.shared.max_body, now));
    }

    /// Take `conn` into the loop.
    fn register(&mut self, mut conn: Conn) {
        let token = self.next_token;
        self.next_token += 1;
        let interest = Interest::READABLE | Interest::WRITABLE;
        let Some(io) = conn.io() else { return };
        if self
            .poll
            .registry()
            .register(io.socket(), Token(token), interest)
            .is_err()
        {
            return;
        }
        if conn.refusing() {
            self.refusing += 1;
        }
        self.conns.insert(token, conn);
    }

    fn drive(&mut self, token: usize, now: Instant) {
        self.step(token, now, Conn::drive);
    }

    /// Apply `f` (drive, time out) to connection `token`, then do what it says.
    fn step(&mut self, token: usize, now: Instant, f: impl FnOnce(&mut Conn, &Cx<'_>) -> Next) {
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        let cx = Cx {
            shared: &self.shared,
            registry: self.poll.registry(),
            token: Token(token),
            now,
        };
        let next = f(conn, &cx);
        self.after(token, next);
    }

    fn after(&mut self, token: usize, next: Next) {
        if next == Next::Wait {
            return;
        }
        let Some(mut conn) = self.conns.remove(&token) else {
            return;
        };
        if conn.refusing() {
            self.refusing -= 1;
        }
        if next == Next::Close
            && let Some(io) = conn.io()
        {
            let _ = self.poll.registry().deregister(io.socket());
            io.close();
        }
    }

    fn time_out(&mut self, now: Instant) {
        let late: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| c.deadline(&self.limits).is_some_and(|d| now >= d))
            .map(|(t, _)| *t)
            .collect();
        for token in late {
            self.step(token, now, Conn::time_out);
        }
    }

    /// Close the connections a lifted hang fault held.
    fn release_held(&mut self) {
        let released: Vec<usize> = {
            let inner = self.shared.lock();
            self.conns
                .iter()
                .filter(|(_, c)| c.hung().is_some_and(|e| !inner.faults.hangs(e)))
                .map(|(t, _)| *t)
                .collect()
        };
        for token in released {
            self.after(token, Next::Close);
        }
    }

    fn close_all(&mut self) {
        self.refusing = 0;
        for (_, mut conn) in self.conns.drain() {
            conn.close();
        }
    }
}

/// Read what a refused client already sent (so closing does not reset the connection
/// over unread bytes), then let it close.
fn drain(socket: &mut TcpStream) {
    let mut sink = [0u8; 4096];
    while matches!(socket.read(&mut sink), Ok(n) if n > 0) {}
}
