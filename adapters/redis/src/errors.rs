//! Redis errors as store faults, and URLs fit for a log.

use flagsync::persist::StoreError;

/// `e` as a [`StoreError`]: authentication, configuration, reachability, or another
/// failure of the server.
pub(crate) fn map_error(e: redis::RedisError) -> StoreError {
    // A RedisError's text holds the server's message or the I/O error, never the URL.
    let text = e.to_string();
    let code = e.code().unwrap_or_default();
    if matches!(e.kind(), redis::ErrorKind::AuthenticationFailed)
        || matches!(code, "NOAUTH" | "WRONGPASS")
        || text.contains("NOAUTH")
        || text.contains("WRONGPASS")
        || text.contains("invalid password")
    {
        StoreError::Auth(text)
    } else if matches!(code, "NOPERM") || text.contains("NOPERM") {
        // An ACL user without the rights the store needs: waiting will not help.
        StoreError::Auth(format!(
            "{text} (the Redis user needs read and write rights on the prefix's keys)"
        ))
    } else if matches!(code, "READONLY") || text.starts_with("READONLY") {
        // A master demoted under an open connection (a Sentinel failover): another
        // connection reaches the new one.
        StoreError::Unreachable(format!("{text} (the server is a replica now)"))
    } else if text.contains("DB index is out of range") || text.contains("invalid DB index") {
        StoreError::Config(text)
    } else if let Some(cause) = tls_refusal(&text) {
        StoreError::Config(format!("redis TLS: {cause} ({text})"))
    } else if e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
    {
        StoreError::Unreachable(text)
    } else {
        StoreError::Backend(text)
    }
}

/// What a TLS failure in `text` (a redis error's text, which holds the rustls error)
/// means, when waiting will not clear it: a certificate refused by either side, or a
/// server that does not speak TLS.
fn tls_refusal(text: &str) -> Option<&'static str> {
    const CLIENT_CERT_ALERTS: [&str; 3] = ["CertificateRequired", "BadCertificate", "UnknownCA"];
    if text.contains("invalid peer certificate") {
        Some(
            "the server's certificate is not trusted; give the CA that signed it \
             (tls_ca_pem, --redis-ca-file), and check the host name",
        )
    } else if text.contains("received fatal alert")
        && CLIENT_CERT_ALERTS.iter().any(|a| text.contains(a))
    {
        Some(
            "the server refused the client certificate, or requires one \
             (tls_client_cert, --redis-client-cert)",
        )
    } else if text.contains("received fatal alert") || text.contains("peer is incompatible") {
        Some("the TLS handshake was refused")
    } else if text.contains("received corrupt message") {
        Some("the server does not speak TLS there (use redis:// for a plaintext port)")
    } else if text.contains("Unable to parse") && text.contains("PEM")
        || text.contains("Unable to extract private key")
        || text.contains("Unable to build client with TLS")
    {
        Some("the certificates or key given do not parse (PEM expected)")
    } else {
        None
    }
}

