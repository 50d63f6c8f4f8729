//! Big segments for the harness (capability `big-segments`): a [`BigSegmentStore`]
//! whose every call is a POST to the harness's callback service (`/getMetadata`,
//! `/getMembership`), and the configuration's `bigSegments` settings. The POST is a
//! blocking call: on the calling thread for the store's blocking path, on smol's
//! blocking-thread pool (which serves any runtime) for its futures.

use std::sync::Arc;
use std::time::Duration;

use flagsync::bigseg::{
    BigSegmentStore, BigSegmentsOptions, Membership, StoreError, StoreMetadata,
};
use flagsync::runtime::BoxFuture;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::service_http::post;

/// The configuration's `bigSegments`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BigSegmentsConfig {
    /// The callback service's base URI.
    pub callback_uri: String,
    /// How many contexts' memberships are cached.
    #[serde(default)]
    pub user_cache_size: Option<u64>,
    /// How long a membership is cached (ms).
    #[serde(default)]
    pub user_cache_time_ms: Option<u64>,
    /// How often the status is polled (ms).
    #[serde(default)]
    pub status_poll_interval_ms: Option<u64>,
    /// How old the store may be before it is stale (ms).
    #[serde(default)]
    pub stale_after_ms: Option<u64>,
}

impl BigSegmentsConfig {
    /// The options these settings describe, over the callback store.
    pub fn options(&self) -> BigSegmentsOptions {
        let store = CallbackStore {
            base: self.callback_uri.trim_end_matches('/').to_owned(),
        };
        let mut o = BigSegmentsOptions::new(Arc::new(store));
        if let Some(n) = self.user_cache_size {
            o = o.context_cache_size(usize::try_from(n).unwrap_or(usize::MAX));
        }
        if let Some(ms) = self.user_cache_time_ms {
            o = o.context_cache_time(Duration::from_millis(ms));
        }
        if let Some(ms) = self.status_poll_interval_ms.filter(|ms| *ms > 0) {
            o = o.status_poll_interval(Duration::from_millis(ms));
        }
        if let Some(ms) = self.stale_after_ms.filter(|ms| *ms > 0) {
            o = o.stale_after(Duration::from_millis(ms));
        }
        o
    }
}

/// How long one callback may take.
const CALLBACK_TIMEOUT: Duration = Duration::from_secs(5);

/// The harness's simulated store.
#[derive(Debug)]
pub struct CallbackStore {
    base: String,
}

/// POST `body` to the callback service at `base` + `path`, within `timeout`; its JSON
/// answer (`null` when empty).
fn call(base: &str, path: &str, body: &Value, timeout: Duration) -> Result<Value, StoreError> {
    let url = format!("{base}{path}");
    let reply = post(
        &url,
        "application/json",
        body.to_string().as_bytes(),
        timeout.min(CALLBACK_TIMEOUT),
    )
    .map_err(|e| StoreError::Unreachable(e.to_string()))?;
    if !(200..300).contains(&reply.status) {
        return Err(StoreError::Backend(format!(
            "{path}: status {}",
            reply.status
        )));
    }
    if reply.body.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&reply.body).map_err(|e| StoreError::Backend(format!("{path}: {e}")))
}

/// `values` of a `getMembership` answer: `None` when absent or null.
fn membership(answer: &Value) -> Option<Membership> {
    let values = answer.get("values")?.as_object()?;
    let included = values
        .iter()
        .filter(|(_, v)| v.as_bool() == Some(true))
        .map(|(k, _)| k.clone());
    let excluded = values
        .iter()
        .filter(|(_, v)| v.as_bool() == Some(false))
        .map(|(k, _)| k.clone());
    Some(Membership::from_refs(included, excluded))
}

fn metadata_call(base: &str, timeout: Duration) -> Result<StoreMetadata, StoreError> {
    let answer = call(base, "/getMetadata", &json!({}), timeout)?;
    Ok(StoreMetadata::new(
        answer.get("lastUpToDate").and_then(Value::as_u64),
    ))
}

fn membership_call(
    base: &str,
    context_hash: &str,
    timeout: Duration,
) -> Result<Option<Membership>, StoreError> {
    let answer = call(
        base,
        "/getMembership",
        &json!({ "contextHash": context_hash }),
        timeout,
    )?;
    Ok(membership(&answer))
}

