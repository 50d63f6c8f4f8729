//! Data-source status: states, error kinds and the transition rules of PROTOCOL.md
//! B §3.1–3.2.

use std::fmt;
use std::time::Instant;

mod error_kind;

pub use error_kind::ErrorKind;

/// The state of the data source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Not yet received a full data set.
    Initializing,
    /// Connected and up to date.
    Valid,
    /// Had data, lost the connection; retrying.
    Interrupted,
    /// Stopped for good (by the user, or by a terminal error).
    Off,
}

impl State {
    /// The wire name used by LaunchDarkly SDKs: `initializing`, `valid`, `interrupted`, `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Initializing => "initializing",
            Self::Valid => "valid",
            Self::Interrupted => "interrupted",
            Self::Off => "off",
        }
    }
}

/// What exactly went wrong, for messages and logs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Cause {
    /// An HTTP error status.
    Status(u16),
    /// The connection could not be made or broke; the adapter's description.
    Io(crate::IoCause),
    /// The server closed the stream.
    StreamClosed,
    /// No byte arrived within the read timeout.
    ReadTimeout,
    /// The connection was not established within the connect timeout.
    ConnectTimeout,
    /// A success response whose `Content-Type` is not `text/event-stream`.
    ContentType(String),
    /// A redirect without a usable `Location`, or too many redirects.
    Redirect,
    /// A redirect that would have taken the request, and the SDK key in it, off its
    /// origin was refused (PROTOCOL.md A.3): the SDK key is sent to the origin it was
    /// configured for only, and never from `https` to `http`.
    RedirectRefused {
        /// Why it was refused.
        refusal: RedirectRefusal,
        /// The origin (`scheme://host[:port]`) the redirect named.
        to: String,
    },
    /// A poll's whole response, or a stream's response head, did not arrive within its
    /// total deadline, however steadily bytes trickled in (PROTOCOL.md A.5).
    ResponseTimeout,
    /// A poll was answered `304 Not Modified` although it sent no `If-None-Match`:
    /// there is no cached data it could confirm (PROTOCOL.md B §2.2).
    UnexpectedNotModified,
    /// The HTTP response could not be read.
    Http(crate::http1::Error),
    /// The event stream could not be read.
    Sse(crate::sse::Error),
    /// FDv1 data could not be used.
    Fdv1(crate::fdv1::Error),
    /// FDv2 data could not be used.
    Fdv2(crate::fdv2::Error),
    /// The persistent store failed.
    Store,
    /// The persistent store failed, and the driver said how.
    StoreFault(StoreFault),
    /// An in-process source ([`crate::Mode::External`]) failed; its description.
    Source(String),
}

/// How a persistent store failed, as the driver reports it
/// ([`crate::Input::StoreFault`]): the kind and the store's message (which never holds
/// a password).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreFault {
    /// What kind of failure.
    pub kind: StoreFaultKind,
    /// The store's description.
    pub message: String,
}

/// What kind of persistent-store failure a [`StoreFault`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreFaultKind {
    /// The store cannot be reached, or the connection broke or timed out.
    Unreachable,
    /// The store refused the credentials (a wrong or missing password): permanent.
    Authentication,
    /// The store's settings cannot work (a missing database, a malformed URL):
    /// permanent.
    Configuration,
    /// The store answered with an error (a wrong key type, …).
    Backend,
    /// Another writer got in between every attempt of an upsert.
    Contended,
    /// The store lost data this process wrote (restarted empty, or from an older
    /// save).
    DataLost,
}

impl StoreFaultKind {
    /// A failure that will not clear by waiting: someone must change a setting.
    pub fn is_permanent(self) -> bool {
        matches!(self, Self::Authentication | Self::Configuration)
    }

    /// The kind as a lowercase word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unreachable => "unreachable",
            Self::Authentication => "authentication",
            Self::Configuration => "configuration",
            Self::Backend => "backend",
            Self::Contended => "contended",
            Self::DataLost => "data lost",
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Status(code @ (401 | 403)) => write!(f, "HTTP error {code} (invalid SDK key)"),
            Self::Status(code) => write!(f, "HTTP error {code}"),
            Self::Io(cause) => write!(f, "connection failed: {cause}"),
            Self::StreamClosed => f.write_str("the server closed the stream"),
            Self::ReadTimeout => f.write_str("read timed out"),
            Self::ConnectTimeout => f.write_str("connect timed out"),
            Self::ContentType(ct) => write!(f, "unexpected content type {ct:?}"),
            Self::Redirect => f.write_str("bad or too many redirects"),
            Self::RedirectRefused {
                refusal: RedirectRefusal::Downgrade,
                to,
            } => write!(
                f,
                "redirect from https to {to} refused: the SDK key is never sent unencrypted"
            ),
            Self::RedirectRefused {
                refusal: RedirectRefusal::CrossOrigin,
                to,
            } => write!(
                f,
                "redirect to another origin ({to}) refused: the SDK key is sent to its own origin only"
            ),
            Self::ResponseTimeout => {
                f.write_str("the response did not complete within its deadline")
            }
            Self::UnexpectedNotModified => {
                f.write_str("not modified (304) to a poll that sent no If-None-Match")
            }
            Self::Http(e) => write!(f, "bad HTTP response: {e}"),
            Self::Sse(e) => write!(f, "bad event stream: {e}"),
            Self::Fdv1(e) => e.fmt(f),
            Self::Fdv2(e) => e.fmt(f),
            Self::Store => f.write_str("the persistent store failed"),
            Self::StoreFault(fault) => write!(
                f,
                "the persistent store failed ({}): {}",
                fault.kind.as_str(),
                fault.message
            ),
            Self::Source(message) => f.write_str(message),
        }
    }
}

