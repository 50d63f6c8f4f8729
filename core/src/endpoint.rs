//! Base URIs: where to connect, and the path to put in front of request paths.

use std::fmt;

/// A host to connect to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// Use TLS (`https`).
    pub tls: bool,
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl Endpoint {
    /// The `Host` header value: the host, with the port when it is not the default.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let default = if self.tls { 443 } else { 80 };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

/// A parsed `http` or `https` URL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Url {
    /// Where to connect.
    pub endpoint: Endpoint,
    /// The path, without trailing slashes (`""` for the root).
    pub path: String,
    /// The query string without `?`, if any.
    pub query: Option<String>,
}

/// Why a URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    /// Only `http://` and `https://` URLs are supported.
    #[error("unsupported scheme (use http:// or https://)")]
    Scheme,
    /// The host is missing or malformed.
    #[error("missing or malformed host")]
    Host,
    /// The port is not a number from 1 to 65535.
    #[error("malformed port")]
    Port,
}

impl Url {
    /// Parse `http[s]://host[:port][/path][?query]`; trailing slashes of the path are
    /// removed (PROTOCOL.md B §1.1). A fragment is dropped.
    pub fn parse(s: &str) -> Result<Self, UrlError> {
        let s = s.trim();
        let (tls, rest) = if let Some(r) = strip_prefix_ci(s, "https://") {
            (true, r)
        } else if let Some(r) = strip_prefix_ci(s, "http://") {
            (false, r)
        } else {
            return Err(UrlError::Scheme);
        };
        let rest = rest.split('#').next().unwrap_or_default();
        let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(auth_end);
        let authority = authority.rsplit('@').next().unwrap_or_default();
        let (host, port) = split_host_port(authority)?;
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or(UrlError::Port)?,
            None if tls => 443,
            None => 80,
        };
        let (path, query) = match tail.split_once('?') {
            Some((p, q)) => (p, Some(q.to_owned())),
            None => (tail, None),
        };
        Ok(Self {
            endpoint: Endpoint {
                tls,
                host: host.to_owned(),
                port,
            },
            path: path.trim_end_matches('/').to_owned(),
            query,
        })
    }

    /// Resolve a redirect `Location` (absolute, or a path on the same host).
    pub fn join(&self, location: &str) -> Result<Self, UrlError> {
        if location.starts_with('/') && !location.starts_with("//") {
            let (path, query) = match location.split_once('?') {
                Some((p, q)) => (p.to_owned(), Some(q.to_owned())),
                None => (location.to_owned(), None),
            };
            Ok(Self {
                endpoint: self.endpoint.clone(),
                path,
                query,
            })
        } else if let Some(rest) = location.strip_prefix("//") {
            let scheme = if self.endpoint.tls {
                "https://"
            } else {
                "http://"
            };
            Self::parse(&format!("{scheme}{rest}"))
        } else {
            Self::parse(location)
        }
    }

    /// Scheme, host and port are the same: `other` is on this URL's origin (RFC 6454),
    /// where request credentials may go (PROTOCOL.md A.3). Host names compare without
    /// regard to ASCII case.
    pub fn same_origin(&self, other: &Self) -> bool {
        self.endpoint.tls == other.endpoint.tls
            && self.endpoint.port == other.endpoint.port
            && self
                .endpoint
                .host
                .eq_ignore_ascii_case(&other.endpoint.host)
    }

    /// `scheme://host[:port]`, for messages (no path, query or user info).
    pub fn origin(&self) -> String {
        let scheme = if self.endpoint.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.endpoint.host_header())
    }

    /// This URL with `path` appended and `query` pairs added (form-URL-encoded).
    pub fn with_path(&self, path: &str, query: &[(&str, &str)]) -> Self {
        let mut q = self.query.clone().unwrap_or_default();
        for (k, v) in query {
            if !q.is_empty() {
                q.push('&');
            }
            q.push_str(&form_encode(k));
            q.push('=');
            q.push_str(&form_encode(v));
        }
        Self {
            endpoint: self.endpoint.clone(),
            path: format!("{}{path}", self.path),
            query: (!q.is_empty()).then_some(q),
        }
    }

    /// The request target: path (or `/`) and query.
    pub fn target(&self) -> String {
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        match &self.query {
            Some(q) => format!("{path}?{q}"),
            None => path.to_owned(),
        }
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.endpoint.tls { "https" } else { "http" };
        write!(
            f,
            "{scheme}://{}{}",
            self.endpoint.host_header(),
            self.target()
        )
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn split_host_port(authority: &str) -> Result<(&str, Option<&str>), UrlError> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or(UrlError::Host)?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or(UrlError::Host)?),
        };
        if host.is_empty() {
            return Err(UrlError::Host);
        }
        return Ok((host, port));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    if host.is_empty() || host.contains([' ', '[', ']']) {
        return Err(UrlError::Host);
    }
    Ok((host, port))
}

/// `application/x-www-form-urlencoded` encoding of one value.
pub fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_ports_and_paths() {
        let u = Url::parse("https://stream.launchdarkly.com/").unwrap();
        assert_eq!(
            (u.endpoint.tls, u.endpoint.port, u.path.as_str()),
            (true, 443, "")
        );
        assert_eq!(u.with_path("/all", &[]).target(), "/all");
        let u = Url::parse("http://127.0.0.1:8080/base//").unwrap();
        assert_eq!(u.endpoint.host_header(), "127.0.0.1:8080");
        assert_eq!(
            u.with_path("/all", &[("filter", "a b&c")]).target(),
            "/base/all?filter=a+b%26c"
        );
        let u = Url::parse("http://[::1]:9/x?y=1").unwrap();
        assert_eq!((u.endpoint.host.as_str(), u.endpoint.port), ("::1", 9));
        assert_eq!(
            u.with_path("/all", &[("filter", "f")]).target(),
            "/x/all?y=1&filter=f"
        );
    }

    #[test]
    fn rejects_bad_urls() {
        assert_eq!(Url::parse("ftp://x"), Err(UrlError::Scheme));
        assert_eq!(Url::parse("http://"), Err(UrlError::Host));
        assert_eq!(Url::parse("http://h:99999"), Err(UrlError::Port));
        assert_eq!(Url::parse("http://h:0"), Err(UrlError::Port));
        assert_eq!(Url::parse("localhost:8080"), Err(UrlError::Scheme));
    }

    #[test]
    fn joins_redirect_locations() {
        let u = Url::parse("http://a:1/all").unwrap();
        assert_eq!(
            u.join("/other?q").unwrap().to_string(),
            "http://a:1/other?q"
        );
        assert_eq!(u.join("https://b/x").unwrap().to_string(), "https://b/x");
        assert_eq!(u.join("//c:5/y").unwrap().to_string(), "http://c:5/y");
    }

    #[test]
    fn same_origin_is_scheme_host_and_port() {
        let u = Url::parse("https://Sdk.Test/all").unwrap();
        assert!(u.same_origin(&Url::parse("https://sdk.test:443/moved?x").unwrap()));
        assert!(!u.same_origin(&Url::parse("http://sdk.test:443/all").unwrap()));
        assert!(!u.same_origin(&Url::parse("https://sdk.test:444/all").unwrap()));
        assert!(!u.same_origin(&Url::parse("https://other.test/all").unwrap()));
        assert_eq!(u.origin(), "https://Sdk.Test");
    }
}
