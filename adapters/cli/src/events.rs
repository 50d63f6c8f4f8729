//! `flagsync serve --events FILE|-`: one JSON line per analytics event the server
//! accepts, written on a thread of its own so that a slow output never holds up the
//! server (payloads it cannot keep up with are dropped and counted on stderr).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::mpsc::RecvTimeoutError;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, UNIX_EPOCH};

use flagsync_server::{EventOrigin, EventPayload, EventSubscription, ServerHandle};
use serde_json::Value;

/// How many received payloads may wait for the writer before new ones are dropped.
const CAPACITY: usize = 1024;
/// The least time between two reports of dropped payloads.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// The lines of one payload, one per event (a bulk payload's elements, or the one
/// diagnostic event), without their newline: `{"receivedAt":MS,"endpoint":"/bulk",
/// "payloadId":ID|null,"schema":S|null,"userAgent":UA|null,"event":{…}}`, the fields in
/// that order so that the event, the longest, comes last. The headers are the
/// request's `X-LaunchDarkly-Payload-ID`, `X-LaunchDarkly-Event-Schema` and
/// `User-Agent`.
pub fn lines(payload: &EventPayload) -> impl Iterator<Item = String> + '_ {
    let received_at = payload
        .received
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let payload_id = Value::from(payload.payload_id.clone());
    let schema = Value::from(payload.schema.clone());
    let user_agent = Value::from(payload.user_agent.clone());
    let endpoint = Value::from(endpoint(payload));
    payload.events().iter().map(move |event| {
        format!(
            "{{\"receivedAt\":{received_at},\"endpoint\":{endpoint},\"payloadId\":{payload_id},\"schema\":{schema},\"userAgent\":{user_agent},\"event\":{event}}}"
        )
    })
}

/// The thread writing the lines; it ends when the server shuts down.
pub struct EventLog {
    thread: JoinHandle<()>,
}

impl EventLog {
    /// Subscribe to `server`'s events and write them to `path` (created or truncated;
    /// `-` is standard output).
    pub fn start(server: &ServerHandle, path: &Path) -> io::Result<Self> {
        let (out, name): (Box<dyn Write + Send>, String) = if path == Path::new("-") {
            (Box::new(io::stdout()), "standard output".to_owned())
        } else {
            (Box::new(File::create(path)?), path.display().to_string())
        };
        let events = server.subscribe_events(CAPACITY);
        let thread = std::thread::Builder::new()
            .name("flagsync-events".into())
            .spawn(move || write_lines(&events, BufWriter::new(out), &name))?;
        Ok(Self { thread })
    }

    /// Wait until every payload received before the server shut down is written.
    pub fn finish(self) {
        let _ = self.thread.join();
    }
}

fn write_lines(events: &EventSubscription, mut out: impl Write, name: &str) {
    let mut reported = 0;
    let mut last_report: Option<Instant> = None;
    loop {
        match events.recv_timeout(REPORT_EVERY) {
            Ok(payload) => {
                let written = lines(&payload)
                    .try_for_each(|line| writeln!(out, "{line}"))
                    .and_then(|()| out.flush());
                if let Err(e) = written {
                    // Dropping the subscription: the server stops queueing for it.
                    eprintln!("flagsync: cannot write events to {name}: {e}; no more are written");
                    return;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let dropped = events.dropped();
        if dropped > reported && last_report.is_none_or(|t| t.elapsed() >= REPORT_EVERY) {
            eprintln!(
                "flagsync: {} event payloads not written to {name}: it did not keep up ({dropped} in all)",
                dropped - reported
            );
            reported = dropped;
            last_report = Some(Instant::now());
        }
    }
    let dropped = events.dropped();
    if dropped > reported {
        eprintln!("flagsync: {dropped} event payloads in all were not written to {name}");
    }
}

/// The `endpoint` a payload is shown with: `/bulk` or `/diagnostic` for a server-side
/// SDK's, the path posted to for a browser's or mobile SDK's (`/events/bulk/ID`,
/// `/mobile/events/bulk`, …).
fn endpoint(payload: &EventPayload) -> &str {
    match payload.origin {
        EventOrigin::ServerSide => payload.kind.path(),
        _ => &payload.path,
    }
}
