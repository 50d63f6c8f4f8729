//! [`Server`] and [`ServerBuilder`]: the settings, and starting the server.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use mio::{Interest, Poll, Token, Waker};
use serde_json::Value;

use crate::client_side::settings::ClientSettings;
use crate::conn::Limits;
use crate::data::{Data, FlagData};
use crate::env::Environment;
use crate::events::Subscribers;
use crate::fault::Faults;
use crate::health::{ConnectionState, Health};
use crate::hub::{Frame, Hub};
use crate::metrics::Metrics;
use crate::request_loop::{MAX_LISTENERS, RequestLoop, WAKE};
use crate::tls::{TlsAcceptor, TlsSettings};

use crate::error::ServerError;
use crate::handle::ServerHandle;
use crate::state::{Env, Inner, Shared};
use crate::{fdv2, http, listen};

/// The default deadline for a whole request head.
pub const DEFAULT_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// The default deadline for a request body.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The default time an idle keep-alive connection is kept open.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Descriptors kept free of connections when the connection limit comes from the
/// process's descriptor limit (for listeners, files, upstream connections, Redis).
const SPARE_DESCRIPTORS: u64 = 64;
/// The connection limit when the descriptor limit is unlimited.
const UNLIMITED_CONNECTIONS: usize = 1 << 20;

/// Entry point: see [`Server::builder`].
#[derive(Debug)]
pub struct Server(());

impl Server {
    /// Start configuring a server. Defaults: any free port, no SDK key check, no data,
    /// heartbeat every 15 s, request bodies up to 8 MiB.
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            port: 0,
            listen: Vec::new(),
            tls: None,
            max_connections: None,
            limits: Limits {
                head: DEFAULT_HEAD_TIMEOUT,
                body: DEFAULT_BODY_TIMEOUT,
                idle: DEFAULT_IDLE_TIMEOUT,
            },
            max_stream_lifetime: None,
            disconnected_status_time: Duration::from_secs(60),
            sdk_key: None,
            env_id: None,
            heartbeat: Duration::from_secs(15),
            data: FlagData::Json(Value::Object(serde_json::Map::new())),
            max_body: http::DEFAULT_MAX_BODY,
            environments: Vec::new(),
            filtered: Vec::new(),
            client: ClientSettings::default(),
        }
    }
}

/// Configuration of a [`Server`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ServerBuilder {
    pub(crate) port: u16,
    pub(crate) listen: Vec<SocketAddr>,
    pub(crate) tls: Option<TlsSettings>,
    pub(crate) max_connections: Option<usize>,
    pub(crate) limits: Limits,
    pub(crate) max_stream_lifetime: Option<Duration>,
    pub(crate) disconnected_status_time: Duration,
    pub(crate) sdk_key: Option<String>,
    pub(crate) env_id: Option<String>,
    pub(crate) heartbeat: Duration,
    pub(crate) data: FlagData,
    pub(crate) max_body: usize,
    pub(crate) environments: Vec<Environment>,
    pub(crate) filtered: Vec<(String, FlagData)>,
    /// The default environment's client-side and mobile settings.
    pub(crate) client: ClientSettings,
}

