//! Redis deployments of several processes for one test, all on free 127.0.0.1 ports and
//! all from the `redis-server` binary (sentinels run it with `--sentinel`, a cluster
//! is made with `redis-cli --cluster create`): a master with one replica and three
//! sentinels, and a cluster of three masters. And [`Deployment`]: what the store
//! contract tests run against, one server or a cluster.
//!
//! Like [`RedisServer`], a deployment that cannot start fails the test with a message
//! saying why; nothing is skipped.

use std::time::{Duration, Instant};

use flagsync_redis::{RedisBigSegmentStoreBuilder, RedisStore, RedisStoreBuilder};

use super::redis_server::{RedisServer, Role};

/// The name the sentinels know the master by.
pub const MASTER_NAME: &str = "flagsync-master";

/// How long a sentinel waits before it calls an unanswering master down.
pub const DOWN_AFTER: Duration = Duration::from_millis(1000);

/// Poll `check` every 20 ms until it is true; panics with `what` after `within`.
fn wait_for(within: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let end = Instant::now() + within;
    while !check() {
        assert!(Instant::now() < end, "{what} after {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How many entries named `name` a redis-cli answer lists (redis-cli prints nested
/// arrays flat: `name`, then its value, on lines of their own).
fn count_named(answer: &str) -> usize {
    answer.lines().filter(|l| l.trim() == "name").count()
}

/// Passwords of a [`SentinelSet`].
#[derive(Debug, Clone, Default)]
pub struct SentinelAuth {
    /// The sentinels' `requirepass`.
    pub sentinel_password: Option<String>,
    /// The master's and the replica's `requirepass` (and `masterauth`).
    pub master_password: Option<String>,
}

/// A master, its replica and three sentinels watching it (quorum 2, down after 1 s).
#[derive(Debug)]
pub struct SentinelSet {
    /// The data servers: the first master, then its replica.
    pub servers: Vec<RedisServer>,
    pub sentinels: Vec<RedisServer>,
    auth: SentinelAuth,
}

impl SentinelSet {
    /// Start it without passwords; returns once the sentinels know each other and the
    /// replica (so they can fail the master over).
    pub fn start() -> Self {
        Self::start_with(SentinelAuth::default())
    }

    /// Start it with `auth`.
    pub fn start_with(auth: SentinelAuth) -> Self {
        let masterauth: Vec<String> = auth
            .master_password
            .iter()
            .flat_map(|p| ["--masterauth".to_owned(), p.clone()])
            .collect();
        let master = RedisServer::start_as(
            Role {
                password: auth.master_password.clone(),
                extra: masterauth.clone(),
                ..Role::default()
            },
            None,
        );
        let mut replica_args = masterauth;
        replica_args.extend([
            "--replicaof".to_owned(),
            "127.0.0.1".to_owned(),
            master.port().to_string(),
        ]);
        let replica = RedisServer::start_as(
            Role {
                password: auth.master_password.clone(),
                extra: replica_args,
                ..Role::default()
            },
            None,
        );
        let auth_pass = auth
            .master_password
            .as_ref()
            .map(|p| format!("sentinel auth-pass {MASTER_NAME} {p}\n"))
            .unwrap_or_default();
        let conf = format!(
            "sentinel monitor {MASTER_NAME} 127.0.0.1 {port} 2\n\
             sentinel down-after-milliseconds {MASTER_NAME} {down}\n\
             sentinel failover-timeout {MASTER_NAME} 2000\n\
             sentinel parallel-syncs {MASTER_NAME} 1\n{auth_pass}",
            port = master.port(),
            down = DOWN_AFTER.as_millis(),
        );
        let sentinels = (0..3)
            .map(|_| {
                RedisServer::start_as(
                    Role {
                        password: auth.sentinel_password.clone(),
                        sentinel: Some(conf.clone()),
                        ..Role::default()
                    },
                    None,
                )
            })
            .collect();
        let set = Self {
            servers: vec![master, replica],
            sentinels,
            auth,
        };
        wait_for(
            Duration::from_secs(10),
            "the replica is not in sync",
            || {
                set.servers[1]
                    .cli(&["INFO", "replication"])
                    .contains("master_link_status:up")
            },
        );
        wait_for(
            Duration::from_secs(15),
            "the sentinels do not know each other and the replica",
            || {
                set.sentinels.iter().all(|s| {
                    count_named(&s.cli(&["SENTINEL", "sentinels", MASTER_NAME])) == 2
                        && count_named(&s.cli(&["SENTINEL", "replicas", MASTER_NAME])) == 1
                })
            },
        );
        set
    }

    /// `redis://[:password@]127.0.0.1:<port>` of each sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| match &self.auth.sentinel_password {
                Some(p) => format!("redis://:{p}@127.0.0.1:{}", s.port()),
                None => format!("redis://127.0.0.1:{}", s.port()),
            })
            .collect()
    }

    /// A store builder that finds the master through the sentinels (with the
    /// master's password, if it has one).
    pub fn store_builder(&self) -> RedisStoreBuilder {
        let b = RedisStore::builder_sentinel(MASTER_NAME, self.sentinel_urls());
        match &self.auth.master_password {
            Some(p) => b.master_credentials(None, p),
            None => b,
        }
    }

    /// A big-segment store builder, as [`Self::store_builder`].
    pub fn big_segment_builder(&self) -> RedisBigSegmentStoreBuilder {
        let b = flagsync_redis::RedisBigSegmentStore::builder_sentinel(
            MASTER_NAME,
            self.sentinel_urls(),
        );
        match &self.auth.master_password {
            Some(p) => b.master_credentials(None, p),
            None => b,
        }
    }

    /// The master's port, as the first sentinel names it now.
    pub fn master_port(&self) -> u16 {
        let answer = self.sentinels[0].cli(&["SENTINEL", "get-master-addr-by-name", MASTER_NAME]);
        answer
            .lines()
            .nth(1)
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no master address in {answer:?}"))
    }

    /// The server the sentinels name as the master now.
    pub fn master(&self) -> &RedisServer {
        let port = self.master_port();
        self.servers
            .iter()
            .find(|s| s.port() == port)
            .expect("the master is one of the set's servers")
    }

    /// Kill the master process (SIGKILL); its port.
    pub fn kill_master(&mut self) -> u16 {
        let port = self.master_port();
        let master = self
            .servers
            .iter_mut()
            .find(|s| s.port() == port)
            .expect("the master is one of the set's servers");
        master.stop();
        port
    }

    /// Wait until the sentinels name another master than the one on `old`; when they
    /// first did (polled every 20 ms, so within 20 ms).
    pub fn await_promotion(&self, old: u16, within: Duration) -> Instant {
        wait_for(within, "the sentinels promoted no replica", || {
            self.master_port() != old
        });
        Instant::now()
    }
}

