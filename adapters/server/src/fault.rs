//! The paths the server answers, and the faults a test can script on them.

use std::fmt;
use std::str::FromStr;

/// A path the server answers (after any base-path prefix).
///
/// ```
/// use flagsync_server::Endpoint;
///
/// assert_eq!("/sdk/stream".parse::<Endpoint>(), Ok(Endpoint::Fdv2Stream));
/// assert_eq!(Endpoint::of_path("/relay/sdk/poll"), Some(Endpoint::Fdv2Poll));
/// assert_eq!(Endpoint::Fdv1Poll.path(), "/sdk/latest-all");
/// assert!(Endpoint::Fdv2Poll.is_fdv2());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Endpoint {
    /// FDv1 streaming, `GET …/all`.
    Fdv1Stream,
    /// FDv1 polling, `GET …/sdk/latest-all` (also the FDv2 data system's FDv1 fallback).
    Fdv1Poll,
    /// FDv2 streaming, `GET …/sdk/stream`.
    Fdv2Stream,
    /// FDv2 polling, `GET …/sdk/poll`.
    Fdv2Poll,
    /// Analytics events, `POST …/bulk` (a JSON array of events).
    Bulk,
    /// Diagnostic events, `POST …/diagnostic` (one diagnostic event object).
    Diagnostic,
}

impl Endpoint {
    /// Every endpoint.
    pub const ALL: [Self; 6] = [
        Self::Fdv1Stream,
        Self::Fdv1Poll,
        Self::Fdv2Stream,
        Self::Fdv2Poll,
        Self::Bulk,
        Self::Diagnostic,
    ];

    /// The path it is served at: `/all`, `/sdk/latest-all`, `/sdk/stream`, `/sdk/poll`,
    /// `/bulk`, `/diagnostic`.
    ///
    /// ```
    /// assert_eq!(flagsync_server::Endpoint::Fdv1Stream.path(), "/all");
    /// ```
    pub fn path(self) -> &'static str {
        match self {
            Self::Fdv1Stream => "/all",
            Self::Fdv1Poll => "/sdk/latest-all",
            Self::Fdv2Stream => "/sdk/stream",
            Self::Fdv2Poll => "/sdk/poll",
            Self::Bulk => "/bulk",
            Self::Diagnostic => "/diagnostic",
        }
    }

    /// The endpoint a request path (without the query) ends with, if any.
    ///
    /// ```
    /// use flagsync_server::Endpoint;
    ///
    /// assert_eq!(Endpoint::of_path("/all"), Some(Endpoint::Fdv1Stream));
    /// assert_eq!(Endpoint::of_path("/base/sdk/latest-all"), Some(Endpoint::Fdv1Poll));
    /// assert_eq!(Endpoint::of_path("/sdk/other"), None);
    /// ```
    pub fn of_path(path: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| path.ends_with(e.path()))
    }

    /// True for the FDv2 endpoints (`/sdk/stream`, `/sdk/poll`).
    ///
    /// ```
    /// assert!(!flagsync_server::Endpoint::Fdv1Poll.is_fdv2());
    /// ```
    pub fn is_fdv2(self) -> bool {
        matches!(self, Self::Fdv2Stream | Self::Fdv2Poll)
    }

    /// True for the events endpoints (`/bulk`, `/diagnostic`), which take `POST`.
    ///
    /// ```
    /// use flagsync_server::Endpoint;
    ///
    /// assert!(Endpoint::Bulk.is_events() && Endpoint::Diagnostic.is_events());
    /// assert!(!Endpoint::Fdv1Stream.is_events());
    /// ```
    pub fn is_events(self) -> bool {
        matches!(self, Self::Bulk | Self::Diagnostic)
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.path())
    }
}

/// An endpoint name that is not one of the six paths.
///
/// ```
/// assert!("/sdk/nope".parse::<flagsync_server::Endpoint>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown endpoint {0:?} (expected /all, /sdk/latest-all, /sdk/stream, /sdk/poll, /bulk or /diagnostic)"
)]
pub struct UnknownEndpoint(pub String);

impl FromStr for Endpoint {
    type Err = UnknownEndpoint;

    /// The path, with or without its leading `/`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let path = s.trim();
        let path = path.strip_prefix('/').unwrap_or(path);
        Self::ALL
            .into_iter()
            .find(|e| &e.path()[1..] == path)
            .ok_or_else(|| UnknownEndpoint(s.to_owned()))
    }
}

