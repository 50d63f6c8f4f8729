//! The SSE contract test service (PROTOCOL.md Part D) on top of
//! `flagsync::sse_client::EventSource`, for `launchdarkly/sse-contract-tests`.
//!
//! `sse-contract-service [--port N]` listens on `127.0.0.1:N` (default 8000). Streams run
//! on smol; requests are served by std threads, one per connection.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flagsync::sse_client::{EventSource, EventSourceControl, Method, SseEvent};
use flagsync_conformance::service_http::{After, Request, Response, post, serve};
use serde::Deserialize;
use serde_json::{Value, json};

const CAPABILITIES: [&str; 10] = [
    "comments",
    "headers",
    "last-event-id",
    "post",
    "report",
    "read-timeout",
    "restart",
    "bom",
    "event-type-listeners",
    "server-directed-shutdown-request",
];

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateStream {
    stream_url: String,
    callback_url: String,
    #[serde(default)]
    tag: Option<String>,
    #[serde(default)]
    initial_delay_ms: Option<u64>,
    #[serde(default)]
    read_timeout_ms: Option<u64>,
    #[serde(default)]
    last_event_id: Option<String>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    headers: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
struct CommandBody {
    command: String,
    #[serde(default)]
    listen: Option<Listen>,
}

#[derive(Debug, Deserialize)]
struct Listen {
    #[serde(rename = "type")]
    event_type: String,
}

struct StreamEntry {
    control: EventSourceControl,
    listens: Arc<Mutex<HashSet<String>>>,
}

#[derive(Default)]
struct Service {
    streams: HashMap<u64, StreamEntry>,
    next_id: u64,
}

type Shared = Arc<Mutex<Service>>;

fn main() {
    let mut port: u16 = 8000;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" | "-p" => {
                port = args
                    .next()
                    .and_then(|p| p.parse().ok())
                    .unwrap_or_else(|| usage())
            }
            "--help" | "-h" => usage(),
            other => match other.strip_prefix("--port=").and_then(|p| p.parse().ok()) {
                Some(p) => port = p,
                None => usage(),
            },
        }
    }
    let shared: Shared = Arc::default();
    let e = serve("sse-contract-service", port, move |req| route(req, &shared));
    eprintln!("sse-contract-service: cannot listen on 127.0.0.1:{port}: {e}");
    std::process::exit(1);
}

