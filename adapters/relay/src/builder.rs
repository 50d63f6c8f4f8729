//! [`Relay`] and [`RelayBuilder`]: the settings, and starting a relay.

use std::sync::Arc;

use flagsync::runtime::TokioRuntime;
use flagsync_redis::RedisStoreBuilder;
use flagsync_server::{Environment, RelayConfig, RelayEnvironment, Server, ServerBuilder};

use crate::error::RelayError;
use crate::goals::keep_goals;
use crate::handle::RelayHandle;
use crate::sync::keep_in_sync;
use crate::upstream::{ClientSettings, Upstream, redis_store};

/// The worker threads of the relay's runtime.
const WORKERS: usize = 2;

/// Entry point: see [`Relay::builder`].
#[derive(Debug)]
pub struct Relay(());

impl Relay {
    /// Start configuring a relay of `config`'s environments. Defaults: served by
    /// [`Server::builder()`] (any free port on 127.0.0.1), no Redis, the SDK's limits
    /// on what the upstream sends.
    ///
    /// An upstream flag service (here a local `flagsync_server` with one flag), a relay
    /// in front of it, and the flag read through the relay as an SDK polls it:
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// use std::net::TcpStream;
    /// use std::time::{Duration, Instant};
    ///
    /// use flagsync_relay::{Relay, RelayConfig};
    /// use flagsync_server::Server;
    /// use serde_json::json;
    ///
    /// let upstream = Server::builder()
    ///     .sdk_key(Some("sdk-example".into()))
    ///     .data(json!({"flagValues": {"greeting": "hello"}}))
    ///     .start()?;
    /// let config = RelayConfig::parse(
    ///     json!({"upstream": upstream.url(), "environments": {"prod": {"sdkKey": "sdk-example"}}})
    ///         .to_string()
    ///         .as_bytes(),
    /// )?;
    /// let relay = Relay::builder(config)
    ///     .server(Server::builder().port(0))
    ///     .start()?;
    ///
    /// // GET /sdk/latest-all with the environment's SDK key, until its data is in.
    /// let addr = relay.server().addr();
    /// let deadline = Instant::now() + Duration::from_secs(10);
    /// let body = loop {
    ///     let mut conn = TcpStream::connect(addr)?;
    ///     write!(
    ///         conn,
    ///         "GET /sdk/latest-all HTTP/1.1\r\nHost: {addr}\r\nAuthorization: sdk-example\r\nConnection: close\r\n\r\n"
    ///     )?;
    ///     let mut response = String::new();
    ///     conn.read_to_string(&mut response)?;
    ///     if response.starts_with("HTTP/1.1 200") {
    ///         break response;
    ///     }
    ///     assert!(Instant::now() < deadline, "never served: {response}");
    ///     std::thread::sleep(Duration::from_millis(50));
    /// };
    /// assert!(body.contains(r#""greeting""#) && body.contains(r#""hello""#), "{body}");
    ///
    /// let report = relay.shutdown();
    /// assert_eq!((report.failed, report.dropped), (0, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(config: RelayConfig) -> RelayBuilder {
        RelayBuilder {
            config,
            server: Server::builder(),
            redis: None,
            max_event_bytes: None,
        }
    }
}

/// Configuration of a [`Relay`]; [`start`](Self::start) starts it.
#[derive(Debug, Clone)]
#[must_use]
pub struct RelayBuilder {
    config: RelayConfig,
    server: ServerBuilder,
    redis: Option<RedisStoreBuilder>,
    max_event_bytes: Option<usize>,
}

impl RelayBuilder {
    /// How the environments are served: the port, the heartbeat, the largest request
    /// body, … (default [`Server::builder()`]). The relay adds one
    /// [`Environment`] per configured environment (its name, SDK key,
    /// [`env_id`](RelayEnvironment::env_id), and the configuration's
    /// [`init_timeout`](RelayConfig::init_timeout)); leave the builder's own data and
    /// SDK key unset.
    pub fn server(mut self, server: ServerBuilder) -> Self {
        self.server = server;
        self
    }

    /// Also keep every environment in Redis as its data arrives (write-through, in
    /// LaunchDarkly's key layout, so SDKs in daemon mode and the Relay Proxy read it).
    /// `store` is the template of each environment's store: where Redis is, its
    /// timeouts and TLS; the key prefix is the environment's
    /// [`redis_prefix`](RelayEnvironment::redis_prefix) when it has one, else `store`'s
    /// own prefix (default `launchdarkly`).
    pub fn redis(mut self, store: RedisStoreBuilder) -> Self {
        self.redis = Some(store);
        self
    }

    /// The largest SSE line and event accepted from upstream, in bytes, which also
    /// bounds a poll response and an FDv2 payload (default: the SDK's 64 MiB). Raise it
    /// for an environment whose data set is larger.
    pub fn max_event_bytes(mut self, bytes: usize) -> Self {
        self.max_event_bytes = Some(bytes);
        self
    }

