//! The I/O vocabulary between the core and a driver: connection ids, what to do, and
//! what happened on the wire.

use std::fmt;

use bytes::Bytes;

use crate::endpoint::Endpoint;

/// A connection the core asked for. Ids are never reused; inputs naming an unknown or
/// closed id are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn#{}", self.0)
    }
}

/// Something the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Open a connection to `endpoint` (TCP, then TLS if `endpoint.tls`, through a
    /// proxy if one is configured), write `request`, report [`crate::Input::Connected`],
    /// then pump every received byte as [`crate::Input::Data`] until the peer closes
    /// ([`crate::Input::Closed`]) or the core says [`Action::Close`].
    Connect {
        /// The id to report this connection's inputs with.
        conn: ConnId,
        /// Where to connect.
        endpoint: Endpoint,
        /// The complete HTTP/1.1 request to write once connected.
        request: Bytes,
    },
    /// Close the connection and release its socket. No more inputs are expected for it.
    Close {
        /// The connection to close.
        conn: ConnId,
    },
}

/// Why a connection closed, as the driver saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseCause {
    /// The peer closed the connection cleanly (end of stream).
    Eof,
    /// Connecting, TLS or reading failed.
    Io(IoCause),
}

/// A transport failure reported by the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IoCause {
    /// The I/O error kind.
    pub kind: std::io::ErrorKind,
    /// The driver's description (never contains secrets).
    pub message: String,
}

impl fmt::Display for IoCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
