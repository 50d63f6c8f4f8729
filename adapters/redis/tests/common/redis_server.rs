//! A real `redis-server` on a free 127.0.0.1 port for one test, killed when dropped.
//!
//! The Redis tests need `redis-server` and `redis-cli` on the PATH (Debian/Ubuntu:
//! `sudo apt-get install redis-server`); `bash .ci/test`, the README's test command,
//! installs them when they are missing and then runs `cargo test --all-features`. A
//! Redis test that cannot run fails with a message saying so: it is never skipped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flagsync_redis::{RedisBigSegmentStoreBuilder, RedisStoreBuilder};

/// How to get the Redis binaries, for the failure messages.
const INSTALL: &str = "install it with `sudo apt-get install redis-server` \
                       (Debian/Ubuntu), or run the tests with `bash .ci/test`, which \
                       installs it when it is missing";

/// A running (or stopped) redis-server owned by one test.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    password: Option<String>,
    tls: Option<Tls>,
    /// More arguments (a replica's `--replicaof`, a cluster node's settings).
    extra: Vec<String>,
    /// A sentinel: its configuration, but the port, address and folder.
    sentinel: Option<String>,
    /// A cluster node: redis-cli follows redirections (`-c`).
    cluster: bool,
}

/// What kind of server [`RedisServer::start_as`] starts, besides a plain one.
#[derive(Debug, Clone, Default)]
pub struct Role {
    /// Required password (`requirepass`).
    pub password: Option<String>,
    /// More arguments.
    pub extra: Vec<String>,
    /// Run as a sentinel with this configuration (`redis-server <file> --sentinel`).
    pub sentinel: Option<String>,
    /// A cluster node (`--cluster-enabled yes`, its `nodes.conf` in its folder).
    pub cluster: bool,
}

/// Certificates made for one test: a CA, a server certificate it signed for
/// 127.0.0.1 and localhost, a client certificate it signed, and another CA that
/// signed nothing of these. All PEM.
#[derive(Debug)]
pub struct TestCerts {
    pub ca_pem: String,
    pub server_cert_pem: String,
    pub server_key_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
    pub other_ca_pem: String,
}

impl TestCerts {
    pub fn new() -> Arc<Self> {
        let ca = |name: &str| {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, name);
            let cert = params.self_signed(&key).unwrap();
            (cert, key)
        };
        let (ca_cert, ca_key) = ca("flagsync redis test CA");
        let (other_ca, _) = ca("flagsync redis other CA");
        let leaf = |names: &[&str], cn: &str| {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::new(
                names.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
            )
            .unwrap();
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
            let cert = params.signed_by(&key, &ca_cert, &ca_key).unwrap();
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert_pem, server_key_pem) = leaf(&["127.0.0.1", "localhost"], "redis");
        let (client_cert_pem, client_key_pem) = leaf(&[], "flagsync client");
        Arc::new(Self {
            ca_pem: ca_cert.pem(),
            server_cert_pem,
            server_key_pem,
            client_cert_pem,
            client_key_pem,
            other_ca_pem: other_ca.pem(),
        })
    }
}

/// How a TLS server is run: `tls-auth-clients` (`no`, `optional`, `yes`), and whether
/// the test's stores and redis-cli present the client certificate.
#[derive(Debug, Clone)]
pub struct Tls {
    pub certs: Arc<TestCerts>,
    pub auth_clients: &'static str,
    pub client_cert: bool,
}

/// Panics, saying how to install it, unless `redis-server --version` runs and succeeds.
fn require_redis_server() {
    match Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(status) if status.success() => {}
        Ok(status) => panic!(
            "`redis-server --version` failed ({status}): this Redis test cannot run; {INSTALL}"
        ),
        Err(e) => panic!(
            "redis-server is missing (not on the PATH: {e}): this Redis test cannot run; \
             {INSTALL}"
        ),
    }
}

impl RedisServer {
    /// Start a server on a free port; panics (the test fails) if redis-server is
    /// missing or does not start.
    pub fn start() -> Self {
        Self::start_with_password(None)
    }

    /// [`Self::start`], requiring `password` (`requirepass`) when given.
    pub fn start_with_password(password: Option<&str>) -> Self {
        Self::start_with(password, None)
    }

