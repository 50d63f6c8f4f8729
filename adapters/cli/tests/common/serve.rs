//! `flagsync serve` as a child process, as a user starts it.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// `flagsync serve --port 0` with more arguments; killed on drop.
pub struct Serve {
    child: Child,
    /// Where it listens (`http://127.0.0.1:<port>`), from the first line it printed.
    pub url: String,
    /// That first line: says whether it serves or relays.
    pub banner: String,
}

impl Serve {
    /// `flagsync serve --port 0 <args>`, started; its standard error is dropped.
    pub fn start(args: &[&str]) -> Self {
        let mut argv = vec!["serve", "--port", "0"];
        argv.extend_from_slice(args);
        Self::with_env(&argv, &[])
    }

    /// `flagsync <argv>` with these environment variables set, started; its standard
    /// error is dropped.
    pub fn with_env(argv: &[&str], vars: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_flagsync"))
            .args(argv)
            .envs(vars.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("flagsync serve");
        let mut banner = String::new();
        BufReader::new(child.stdout.as_mut().expect("stdout"))
            .read_line(&mut banner)
            .expect("a first line");
        let url = banner
            .split_whitespace()
            .last()
            .unwrap_or_else(|| panic!("no URL in {banner:?}"))
            .to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{banner:?}");
        Self { child, url, banner }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
