//! [`RecordedRequest`]: a request the server received, kept for tests.

use crate::fault::Endpoint;
use crate::http;

/// A request the server received, for assertions in tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// The method, e.g. `GET`.
    pub method: String,
    /// The path and query as sent, e.g. `/all?filter=x`.
    pub target: String,
    /// Every header, in order.
    pub headers: Vec<(String, String)>,
}

impl RecordedRequest {
    /// The first value of header `name` (case-insensitive).
    ///
    /// ```
    /// use flagsync_server::RecordedRequest;
    ///
    /// let req = RecordedRequest {
    ///     method: "GET".into(),
    ///     target: "/sdk/stream".into(),
    ///     headers: vec![("Authorization".into(), "sdk-key".into())],
    /// };
    /// assert_eq!(req.header("authorization"), Some("sdk-key"));
    /// ```
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The endpoint the path names, if any.
    ///
    /// ```
    /// use flagsync_server::{Endpoint, RecordedRequest};
    ///
    /// let req = RecordedRequest {
    ///     method: "GET".into(),
    ///     target: "/sdk/poll?basis=abc-1".into(),
    ///     headers: vec![],
    /// };
    /// assert_eq!(req.endpoint(), Some(Endpoint::Fdv2Poll));
    /// ```
    pub fn endpoint(&self) -> Option<Endpoint> {
        Endpoint::of_path(self.target.split(['?', '#']).next().unwrap_or(""))
    }

    /// The first value of query parameter `name`, percent-decoded (e.g. FDv2's
    /// `basis`).
    ///
    /// ```
    /// use flagsync_server::RecordedRequest;
    ///
    /// let req = RecordedRequest {
    ///     method: "GET".into(),
    ///     target: "/sdk/stream?filter=f&basis=abc-1".into(),
    ///     headers: vec![],
    /// };
    /// assert_eq!(req.query("basis").as_deref(), Some("abc-1"));
    /// assert_eq!(req.query("other"), None);
    /// ```
    pub fn query(&self, name: &str) -> Option<String> {
        http::query_param(&self.target, name)
    }
}