/// `url` with any password replaced by `***`: the one in the user information
/// (`redis://user:password@host`, also when the password holds `/` or `@`), and a
/// `pass` or `password` query parameter (`redis+unix:///path?pass=…`).
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        // Not a URL: only its part before any `@` could be a secret's end.
        return match url.rsplit_once('@') {
            Some((_, host)) => format!("***@{host}"),
            None => url.to_owned(),
        };
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let (before, query) = rest.split_at(end);
    let mut out = format!("{scheme}://");
    match before.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            out.push_str(&format!("{user}:***@{host}"));
        }
        None => out.push_str(before),
    }
    // `?a=1&pass=x#f`: each parameter named like a password loses its value.
    let mut rest = query;
    while !rest.is_empty() {
        let sep = rest[1..].find(['&', '#']).map_or(rest.len(), |i| i + 1);
        let (param, tail) = rest.split_at(sep);
        let (lead, body) = param.split_at(1);
        match body.split_once('=') {
            Some((name, _)) if lead != "#" && matches!(name, "pass" | "password") => {
                out.push_str(&format!("{lead}{name}=***"));
            }
            _ => out.push_str(param),
        }
        rest = tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use flagsync_core::Kind;

    use super::*;
    use crate::RedisStore;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact_url("redis://user:s3cret@h:6379/2"),
            "redis://user:***@h:6379/2"
        );
        assert_eq!(redact_url("redis://:s3cret@h"), "redis://:***@h");
        assert_eq!(redact_url("redis://h:1/0"), "redis://h:1/0");
        // ACL users, over TLS too.
        assert_eq!(
            redact_url("redis://app:pw-42@h:6379/0"),
            "redis://app:***@h:6379/0"
        );
        assert_eq!(
            redact_url("rediss://app:pw-42@h:6380/1"),
            "rediss://app:***@h:6380/1"
        );
        // A password holding the URL's own delimiters.
        assert_eq!(redact_url("redis://app:a/b@c@h/0"), "redis://app:***@h/0");
        assert_eq!(redact_url("redis://app:p%40ss@h"), "redis://app:***@h");
        // Query parameters, as unix-socket URLs carry them.
        assert_eq!(
            redact_url("redis+unix:///run/r.sock?db=1&pass=pw-42&user=app"),
            "redis+unix:///run/r.sock?db=1&pass=***&user=app"
        );
        assert_eq!(
            redact_url("redis://h/0?password=pw-42#x"),
            "redis://h/0?password=***#x"
        );
        assert_eq!(redact_url("app:pw-42@h"), "***@h");
        for url in [
            "redis://app:pw-42@127.0.0.1:1/3",
            "rediss://app:pw-42@127.0.0.1:1/3",
        ] {
            if url.starts_with("rediss") && !cfg!(feature = "tls") {
                continue;
            }
            let b = RedisStore::builder(url);
            assert!(!format!("{b:?}").contains("pw-42"));
            let debug = format!("{:?}", b.build().unwrap());
            assert!(!debug.contains("pw-42"), "{debug}");
            let big = crate::RedisBigSegmentStore::builder(url);
            assert!(!format!("{big:?}").contains("pw-42"));
            let debug = format!("{:?}", big.build().unwrap());
            assert!(!debug.contains("pw-42"), "{debug}");
        }
        let b = RedisStore::builder("redis://u:hunter2@127.0.0.1:1/3");
        assert!(!format!("{b:?}").contains("hunter2"));
        let store = b.build().unwrap();
        let debug = format!("{store:?}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(debug.contains("127.0.0.1:1/3"), "{debug}");
    }

    #[test]
    fn tls_refusals_and_missing_rights_are_permanent() {
        let io = |text: &str| redis::RedisError::from(std::io::Error::other(text.to_owned()));
        for text in [
            "invalid peer certificate: UnknownIssuer",
            "received fatal alert: CertificateRequired",
            "received corrupt message of type InvalidContentType",
            "Unable to parse root certificate PEM: bad",
        ] {
            let e = map_error(io(text));
            assert!(e.is_permanent(), "{text}: {e:?}");
            assert!(e.to_string().contains("redis TLS"), "{e}");
        }
        let e = map_error(io("invalid peer certificate: UnknownIssuer"));
        assert!(e.to_string().contains("not trusted"), "{e}");
        assert!(!map_error(io("connection refused")).is_permanent());
    }

    #[test]
    fn keys_follow_the_launchdarkly_layout() {
        let store = RedisStore::new("redis://127.0.0.1:1").unwrap();
        assert_eq!(store.hash_key(Kind::Flag), "launchdarkly:features");
        assert_eq!(store.hash_key(Kind::Segment), "launchdarkly:segments");
        assert_eq!(store.inited_key(), "launchdarkly:$inited");
        let store = RedisStore::builder("redis://127.0.0.1:1")
            .prefix("p")
            .build()
            .unwrap();
        assert_eq!(store.hash_key(Kind::Flag), "p:features");
    }

    #[test]
    fn malformed_urls_are_config_errors() {
        assert!(matches!(
            RedisStore::new("nonsense:/x"),
            Err(StoreError::Config(_))
        ));
    }
}
