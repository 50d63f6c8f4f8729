//! Redis over TLS against plaintext in the same run (issue 30 item 8): the init of a
//! 5,000-flag data set and point reads (`get`, one key after another on one
//! connection), each against a plaintext redis-server and a TLS-only one
//! (`--port 0 --tls-port`, certificates made by rcgen for the run), timed in turn,
//! round after round, so that load on a shared machine skews both alike.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flagsync::Kind;
use flagsync::persist::{Item, PersistentStore};
use flagsync_redis::RedisStore;

/// A redis-server on TLS only, killed on drop; its CA in PEM.
pub(crate) struct TlsServer {
    child: Child,
    pub(crate) port: u16,
    dir: PathBuf,
    pub(crate) ca_pem: String,
}

impl TlsServer {
    pub(crate) fn start() -> Self {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        let dir =
            std::env::temp_dir().join(format!("flagsync-redis-tls-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, pem: String| {
            let path = dir.join(name);
            std::fs::write(&path, pem).unwrap();
            path
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args([
                "--bind",
                "127.0.0.1",
                "--port",
                "0",
                "--tls-port",
                &port.to_string(),
            ])
            .arg("--tls-cert-file")
            .arg(file("server.pem", cert.pem()))
            .arg("--tls-key-file")
            .arg(file("server.key", key.serialize_pem()))
            .arg("--tls-ca-cert-file")
            .arg(file("ca.pem", ca.pem()))
            .args(["--tls-auth-clients", "no"])
            .args(["--save", "", "--appendonly", "no", "--loglevel", "warning"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server (built with TLS) on the PATH");
        let end = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < end, "redis-server on TLS did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            child,
            port,
            dir,
            ca_pem: ca.pem(),
        }
    }

    pub(crate) fn store(&self) -> RedisStore {
        RedisStore::builder(format!("rediss://127.0.0.1:{}/0", self.port))
            .tls_ca_pem(self.ca_pem.clone())
            .pool_size(1)
            .build()
            .unwrap()
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Time init and point reads over `plain` and over TLS, interleaved, and print the
/// medians and TLS throughput as a share of plaintext.
pub(crate) fn compare(
    rt: &tokio::runtime::Runtime,
    plain: Arc<RedisStore>,
    items: &[(Kind, String, Item)],
) {
    let server = TlsServer::start();
    let tls = Arc::new(server.store());
    let rounds = super::bench_rounds();
    let keys = super::flag_keys(items);
    let init = |store: &Arc<RedisStore>| rt.block_on(store.init(items)).unwrap();
    let reads = |store: &Arc<RedisStore>| {
        rt.block_on(async {
            for key in &keys {
                assert!(store.get(Kind::Flag, key).await.unwrap().is_some());
            }
        })
    };
    // Connections opened and data written before timing.
    init(&plain);
    init(&tls);
    let named: [(&str, &dyn Fn()); 4] = [
        ("init plaintext", &|| init(&plain)),
        ("init TLS", &|| init(&tls)),
        ("1,000 point reads plaintext", &|| reads(&plain)),
        ("1,000 point reads TLS", &|| reads(&tls)),
    ];
    let times = super::time_rounds(&named, rounds);
    let bytes: usize = items.iter().map(|(_, _, i)| i.raw.len()).sum();
    let title = format!(
        "TLS against plaintext, {} items ({:.1} MB), {rounds} rounds",
        items.len(),
        bytes as f64 / 1e6
    );
    let medians = super::print_medians(&title, &named, &times);
    let share =
        |plain: usize, tls: usize| medians[plain].as_secs_f64() / medians[tls].as_secs_f64();
    eprintln!(
        "  init throughput, TLS / plaintext        {:.2}",
        share(0, 1)
    );
    eprintln!(
        "  point-read throughput, TLS / plaintext  {:.2}",
        share(2, 3)
    );
}
