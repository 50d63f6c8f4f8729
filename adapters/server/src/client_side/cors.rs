//! CORS for the client-side endpoints, as LaunchDarkly's Relay Proxy answers browsers
//! (its `internal/middleware` CORS handler): the request's `Origin` echoed when the
//! environment allows it (any, unless origins are configured; `*` without an
//! `Origin`), the LaunchDarkly request headers allowed, `Date` exposed, a five-minute
//! preflight cache, no credentials. A preflight (`OPTIONS`) is answered `200` on every
//! client-side path, whatever the environment.

/// The request headers browsers may send (the Relay Proxy's list).
pub(crate) const ALLOWED_HEADERS: &str = "Cache-Control, Content-Type, Content-Length, \
Accept-Encoding, X-LaunchDarkly-User-Agent, X-LaunchDarkly-Payload-ID, \
X-LaunchDarkly-Wrapper, X-LaunchDarkly-Event-Schema, X-LaunchDarkly-Tags";

/// The methods of the client-side endpoints.
pub(crate) const ALLOWED_METHODS: &str = "OPTIONS, GET, REPORT, POST";

/// How long a browser may cache a preflight's answer, in seconds.
pub(crate) const MAX_AGE: &str = "300";

/// The CORS headers of a response to a request from `origin`, for an environment
/// allowing `allowed` (empty: any). An origin not allowed is not echoed: the first
/// allowed one is named instead, and the browser refuses the response.
pub(crate) fn headers(origin: Option<&str>, allowed: &[String]) -> Vec<(&'static str, String)> {
    let allow_origin = match origin {
        Some(o) if allowed.is_empty() || allowed.iter().any(|a| a == o) => o.to_owned(),
        Some(_) => allowed[0].clone(),
        None if allowed.is_empty() => "*".to_owned(),
        None => allowed[0].clone(),
    };
    vec![
        ("Access-Control-Allow-Origin", allow_origin),
        ("Access-Control-Allow-Methods", ALLOWED_METHODS.to_owned()),
        ("Access-Control-Allow-Headers", ALLOWED_HEADERS.to_owned()),
        ("Access-Control-Allow-Credentials", "false".to_owned()),
        ("Access-Control-Expose-Headers", "Date".to_owned()),
        ("Access-Control-Max-Age", MAX_AGE.to_owned()),
        ("Vary", "Origin".to_owned()),
    ]
}

#[cfg(test)]
mod tests {
    use super::headers;

    #[test]
    fn echoes_allowed_origins_only() {
        let any = headers(Some("https://a.example"), &[]);
        assert_eq!(any[0].1, "https://a.example");
        assert_eq!(headers(None, &[])[0].1, "*");
        let only = vec!["https://b.example".to_owned()];
        assert_eq!(
            headers(Some("https://b.example"), &only)[0].1,
            "https://b.example"
        );
        assert_eq!(
            headers(Some("https://evil.example"), &only)[0].1,
            "https://b.example"
        );
    }
}