impl ServerBuilder {
    /// The port on 127.0.0.1 to listen on; 0 (the default) picks a free one. Used
    /// only when no [`listen`](Self::listen) address is given.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Listen on `addr` (repeatable: every address given is served; IPv4 and IPv6,
    /// `0.0.0.0:P` and `[::]:P` for every interface). Without any, the server listens
    /// on `127.0.0.1:`[`port`](Self::port) only: a local server is not reachable from
    /// other hosts unless asked.
    ///
    /// ```
    /// use flagsync_server::Server;
    ///
    /// let server = Server::builder()
    ///     .listen("127.0.0.1:0".parse()?)
    ///     .listen("[::1]:0".parse()?)
    ///     .start()?;
    /// assert_eq!(server.addrs().len(), 2);
    /// assert!(server.addrs()[1].is_ipv6());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen.push(addr);
        self
    }

    /// Serve TLS (HTTPS) on every listening address (see [`TlsSettings`]). A client
    /// that speaks plaintext HTTP to it gets a plaintext `400` saying so.
    pub fn tls(mut self, tls: TlsSettings) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The most connections open at once, streams included. Past it, a connection is
    /// accepted, answered `503` with `Retry-After: 1` at once (whether it sent a
    /// request yet or not), and closed; on a TLS port it is closed without a handshake.
    /// Default: the process's soft descriptor limit at start, less 64 for everything
    /// else (see [`raise_fd_limit`](crate::raise_fd_limit)).
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = Some(n.max(1));
        self
    }

    /// The deadline for a whole request head, from its first byte (for a new
    /// connection, from the accept, TLS handshake included); default 10 s. A client
    /// slower than that gets `408` and the connection closes, however steadily it
    /// trickles bytes.
    pub fn head_timeout(mut self, timeout: Duration) -> Self {
        self.limits.head = timeout.max(Duration::from_millis(1));
        self
    }

    /// The deadline for a request body, from the end of its head; default 30 s. Past
    /// it: `408`, and the connection closes.
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.limits.body = timeout.max(Duration::from_millis(1));
        self
    }

    /// How long an idle keep-alive connection is kept open; default 60 s.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.limits.idle = timeout.max(Duration::from_millis(1));
        self
    }

    /// End every stream after at most this long (each after between three quarters of
    /// it and all of it, so streams opened together do not end together); the SDK
    /// reconnects, to this server or, behind a load balancer, to another. After a
    /// rolling restart this spreads SDKs over every instance again (the Relay Proxy's
    /// `maxClientConnectionTime`). Default: streams last until the client closes them.
    pub fn max_stream_lifetime(mut self, lifetime: Duration) -> Self {
        self.max_stream_lifetime = Some(lifetime.max(Duration::from_secs(1)));
        self
    }

    /// How long an environment whose upstream connection is interrupted still counts
    /// as connected in `GET /status` (default 60 s, as the Relay Proxy's
    /// `disconnectedStatusTime`).
    pub fn disconnected_status_time(mut self, time: Duration) -> Self {
        self.disconnected_status_time = time;
        self
    }

    /// Require this SDK key in the `Authorization` header (raw, or after `api_key `).
    /// `None` (the default) accepts any request.
    pub fn sdk_key(mut self, key: Option<String>) -> Self {
        self.sdk_key = key;
        self
    }

    /// Send this value in an `X-LD-EnvID` header on successful responses.
    pub fn env_id(mut self, env_id: Option<String>) -> Self {
        self.env_id = env_id;
        self
    }

    /// The interval between comment heartbeats on streams (default 15 s).
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every.max(Duration::from_millis(1));
        self
    }

    /// The initial data: `{"flags":{key: flag…},"segments":{key: segment…}}`. Either map
    /// may be missing; a `flagValues` map of `key → value` adds flags that serve that
    /// value to everyone. Items without `key`/`version` get the map key and version 1.
    pub fn data(mut self, data: impl Into<FlagData>) -> Self {
        self.data = data.into();
        self
    }

    /// The longest request body accepted, in bytes (default 8 MiB): as sent (once
    /// de-chunked), and again once gunzipped. A longer body gets `413` without being
    /// buffered: a `Content-Length` above it is refused before the body is read, a
    /// chunked body as soon as its chunk sizes add up to more.
    ///
    /// ```
    /// let server = flagsync_server::Server::builder().max_body(64 * 1024).start()?;
    /// # Ok::<(), flagsync_server::ServerError>(())
    /// ```
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// Serve another environment beside the default one, to requests that carry its
    /// SDK key (see [`Environment`]). Once any is added, a request whose key names no
    /// environment gets `401`, and the default environment serves only its own
    /// [`sdk_key`](Self::sdk_key), if it has one.
    pub fn environment(mut self, environment: Environment) -> Self {
        self.environments.push(environment);
        self
    }

    /// The initial data as the server would serve it, without serving it: `{"flags":
    /// {…},"segments":{…}}` exactly as polling serves it once started (`flagValues`
    /// expanded, keys and versions filled in). `flagsync eval` evaluates this.
    ///
    /// ```
    /// use flagsync_server::Server;
    /// use serde_json::json;
    ///
    /// let data = Server::builder().data(json!({"flagValues": {"x": 1}})).render_data()?;
    /// assert!(data.starts_with(r#"{"flags":{"x":{"#));
    /// # Ok::<(), flagsync_server::ServerError>(())
    /// ```
    pub fn render_data(&self) -> Result<String, ServerError> {
        let mut data = Data::new(self.data.clone()).map_err(ServerError::InvalidData)?;
        Ok(data.rendered().text())
    }

    /// Serve `data` to the default environment's requests for the payload filter `key`
    /// (`?filter=KEY`, from SDKs configured with that filter), beside its unfiltered
    /// [`data`](Self::data); repeatable, one data set per filter. A request for a filter
    /// not given here is answered `404` naming it. The filtered data is an environment
    /// of its own named `default/KEY`
    /// ([`ServerHandle::environment`](crate::ServerHandle::environment)), with the
    /// default environment's SDK key.
    ///
    /// ```
    /// use flagsync_server::Server;
    /// use serde_json::json;
    ///
    /// let server = Server::builder()
    ///     .data(json!({"flagValues": {"web": 1, "shared": 2}}))
    ///     .filtered_data("mobile", json!({"flagValues": {"shared": 2}}))
    ///     .start()?;
    /// assert!(server.environment("default/mobile").is_some());
    /// # Ok::<(), flagsync_server::ServerError>(())
    /// ```
    pub fn filtered_data(mut self, key: impl Into<String>, data: impl Into<FlagData>) -> Self {
        self.filtered.push((key.into(), data.into()));
        self
    }

    /// Validate the data, bind the sockets and start serving.
    pub fn start(self) -> Result<ServerHandle, ServerError> {
        let epoch = format!("{:08x}", fastrand::u32(..));
        let now = Instant::now();
        let wall = SystemTime::now();
        let mut default = Data::new(self.data).map_err(ServerError::InvalidData)?;
        default.set_epoch(epoch.clone());
        let mut envs = vec![Env {
            name: "default".into(),
            sdk_key: self.sdk_key,
            filter: None,
            env_id: self.env_id,
            data: default,
            starting_until: None,
            health: Health::new(ConnectionState::Valid, wall),
            default_variant: false,
            client: self.client,
        }];
        for (filter, data) in self.filtered {
            let mut data = Data::new(data).map_err(ServerError::InvalidData)?;
            data.set_epoch(epoch.clone());
            envs.push(Env {
                name: format!("default/{filter}"),
                sdk_key: envs[0].sdk_key.clone(),
                filter: Some(filter),
                env_id: envs[0].env_id.clone(),
                data,
                starting_until: None,
                health: Health::new(ConnectionState::Valid, wall),
                default_variant: true,
                client: ClientSettings::default(),
            });
        }
        for e in self.environments {
            let (mut data, starting_until, state) = match e.data {
                Some(d) => (
                    Data::new(d).map_err(ServerError::InvalidData)?,
                    None,
                    ConnectionState::Valid,
                ),
                None => (
                    Data::default(),
                    Some(now + e.init_timeout),
                    ConnectionState::Initializing,
                ),
            };
            data.set_epoch(epoch.clone());
            envs.push(Env {
                name: e.name,
                sdk_key: Some(e.sdk_key),
                filter: e.filter,
                env_id: e.env_id,
                data,
                starting_until,
                health: Health::new(state, wall),
                default_variant: false,
                client: e.client,
            });
        }
        let addrs = if self.listen.is_empty() {
            vec![SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))]
        } else {
            self.listen
        };
        if addrs.len() > MAX_LISTENERS {
            let source = std::io::Error::other("too many listening addresses");
            return Err(ServerError::Bind {
                addr: addrs[0],
                source,
            });
        }
        let tls = self.tls.map(TlsAcceptor::new).transpose()?;
        let poll = Poll::new().map_err(ServerError::Thread)?;
        let mut listeners = Vec::with_capacity(addrs.len());
        let mut bound = Vec::with_capacity(addrs.len());
        for (i, addr) in addrs.iter().enumerate() {
            let mut listener = listen::bind(*addr)?;
            let local = listener.local_addr().map_err(|source| ServerError::Bind {
                addr: *addr,
                source,
            })?;
            poll.registry()
                .register(&mut listener, Token(i + 1), Interest::READABLE)
                .map_err(ServerError::Thread)?;
            listeners.push(listener);
            bound.push(local);
        }
        let wake = Arc::new(Waker::new(poll.registry(), WAKE).map_err(ServerError::Thread)?);
        let heartbeats = [
            Frame::new(&b":\n"[..]),
            Frame::new(fdv2::to_sse(&[fdv2::heartbeat()]).into_bytes()),
        ];
        let metrics = Arc::new(Metrics::default());
        let hub = Hub::start(
            self.heartbeat,
            heartbeats,
            self.max_stream_lifetime,
            metrics.clone(),
        )
        .map_err(ServerError::Thread)?;
        let max_connections = self.max_connections.unwrap_or_else(|| {
            listen::fd_limit()
                .soft
                .map_or(UNLIMITED_CONNECTIONS, |soft| {
                    usize::try_from(soft.saturating_sub(SPARE_DESCRIPTORS).max(1))
                        .unwrap_or(UNLIMITED_CONNECTIONS)
                        .min(UNLIMITED_CONNECTIONS)
                })
        });
        let shared = Arc::new(Shared {
            addrs: bound,
            tls: tls.is_some(),
            max_body: self.max_body,
            shutting_down: AtomicBool::new(false),
            inner: Mutex::new(Inner {
                envs,
                faults: Faults::default(),
                requests: VecDeque::new(),
                request_count: 0,
                event_subs: Subscribers::default(),
            }),
            wake,
            hub,
            metrics,
            disconnected_grace: self.disconnected_status_time,
            max_connections,
            ofrep: Default::default(),
        });
        let requests = RequestLoop::new(
            poll,
            listeners,
            shared.clone(),
            self.limits,
            max_connections,
            tls,
        );
        let thread = thread::Builder::new()
            .name("flagsync-server-requests".into())
            .spawn(move || requests.run())
            .map_err(ServerError::Thread)?;
        Ok(ServerHandle {
            shared,
            requests: Mutex::new(Some(thread)),
        })
    }
}
