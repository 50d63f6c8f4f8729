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
    } else if text.contains("DB index is out of range") || text.contains("invalid DB index") {
        StoreError::Config(text)
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

/// `url` with any password replaced by `***`.
pub(crate) fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{scheme}://{user}:***@{host}{path}")
        }
        None => url.to_owned(),
    }
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
        let b = RedisStore::builder("redis://u:hunter2@127.0.0.1:1/3");
        assert!(!format!("{b:?}").contains("hunter2"));
        let store = b.build().unwrap();
        let debug = format!("{store:?}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(debug.contains("127.0.0.1:1/3"), "{debug}");
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
