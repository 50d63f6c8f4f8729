//! [`Server`] and [`ServerBuilder`]: the settings, and starting the server.

use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::data::Data;
use crate::env::Environment;
use crate::events::Subscribers;
use crate::fault::Faults;
use crate::hub::{Frame, Hub};

use crate::conn::accept_loop;
use crate::error::ServerError;
use crate::handle::ServerHandle;
use crate::state::{Env, Inner, Shared};
use crate::{fdv2, http};

/// The listen backlog: room for a thousand SDKs connecting at once.
const BACKLOG: i32 = 4096;

/// Entry point: see [`Server::builder`].
#[derive(Debug)]
pub struct Server(());

impl Server {
    /// Start configuring a server. Defaults: any free port, no SDK key check, no data,
    /// heartbeat every 15 s, request bodies up to 8 MiB.
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            port: 0,
            sdk_key: None,
            env_id: None,
            heartbeat: Duration::from_secs(15),
            data: Value::Object(serde_json::Map::new()),
            max_body: http::DEFAULT_MAX_BODY,
            environments: Vec::new(),
        }
    }
}

/// Configuration of a [`Server`].
#[derive(Debug, Clone)]
#[must_use]
pub struct ServerBuilder {
    pub(crate) port: u16,
    pub(crate) sdk_key: Option<String>,
    pub(crate) env_id: Option<String>,
    pub(crate) heartbeat: Duration,
    pub(crate) data: Value,
    pub(crate) max_body: usize,
    pub(crate) environments: Vec<Environment>,
}

impl ServerBuilder {
    /// The port on 127.0.0.1 to listen on; 0 (the default) picks a free one.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
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
    pub fn data(mut self, data: Value) -> Self {
        self.data = data;
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
        let mut data = Data::from_json(self.data.clone()).map_err(ServerError::InvalidData)?;
        Ok(data.rendered().body.to_string())
    }

    /// Validate the data, bind the socket and start serving.
    pub fn start(self) -> Result<ServerHandle, ServerError> {
        let epoch = format!("{:08x}", fastrand::u32(..));
        let now = Instant::now();
        let mut default = Data::from_json(self.data).map_err(ServerError::InvalidData)?;
        default.set_epoch(epoch.clone());
        let mut envs = vec![Env {
            name: "default".into(),
            sdk_key: self.sdk_key,
            env_id: self.env_id,
            data: default,
            starting_until: None,
        }];
        for e in self.environments {
            let (mut data, starting_until) = match e.data {
                Some(d) => (Data::from_json(d).map_err(ServerError::InvalidData)?, None),
                None => (Data::default(), Some(now + e.init_timeout)),
            };
            data.set_epoch(epoch.clone());
            envs.push(Env {
                name: e.name,
                sdk_key: Some(e.sdk_key),
                env_id: e.env_id,
                data,
                starting_until,
            });
        }
        let listener = bind(self.port)?;
        let addr = listener.local_addr().map_err(|source| ServerError::Bind {
            port: self.port,
            source,
        })?;
        let heartbeats = [
            Frame::new(&b":\n"[..]),
            Frame::new(fdv2::to_sse(&[fdv2::heartbeat()]).into_bytes()),
        ];
        let hub = Hub::start(self.heartbeat, heartbeats).map_err(ServerError::Thread)?;
        let shared = Arc::new(Shared {
            addr,
            max_body: self.max_body,
            shutting_down: AtomicBool::new(false),
            inner: Mutex::new(Inner {
                envs,
                conns: HashMap::new(),
                threads: Vec::new(),
                next_id: 0,
                faults: Faults::default(),
                requests: VecDeque::new(),
                request_count: 0,
                event_subs: Subscribers::default(),
            }),
            unhang: Condvar::new(),
            hub,
        });
        let accept_shared = shared.clone();
        let accept = thread::Builder::new()
            .name("flagsync-server-accept".into())
            .spawn(move || accept_loop(&accept_shared, &listener))
            .map_err(ServerError::Thread)?;
        Ok(ServerHandle {
            shared,
            accept: Mutex::new(Some(accept)),
        })
    }
}

/// Bind 127.0.0.1:`port` with a backlog for many SDKs connecting at once.
fn bind(port: u16) -> Result<TcpListener, ServerError> {
    use socket2::{Domain, Socket, Type};
    let err = |source| ServerError::Bind { port, source };
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None).map_err(err)?;
    socket.set_reuse_address(true).map_err(err)?;
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    socket.bind(&addr.into()).map_err(err)?;
    socket.listen(BACKLOG).map_err(err)?;
    Ok(socket.into())
}
