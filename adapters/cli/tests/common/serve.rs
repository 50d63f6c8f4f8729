//! `flagsync serve` as a child process, as a user starts it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `flagsync serve --port 0` with more arguments; killed on drop.
pub struct Serve {
    child: Child,
    /// Where it listens (`http://127.0.0.1:<port>`), from the first line it printed.
    pub url: String,
    /// That first line: says whether it serves or relays.
    pub banner: String,
    /// Every line it printed to standard output so far (read by a thread, so the
    /// pipe never fills), the first line included.
    lines: Arc<Mutex<Vec<String>>>,
}

impl Serve {
    /// `flagsync serve --port 0 <args>`, started; its standard error is dropped.
    pub fn start(args: &[&str]) -> Self {
        Self::start_via(&[], args)
    }

    /// `<wrapper…> flagsync serve --port 0 <args>`: the binary run by a program that
    /// execs it (`prlimit --nofile=…`), so the child is the server itself.
    pub fn start_via(wrapper: &[&str], args: &[&str]) -> Self {
        let mut argv = vec!["serve", "--port", "0"];
        argv.extend_from_slice(args);
        Self::spawn(wrapper, &argv, &[])
    }

    /// `flagsync <argv>` with these environment variables set, started; its standard
    /// error is dropped.
    pub fn with_env(argv: &[&str], vars: &[(&str, &str)]) -> Self {
        Self::spawn(&[], argv, vars)
    }

    /// `<wrapper…> flagsync <argv>` with `vars` set.
    fn spawn(wrapper: &[&str], argv: &[&str], vars: &[(&str, &str)]) -> Self {
        let bin = env!("CARGO_BIN_EXE_flagsync");
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        let mut child = command
            .args(argv)
            .envs(vars.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {wrapper:?} flagsync serve: {e}"));
        let mut out = BufReader::new(child.stdout.take().expect("stdout"));
        let mut banner = String::new();
        out.read_line(&mut banner).expect("a first line");
        let url = banner
            .split_whitespace()
            .last()
            .unwrap_or_else(|| panic!("no URL in {banner:?}"))
            .to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{banner:?}");
        let lines = Arc::new(Mutex::new(vec![banner.trim_end().to_owned()]));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in out.lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        });
        Self {
            child,
            url,
            banner,
            lines,
        }
    }

    /// The child's process id (the server's, also when started through a wrapper that
    /// execs it).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `host:port` of [`Self::url`].
    pub fn addr(&self) -> &str {
        self.url.trim_start_matches("http://")
    }

    /// The first line printed that contains `needle`, waiting up to `timeout` for it.
    pub fn line_containing(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(line) = lines.iter().find(|l| l.contains(needle)) {
                    return line.clone();
                }
                assert!(
                    Instant::now() < deadline,
                    "no line with {needle:?} printed in {timeout:?}; printed: {lines:#?}"
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