    /// A server on TLS only (`--port 0`), with new certificates, clients optionally
    /// authenticated (`tls-auth-clients optional`); the test's stores trust its CA
    /// and present no client certificate.
    pub fn start_tls() -> Self {
        Self::start_with(
            None,
            Some(Tls {
                certs: TestCerts::new(),
                auth_clients: "optional",
                client_cert: false,
            }),
        )
    }

    /// A server on TLS only; see [`Tls`].
    pub fn start_with(password: Option<&str>, tls: Option<Tls>) -> Self {
        Self::start_as(
            Role {
                password: password.map(str::to_owned),
                ..Role::default()
            },
            tls,
        )
    }

    /// A server in `role` (a replica, a sentinel, a cluster node), on TLS if `tls`.
    pub fn start_as(role: Role, tls: Option<Tls>) -> Self {
        require_redis_server();
        let dir = std::env::temp_dir().join(format!(
            "flagsync-redis-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut server = Self {
                child: None,
                port,
                dir: dir.clone(),
                password: role.password.clone(),
                tls: tls.clone(),
                extra: role.extra.clone(),
                sentinel: role.sentinel.clone(),
                cluster: role.cluster,
            };
            if server.spawn() {
                return server;
            }
        }
        panic!("redis-server did not start");
    }

    /// The server's TLS settings, if it runs on TLS.
    pub fn tls(&self) -> Option<&Tls> {
        self.tls.as_ref()
    }

