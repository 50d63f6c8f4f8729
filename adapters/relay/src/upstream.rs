//! [`Upstream`]: an environment's flagsync client, connected to its upstream flag
//! service, with what the relay reads from it.

use std::sync::Arc;

use flagsync::persist::{CacheConfig, StoreMode};
use flagsync::runtime::Runtime;
use flagsync::{Client, DataSourceStatus, Fdv2Config, FlagChange, Subscription};
use flagsync_redis::{RedisStore, RedisStoreBuilder};
use flagsync_server::{RelayEnvironment, UpstreamProtocol};

use crate::error::RelayError;

/// How every environment's client is built.
pub(crate) struct ClientSettings {
    /// The runtime the clients run on (the relay's own).
    pub(crate) runtime: Arc<dyn Runtime>,
    pub(crate) protocol: UpstreamProtocol,
    /// The largest SSE line and event, poll body and FDv2 payload accepted.
    pub(crate) max_event_bytes: Option<usize>,
}

/// A started client and its subscriptions (made before it started: nothing missed).
pub(crate) struct Upstream {
    pub(crate) client: Client,
    pub(crate) statuses: Subscription<DataSourceStatus>,
    pub(crate) flags: Subscription<FlagChange>,
}

impl Upstream {
    /// Build and start `env`'s client, for its payload `filter` if any; with `store`,
    /// it writes its data there too.
    pub(crate) fn start(
        env: &RelayEnvironment,
        filter: Option<&str>,
        settings: &ClientSettings,
        store: Option<RedisStore>,
    ) -> Result<Self, RelayError> {
        let mut builder = Client::builder(env.sdk_key.clone())
            .stream_uri(env.stream_uri.clone())
            .polling_uri(env.polling_uri.clone())
            // Downstream SDKs' events are forwarded as they were sent; the relay's
            // clients evaluate nothing.
            .send_events(false)
            .runtime(settings.runtime.clone());
        if let Some(filter) = filter {
            builder = builder.payload_filter(filter);
        }
        if settings.protocol == UpstreamProtocol::Fdv2 {
            builder = builder.fdv2(Fdv2Config::default());
        }
        if let Some(max) = settings.max_event_bytes {
            builder = builder.core_config(|c| {
                c.limits.sse.max_line_len = max;
                c.limits.sse.max_event_len = max;
                c.limits.max_poll_body = c.limits.max_poll_body.max(max);
            });
            builder = builder.fdv2_payload_limits(flagsync::PayloadLimits::for_bytes(max));
        }
        if let Some(store) = store {
            builder = builder.persistent_store(
                Arc::new(store),
                StoreMode::ReadWrite,
                CacheConfig::default(),
            );
        }
        let client_error = |source| RelayError::Client {
            environment: env.name.clone(),
            source,
        };
        let client = builder.build().map_err(client_error)?;
        let statuses = client.status_changes();
        let flags = client.flag_changes();
        client.start().map_err(client_error)?;
        Ok(Self {
            client,
            statuses,
            flags,
        })
    }
}

/// `env`'s Redis store: `template` with the environment's prefix, if it has one (else
/// the template's own).
pub(crate) fn redis_store(
    template: &RedisStoreBuilder,
    env: &RelayEnvironment,
) -> Result<RedisStore, RelayError> {
    let mut builder = template.clone();
    if let Some(prefix) = &env.redis_prefix {
        builder = builder.prefix(prefix.clone());
    }
    builder.build().map_err(|source| RelayError::Redis {
        environment: env.name.clone(),
        source,
    })
}
