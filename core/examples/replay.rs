//! Drive the sans-I/O core with a recorded HTTP/SSE response, in 4 KiB reads, with a
//! hand-made clock: no socket, no runtime.
//!
//! ```text
//! cargo run -p flagsync-core --example replay            # a built-in sample stream
//! cargo run -p flagsync-core --example replay -- FILE    # an SSE body saved from a server
//! ```

use std::time::Duration;

use flagsync_core::{Action, Command, Config, DataSystem, Event, Input, Kind, Output};

const SAMPLE: &str = concat!(
    ": heartbeat\n",
    "event: put\n",
    "data: {\"path\":\"/\",\"data\":{\"flags\":{\"checkout\":{\"key\":\"checkout\",\"version\":1,\"on\":true,",
    "\"prerequisites\":[{\"key\":\"login\",\"variation\":0}]},\"login\":{\"key\":\"login\",\"version\":3,\"on\":true}},",
    "\"segments\":{\"beta\":{\"key\":\"beta\",\"version\":1,\"included\":[\"u1\"]}}}}\n\n",
    "event: patch\n",
    "data: {\"path\":\"/flags/login\",\"data\":{\"key\":\"login\",\"version\":4,\"on\":false}}\n\n",
    "event: delete\n",
    "data: {\"path\":\"/segments/beta\",\"version\":2}\n\n",
    "event: patch\n",
    "data: {\"path\":\"/flags/login\",\"data\":{\"key\":\"login\",\"version\":2,\"on\":true}}\n\n",
);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let body = match std::env::args().nth(1) {
        Some(path) => std::fs::read(&path).map_err(|e| format!("cannot read {path}: {e}"))?,
        None => SAMPLE.as_bytes().to_vec(),
    };
    let mut config = Config::new("sdk-example");
    config.stream_uri = "http://127.0.0.1:8030".into();
    // The example is the driver: it owns the clock and hands the core `now`.
    #[allow(
        clippy::disallowed_methods,
        reason = "the driver, not the core, reads the clock"
    )]
    let mut now = std::time::Instant::now();
    let mut system = DataSystem::new(config, 1, now)?;
    system.handle_input(now, Input::Command(Command::Start));

    let mut response = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n".to_vec();
    response.extend_from_slice(&body);
    let mut reads = response.chunks(4096);
    let mut conn = None;
    loop {
        match system.poll_output() {
            Output::Action(Action::Connect {
                conn: c, request, ..
            }) => {
                println!(
                    "connect {c}: {}",
                    String::from_utf8_lossy(&request)
                        .lines()
                        .next()
                        .unwrap_or("")
                );
                conn = Some(c);
            }
            Output::Action(other) => println!("action: {other:?}"),
            Output::Event(Event::StatusChanged(s)) => println!(
                "status: {:?} (error: {:?})",
                s.state,
                s.error.map(|e| e.kind)
            ),
            Output::Event(Event::StoreChanged { changed_flags }) => {
                println!("store changed; affected flags: {changed_flags:?}")
            }
            Output::Event(other) => println!("event: {other:?}"),
            Output::Persist(p) => println!("persist: {p:?}"),
            Output::Wait(_) => {
                let Some(conn) = conn else { break };
                now += Duration::from_millis(1);
                match reads.next() {
                    Some(bytes) => system.handle_input(now, Input::Data { conn, bytes }),
                    None => break,
                }
            }
        }
    }
    let snap = system.snapshot();
    println!("\nstore after {} bytes in 4 KiB reads:", body.len());
    for kind in Kind::ALL {
        for (key, item) in snap.sorted(kind) {
            println!("  {kind}/{key} v{}", item.version);
        }
    }
    Ok(())
}
