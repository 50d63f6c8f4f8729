//! A connection's byte stream on a non-blocking socket: plain TCP, or TLS (rustls)
//! over it. The connection loop reads requests and writes responses through it, and
//! the stream hub writes events through it, so a TLS stream is handed over whole (its
//! socket and its session: one descriptor).
//!
//! Reads and writes never block: they return [`io::ErrorKind::WouldBlock`] when the
//! socket has nothing to give or takes nothing more, and the caller waits for the
//! socket's next readiness event. A TLS session buffers at most one record's worth of
//! encrypted output beyond what the socket took: a write is refused (`WouldBlock`)
//! while earlier output is still waiting.

use std::io::{self, Read, Write};
use std::net::Shutdown;

use mio::net::TcpStream;
use rustls::ServerConnection;

/// The most plaintext handed to a TLS session in one write (one TLS record).
const TLS_WRITE: usize = 16 * 1024;

/// The first byte of a TLS handshake record; a client that opens with anything else
/// is not speaking TLS.
const TLS_HANDSHAKE: u8 = 0x16;

/// A connection's byte stream.
#[derive(Debug)]
pub(crate) enum Transport {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<TlsStream>),
}

/// A TLS session and its socket.
#[derive(Debug)]
pub(crate) struct TlsStream {
    socket: TcpStream,
    session: ServerConnection,
    /// Whether the client's first byte was looked at yet.
    checked: bool,
    /// The client's first byte was not a TLS handshake.
    refused: bool,
}

/// Why a read failed in a way the connection answers itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A plaintext request arrived on a TLS port.
    PlainHttpOnTls,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a plaintext HTTP request on a TLS port")
    }
}

impl std::error::Error for Refusal {}

impl Transport {
    /// A TLS stream over `socket`, its handshake still to come.
    pub(crate) fn tls(socket: TcpStream, session: ServerConnection) -> Self {
        Self::Tls(Box::new(TlsStream {
            socket,
            session,
            checked: false,
            refused: false,
        }))
    }

    /// The socket (to register it with an event loop, or to answer a refusal on it).
    pub(crate) fn socket(&mut self) -> &mut TcpStream {
        match self {
            Self::Plain(s) => s,
            Self::Tls(t) => &mut t.socket,
        }
    }

    /// The bare socket of a TLS stream whose client spoke plaintext (to answer it in
    /// plaintext); otherwise the stream unchanged.
    pub(crate) fn into_plain_if_refused(self) -> Result<Self, Self> {
        match self {
            Self::Tls(t) if t.refused => Ok(Self::Plain(t.socket)),
            other => Err(other),
        }
    }

    /// Whether it is TLS.
    pub(crate) fn is_tls(&self) -> bool {
        matches!(self, Self::Tls(_))
    }

    /// Write encrypted output the session holds; `Ok(true)` once none is left.
    pub(crate) fn write_pending(&mut self) -> io::Result<bool> {
        match self {
            Self::Plain(_) => Ok(true),
            Self::Tls(t) => t.write_pending(),
        }
    }

    /// End the connection: a TLS `close_notify` (best effort), then both directions.
    pub(crate) fn close(&mut self) {
        if let Self::Tls(t) = self {
            t.session.send_close_notify();
            let _ = t.write_pending();
        }
        let _ = self.socket().shutdown(Shutdown::Both);
    }

    /// Stop writing (after a refusal, before draining what the client still sends).
    pub(crate) fn shutdown_write(&mut self) {
        if let Self::Tls(t) = self {
            t.session.send_close_notify();
            let _ = t.write_pending();
        }
        let _ = self.socket().shutdown(Shutdown::Write);
    }
}

impl TlsStream {
    fn write_pending(&mut self) -> io::Result<bool> {
        while self.session.wants_write() {
            match self.session.write_tls(&mut self.socket) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Refuse a client whose first byte is not a TLS handshake (plaintext HTTP).
    fn check_first_byte(&mut self) -> io::Result<()> {
        if self.checked {
            return Ok(());
        }
        let mut first = [0u8; 1];
        match self.socket.peek(&mut first)? {
            0 => Ok(()),
            _ if first[0] == TLS_HANDSHAKE => {
                self.checked = true;
                Ok(())
            }
            _ => {
                self.refused = true;
                Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    Refusal::PlainHttpOnTls,
                ))
            }
        }
    }
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let t = match self {
            Self::Plain(s) => return s.read(buf),
            Self::Tls(t) => t,
        };
        t.check_first_byte()?;
        loop {
            match t.session.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            match t.session.read_tls(&mut t.socket) {
                Ok(0) => return Ok(0),
                Ok(_) => {
                    let processed = t.session.process_new_packets();
                    // Handshake messages, or the alert that explains a failure.
                    let _ = t.write_pending();
                    if let Err(e) = processed {
                        return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let t = match self {
            Self::Plain(s) => return s.write(buf),
            Self::Tls(t) => t,
        };
        if !t.write_pending()? {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = t.session.writer().write(&buf[..buf.len().min(TLS_WRITE)])?;
        if n == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        // What the socket does not take now waits for its next writable event.
        t.write_pending()?;
        Ok(n)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Self::Plain(s) => s.write_vectored(bufs),
            Self::Tls(_) => {
                // One record for many small pieces (a chunk's size line, its data, its
                // CRLF), not a record each.
                let mut gathered =
                    Vec::with_capacity(bufs.iter().map(|b| b.len()).sum::<usize>().min(TLS_WRITE));
                for b in bufs {
                    let room = TLS_WRITE - gathered.len();
                    gathered.extend_from_slice(&b[..b.len().min(room)]);
                    if gathered.len() == TLS_WRITE {
                        break;
                    }
                }
                self.write(&gathered)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