/// Why a redirect was refused ([`Cause::RedirectRefused`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedirectRefusal {
    /// From `https` to `http`.
    Downgrade,
    /// To another scheme, host or port.
    CrossOrigin,
}

/// A failure as the status reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorInfo {
    /// The error kind.
    pub kind: ErrorKind,
    /// The HTTP status, or 0.
    pub status_code: u16,
    /// When it happened.
    pub at: Instant,
    /// What happened.
    pub cause: Cause,
}

impl ErrorInfo {
    /// An error of `kind` caused by `cause` at `at`; the status code is taken from an
    /// HTTP status cause.
    pub fn new(at: Instant, kind: ErrorKind, cause: Cause) -> Self {
        let status_code = match cause {
            Cause::Status(code) => code,
            _ => 0,
        };
        Self {
            kind,
            status_code,
            at,
            cause,
        }
    }
}

/// The data-source status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The current state.
    pub state: State,
    /// When the state last changed.
    pub since: Instant,
    /// The most recent error since start-up, kept through later successes (sticky).
    pub error: Option<ErrorInfo>,
}

/// Applies the status transition rules of PROTOCOL.md B §3.2.
#[derive(Debug, Clone)]
pub struct StatusTracker {
    current: Status,
}

impl StatusTracker {
    /// Start INITIALIZING at `now` with no error.
    pub fn new(now: Instant) -> Self {
        Self {
            current: Status {
                state: State::Initializing,
                since: now,
                error: None,
            },
        }
    }

    /// The current status.
    pub fn status(&self) -> &Status {
        &self.current
    }

    /// Report `state` and optionally an error; returns the new status if observers
    /// should be told.
    ///
    /// 1. INTERRUPTED while INITIALIZING stays INITIALIZING.
    /// 2. The same state with no new error is a no-op.
    /// 3. `since` changes only when the state does; the last error is sticky.
    pub fn update(
        &mut self,
        now: Instant,
        state: State,
        error: Option<ErrorInfo>,
    ) -> Option<&Status> {
        let state = match (state, self.current.state) {
            (State::Interrupted, State::Initializing) => State::Initializing,
            (s, _) => s,
        };
        if state == self.current.state && error.is_none() {
            return None;
        }
        if state != self.current.state {
            self.current.state = state;
            self.current.since = now;
        }
        if error.is_some() {
            self.current.error = error;
        }
        Some(&self.current)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn err(at: Instant, kind: ErrorKind, code: u16) -> ErrorInfo {
        ErrorInfo::new(
            at,
            kind,
            if code > 0 {
                Cause::Status(code)
            } else {
                Cause::StreamClosed
            },
        )
    }

    #[test]
    fn interrupted_before_first_success_stays_initializing() {
        let t0 = crate::testing::origin();
        let mut s = StatusTracker::new(t0);
        let st = s
            .update(
                t0 + Duration::from_secs(1),
                State::Interrupted,
                Some(err(t0, ErrorKind::ErrorResponse, 503)),
            )
            .cloned()
            .unwrap();
        assert_eq!(st.state, State::Initializing);
        assert_eq!(st.since, t0);
        assert_eq!(st.error.unwrap().status_code, 503);
    }

    #[test]
    fn same_state_without_error_is_a_no_op() {
        let t0 = crate::testing::origin();
        let mut s = StatusTracker::new(t0);
        assert!(s.update(t0, State::Initializing, None).is_none());
        s.update(t0, State::Valid, None).unwrap();
        assert!(
            s.update(t0 + Duration::from_secs(5), State::Valid, None)
                .is_none()
        );
    }

    #[test]
    fn repeated_error_in_same_state_is_broadcast_without_moving_since() {
        let t0 = crate::testing::origin();
        let mut s = StatusTracker::new(t0);
        s.update(t0, State::Valid, None);
        let t1 = t0 + Duration::from_secs(1);
        s.update(
            t1,
            State::Interrupted,
            Some(err(t1, ErrorKind::NetworkError, 0)),
        )
        .unwrap();
        let t2 = t0 + Duration::from_secs(2);
        let st = s
            .update(
                t2,
                State::Interrupted,
                Some(err(t2, ErrorKind::ErrorResponse, 500)),
            )
            .unwrap();
        assert_eq!(st.since, t1);
        assert_eq!(st.error.as_ref().unwrap().status_code, 500);
    }

    #[test]
    fn error_is_sticky_through_valid() {
        let t0 = crate::testing::origin();
        let mut s = StatusTracker::new(t0);
        s.update(
            t0,
            State::Interrupted,
            Some(err(t0, ErrorKind::ErrorResponse, 503)),
        );
        let t1 = t0 + Duration::from_secs(3);
        let st = s.update(t1, State::Valid, None).unwrap();
        assert_eq!((st.state, st.since), (State::Valid, t1));
        assert_eq!(st.error.as_ref().unwrap().kind, ErrorKind::ErrorResponse);
    }

    #[test]
    fn store_error_is_not_overwritten_by_a_state_change() {
        let t0 = crate::testing::origin();
        let mut s = StatusTracker::new(t0);
        s.update(t0, State::Valid, None);
        s.update(
            t0,
            State::Interrupted,
            Some(err(t0, ErrorKind::StoreError, 0)),
        );
        let st = s.update(t0, State::Valid, None).unwrap();
        assert_eq!(st.error.as_ref().unwrap().kind, ErrorKind::StoreError);
    }
}
