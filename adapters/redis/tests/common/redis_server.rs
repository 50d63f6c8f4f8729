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
use std::time::{Duration, Instant};

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
                password: password.map(str::to_owned),
            };
            if server.spawn() {
                return server;
            }
        }
        panic!("redis-server did not start");
    }

    fn spawn(&mut self) -> bool {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(["--protected-mode", "no", "--loglevel", "warning"])
            .arg("--dir")
            .arg(&self.dir)
            .args(
                self.password
                    .iter()
                    .flat_map(|p| ["--requirepass".to_owned(), p.clone()]),
            )
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
        let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
        // Any answer will do (without the password it is an error): it is listening.
        let mut buf = [0u8; 1];
        s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok()
    }

    /// `redis://[:password@]127.0.0.1:<port>/0`.
    pub fn url(&self) -> String {
        match &self.password {
            Some(p) => format!("redis://:{p}@127.0.0.1:{}/0", self.port),
            None => format!("redis://127.0.0.1:{}/0", self.port),
        }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Run `redis-cli` against this server with `args`; its trimmed standard output.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(
                self.password
                    .iter()
                    .flat_map(|p| ["--no-auth-warning".to_owned(), "-a".to_owned(), p.clone()]),
            )
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("redis-cli did not run ({e}): {INSTALL}"));
        assert!(out.status.success(), "redis-cli {args:?} failed");
        String::from_utf8(out.stdout).unwrap().trim_end().to_owned()
    }

    /// Stop the server (kill and reap it); the port stays reserved for [`Self::restart`].
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
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