    /// Check the settings, start the server, then each environment's client and the
    /// task that serves its data, and the events forwarder.
    ///
    /// The clients and tasks run on a tokio runtime the relay starts and owns, so this
    /// works from any thread, inside an async runtime or not. The environments answer
    /// SDKs `503` until their first data set arrives (within the configuration's
    /// `init_timeout`; later, streams wait for it).
    pub fn start(self) -> Result<RelayHandle, RelayError> {
        let Self {
            config,
            mut server,
            redis,
            max_event_bytes,
        } = self;
        // Every store's settings are checked before anything starts.
        let mut stores = Vec::with_capacity(config.environments.len());
        for env in &config.environments {
            stores.push(match &redis {
                Some(template) => Some(redis_store(template, env)?),
                None => None,
            });
        }
        for env in &config.environments {
            let filters = env.payload_filters.iter().map(Some);
            for filter in std::iter::once(None).chain(filters) {
                let name = served_name(env, filter.map(String::as_str));
                let mut e = Environment::new(name, &env.sdk_key).init_timeout(config.init_timeout);
                if let Some(id) = &env.env_id {
                    e = e.env_id(id);
                }
                if let Some(filter) = filter {
                    e = e.payload_filter(filter);
                } else {
                    // Client-side and mobile SDKs get the whole environment.
                    if let Some(id) = &env.env_id {
                        e = e.client_side_id(id);
                    }
                    if let Some(key) = &env.mobile_key {
                        e = e.mobile_key(key);
                    }
                    e = e.secure_mode(env.secure_mode);
                    for origin in &env.allowed_origins {
                        e = e.allowed_origin(origin);
                    }
                }
                server = server.environment(e);
            }
        }
        let server = server.start()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(WORKERS)
            .thread_name("flagsync-relay")
            .enable_all()
            .build()
            .map_err(|source| RelayError::Thread {
                what: "runtime",
                source,
            })?;
        // From here on, an error drops `relay`, which stops what started.
        let mut relay = RelayHandle::new(server, runtime);
        let runtime = {
            let _entered = relay.enter();
            TokioRuntime::try_current()
        };
        let settings = ClientSettings {
            runtime: Arc::new(runtime.ok_or_else(|| RelayError::Thread {
                what: "runtime",
                source: std::io::Error::other("its handle is missing"),
            })?),
            protocol: config.protocol,
            max_event_bytes,
        };
        for (env, mut store) in config.environments.iter().zip(stores) {
            log_environment(env, &config, redis.is_some());
            let filters = env.payload_filters.iter().map(|f| Some(f.as_str()));
            for filter in std::iter::once(None).chain(filters) {
                let name = served_name(env, filter);
                let handle = relay.server().environment(&name).ok_or_else(|| {
                    RelayError::Server(flagsync_server::ServerError::InvalidData(format!(
                        "environment {name:?} is not served"
                    )))
                })?;
                // Redis holds the whole environment: a filtered client keeps its data
                // in memory only.
                let store = if filter.is_none() { store.take() } else { None };
                let has_store = store.is_some();
                let upstream = {
                    let _entered = relay.enter();
                    Upstream::start(env, filter, &settings, store)?
                };
                if filter.is_none()
                    && let Some(id) = &env.env_id
                {
                    let (goals_env, base, id) =
                        (handle.clone(), env.client_side_uri.clone(), id.clone());
                    relay.spawn(|stop| keep_goals(goals_env, base, id, stop));
                }
                relay.spawn(|stop| keep_in_sync(handle, upstream, has_store, stop));
            }
        }
        relay
            .forward_events(&config.environments)
            .map_err(|source| RelayError::Thread {
                what: "events forwarder",
                source,
            })?;
        tracing::info!(url = relay.server().url(), "relaying");
        Ok(relay)
    }
}

/// The name `env` is served under for a payload `filter`: its own, or
/// `NAME/FILTER` (in `/status`, `/metrics` and
/// [`ServerHandle::environment`](flagsync_server::ServerHandle::environment)).
fn served_name(env: &RelayEnvironment, filter: Option<&str>) -> String {
    match filter {
        None => env.name.clone(),
        Some(filter) => format!("{}/{filter}", env.name),
    }
}

/// Log where `env` comes from (never its key, nor URI credentials).
fn log_environment(env: &RelayEnvironment, config: &RelayConfig, redis: bool) {
    tracing::info!(
        environment = env.name,
        upstream = crate::redact_userinfo(&env.stream_uri),
        protocol = ?config.protocol,
        events = env.events_uri.as_deref().map(crate::redact_userinfo),
        redis,
        payload_filters = ?env.payload_filters,
        "environment relayed"
    );
}