fn usage() -> ! {
    eprintln!("usage: sse-contract-service [--port N]   (listens on 127.0.0.1, default port 8000)");
    std::process::exit(2);
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Service> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

fn route(req: &Request, shared: &Shared) -> (Response, After) {
    let path = req.path.split('?').next().unwrap_or("");
    match (req.method.as_str(), path) {
        ("GET", "/") => {
            let body = json!({ "capabilities": CAPABILITIES });
            (Response::json(&body), After::Continue)
        }
        ("DELETE", "/") => (Response::empty(204), After::Exit),
        ("POST", "/") => (create(req, shared), After::Continue),
        (method, p) => {
            let Some(id) = p
                .strip_prefix("/streams/")
                .and_then(|id| id.parse::<u64>().ok())
            else {
                return (Response::text(404, "not found"), After::Continue);
            };
            match method {
                "POST" => (command(id, req, shared), After::Continue),
                "DELETE" => {
                    let entry = lock(shared).streams.remove(&id);
                    match entry {
                        Some(e) => {
                            smol::block_on(e.control.close());
                            (Response::empty(204), After::Continue)
                        }
                        None => (Response::text(404, "unknown stream"), After::Continue),
                    }
                }
                _ => (Response::text(405, "method not allowed"), After::Continue),
            }
        }
    }
}

fn create(req: &Request, shared: &Shared) -> Response {
    let params: CreateStream = match serde_json::from_slice(&req.body) {
        Ok(p) => p,
        Err(e) => return Response::text(400, &format!("invalid body: {e}")),
    };
    let method = match params.method.as_deref().map(str::to_ascii_uppercase) {
        None => Method::Get,
        Some(m) if m.is_empty() || m == "GET" => Method::Get,
        Some(m) if m == "POST" => Method::Post,
        Some(m) if m == "REPORT" => Method::Report,
        Some(m) => return Response::text(400, &format!("unsupported method {m}")),
    };
    let mut builder = EventSource::builder(params.stream_url.clone())
        .method(method)
        .no_proxy();
    for (name, value) in params.headers.iter().flatten() {
        builder = builder.header(name.clone(), value.clone());
    }
    if let Some(body) = &params.body {
        builder = builder.body(body.clone().into_bytes());
    }
    if let Some(id) = &params.last_event_id {
        builder = builder.last_event_id(id.clone());
    }
    if let Some(ms) = params.read_timeout_ms {
        builder = builder.read_timeout(Duration::from_millis(ms));
    }
    if let Some(ms) = params.initial_delay_ms {
        builder = builder.initial_retry_delay(Duration::from_millis(ms));
    }
    let source = match builder.start() {
        Ok(s) => s,
        Err(e) => return Response::text(400, &format!("cannot start the stream: {e}")),
    };
    let listens: Arc<Mutex<HashSet<String>>> = Arc::default();
    let id = {
        let mut service = lock(shared);
        service.next_id += 1;
        let id = service.next_id;
        service.streams.insert(
            id,
            StreamEntry {
                control: source.control(),
                listens: listens.clone(),
            },
        );
        id
    };
    let tag = params.tag.clone().unwrap_or_default();
    let callback = params.callback_url.clone();
    std::thread::spawn(move || pump(source, &callback, &listens, &tag));
    Response {
        status: 201,
        headers: vec![("Location".into(), format!("/streams/{id}"))],
        body: Vec::new(),
    }
}

fn command(id: u64, req: &Request, shared: &Shared) -> Response {
    let service = lock(shared);
    let Some(entry) = service.streams.get(&id) else {
        return Response::text(404, "unknown stream");
    };
    let cmd: CommandBody = match serde_json::from_slice(&req.body) {
        Ok(c) => c,
        Err(e) => return Response::text(400, &format!("invalid command: {e}")),
    };
    match (cmd.command.as_str(), cmd.listen) {
        ("listen", Some(l)) => {
            entry
                .listens
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(l.event_type);
            Response::empty(204)
        }
        ("restart", _) => {
            entry.control.restart();
            Response::empty(204)
        }
        (other, _) => Response::text(400, &format!("unknown command {other:?}")),
    }
}

/// Forward the stream's items to the callback URL, numbered from 1, in order.
fn pump(mut source: EventSource, callback: &str, listens: &Mutex<HashSet<String>>, tag: &str) {
    let mut n = 0u64;
    smol::block_on(async {
        while let Some(item) = source.next().await {
            let body = match item {
                SseEvent::Event {
                    event_type,
                    data,
                    id,
                } => {
                    // With listeners registered, only `message` and listened types are
                    // delivered (EventSource semantics); without any, every event is.
                    let wanted = {
                        let l = listens.lock().unwrap_or_else(|e| e.into_inner());
                        l.is_empty() || event_type == "message" || l.contains(&event_type)
                    };
                    if !wanted {
                        continue;
                    }
                    json!({"kind": "event", "event": {"type": event_type, "data": data, "id": id}})
                }
                SseEvent::Comment(text) => json!({"kind": "comment", "comment": text}),
                SseEvent::Error { message, .. } => json!({"kind": "error", "error": message}),
                _ => continue,
            };
            n += 1;
            if let Err(e) = post_callback(callback, n, &body) {
                eprintln!("sse-contract-service: [{tag}] callback {n} failed: {e}");
            }
        }
    });
}

/// POST `body` as JSON to `<callback>/<n>`, waiting for the answer so that callbacks
/// stay in order.
fn post_callback(callback: &str, n: u64, body: &Value) -> std::io::Result<()> {
    let url = format!("{}/{n}", callback.trim_end_matches('/'));
    let body = body.to_string();
    post(
        &url,
        "application/json",
        body.as_bytes(),
        Duration::from_secs(10),
    )
    .map(drop)
}
