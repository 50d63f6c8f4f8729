//! Redis Cluster: the hash-tag rule for prefixes, and the cluster client.
//!
//! A full write replaces `<prefix>:features`, `<prefix>:segments` and `<prefix>:$inited`
//! in one `MULTI`/`EXEC` transaction, and each upsert `WATCH`es a hash and writes it
//! with the writer's count (`<prefix>:$flagsync:<id>`). Redis Cluster runs a
//! transaction only when all its keys hash to one slot, which keys with different names
//! do only through a hash tag: the part of the key between the first `{` and the next
//! `}`, when it is not empty, is all that is hashed. So on a cluster the prefix must
//! hold a non-empty hash tag (`{launchdarkly}`, `env-{prod}`), and every key of the
//! prefix then lives on one node.
//!
//! A prefix without one is refused when the store is built
//! ([`StoreError::Config`]). LaunchDarkly's own integrations do less: the Node SDK's
//! store sends the same transaction and fails on every full write with `CROSSSLOT`
//! (launchdarkly/js-core#872), and the Go SDK's go-redis store splits its full write
//! into a pipeline per node, so readers can see a half-written data set with
//! `$inited` set. Refusing up front keeps a full write atomic, and says what to change
//! before any data is written. The big-segment store keeps the same rule: it reads a
//! context's include and exclude sets in one round trip, from one node.

use std::time::Duration;

use flagsync::persist::StoreError;

use crate::tls::{self, TlsSettings};

/// The hash tag of `prefix`, as Redis Cluster finds it in a key that starts with it:
/// what is between the first `{` and the first `}` after it, if that is not empty and
/// the `}` is within the prefix.
pub(crate) fn hash_tag(prefix: &str) -> Option<&str> {
    let open = prefix.find('{')?;
    let close = prefix[open + 1..].find('}')? + open + 1;
    let tag = &prefix[open + 1..close];
    (!tag.is_empty()).then_some(tag)
}

/// Refuse `prefix` for a cluster unless it holds a hash tag.
pub(crate) fn check_prefix(prefix: &str) -> Result<(), StoreError> {
    match hash_tag(prefix) {
        Some(_) => Ok(()),
        None => Err(StoreError::Config(format!(
            "on Redis Cluster the prefix needs a non-empty hash tag so that all of its keys \
             share one slot (a full write changes them in one transaction): use \
             \"{{{prefix}}}\" instead of {prefix:?}, the same prefix in every SDK and the \
             Relay Proxy that share the data"
        ))),
    }
}

/// A cluster client for the seed `nodes` (`redis://[user:password@]host:port`,
/// `rediss://` for TLS, or `host:port`; the first one's credentials and scheme count
/// for every node, as the cluster's nodes share them).
pub(crate) fn client(
    nodes: &[String],
    tls: &TlsSettings,
    connect_timeout: Duration,
    response_timeout: Duration,
) -> Result<redis::cluster::ClusterClient, StoreError> {
    if nodes.is_empty() {
        return Err(StoreError::Config(
            "redis cluster: no node address was given".into(),
        ));
    }
    let urls: Vec<String> = nodes.iter().map(|n| tls::node_url(n)).collect();
    let secure = tls::is_secure(&urls[0]);
    tls::check(secure, tls)?;
    let infos = urls
        .iter()
        .map(|u| tls::connection_info(u))
        .collect::<Result<Vec<_>, _>>()?;
    if infos.iter().any(|i| i.redis_settings().db() != 0) {
        return Err(StoreError::Config(
            "redis cluster: a node URL names a database; Redis Cluster has database 0 only".into(),
        ));
    }
    let builder = redis::cluster::ClusterClientBuilder::new(infos)
        .connection_timeout(connect_timeout)
        .response_timeout(response_timeout)
        // A moved slot or a node that fails over is retried a few times, briefly; a
        // longer outage is the store's failure, which the SDK retries.
        .retries(3)
        .min_retry_wait(20)
        .max_retry_wait(200);
    #[cfg(feature = "tls")]
    let builder = if tls.is_default() {
        builder
    } else {
        builder.certs(tls::certificates(tls))
    };
    builder
        .build()
        .map_err(|e| StoreError::Config(format!("redis cluster: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_tags_are_found_as_redis_cluster_finds_them() {
        assert_eq!(hash_tag("{launchdarkly}"), Some("launchdarkly"));
        assert_eq!(hash_tag("env-{prod}"), Some("prod"));
        assert_eq!(hash_tag("{a}{b}"), Some("a"));
        assert_eq!(hash_tag("x{a{b}"), Some("a{b"));
        for none in [
            "launchdarkly",
            "{}launchdarkly",
            "{launchdarkly",
            "launch}{",
            "",
        ] {
            assert_eq!(hash_tag(none), None, "{none}");
        }
    }

    #[test]
    fn a_prefix_without_a_hash_tag_is_a_config_error() {
        assert!(check_prefix("{launchdarkly}").is_ok());
        let e = check_prefix("launchdarkly").unwrap_err();
        assert!(e.is_permanent());
        assert!(e.to_string().contains("{launchdarkly}"), "{e}");
        assert!(check_prefix("{}x").is_err());
    }

    #[test]
    fn cluster_settings_that_cannot_work_are_config_errors() {
        let s = Duration::from_secs(1);
        let tls = TlsSettings::default();
        let client = |nodes: &[&str]| {
            let nodes: Vec<String> = nodes.iter().map(|n| (*n).to_owned()).collect();
            super::client(&nodes, &tls, s, s)
        };
        assert!(matches!(client(&[]), Err(StoreError::Config(_))));
        assert!(matches!(
            client(&["redis://127.0.0.1:1/2"]),
            Err(StoreError::Config(_))
        ));
        assert!(client(&["127.0.0.1:1", "redis://127.0.0.1:2"]).is_ok());
    }
}