    /// Write `pem` to a file in the server's folder; its path.
    fn file(&self, name: &str, pem: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, pem).unwrap();
        path.to_str().unwrap().to_owned()
    }

    /// The arguments that make redis-server listen on TLS only, or on plaintext.
    fn listen_args(&self) -> Vec<String> {
        let port = self.port.to_string();
        let Some(tls) = &self.tls else {
            return vec!["--port".into(), port];
        };
        let c = &tls.certs;
        vec![
            "--port".into(),
            "0".into(),
            "--tls-port".into(),
            port,
            "--tls-cert-file".into(),
            self.file("server.pem", &c.server_cert_pem),
            "--tls-key-file".into(),
            self.file("server.key", &c.server_key_pem),
            "--tls-ca-cert-file".into(),
            self.file("ca.pem", &c.ca_pem),
            "--tls-auth-clients".into(),
            tls.auth_clients.into(),
        ]
    }

    /// The arguments that make redis-cli speak TLS to this server, if it runs on TLS.
    fn cli_tls_args(&self) -> Vec<String> {
        let Some(tls) = &self.tls else {
            return Vec::new();
        };
        let c = &tls.certs;
        let mut args = vec![
            "--tls".into(),
            "--cacert".into(),
            self.file("ca.pem", &c.ca_pem),
        ];
        // redis-cli presents it whenever it can (the server may require it).
        args.extend([
            "--cert".into(),
            self.file("client.pem", &c.client_cert_pem),
            "--key".into(),
            self.file("client.key", &c.client_key_pem),
        ]);
        args
    }

    /// A store builder for this server: its URL, and over TLS its CA (and the client
    /// certificate when [`Tls::client_cert`]).
    pub fn store_builder(&self) -> RedisStoreBuilder {
        let b = flagsync_redis::RedisStore::builder(self.url());
        match &self.tls {
            Some(tls) if tls.client_cert => b.tls_ca_pem(tls.certs.ca_pem.clone()).tls_client_cert(
                tls.certs.client_cert_pem.clone(),
                tls.certs.client_key_pem.clone(),
            ),
            Some(tls) => b.tls_ca_pem(tls.certs.ca_pem.clone()),
            None => b,
        }
    }

    /// A big-segment store builder for this server, as [`Self::store_builder`].
    pub fn big_segment_builder(&self) -> RedisBigSegmentStoreBuilder {
        let b = flagsync_redis::RedisBigSegmentStore::builder(self.url());
        match &self.tls {
            Some(tls) if tls.client_cert => b.tls_ca_pem(tls.certs.ca_pem.clone()).tls_client_cert(
                tls.certs.client_cert_pem.clone(),
                tls.certs.client_key_pem.clone(),
            ),
            Some(tls) => b.tls_ca_pem(tls.certs.ca_pem.clone()),
            None => b,
        }
    }

    /// The command that runs this server.
    fn command(&self) -> Command {
        let mut cmd = Command::new("redis-server");
        if let Some(conf) = &self.sentinel {
            // A sentinel rewrites its file (what it learnt): written once, kept across
            // restarts.
            let path = self.dir.join("sentinel.conf");
            if !path.exists() {
                let password = self
                    .password
                    .as_ref()
                    .map(|p| format!("requirepass {p}\n"))
                    .unwrap_or_default();
                // On TLS: a TLS port only, and TLS to the servers it watches.
                let listen = match &self.tls {
                    None => format!("port {}\n", self.port),
                    Some(tls) => format!(
                        "port 0\ntls-port {}\ntls-cert-file {}\ntls-key-file {}\n\
                         tls-ca-cert-file {}\ntls-auth-clients {}\ntls-replication yes\n",
                        self.port,
                        self.file("server.pem", &tls.certs.server_cert_pem),
                        self.file("server.key", &tls.certs.server_key_pem),
                        self.file("ca.pem", &tls.certs.ca_pem),
                        tls.auth_clients,
                    ),
                };
                let text = format!(
                    "{listen}bind 127.0.0.1\nprotected-mode no\nloglevel warning\ndir {}\n{password}{conf}\n",
                    self.dir.display()
                );
                std::fs::write(&path, text).unwrap();
            }
            cmd.arg(path).arg("--sentinel");
            return cmd;
        }
        cmd.args(["--bind", "127.0.0.1"])
            .args(self.listen_args())
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--protected-mode", "no", "--loglevel", "warning"])
            .arg("--dir")
            .arg(&self.dir)
            .args(
                self.password
                    .iter()
                    .flat_map(|p| ["--requirepass".to_owned(), p.clone()]),
            );
        if self.cluster {
            cmd.args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ])
            .args(["--cluster-node-timeout", "1000"]);
        }
        cmd.args(&self.extra);
        cmd
    }

    fn spawn(&mut self) -> bool {
        let child = self
            .command()
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run redis-server");
        self.child = Some(child);
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if self.ping() {
                return true;
            }
            if let Some(c) = self.child.as_mut()
                && c.try_wait().ok().flatten().is_some()
            {
                // It exited (the port was taken meanwhile).
                self.child = None;
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    fn ping(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        if self.tls.is_some() {
            // It accepts connections: it is listening (a TLS handshake is redis-cli's).
            return true;
        }
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        // Any answer will do (without the password it is an error): it is listening.
        let mut buf = [0u8; 1];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok()
    }

    /// `redis://[:password@]127.0.0.1:<port>/0` (`rediss://` over TLS).
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        match &self.password {
            Some(p) => format!("{scheme}://:{p}@127.0.0.1:{}/0", self.port),
            None => format!("{scheme}://127.0.0.1:{}/0", self.port),
        }
    }

    /// The URL of the ACL user `user` with `password`.
    pub fn user_url(&self, user: &str, password: &str) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://{user}:{password}@127.0.0.1:{}/0", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Run `redis-cli` against this server with `args`; its trimmed standard output.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(self.cluster.then_some("-c"))
            .args(self.cli_tls_args())
            .args(
                self.password
                    .iter()
                    .flat_map(|p| ["--no-auth-warning".to_owned(), "-a".to_owned(), p.clone()]),
            )
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("redis-cli did not run ({e}): {INSTALL}"));
        assert!(
            out.status.success(),
            "redis-cli {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap().trim_end().to_owned();
        assert!(
            !text.starts_with("ERR") && !text.contains("Could not connect"),
            "redis-cli {args:?}: {text}"
        );
        text
    }

    /// Stop the server (kill and reap it); the port stays reserved for [`Self::restart`].
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The folder it runs in.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// True while its process runs.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Send `signal` (`"STOP"`, `"CONT"`) to the server process.
    #[allow(dead_code, reason = "not every test binary stalls the server")]
    pub fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -{signal} {pid}");
    }

    /// Start it again on the same port: empty, or with what `SAVE` last wrote.
    pub fn restart(&mut self) {
        self.stop();
        assert!(self.spawn(), "redis-server did not restart");
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
