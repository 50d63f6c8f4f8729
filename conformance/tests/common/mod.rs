//! What the tests that run the built binaries share: `target/debug`, a binary brought up
//! to date with cargo, child processes killed when dropped, and their output read line
//! by line with deadlines.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// `target/debug`, from the test's own path (`target/debug/deps/<test>-…`).
pub fn debug_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/debug")
        .to_path_buf()
}

/// `path`, brought up to date with `cargo build ARGS` (a no-op when it is, so a test
/// never runs a stale binary). Only if cargo cannot be started at all is an existing
/// binary used as it is; a missing one, or a failed build, fails the test.
pub fn built(path: PathBuf, args: &[&str]) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target = debug_dir().parent().expect("target dir").to_path_buf();
    let mut command = Command::new(cargo);
    // What cargo sets for this test process would, seen by the inner cargo, change the
    // fingerprints of build scripts that watch them (ring's), and each run would
    // rebuild them.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name == "OUT_DIR"
            || name.starts_with("CARGO_PKG_")
            || name.starts_with("CARGO_MANIFEST_")
            || name.starts_with("CARGO_BIN_EXE_")
            || [
                "CARGO_CRATE_NAME",
                "CARGO_PRIMARY_PACKAGE",
                "CARGO_TARGET_TMPDIR",
            ]
            .contains(&name.as_ref())
        {
            command.env_remove(name.as_ref());
        }
    }
    let status = command
        .arg("build")
        .args(args)
        .env("CARGO_TARGET_DIR", target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status();
    match status {
        Ok(status) => assert!(status.success(), "cargo build {args:?} failed"),
        Err(e) if path.exists() => eprintln!("cannot run cargo ({e}): using {}", path.display()),
        Err(e) => panic!("{} is missing and cargo cannot be run: {e}", path.display()),
    }
    assert!(
        path.exists(),
        "{} is missing after building it",
        path.display()
    );
    path
}

/// The `flagsync` binary, up to date (built once per test binary).
pub fn flagsync_bin() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| built(debug_dir().join("flagsync"), &["-p", "flagsync-cli"]))
        .clone()
}

/// A child process killed when dropped (a failing test leaves none behind).
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `flagsync serve` on a free port (`--port 0`) for `sdk_key`, with heartbeats every
/// second and the data file `data`; more arguments may follow.
pub fn serve_command(sdk_key: &str, data: &Path) -> Command {
    let mut command = Command::new(flagsync_bin());
    command
        .args([
            "serve",
            "--port",
            "0",
            "--sdk-key",
            sdk_key,
            "--heartbeat",
            "1",
            "--data",
        ])
        .arg(data);
    command
}

/// Lines of a child's stdout, from a thread.
pub fn lines(out: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Wait for a line `want` accepts; every line seen goes to `seen`.
pub fn expect(
    rx: &Receiver<String>,
    seen: &mut Vec<String>,
    within: Duration,
    want: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + within;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) => {
                seen.push(line.clone());
                if want(&line) {
                    return line;
                }
            }
            Err(_) => break,
        }
    }
    panic!("no expected line within {within:?}; saw {seen:#?}");
}

/// Start `serve` (a [`serve_command`], with any more arguments) and wait at most 20 s
/// for it to say where it serves: the process and its URL. Its output is drained from
/// then on, so that it never blocks.
pub fn serving(mut serve: Command) -> (Proc, String) {
    let mut child = serve
        .stdout(Stdio::piped())
        .spawn()
        .expect("start flagsync serve");
    let rx = lines(child.stdout.take().unwrap());
    let proc = Proc(child);
    let first = expect(&rx, &mut Vec::new(), Duration::from_secs(20), |l| {
        l.contains("serving on")
    });
    let url = first.trim().rsplit(' ').next().unwrap().to_owned();
    std::thread::spawn(move || rx.iter().count());
    (proc, url)
}