/// A cluster of three masters (no replicas), every slot covered.
#[derive(Debug)]
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Start three nodes, make them a cluster with `redis-cli --cluster create`, and
    /// return once every node says `cluster_state:ok`.
    pub fn start() -> Self {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                RedisServer::start_as(
                    Role {
                        cluster: true,
                        ..Role::default()
                    },
                    None,
                )
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port()))
            .collect();
        let out = std::process::Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .unwrap_or_else(|e| panic!("redis-cli did not run ({e}): install redis-tools"));
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = Self { nodes };
        cluster.await_ok();
        cluster
    }

    fn await_ok(&self) {
        wait_for(Duration::from_secs(15), "the cluster is not ok", || {
            self.nodes
                .iter()
                .all(|n| n.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok"))
        });
    }

    /// `redis://127.0.0.1:<port>` of each node.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port()))
            .collect()
    }

    /// A store builder for the cluster, with the prefix `{launchdarkly}`.
    pub fn store_builder(&self) -> RedisStoreBuilder {
        RedisStore::builder_cluster(self.seeds()).prefix("{launchdarkly}")
    }

    /// A big-segment store builder for the cluster, with the prefix `{launchdarkly}`.
    pub fn big_segment_builder(&self) -> RedisBigSegmentStoreBuilder {
        flagsync_redis::RedisBigSegmentStore::builder_cluster(self.seeds()).prefix("{launchdarkly}")
    }

    /// redis-cli in cluster mode (following redirections) through the first node.
    pub fn cli(&self, args: &[&str]) -> String {
        self.nodes[0].cli(args)
    }

    /// The keys matching `pattern` on every node, sorted.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        let mut keys: Vec<String> = self
            .nodes
            .iter()
            .flat_map(|n| {
                n.cli(&["KEYS", pattern])
                    .lines()
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect();
        keys.sort();
        keys
    }

    /// Stop every node.
    pub fn stop(&mut self) {
        for n in &mut self.nodes {
            n.stop();
        }
    }

    /// Start every node again (empty: nothing is saved; the cluster's layout is in
    /// each node's `nodes.conf`), and wait until the cluster is ok.
    pub fn restart(&mut self) {
        for n in &mut self.nodes {
            n.restart();
        }
        self.await_ok();
    }
}

/// What the store contract tests run against: one server (plaintext or TLS), or a
/// cluster, where every prefix gets a hash tag.
#[derive(Debug)]
pub enum Deployment {
    Server(RedisServer),
    Cluster(RedisCluster),
}

impl Deployment {
    /// The prefix the tests call `name`: `{name}` on a cluster.
    pub fn prefix(&self, name: &str) -> String {
        match self {
            Self::Server(_) => name.to_owned(),
            Self::Cluster(_) => format!("{{{name}}}"),
        }
    }

    /// `key` (`<prefix>:<rest>`) with its prefix as [`Self::prefix`] makes it.
    pub fn key(&self, key: &str) -> String {
        match key.split_once(':') {
            Some((prefix, rest)) => format!("{}:{rest}", self.prefix(prefix)),
            None => self.prefix(key),
        }
    }

    /// A store builder with the default prefix (`{launchdarkly}` on a cluster).
    pub fn store_builder(&self) -> RedisStoreBuilder {
        match self {
            Self::Server(s) => s.store_builder(),
            Self::Cluster(c) => c.store_builder(),
        }
    }

    /// redis-cli against the deployment.
    pub fn cli(&self, args: &[&str]) -> String {
        match self {
            Self::Server(s) => s.cli(args),
            Self::Cluster(c) => c.cli(args),
        }
    }

    /// The keys matching `pattern` (on every node), sorted.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        match self {
            Self::Server(s) => {
                let mut keys: Vec<String> = s
                    .cli(&["KEYS", pattern])
                    .lines()
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned)
                    .collect();
                keys.sort();
                keys
            }
            Self::Cluster(c) => c.keys(pattern),
        }
    }

    /// Stop it (every node).
    pub fn stop(&mut self) {
        match self {
            Self::Server(s) => s.stop(),
            Self::Cluster(c) => c.stop(),
        }
    }

    /// Start it again, empty.
    pub fn restart(&mut self) {
        match self {
            Self::Server(s) => s.restart(),
            Self::Cluster(c) => c.restart(),
        }
    }
}
