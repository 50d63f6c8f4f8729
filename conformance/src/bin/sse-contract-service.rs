//! The SSE contract test service (PROTOCOL.md Part D) on top of
//! `flagsync::sse_client::EventSource`, for `launchdarkly/sse-contract-tests`.
//!
//! `sse-contract-service [--port N]` listens on `127.0.0.1:N` (default 8000). Streams run
//! on smol; requests are served by std threads, one per connection.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flagsync::sse_client::{EventSource, EventSourceControl, Method, SseEvent};
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

struct Request {
    method: String,
    path: String,
    body: Vec<u8>,
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn empty(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    fn text(status: u16, text: &str) -> Self {
        Self {
            status,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body: text.as_bytes().to_vec(),
        }
    }
}

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
    let listener = match TcpListener::bind(("127.0.0.1", port)) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("sse-contract-service: cannot listen on 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        }
    };
    eprintln!("sse-contract-service: listening on 127.0.0.1:{port}");
    let shared: Shared = Arc::default();
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let shared = shared.clone();
        std::thread::spawn(move || handle(stream, &shared));
    }
}

fn usage() -> ! {
    eprintln!("usage: sse-contract-service [--port N]   (listens on 127.0.0.1, default port 8000)");
    std::process::exit(2);
}

fn handle(mut stream: TcpStream, shared: &Shared) {
    let Some(req) = read_request(&mut stream) else {
        return;
    };
    let (resp, exit) = route(&req, shared);
    let mut out = format!("HTTP/1.1 {} X\r\n", resp.status);
    for (n, v) in &resp.headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    out.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        resp.body.len()
    ));
    let _ = stream.write_all(out.as_bytes());
    let _ = stream.write_all(&resp.body);
    let _ = stream.flush();
    if exit {
        let _ = stream.shutdown(std::net::Shutdown::Both);
        eprintln!("sse-contract-service: stopping (DELETE /)");
        std::process::exit(0);
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Request> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(len)) => {
                let content_length = req
                    .headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                    .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse().ok())
                    .unwrap_or(0usize);
                let method = req.method?.to_owned();
                let path = req.path?.to_owned();
                let mut body = buf[len..].to_vec();
                while body.len() < content_length {
                    let n = stream.read(&mut chunk).ok()?;
                    if n == 0 {
                        break;
                    }
                    body.extend_from_slice(&chunk[..n]);
                }
                body.truncate(content_length);
                return Some(Request { method, path, body });
            }
            Ok(httparse::Status::Partial) if buf.len() < 1 << 20 => {}
            _ => return None,
        }
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Service> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

fn route(req: &Request, shared: &Shared) -> (Response, bool) {
    let path = req.path.split('?').next().unwrap_or("");
    match (req.method.as_str(), path) {
        ("GET", "/") => {
            let body = json!({ "capabilities": CAPABILITIES }).to_string();
            (
                Response {
                    status: 200,
                    headers: vec![("Content-Type".into(), "application/json".into())],
                    body: body.into_bytes(),
                },
                false,
            )
        }
        ("DELETE", "/") => (Response::empty(204), true),
        ("POST", "/") => (create(req, shared), false),
        (method, p) => {
            let Some(id) = p
                .strip_prefix("/streams/")
                .and_then(|id| id.parse::<u64>().ok())
            else {
                return (Response::text(404, "not found"), false);
            };
            match method {
                "POST" => (command(id, req, shared), false),
                "DELETE" => {
                    let entry = lock(shared).streams.remove(&id);
                    match entry {
                        Some(e) => {
                            smol::block_on(e.control.close());
                            (Response::empty(204), false)
                        }
                        None => (Response::text(404, "unknown stream"), false),
                    }
                }
                _ => (Response::text(405, "method not allowed"), false),
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
            if let Err(e) = post(callback, n, &body) {
                eprintln!("sse-contract-service: [{tag}] callback {n} failed: {e}");
            }
        }
    });
}

/// POST `body` as JSON to `<callback>/<n>` with a plain std socket.
fn post(callback: &str, n: u64, body: &Value) -> std::io::Result<()> {
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad callback URL");
    let rest = callback.strip_prefix("http://").ok_or_else(bad)?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    let addr = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let body = body.to_string();
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "POST {path}/{n} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    // Wait for the status line, so that callbacks stay in order.
    let mut buf = [0u8; 512];
    let _ = stream.read(&mut buf)?;
    Ok(())
}
