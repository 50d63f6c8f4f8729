//! Where the server listens, and the process's file-descriptor limit.
//!
//! Each address gets its own listening socket with a deep backlog (room for thousands
//! of SDKs connecting at once after a restart). An IPv6 socket is IPv6-only, so
//! `0.0.0.0:P` and `[::]:P` can both be given.

use std::io;
use std::net::SocketAddr;

use crate::error::ServerError;

/// The listen backlog: room for a thousand SDKs connecting at once.
const BACKLOG: i32 = 4096;

/// A non-blocking listening socket on `addr`.
pub(crate) fn bind(addr: SocketAddr) -> Result<mio::net::TcpListener, ServerError> {
    use socket2::{Domain, Socket, Type};
    let err = |source| ServerError::Bind { addr, source };
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None).map_err(err)?;
    socket.set_reuse_address(true).map_err(err)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true).map_err(err)?;
    }
    socket.bind(&addr.into()).map_err(err)?;
    socket.listen(BACKLOG).map_err(err)?;
    socket.set_nonblocking(true).map_err(err)?;
    Ok(mio::net::TcpListener::from_std(socket.into()))
}

/// The process's limit on open file descriptors: the soft limit (what it may open
/// now) and the hard limit (how far it may raise the soft one); `None`: unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    /// The soft limit.
    pub soft: Option<u64>,
    /// The hard limit.
    pub hard: Option<u64>,
}

/// The process's descriptor limit now.
pub fn fd_limit() -> FdLimit {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    FdLimit {
        soft: limit.current,
        hard: limit.maximum,
    }
}

/// Raise the soft descriptor limit to the hard one (what Go programs such as
/// LaunchDarkly's Relay Proxy do at start: a service with thousands of connections
/// needs more than the usual 1,024). Returns the limit before and after.
///
/// ```
/// let (before, after) = flagsync_server::raise_fd_limit()?;
/// assert_eq!(after.soft, before.hard);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn raise_fd_limit() -> io::Result<(FdLimit, FdLimit)> {
    let before = fd_limit();
    if before.soft != before.hard {
        let raised = rustix::process::Rlimit {
            current: before.hard,
            maximum: before.hard,
        };
        rustix::process::setrlimit(rustix::process::Resource::Nofile, raised)?;
    }
    Ok((before, fd_limit()))
}

/// Whether an accept failed because descriptors ran out (`EMFILE`, `ENFILE`).
pub(crate) fn out_of_descriptors(e: &io::Error) -> bool {
    use rustix::io::Errno;
    matches!(Errno::from_io_error(e), Some(Errno::MFILE | Errno::NFILE))
}
