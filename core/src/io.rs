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

/// Something the driver must do. Its `Debug` output shows a request's text with the
/// values of `Authorization` and `Proxy-Authorization` redacted.
#[derive(Clone, PartialEq, Eq)]
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

impl fmt::Debug for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Connect {
                conn,
                endpoint,
                request,
            } => f
                .debug_struct("Connect")
                .field("conn", conn)
                .field("endpoint", endpoint)
                .field("request", &RedactedRequest(request))
                .finish(),
            Self::Close { conn } => f.debug_struct("Close").field("conn", conn).finish(),
        }
    }
}

/// A request's text for `Debug` output, secret header values redacted.
struct RedactedRequest<'a>(&'a [u8]);

impl fmt::Debug for RedactedRequest<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = String::from_utf8_lossy(self.0);
        let mut shown = String::with_capacity(text.len());
        for line in text.split_inclusive('\n') {
            let name = line.split(':').next().unwrap_or_default().trim();
            if line.contains(':') && crate::http1::is_credential_header(name) {
                shown.push_str(name);
                shown.push_str(": <redacted>\r\n");
            } else {
                shown.push_str(line);
            }
        }
        fmt::Debug::fmt(&shown, f)
    }
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

#[cfg(test)]
mod redaction_tests {
    use super::*;

    #[test]
    fn a_connect_action_never_shows_the_key() {
        let action = Action::Connect {
            conn: ConnId(1),
            endpoint: Endpoint {
                tls: false,
                host: "h".into(),
                port: 80,
            },
            request: Bytes::from_static(
                b"GET /all HTTP/1.1\r\nHost: h\r\nauthorization: sdk-secret\r\nProxy-Authorization: Basic x\r\nAccept: */*\r\n\r\n",
            ),
        };
        let shown = format!("{action:?}");
        assert!(
            !shown.contains("sdk-secret") && !shown.contains("Basic x"),
            "{shown}"
        );
        assert!(
            shown.contains("authorization: <redacted>") && shown.contains("Accept: */*"),
            "{shown}"
        );
    }
}