/// The faults in effect; see the fault methods of [`super::ServerHandle`].
#[derive(Debug, Default)]
pub(super) struct Faults {
    /// Answer the next `n` requests, whatever the endpoint, with this status.
    fail_next: Option<(u16, usize)>,
    /// Hold every request unanswered.
    hang: bool,
    /// Answer every request to an endpoint with a status.
    fail: [Option<u16>; Endpoint::ALL.len()],
    /// Hold every request to an endpoint unanswered.
    hang_endpoint: [bool; Endpoint::ALL.len()],
    /// Send `X-LD-FD-Fallback: true` on every FDv2 response.
    pub(super) fdv1_fallback: bool,
    /// FDv2 streams left that end with a `goodbye` after their first payload.
    goodbye: usize,
    /// FDv2 full payloads left that carry an `error` event half-way.
    payload_error: usize,
}

impl Faults {
    pub(super) fn set_fail_next(&mut self, count: usize, status: u16) {
        self.fail_next = (count > 0).then_some((status, count));
    }

    pub(super) fn set_hang(&mut self, hang: bool) {
        self.hang = hang;
    }

    pub(super) fn set_fail(&mut self, endpoint: Endpoint, status: Option<u16>) {
        self.fail[endpoint.index()] = status;
    }

    pub(super) fn set_hang_endpoint(&mut self, endpoint: Endpoint, hang: bool) {
        self.hang_endpoint[endpoint.index()] = hang;
    }

    pub(super) fn set_goodbye(&mut self, count: usize) {
        self.goodbye = count;
    }

    pub(super) fn set_payload_error(&mut self, count: usize) {
        self.payload_error = count;
    }

    /// Whether a request to `endpoint` (`None`: an unknown path) is held unanswered.
    pub(super) fn hangs(&self, endpoint: Option<Endpoint>) -> bool {
        self.hang || endpoint.is_some_and(|e| self.hang_endpoint[e.index()])
    }

    /// The status to answer a request to `endpoint` with instead of serving it, if any;
    /// counts down `fail_next`.
    pub(super) fn take_failure(&mut self, endpoint: Option<Endpoint>) -> Option<u16> {
        if let Some((status, n)) = &mut self.fail_next {
            let status = *status;
            *n -= 1;
            if *n == 0 {
                self.fail_next = None;
            }
            return Some(status);
        }
        endpoint.and_then(|e| self.fail[e.index()])
    }

    /// Whether the FDv2 stream being opened ends with a `goodbye`; counts down.
    pub(super) fn take_goodbye(&mut self) -> bool {
        take(&mut self.goodbye)
    }

    /// Whether the full payload being rendered carries an `error` event; counts down.
    pub(super) fn take_payload_error(&mut self) -> bool {
        take(&mut self.payload_error)
    }
}

/// Count down; `usize::MAX` means "every time".
fn take(count: &mut usize) -> bool {
    match *count {
        0 => false,
        usize::MAX => true,
        _ => {
            *count -= 1;
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fail_next_comes_first_and_counts_down() {
        let mut f = Faults::default();
        f.set_fail(Endpoint::Fdv2Stream, Some(401));
        f.set_fail_next(1, 503);
        assert_eq!(f.take_failure(Some(Endpoint::Fdv2Stream)), Some(503));
        assert_eq!(f.take_failure(Some(Endpoint::Fdv2Stream)), Some(401));
        assert_eq!(f.take_failure(Some(Endpoint::Fdv2Poll)), None);
        assert_eq!(f.take_failure(None), None);
        f.set_fail(Endpoint::Fdv2Stream, None);
        assert_eq!(f.take_failure(Some(Endpoint::Fdv2Stream)), None);
    }

    #[test]
    fn counts_and_always() {
        let mut f = Faults::default();
        f.set_goodbye(2);
        assert!(f.take_goodbye() && f.take_goodbye() && !f.take_goodbye());
        f.set_payload_error(usize::MAX);
        assert!((0..100).all(|_| f.take_payload_error()));
    }

    #[test]
    fn hang_per_endpoint() {
        let mut f = Faults::default();
        f.set_hang_endpoint(Endpoint::Fdv2Poll, true);
        assert!(f.hangs(Some(Endpoint::Fdv2Poll)));
        assert!(!f.hangs(Some(Endpoint::Fdv2Stream)) && !f.hangs(None));
        f.set_hang(true);
        assert!(f.hangs(None));
    }

    #[test]
    fn endpoint_names() {
        for e in Endpoint::ALL {
            assert_eq!(e.path().parse::<Endpoint>(), Ok(e));
            assert_eq!(e.path()[1..].parse::<Endpoint>(), Ok(e));
            assert_eq!(Endpoint::of_path(&format!("/base{}", e.path())), Some(e));
        }
        assert!("sdk".parse::<Endpoint>().is_err());
    }
}
