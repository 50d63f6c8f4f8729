//! Idle connections of `sse-load` (`--idle-conns N`): plain TCP connections to the
//! server that send nothing, held open beside the streams to measure what an open
//! connection that never sends a request costs the server. One that the server closes
//! (its request-head deadline, 10 s by default) is counted, not reopened.

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::net::SocketAddr;

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};

/// One idle connection.
#[derive(Debug)]
struct Idle {
    socket: TcpStream,
    connected: bool,
    /// The server sent bytes.
    answered: bool,
}

/// The idle connections, registered with the load loop's poll under tokens from a
/// base of their own.
#[derive(Debug)]
pub struct IdleConns {
    conns: Vec<Option<Idle>>,
    base: usize,
    /// Connections to open in all.
    total: usize,
    in_flight: usize,
    /// Connects that completed.
    pub connected: usize,
    /// Connects that failed, by error.
    pub failed: BTreeMap<String, usize>,
    /// Connected, then closed by the server (end of stream or reset).
    pub closed: usize,
    /// Of the closed ones, those that got bytes first (a `408` answer).
    pub answered: usize,
}

impl IdleConns {
    /// `total` connections, to register under tokens `base..base + total`.
    pub fn new(total: usize, base: usize) -> Self {
        Self {
            conns: Vec::with_capacity(total),
            base,
            total,
            in_flight: 0,
            connected: 0,
            failed: BTreeMap::new(),
            closed: 0,
            answered: 0,
        }
    }

    /// True if `token` is one of these connections'.
    pub fn owns(&self, token: usize) -> bool {
        token >= self.base && token - self.base < self.total
    }

    /// Every connection has connected or failed.
    pub fn settled(&self) -> bool {
        self.conns.len() == self.total && self.in_flight == 0
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.connected - self.closed
    }

    /// Connects that failed, in all.
    pub fn failed_count(&self) -> usize {
        self.failed.values().sum()
    }

    /// Start connecting while fewer than `max_in_flight` connects are under way.
    pub fn start(&mut self, registry: &Registry, addr: SocketAddr, max_in_flight: usize) {
        while self.conns.len() < self.total && self.in_flight < max_in_flight {
            let token = Token(self.base + self.conns.len());
            let conn = TcpStream::connect(addr).and_then(|mut socket| {
                registry.register(&mut socket, token, Interest::READABLE | Interest::WRITABLE)?;
                Ok(socket)
            });
            match conn {
                Ok(socket) => {
                    self.conns.push(Some(Idle {
                        socket,
                        connected: false,
                        answered: false,
                    }));
                    self.in_flight += 1;
                }
                Err(e) => {
                    self.conns.push(None);
                    *self.failed.entry(e.kind().to_string()).or_default() += 1;
                }
            }
        }
    }

    /// Handle readiness of the connection with `token`; `buf` takes what the server
    /// sends.
    pub fn handle(&mut self, registry: &Registry, token: usize, writable: bool, buf: &mut [u8]) {
        let j = token - self.base;
        let Some(Some(idle)) = self.conns.get_mut(j) else {
            return;
        };
        if !idle.connected {
            let socket = &idle.socket;
            let error = match (socket.take_error(), socket.peer_addr()) {
                (Ok(Some(e)) | Err(e), _) => Some(e),
                (Ok(None), Err(e)) if e.kind() == io::ErrorKind::NotConnected => return,
                (Ok(None), Err(e)) => Some(e),
                (Ok(None), Ok(_)) if writable => None,
                (Ok(None), Ok(_)) => return,
            };
            self.in_flight -= 1;
            if let Some(e) = error {
                *self.failed.entry(e.kind().to_string()).or_default() += 1;
                self.drop_conn(registry, j);
                return;
            }
            idle.connected = true;
            self.connected += 1;
        }
        let Some(Some(idle)) = self.conns.get_mut(j) else {
            return;
        };
        let closed = loop {
            match idle.socket.read(buf) {
                Ok(0) => break true,
                Ok(_) => idle.answered = true,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break true,
            }
        };
        if closed {
            self.closed += 1;
            if idle.answered {
                self.answered += 1;
            }
            self.drop_conn(registry, j);
        }
    }

    fn drop_conn(&mut self, registry: &Registry, j: usize) {
        if let Some(mut idle) = self.conns.get_mut(j).and_then(Option::take) {
            let _ = registry.deregister(&mut idle.socket);
        }
    }
}