impl BigSegmentStore for CallbackStore {
    fn metadata(&self) -> BoxFuture<'_, Result<StoreMetadata, StoreError>> {
        let base = self.base.clone();
        Box::pin(smol::unblock(move || {
            metadata_call(&base, CALLBACK_TIMEOUT)
        }))
    }

    fn membership<'a>(
        &'a self,
        context_hash: &'a str,
    ) -> BoxFuture<'a, Result<Option<Membership>, StoreError>> {
        let (base, hash) = (self.base.clone(), context_hash.to_owned());
        Box::pin(smol::unblock(move || {
            membership_call(&base, &hash, CALLBACK_TIMEOUT)
        }))
    }

    fn membership_now(
        &self,
        context_hash: &str,
        timeout: Duration,
    ) -> Option<Result<Option<Membership>, StoreError>> {
        Some(membership_call(&self.base, context_hash, timeout))
    }

    fn metadata_now(&self, timeout: Duration) -> Option<Result<StoreMetadata, StoreError>> {
        Some(metadata_call(&self.base, timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_values_true_false_and_null() {
        let m = membership(&json!({"values": {"a.g1": true, "b.g2": false, "c.g3": null}}))
            .expect("values");
        assert_eq!(m.check("a.g1"), Some(true));
        assert_eq!(m.check("b.g2"), Some(false));
        assert_eq!(m.check("c.g3"), None);
        assert_eq!(membership(&json!({})), None);
        assert_eq!(membership(&json!({"values": null})), None);
    }

    #[test]
    fn the_store_posts_to_the_callback_service_and_reads_its_answers() {
        use crate::service_http::{After, Response, serve};
        // A free port (bound, then released for the callback server).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        std::thread::spawn(move || {
            serve("callback", port, |req| {
                let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
                let answer = match (req.method.as_str(), req.path.as_str()) {
                    ("POST", "/bs/getMetadata") => Response::json(&json!({"lastUpToDate": 99})),
                    ("POST", "/bs/getMembership") if body["contextHash"] == "h1" => {
                        Response::json(&json!({"values": {"s.g1": true}}))
                    }
                    ("POST", "/bs/getMembership") => Response::json(&json!({})),
                    _ => Response::text(500, "unexpected"),
                };
                (answer, After::Continue)
            })
        });
        let store = BigSegmentsConfig {
            callback_uri: format!("http://127.0.0.1:{port}/bs/"),
            user_cache_size: None,
            user_cache_time_ms: None,
            status_poll_interval_ms: None,
            stale_after_ms: None,
        };
        let store = CallbackStore {
            base: store.callback_uri.trim_end_matches('/').to_owned(),
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let metadata = loop {
            match store.metadata_now(CALLBACK_TIMEOUT).expect("blocking path") {
                Ok(m) => break m,
                Err(e) => {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "no callback server: {e}"
                    );
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        };
        assert_eq!(metadata.last_up_to_date, Some(99));
        let now = |hash: &str| {
            store
                .membership_now(hash, CALLBACK_TIMEOUT)
                .expect("blocking path")
        };
        let m = now("h1").expect("answered").expect("values");
        assert_eq!(m.check("s.g1"), Some(true));
        assert_eq!(now("h2").expect("answered"), None);
        // The futures ask the same service.
        use futures_lite::future::block_on;
        assert_eq!(
            block_on(store.metadata())
                .expect("answered")
                .last_up_to_date,
            Some(99)
        );
        assert_eq!(block_on(store.membership("h1")).expect("answered"), Some(m));
    }

    #[test]
    fn an_unreachable_callback_is_a_store_error() {
        let store = CallbackStore {
            base: "http://127.0.0.1:1".into(),
        };
        assert!(store.metadata_now(CALLBACK_TIMEOUT).unwrap().is_err());
        assert!(
            store
                .membership_now("h", CALLBACK_TIMEOUT)
                .unwrap()
                .is_err()
        );
        assert!(futures_lite::future::block_on(store.metadata()).is_err());
        assert!(futures_lite::future::block_on(store.membership("h")).is_err());
    }
}
