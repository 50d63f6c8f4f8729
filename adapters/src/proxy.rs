//! HTTP proxies: an explicit proxy URL, or `HTTP_PROXY` / `HTTPS_PROXY` / `NO_PROXY`
//! from the environment. `https` targets are tunnelled with `CONNECT`, so the proxy
//! never sees the request (nor its `Authorization` header); a plain-`http` request is
//! sent to the proxy in absolute form, as HTTP proxies expect (the proxy reads
//! cleartext traffic either way).

use std::fmt;

use flagsync_core::endpoint::{Endpoint, Url};

/// A proxy server to tunnel through.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Proxy {
    pub(crate) host: String,
    pub(crate) port: u16,
    /// `Proxy-Authorization` value (`Basic …`), from the URL's user info.
    pub(crate) authorization: Option<String>,
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Proxy")
            .field("host", &self.host)
            .field("port", &self.port)
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Why a proxy URL was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid proxy URL: {0}")]
pub struct ProxyError(pub(crate) String);

impl Proxy {
    /// Parse `http://[user[:password]@]host[:port]` (the scheme may be left out; the
    /// port defaults to 80).
    pub(crate) fn parse(s: &str) -> Result<Self, ProxyError> {
        let s = s.trim();
        let with_scheme = if s.contains("://") {
            s.to_owned()
        } else {
            format!("http://{s}")
        };
        if !with_scheme.to_ascii_lowercase().starts_with("http://") {
            return Err(ProxyError("only http:// proxies are supported".into()));
        }
        let url = Url::parse(&with_scheme).map_err(|e| ProxyError(e.to_string()))?;
        let rest = &with_scheme["http://".len()..];
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        let authorization = authority
            .rsplit_once('@')
            .map(|(userinfo, _)| format!("Basic {}", base64(&percent_decode(userinfo))));
        Ok(Self {
            host: url.endpoint.host,
            port: url.endpoint.port,
            authorization,
        })
    }
}

/// Which proxy (if any) each target uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProxySettings {
    /// Used for every target when set.
    pub(crate) explicit: Option<Proxy>,
    /// From `HTTP_PROXY`, for `http` targets.
    pub(crate) http: Option<Proxy>,
    /// From `HTTPS_PROXY`, for `https` targets.
    pub(crate) https: Option<Proxy>,
    /// From `NO_PROXY`: host suffixes (or `*`) that bypass the environment proxies.
    pub(crate) no_proxy: Vec<String>,
}

impl ProxySettings {
    /// Read the environment through `var` (upper-case names first, then lower-case).
    /// Malformed values are ignored.
    pub(crate) fn from_env(var: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| {
            var(name)
                .or_else(|| var(&name.to_ascii_lowercase()))
                .filter(|v| !v.trim().is_empty())
        };
        let parse = |name: &str| get(name).and_then(|v| Proxy::parse(&v).ok());
        Self {
            explicit: None,
            http: parse("HTTP_PROXY"),
            https: parse("HTTPS_PROXY"),
            no_proxy: get("NO_PROXY")
                .map(|v| {
                    v.split(',')
                        .map(|s| s.trim().trim_start_matches('.').to_ascii_lowercase())
                        .filter(|s| !s.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The proxy for `endpoint`, if any.
    pub(crate) fn for_endpoint(&self, endpoint: &Endpoint) -> Option<&Proxy> {
        if let Some(p) = &self.explicit {
            return Some(p);
        }
        let proxy = if endpoint.tls {
            &self.https
        } else {
            &self.http
        };
        let proxy = proxy.as_ref()?;
        let host = endpoint.host.to_ascii_lowercase();
        let bypass = self.no_proxy.iter().any(|entry| {
            let entry = entry.split(':').next().unwrap_or_default();
            entry == "*"
                || host == entry
                || host
                    .strip_suffix(entry)
                    .is_some_and(|prefix| prefix.ends_with('.'))
        });
        (!bypass).then_some(proxy)
    }
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(tls: bool, host: &str) -> Endpoint {
        Endpoint {
            tls,
            host: host.into(),
            port: 443,
        }
    }

    #[test]
    fn parses_proxy_urls() {
        let p = Proxy::parse("http://user:p%40ss@proxy.local:3128/").unwrap();
        assert_eq!((p.host.as_str(), p.port), ("proxy.local", 3128));
        assert_eq!(p.authorization.as_deref(), Some("Basic dXNlcjpwQHNz"));
        assert!(!format!("{p:?}").contains("dXNlcjpwQHNz"));
        let p = Proxy::parse("127.0.0.1:8080").unwrap();
        assert_eq!(
            (p.host.as_str(), p.port, p.authorization),
            ("127.0.0.1", 8080, None)
        );
        assert!(Proxy::parse("socks5://h:1").is_err());
        assert!(Proxy::parse("http://").is_err());
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b"a"), "YQ==");
    }

    #[test]
    fn environment_proxies_and_no_proxy() {
        let env = |name: &str| match name {
            "HTTPS_PROXY" => Some("http://secure:1".to_owned()),
            "http_proxy" => Some("plain:2".to_owned()),
            "NO_PROXY" => Some("internal.example, .corp.example,localhost".to_owned()),
            _ => None,
        };
        let s = ProxySettings::from_env(env);
        assert_eq!(s.for_endpoint(&ep(true, "stream.example")).unwrap().port, 1);
        assert_eq!(
            s.for_endpoint(&ep(false, "stream.example")).unwrap().port,
            2
        );
        assert!(s.for_endpoint(&ep(true, "internal.example")).is_none());
        assert!(s.for_endpoint(&ep(true, "a.corp.example")).is_none());
        assert!(s.for_endpoint(&ep(true, "notcorp.example")).is_some());
        assert!(s.for_endpoint(&ep(false, "LOCALHOST")).is_none());
        let all = ProxySettings::from_env(|n| match n {
            "HTTP_PROXY" => Some("p:3".into()),
            "NO_PROXY" => Some("*".into()),
            _ => None,
        });
        assert!(all.for_endpoint(&ep(false, "x")).is_none());
        assert_eq!(ProxySettings::from_env(|_| None), ProxySettings::default());
    }
}
