//! `flagsync`: serve flags locally, watch a flag delivery service, take a snapshot.

mod client;
mod demo;
mod events;

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use clap::{Args, Parser, Subcommand};
use flagsync_server::{Endpoint, Server, ServerError, ServerHandle};
use flagsync::{Snapshot, State};
use flagsync_core::Kind;
use flagsync_core::config::{DEFAULT_POLLING_URI, DEFAULT_STREAM_URI};
use flagsync_core::endpoint::Url;
use serde_json::{Value, json};

use client::{
    ErrorSummary, Fdv2Preset, Options, RedisOptions, Session, SourceSummary, StatusSummary, Update,
};
use flagsync::persist::{CacheConfig, CachingStore, StoreStatus};

/// Keep a feature-flag store in sync with a LaunchDarkly-compatible flag delivery
/// service, or serve one locally.
#[derive(Debug, Parser)]
#[command(name = "flagsync", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve flags from a JSON file (or from Redis) as a LaunchDarkly-compatible
    /// service (FDv1 and FDv2), until Ctrl-C. Edits to the file (or the Redis data) are
    /// pushed to connected clients. Analytics events (POST /bulk, /diagnostic) are
    /// accepted, and shown with --events. Faults can be injected to test clients.
    Serve(ServeArgs),
    /// Run a local server with sample flags that change every few seconds, connect a
    /// client to it and print what it sees. Works offline.
    Demo(DemoArgs),
    /// Connect to a flag delivery service and print status changes and flag changes
    /// (with FDv2, also the data availability and the active source). With --redis,
    /// also keep the flags in Redis; with --redis and --daemon, only read them there.
    Watch(WatchArgs),
    /// Wait for the full flag data and print it as {"flags":{…},"segments":{…}}.
    Snapshot(SnapshotArgs),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// The flag data: {"flags":{…},"segments":{…}} (as `flagsync snapshot` prints), or
    /// {"flagValues":{"key": value}} for simple flags. Edits are pushed to clients
    /// within a second; an edited flag or segment is served with a version above the
    /// one served before (versions never go back), whatever the file says.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "redis",
        conflicts_with = "redis"
    )]
    data: Option<PathBuf>,
    /// Serve the flags kept in Redis at URL (LaunchDarkly key layout, as the Relay
    /// Proxy, other SDKs or `flagsync watch --redis` write them) instead of a file;
    /// changes there are pushed to clients within a second.
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// The Redis key prefix [default: launchdarkly].
    #[arg(long, value_name = "PREFIX", requires = "redis")]
    prefix: Option<String>,
    /// The port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 8030)]
    port: u16,
    /// Require this SDK key in the Authorization header (default: accept any).
    #[arg(long, value_name = "KEY")]
    sdk_key: Option<String>,
    /// Seconds between stream heartbeats.
    #[arg(long, value_name = "SECS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..))]
    heartbeat: u64,
    /// Write the analytics events SDKs send (POST /bulk, POST /diagnostic; always
    /// accepted with 202) to FILE, created or truncated, or to standard output with `-`
    /// (the other messages then go to standard error). One JSON line per event, a bulk
    /// payload's events one line each: {"receivedAt":MS,"endpoint":"/bulk",
    /// "payloadId":ID|null,"event":{…}} (receivedAt: milliseconds since the Unix epoch;
    /// endpoint: /bulk or /diagnostic). Payloads the output cannot keep up with are
    /// dropped and counted on standard error.
    #[arg(long, value_name = "FILE|-")]
    events: Option<PathBuf>,
    /// Send `X-LD-FD-Fallback: true` on every FDv2 response (success or error), which
    /// moves FDv2 clients to FDv1 polling (/sdk/latest-all) for good.
    #[arg(long, help_heading = FAULTS)]
    fdv1_fallback: bool,
    /// End the first COUNT FDv2 streams with a `goodbye` event after their first
    /// payload, then close them (`always`: every stream). Clients reconnect with their
    /// `basis`.
    #[arg(long, value_name = "COUNT", value_parser = parse_count, help_heading = FAULTS)]
    goodbye: Option<usize>,
    /// Interrupt the first COUNT FDv2 full payloads (stream or poll) half-way with an
    /// `error` event, then send them again in full (`always`: every one).
    #[arg(long, value_name = "COUNT", value_parser = parse_count, help_heading = FAULTS)]
    payload_error: Option<usize>,
    /// Answer every request to ENDPOINT with HTTP STATUS, e.g. `/sdk/stream=401`.
    /// ENDPOINT is /all, /sdk/latest-all, /sdk/stream, /sdk/poll, /bulk or
    /// /diagnostic. Repeatable.
    #[arg(long, value_name = "ENDPOINT=STATUS", value_parser = parse_fail, help_heading = FAULTS)]
    fail: Vec<(Endpoint, u16)>,
    /// Accept requests to ENDPOINT but never answer them. Repeatable.
    #[arg(long, value_name = "ENDPOINT", help_heading = FAULTS)]
    hang: Vec<Endpoint>,
}

/// The help heading of `serve`'s fault options.
const FAULTS: &str = "Faults (for testing clients)";

/// A count, or `always`.
fn parse_count(s: &str) -> Result<usize, String> {
    if s == "always" {
        return Ok(usize::MAX);
    }
    s.parse()
        .map_err(|_| format!("expected a number of times or `always`, not {s:?}"))
}

/// `ENDPOINT=STATUS`.
fn parse_fail(s: &str) -> Result<(Endpoint, u16), String> {
    let (endpoint, status) = s
        .split_once('=')
        .ok_or_else(|| format!("expected ENDPOINT=STATUS such as /sdk/stream=401, not {s:?}"))?;
    let endpoint = endpoint.parse::<Endpoint>().map_err(|e| e.to_string())?;
    match status.parse::<u16>() {
        Ok(code @ 100..=599) => Ok((endpoint, code)),
        _ => Err(format!("expected an HTTP status (100-599), not {status:?}")),
    }
}

#[derive(Debug, Args)]
struct DemoArgs {
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Seconds between the server's flag changes.
    #[arg(long, value_name = "SECS", default_value_t = 2.5)]
    interval: f64,
    /// Have the client poll instead of stream.
    #[arg(long)]
    polling: bool,
    /// Have the client use the FDv2 data system with this preset.
    #[arg(long, value_name = "PRESET", value_enum, conflicts_with = "polling")]
    fdv2: Option<Fdv2Preset>,
    /// Print JSON lines instead of text.
    #[arg(long)]
    json: bool,
}

/// Where and how to connect (shared by the client subcommands).
#[derive(Debug, Args)]
struct ConnArgs {
    /// The SDK key. A command-line argument is visible to every user of this machine
    /// (`ps`): set the environment variable FLAGSYNC_SDK_KEY instead, the safe way.
    #[arg(
        long,
        env = "FLAGSYNC_SDK_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    sdk_key: Option<String>,
    /// The streaming base URI [default: https://stream.launchdarkly.com, or the
    /// --polling-uri if only that is given].
    #[arg(long, value_name = "URL")]
    stream_uri: Option<String>,
    /// The polling base URI [default: https://app.launchdarkly.com, or the
    /// --stream-uri if only that is given].
    #[arg(long, value_name = "URL")]
    polling_uri: Option<String>,
    /// Poll instead of streaming (FDv1).
    #[arg(long)]
    polling: bool,
    /// Use the FDv2 data system (/sdk/stream, /sdk/poll, with the FDv1 fallback) with
    /// this preset instead of FDv1.
    #[arg(long, value_name = "PRESET", value_enum, conflicts_with = "polling")]
    fdv2: Option<Fdv2Preset>,
    /// A payload filter key.
    #[arg(long, value_name = "KEY")]
    filter: Option<String>,
    /// Also keep the flags in Redis at URL (redis://[:password@]host[:port][/db]), in
    /// the key layout of the LaunchDarkly SDKs and Relay Proxy. Until the service
    /// delivers, the flags already there are served; an outage of Redis is survived
    /// and repaired when it returns.
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// The Redis key prefix [default: launchdarkly].
    #[arg(long, value_name = "PREFIX", requires = "redis")]
    prefix: Option<String>,
    /// Daemon mode: connect to no flag service; serve the flags another process keeps
    /// in --redis (re-read every 15 s).
    #[arg(long, requires = "redis", conflicts_with_all = ["polling", "fdv2", "filter", "stream_uri", "polling_uri"])]
    daemon: bool,
    /// The largest SSE line and event accepted, in bytes [default: 64 MiB]: raise it
    /// for a data set whose `put` is larger. Also the most of an FDv2 payload held
    /// before its payload-transferred.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    max_event_bytes: Option<u64>,
    /// Also trust the CA certificate(s) in this PEM file (a private CA, or a local
    /// server's self-signed certificate).
    #[arg(long, value_name = "PEM")]
    ca_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
struct WatchArgs {
    #[command(flatten)]
    conn: ConnArgs,
    /// Print JSON lines instead of text.
    #[arg(long)]
    json: bool,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// Show the loading progress of the initial data on stderr (the default when
    /// stderr is a terminal).
    #[arg(long)]
    progress: bool,
    /// Evaluate this flag (repeatable) for --context once the data is in and after
    /// every flag change, print the result, and report the evaluation as analytics
    /// events (to --events-uri): with `flagsync serve --events -` on the other side,
    /// a local loop of what an SDK would report.
    #[arg(long, value_name = "KEY")]
    evaluate: Vec<String>,
    /// The context to evaluate for, as LaunchDarkly context JSON.
    #[arg(
        long,
        value_name = "JSON",
        default_value = r#"{"kind":"user","key":"flagsync-cli"}"#,
        requires = "evaluate"
    )]
    context: String,
    /// Where the evaluations' analytics events go [default: the --stream-uri, which is
    /// right for `flagsync serve`; LaunchDarkly's events service for LaunchDarkly].
    #[arg(long, value_name = "URL", requires = "evaluate")]
    events_uri: Option<String>,
}

#[derive(Debug, Args)]
struct SnapshotArgs {
    #[command(flatten)]
    conn: ConnArgs,
    /// Give up after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 15.0)]
    timeout: f64,
}

/// A failure to report: a message saying what to do, and the exit code.
#[derive(Debug)]
struct CliError {
    message: String,
    code: u8,
}

impl CliError {
    /// Bad input (arguments, files): exit code 2.
    fn usage(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 2,
        }
    }

    /// The operation failed: exit code 1.
    fn failed(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 1,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("flagsync: error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve(args).await,
            Command::Demo(args) => demo(args).await,
            Command::Watch(args) => watch(args).await,
            Command::Snapshot(args) => snapshot(args).await,
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(2));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flagsync: error: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}

// ---------------------------------------------------------------------------------
// serve

fn read_data(path: &Path) -> Result<Value, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::usage(format!(
            "cannot read the flag data file {}: {e}",
            path.display()
        ))
    })?;
    serde_json::from_str(&text).map_err(|e| {
        CliError::usage(format!(
            "{} is not valid JSON: {e}. Expected {{\"flags\":{{…}},\"segments\":{{…}}}}, as `flagsync snapshot` prints",
            path.display()
        ))
    })
}

fn data_error(path: &Path, e: ServerError) -> CliError {
    match e {
        ServerError::InvalidData(msg) => CliError::usage(format!("{}: {msg}", path.display())),
        other => CliError::failed(other.to_string()),
    }
}

fn counts(server: &ServerHandle) -> (usize, usize) {
    let v: Value = serde_json::from_str(&server.data_json()).unwrap_or(Value::Null);
    let n = |k: &str| v[k].as_object().map_or(0, serde_json::Map::len);
    (n("flags"), n("segments"))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Where `serve` gets its flag data.
enum ServeSource {
    File(PathBuf),
    /// Redis (read uncached), and `host:port/db (prefix p)` for people.
    Redis(Box<CachingStore>, String),
}

impl ServeSource {
    fn new(args: &ServeArgs) -> Result<Self, CliError> {
        if let Some(url) = &args.redis {
            let opts = RedisOptions {
                url: url.clone(),
                prefix: args.prefix.clone(),
                daemon: true,
            };
            let store = opts.store().map_err(CliError::usage)?;
            let name = format!("Redis {} (prefix {})", store.target(), store.prefix());
            return Ok(Self::Redis(
                Box::new(CachingStore::new(Arc::new(store), CacheConfig::disabled())),
                name,
            ));
        }
        match &args.data {
            Some(path) => Ok(Self::File(path.clone())),
            None => Err(CliError::usage(
                "give the flag data with --data FILE or --redis URL",
            )),
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::File(path) => path.display().to_string(),
            Self::Redis(_, name) => name.clone(),
        }
    }

    /// The data as {"flags":{…},"segments":{…}}.
    async fn load(&self) -> Result<Value, CliError> {
        match self {
            Self::File(path) => read_data(path),
            Self::Redis(store, name) => {
                let mut data = json!({"flags": {}, "segments": {}});
                for (kind, field) in [(Kind::Flag, "flags"), (Kind::Segment, "segments")] {
                    let items = store.all(kind).await.map_err(|e| {
                        CliError::failed(format!("cannot read the flags from {name}: {e}. Is Redis running, and is --redis right?"))
                    })?;
                    for (key, item) in items.iter() {
                        let value: Value = serde_json::from_slice(&item.raw).unwrap_or(Value::Null);
                        data[field][key] = value;
                    }
                }
                Ok(data)
            }
        }
    }

    fn error(&self, e: ServerError) -> CliError {
        match self {
            Self::File(path) => data_error(path, e),
            Self::Redis(_, name) => CliError::failed(format!("{name}: {e}")),
        }
    }
}

async fn serve(args: ServeArgs) -> Result<(), CliError> {
    let source = ServeSource::new(&args)?;
    let mut data = source.load().await?;
    let server = Server::builder()
        .port(args.port)
        .sdk_key(args.sdk_key.clone())
        .heartbeat(Duration::from_secs(args.heartbeat))
        .data(data.clone())
        .start()
        .map_err(|e| match e {
            ServerError::Bind { port, source } => CliError::failed(format!(
                "cannot listen on 127.0.0.1:{port}: {source}. Choose another port with --port (0 picks a free one)"
            )),
            other => source.error(other),
        })?;
    // With `--events -`, standard output is for the events alone.
    let to_stderr = args.events.as_deref() == Some(Path::new("-"));
    macro_rules! say {
        ($($arg:tt)*) => {
            if to_stderr { eprintln!($($arg)*) } else { println!($($arg)*) }
        };
    }
    let event_log = match &args.events {
        Some(path) => Some(events::EventLog::start(&server, path).map_err(|e| {
            CliError::usage(format!("cannot write events to {}: {e}", path.display()))
        })?),
        None => None,
    };
    let faults = apply_faults(&server, &args);
    let (flags, segments) = counts(&server);
    let url = server.url();
    say!("flagsync: serving on {url}");
    say!(
        "  {} and {} from {}",
        plural(flags, "flag", "flags"),
        plural(segments, "segment", "segments"),
        source.describe()
    );
    say!("  FDv1 streaming: GET {url}/all");
    say!("  FDv1 polling:   GET {url}/sdk/latest-all");
    say!("  FDv2 streaming: GET {url}/sdk/stream");
    say!("  FDv2 polling:   GET {url}/sdk/poll");
    let shown = match &args.events {
        Some(_) if to_stderr => " (shown on standard output)".to_owned(),
        Some(path) => format!(" (written to {})", path.display()),
        None => String::new(),
    };
    say!("  events:         POST {url}/bulk, POST {url}/diagnostic{shown}");
    for fault in &faults {
        say!("  fault:          {fault}");
    }
    // Never echo the key itself: it may be a real one.
    let key_hint = if args.sdk_key.is_some() {
        " --sdk-key KEY"
    } else {
        ""
    };
    say!("  try:            flagsync watch --stream-uri {url}{key_hint} [--fdv2 default]");
    match source {
        ServeSource::File(_) => {
            say!("Edits to the file are pushed to clients. Press Ctrl-C to stop.")
        }
        ServeSource::Redis(..) => {
            say!("Changes in Redis are pushed to clients. Press Ctrl-C to stop.")
        }
    }

    let mut modified = args.data.as_deref().and_then(file_stamp);
    let mut failing = false;
    // A file costs one stat a check: checked five times a second, an edit reaches
    // clients well within a second. Redis is read once a second.
    let every = match source {
        ServeSource::File(_) => Duration::from_millis(200),
        ServeSource::Redis(..) => Duration::from_secs(1),
    };
    let mut tick = tokio::time::interval(every);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        tokio::select! {
            _ = &mut ctrl_c => break,
            _ = tick.tick() => {
                if let ServeSource::File(path) = &source {
                    let now = file_stamp(path);
                    if now == modified {
                        continue;
                    }
                    modified = now;
                }
                let loaded = source.load().await;
                if let ServeSource::Redis(..) = &source {
                    // Polled every second: report a failure once, and only changes.
                    match &loaded {
                        Err(e) if !failing => eprintln!("flagsync: {} (still serving the previous data)", e.message),
                        Ok(_) if failing => eprintln!("flagsync: {} answers again", source.describe()),
                        _ => {}
                    }
                    failing = loaded.is_err();
                    if loaded.as_ref().is_ok_and(|d| *d == data) || failing {
                        continue;
                    }
                }
                match loaded.and_then(|d| {
                    data = d.clone();
                    server.replace_all(d).map_err(|e| source.error(e))
                }) {
                    Ok(()) => {
                        let (f, s) = counts(&server);
                        say!(
                            "reloaded {}: {} and {}, sent to {}",
                            source.describe(),
                            plural(f, "flag", "flags"),
                            plural(s, "segment", "segments"),
                            plural(server.open_streams(), "stream", "streams"),
                        );
                    }
                    Err(e) => eprintln!("flagsync: not reloaded (still serving the previous data): {}", e.message),
                }
            }
        }
    }
    say!("stopping");
    tokio::task::spawn_blocking(move || {
        server.shutdown();
        if let Some(log) = event_log {
            log.finish();
        }
    })
    .await
    .map_err(|e| CliError::failed(e.to_string()))
}

/// Set the faults `args` asks for; one line describing each.
fn apply_faults(server: &ServerHandle, args: &ServeArgs) -> Vec<String> {
    let times = |n: usize, what: &str| match n {
        usize::MAX => format!("every {what}"),
        1 => format!("the first {what}"),
        _ => format!("the first {n} {what}s"),
    };
    let mut faults = Vec::new();
    if args.fdv1_fallback {
        server.fdv1_fallback(true);
        faults.push("X-LD-FD-Fallback: true on every FDv2 response".to_owned());
    }
    if let Some(n) = args.goodbye.filter(|n| *n > 0) {
        server.goodbye_next(n);
        faults.push(format!(
            "a goodbye after the first payload of {}",
            times(n, "FDv2 stream")
        ));
    }
    if let Some(n) = args.payload_error.filter(|n| *n > 0) {
        server.payload_error_next(n);
        faults.push(format!(
            "an error event half-way through {}",
            times(n, "FDv2 full payload")
        ));
    }
    for (endpoint, status) in &args.fail {
        server.fail_endpoint(*endpoint, Some(*status));
        faults.push(format!("{endpoint} answers HTTP {status}"));
    }
    for endpoint in &args.hang {
        server.hang_endpoint(*endpoint, true);
        faults.push(format!("{endpoint} never answers"));
    }
    faults
}

/// What tells that a file changed: its modification time and length.
fn file_stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

// ---------------------------------------------------------------------------------
// client options

fn check_uri(flag: &str, uri: &str) -> Result<(), CliError> {
    Url::parse(uri).map(|_| ()).map_err(|e| {
        CliError::usage(format!(
            "invalid {flag} {uri:?}: {e}. Expected a base URL such as http://127.0.0.1:8030 or {DEFAULT_STREAM_URI}"
        ))
    })
}

fn resolve(conn: ConnArgs) -> Result<Options, CliError> {
    if let Some(u) = &conn.stream_uri {
        check_uri("--stream-uri", u)?;
    }
    if let Some(u) = &conn.polling_uri {
        check_uri("--polling-uri", u)?;
    }
    let stream_uri = conn
        .stream_uri
        .clone()
        .or_else(|| conn.polling_uri.clone())
        .unwrap_or_else(|| DEFAULT_STREAM_URI.into());
    let polling_uri = conn
        .polling_uri
        .or(conn.stream_uri)
        .unwrap_or_else(|| DEFAULT_POLLING_URI.into());
    let sdk_key = conn.sdk_key.unwrap_or_default();
    // FDv2 presets use both services (the FDv1 fallback polls); a daemon uses none.
    let used: &[&String] = match (conn.fdv2, conn.polling) {
        _ if conn.daemon => &[],
        (Some(_), _) => &[&stream_uri, &polling_uri],
        (None, true) => &[&polling_uri],
        (None, false) => &[&stream_uri],
    };
    let official = |u: &&String| *u == DEFAULT_STREAM_URI || *u == DEFAULT_POLLING_URI;
    if sdk_key.is_empty() && used.iter().any(official) {
        return Err(CliError::usage(
            "an SDK key is required: pass --sdk-key KEY or set FLAGSYNC_SDK_KEY (or point --stream-uri at a local `flagsync serve`)",
        ));
    }
    if sdk_key.len() > 8192
        || !sdk_key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(CliError::usage(
            "the SDK key is malformed: it may only contain letters, digits, '.', '_' and '-' (check --sdk-key or FLAGSYNC_SDK_KEY)",
        ));
    }
    let redis = conn.redis.map(|url| RedisOptions {
        url,
        prefix: conn.prefix,
        daemon: conn.daemon,
    });
    if let Some(r) = &redis {
        r.store().map_err(CliError::usage)?;
    }
    let ca_pem = match &conn.ca_file {
        Some(path) => Some(std::fs::read(path).map_err(|e| {
            CliError::usage(format!("cannot read --ca-file {}: {e}", path.display()))
        })?),
        None => None,
    };
    Ok(Options {
        max_event_bytes: conn
            .max_event_bytes
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        ca_pem,
        sdk_key,
        stream_uri,
        polling_uri,
        polling: conn.polling,
        filter: conn.filter,
        fdv2: conn.fdv2,
        redis,
        events_uri: None,
    })
}

/// Where the data comes from, for people: the service URI, or Redis in daemon mode
/// (`host:port/db`, never the password).
fn source_name(opts: &Options) -> String {
    match &opts.redis {
        Some(r) if r.daemon => r
            .store()
            .map_or_else(|_| "Redis".into(), |s| format!("Redis {}", s.target())),
        _ => redact_userinfo(target(opts)),
    }
}

/// Where the flags are also kept, for people.
fn describe_redis(opts: &Options) -> String {
    match &opts.redis {
        Some(r) if !r.daemon => r.store().map_or_else(
            |_| String::new(),
            |s| format!(", kept in Redis {} (prefix {})", s.target(), s.prefix()),
        ),
        _ => String::new(),
    }
}

/// `uri` for people: user info (`user:password@`) replaced by `***@`.
fn redact_userinfo(uri: &str) -> String {
    let (scheme, rest) = match uri.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), uri),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}***@{host}{tail}"),
        None => uri.to_owned(),
    }
}

fn target(opts: &Options) -> &str {
    match opts.fdv2 {
        Some(Fdv2Preset::Streaming) => &opts.stream_uri,
        Some(_) => &opts.polling_uri,
        None if opts.polling => &opts.polling_uri,
        None => &opts.stream_uri,
    }
}

/// The data system, for people.
fn describe_mode(opts: &Options) -> &'static str {
    if opts.redis.as_ref().is_some_and(|r| r.daemon) {
        return "daemon mode: read-only, no flag service";
    }
    match opts.fdv2 {
        Some(preset) => preset.describe(),
        None if opts.polling => "polling",
        None => "streaming",
    }
}

// ---------------------------------------------------------------------------------
// watch and demo: printing what a client sees

struct Printer {
    json: bool,
    start: Instant,
    initialized: bool,
    /// Each flag's JSON as last printed.
    known: HashMap<String, Value>,
    last_error: Option<ErrorSummary>,
    changes: usize,
    /// Loading progress on stderr, until initialized.
    progress: Option<Progress>,
}

/// The loading progress line(s) on stderr: redrawn in place on a terminal, else one
/// line per update.
#[derive(Debug)]
struct Progress {
    terminal: bool,
}

impl Progress {
    const EVERY: Duration = Duration::from_millis(200);

    fn show(&self, line: &str, last: bool) {
        if self.terminal {
            // Return to the start of the line and clear it.
            eprint!("\r\x1b[K{line}{}", if last { "\n" } else { "" });
        } else {
            eprintln!("{line}");
        }
    }
}

/// `bytes` for people: B, kB, MB, GB (powers of 1000).
fn human_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.1} kB", b / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", b / 1e6),
        _ => format!("{:.2} GB", b / 1e9),
    }
}

fn flag_values(snapshot: &Snapshot) -> HashMap<String, Value> {
    snapshot
        .iter(Kind::Flag)
        .map(|(k, item)| {
            (
                k.to_owned(),
                serde_json::from_str(item.raw_str()).unwrap_or(Value::Null),
            )
        })
        .collect()
}

impl Printer {
    fn new(json: bool) -> Self {
        Self {
            json,
            start: Instant::now(),
            initialized: false,
            known: HashMap::new(),
            last_error: None,
            changes: 0,
            progress: None,
        }
    }

    fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn line(&self, text: &str) {
        println!("[{:7.3}s] {text}", self.elapsed());
    }

    fn json_line(&self, mut v: Value) {
        v["t"] = json!((self.elapsed() * 1000.0).round() / 1000.0);
        println!("{v}");
    }

    fn status(&mut self, s: &StatusSummary) {
        // The client keeps the last error after a recovery: show an error only when new.
        let new_error = s
            .error
            .as_ref()
            .filter(|e| Some(*e) != self.last_error.as_ref());
        if self.json {
            // While failing, every line carries the error in force (the same error again
            // included); once valid, only an error that is new.
            let shown = if s.state == State::Valid {
                new_error
            } else {
                s.error.as_ref()
            };
            let error = shown.map(
                |e| json!({"kind": e.kind.as_str(), "status": e.status_code, "message": e.message}),
            );
            let mut line = json!({"type": "status", "state": s.state.as_str(), "error": error});
            if let Some(source) = &s.source {
                line["availability"] = json!(source.availability.as_str());
                line["source"] = json!(source.active);
            }
            self.json_line(line);
        } else {
            let mut text = format!("status: {}", s.state.as_str());
            if let Some(source) = &s.source {
                text.push_str(&format!("  [{}]", describe_source(source)));
            }
            if let Some(e) = new_error {
                text.push_str(&format!("  ({})", describe_error(e)));
            }
            self.line(&text);
        }
        if s.error.is_some() {
            self.last_error = s.error.clone();
        }
    }

    /// FDv2: the data availability or the active source changed.
    fn source(&self, s: &SourceSummary) {
        if self.json {
            self.json_line(json!({
                "type": "source", "availability": s.availability.as_str(), "source": s.active,
            }));
        } else {
            self.line(&describe_source(s));
        }
    }

    /// The persistent store became unavailable or available again.
    fn store(&self, s: &StoreStatus, why: Option<&str>) {
        if self.json {
            self.json_line(json!({
                "type": "store", "available": s.available, "stale": s.stale, "error": why,
            }));
        } else {
            let text = match (s.available, s.stale) {
                (true, _) => "data store: available",
                (false, true) => {
                    "data store: unavailable (updates kept in memory, written when it returns)"
                }
                (false, false) => "data store: unavailable",
            };
            match why {
                Some(why) => self.line(&format!("{text}: {why}")),
                None => self.line(text),
            }
        }
    }

    /// Show how much of the initial data has arrived.
    fn loading(&self, bytes: u64) {
        if let Some(p) = &self.progress {
            p.show(
                &format!(
                    "loading: {} received ({:.1} s)",
                    human_bytes(bytes),
                    self.elapsed()
                ),
                false,
            );
        }
    }

    fn ready(&mut self, snapshot: &Snapshot, bytes: u64) {
        self.initialized = true;
        self.known = flag_values(snapshot);
        let (flags, segments) = (snapshot.len(Kind::Flag), snapshot.len(Kind::Segment));
        let ms = self.start.elapsed().as_millis();
        if let Some(p) = self.progress.take() {
            p.show(
                &format!(
                    "initialized in {ms} ms: {} ({} received)",
                    plural(flags, "flag", "flags"),
                    human_bytes(bytes)
                ),
                true,
            );
        }
        if self.json {
            self.json_line(json!({"type": "initialized", "flags": flags, "segments": segments, "elapsed_ms": ms}));
        } else {
            self.line(&format!(
                "initialized in {ms} ms: {} and {}",
                plural(flags, "flag", "flags"),
                plural(segments, "segment", "segments")
            ));
            let mut keys: Vec<_> = self.known.iter().collect();
            keys.sort_by(|a, b| a.0.cmp(b.0));
            for (key, flag) in keys {
                self.line(&format!("flag {key}: {}", summarize_flag(flag)));
            }
        }
    }

    fn evaluation(&mut self, key: &str, detail: &flagsync::eval::Detail<Value>) {
        let reason = serde_json::to_value(&detail.reason).unwrap_or(Value::Null);
        if self.json {
            self.json_line(json!({
                "type": "evaluation", "key": key, "value": detail.value,
                "variation": detail.variation_index, "reason": reason,
            }));
        } else {
            let value = detail.value.clone().unwrap_or(Value::Null);
            self.line(&format!("evaluate {key}: {value} ({reason})"));
        }
    }

    fn flag_changed(&mut self, key: &str, snapshot: &Snapshot) {
        if !self.initialized {
            return; // the initial data, printed at initialization
        }
        let new = snapshot
            .get(Kind::Flag, key)
            .and_then(|i| serde_json::from_str::<Value>(i.raw_str()).ok());
        let old = self.known.get(key);
        self.changes += 1;
        if self.json {
            self.json_line(json!({
                "type": "flag", "key": key, "deleted": new.is_none(),
                "version": new.as_ref().map(|f| f["version"].clone()), "flag": new,
            }));
        } else {
            self.line(&format!(
                "flag {key}: {}",
                describe_change(old, new.as_ref())
            ));
        }
        match new {
            Some(v) => self.known.insert(key.to_owned(), v),
            None => self.known.remove(key),
        };
    }
}

fn describe_source(s: &SourceSummary) -> String {
    format!(
        "data: {}, source: {}",
        s.availability.as_str(),
        s.active.unwrap_or("none")
    )
}

fn describe_error(e: &ErrorSummary) -> String {
    if e.key_rejected() {
        format!("HTTP {}: the SDK key was rejected", e.status_code)
    } else if e.unreachable() {
        format!("unreachable: {}", e.message)
    } else {
        format!("{}: {}", e.kind.as_str(), e.message)
    }
}

fn summarize_flag(f: &Value) -> String {
    let rules = f["rules"].as_array().map_or(0, Vec::len);
    format!(
        "v{}, {}, {}, serves {}",
        f["version"],
        if f["on"].as_bool() == Some(true) {
            "on"
        } else {
            "off"
        },
        plural(rules, "rule", "rules"),
        serves(f),
    )
}

/// What the flag serves to everyone not matched by targets or rules.
fn serves(f: &Value) -> String {
    let variation = |i: &Value| {
        i.as_u64()
            .and_then(|i| f["variations"].get(i as usize))
            .map_or_else(|| "?".to_owned(), Value::to_string)
    };
    if f["on"].as_bool() != Some(true) {
        return variation(&f["offVariation"]);
    }
    let ft = &f["fallthrough"];
    if let Some(list) = ft["rollout"]["variations"].as_array() {
        let parts: Vec<_> = list
            .iter()
            .map(|wv| {
                let pct = wv["weight"].as_f64().unwrap_or(0.0) / 1000.0;
                format!("{} {pct}%", variation(&wv["variation"]))
            })
            .collect();
        return format!("a rollout ({})", parts.join(" / "));
    }
    variation(&ft["variation"])
}

fn describe_change(old: Option<&Value>, new: Option<&Value>) -> String {
    let (old, new) = match (old, new) {
        (_, None) => return "deleted".into(),
        (None, Some(n)) => return format!("added: {}", summarize_flag(n)),
        (Some(o), Some(n)) => (o, n),
    };
    let mut parts = vec![format!("v{} → v{}", old["version"], new["version"])];
    if old["on"] != new["on"] {
        parts.push(format!("on: {} → {}", old["on"], new["on"]));
    }
    if serves(old) != serves(new) {
        parts.push(format!("serves {} → {}", serves(old), serves(new)));
    }
    let rules = |f: &Value| f["rules"].as_array().map_or(0, Vec::len);
    if old["rules"] != new["rules"] {
        if rules(old) == rules(new) {
            parts.push("rules edited".into());
        } else {
            parts.push(format!("rules: {} → {}", rules(old), rules(new)));
        }
    }
    for field in ["targets", "prerequisites", "variations"] {
        if old[field] != new[field] {
            parts.push(format!("{field} edited"));
        }
    }
    if old == new {
        parts = vec!["affected by a change to a prerequisite or segment".into()];
    }
    parts.join(", ")
}

/// Print updates until `duration`, Ctrl-C, or the client stops.
/// Flags to evaluate after every update, and for whom.
struct Evaluations {
    keys: Vec<String>,
    context: flagsync::eval::Context,
}

impl Evaluations {
    fn run(&self, session: &Session, printer: &mut Printer) {
        for key in &self.keys {
            let detail = session.evaluate(key, &self.context);
            printer.evaluation(key, &detail);
        }
    }
}

async fn print_updates(
    session: &mut Session,
    printer: &mut Printer,
    duration: Option<Duration>,
    evaluations: Option<&Evaluations>,
) -> Result<(), CliError> {
    let deadline = duration.map(|d| tokio::time::Instant::now() + d);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut progress = tokio::time::interval(Progress::EVERY);
    progress.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = &mut ctrl_c => return Ok(()),
            () = sleep => return Ok(()),
            _ = progress.tick(), if printer.progress.is_some() => {
                printer.loading(session.bytes_received());
            }
            update = session.next() => match update {
                None => return Ok(()),
                Some(Update::Status(s)) => printer.status(&s),
                Some(Update::Ready) => {
                    printer.ready(&session.snapshot(), session.bytes_received());
                    if let Some(e) = evaluations {
                        e.run(session, printer);
                    }
                }
                Some(Update::FlagChanged(key)) => {
                    printer.flag_changed(&key, &session.snapshot());
                    if let Some(e) = evaluations.filter(|_| printer.initialized) {
                        e.run(session, printer);
                    }
                }
                Some(Update::Source(s)) => printer.source(&s),
                Some(Update::Store(s, why)) => printer.store(&s, why.as_deref()),
            },
        }
    }
}

fn seconds(flag: &str, secs: Option<f64>) -> Result<Option<Duration>, CliError> {
    secs.map(|s| {
        Duration::try_from_secs_f64(s).map_err(|_| {
            CliError::usage(format!("{flag} must be a non-negative number of seconds"))
        })
    })
    .transpose()
}

async fn watch(args: WatchArgs) -> Result<(), CliError> {
    let duration = seconds("--duration", args.duration)?;
    let mut opts = resolve(args.conn)?;
    let evaluations = if args.evaluate.is_empty() {
        None
    } else {
        let context: flagsync::eval::Context = serde_json::from_str(&args.context)
            .map_err(|e| CliError::usage(format!("--context is not a valid context: {e}")))?;
        opts.events_uri = Some(args.events_uri.unwrap_or_else(|| opts.stream_uri.clone()));
        Some(Evaluations {
            keys: args.evaluate,
            context,
        })
    };
    eprintln!(
        "connecting to {} ({}{})…",
        source_name(&opts),
        describe_mode(&opts),
        describe_redis(&opts)
    );
    let mut session = Session::start(&opts).map_err(CliError::usage)?;
    let mut printer = Printer::new(args.json);
    if args.progress || std::io::stderr().is_terminal() {
        printer.progress = Some(Progress {
            terminal: std::io::stderr().is_terminal(),
        });
    }
    let result = print_updates(&mut session, &mut printer, duration, evaluations.as_ref()).await;
    session.close().await;
    result
}

async fn demo(args: DemoArgs) -> Result<(), CliError> {
    let duration = seconds("--duration", args.duration)?;
    let interval = seconds("--interval", Some(args.interval))?
        .unwrap_or_default()
        .max(Duration::from_millis(100));
    let sdk_key = "sdk-demo-0123456789";
    let server = Server::builder()
        .sdk_key(Some(sdk_key.into()))
        .env_id(Some("demo-environment".into()))
        .data(demo::sample_data())
        .start()
        .map_err(|e| CliError::failed(format!("cannot start the demo server: {e}")))?;
    let server = Arc::new(server);
    let (flags, segments) = counts(&server);
    if !args.json {
        println!(
            "flagsync demo: a local flag server on {} with {} and {}.",
            server.url(),
            plural(flags, "flag", "flags"),
            plural(segments, "segment", "segments")
        );
        println!(
            "It changes a flag every {:.1} s; a flagsync Client ({}) prints what it sees. {}",
            interval.as_secs_f64(),
            match args.fdv2 {
                Some(preset) => preset.describe(),
                None if args.polling => "polling",
                None => "streaming",
            },
            match duration {
                Some(d) => format!("Stopping after {:.0} s.", d.as_secs_f64()),
                None => "Press Ctrl-C to stop.".into(),
            }
        );
    }
    let opts = Options {
        sdk_key: sdk_key.into(),
        stream_uri: server.url(),
        polling_uri: server.url(),
        polling: args.polling,
        filter: None,
        fdv2: args.fdv2,
        redis: None,
        events_uri: None,
        max_event_bytes: None,
        ca_pem: None,
    };
    let mut session = Session::start(&opts).map_err(CliError::failed)?;
    let mut printer = Printer::new(args.json);

    let changer_server = server.clone();
    let json_out = args.json;
    let start = printer.start;
    let changer = tokio::spawn(async move {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        for step in demo::STEPS.iter().cycle() {
            tick.tick().await;
            let Some(mut flag) = changer_server.flag(step.key) else {
                continue;
            };
            (step.apply)(&mut flag);
            if let Some(obj) = flag.as_object_mut() {
                obj.remove("version"); // the server bumps it
            }
            if let Ok(v) = changer_server.set_flag(step.key, flag) {
                let t = start.elapsed().as_secs_f64();
                if json_out {
                    println!(
                        "{}",
                        json!({"type": "server", "change": step.describe, "key": step.key, "version": v, "t": (t * 1000.0).round() / 1000.0})
                    );
                } else {
                    println!("[{t:7.3}s] server: {} (v{v})", step.describe);
                }
            }
        }
    });
    let result = print_updates(&mut session, &mut printer, duration, None).await;
    changer.abort();
    let _ = changer.await;
    session.close().await;
    let changes = printer.changes;
    tokio::task::spawn_blocking(move || server.shutdown())
        .await
        .map_err(|e| CliError::failed(e.to_string()))?;
    if !args.json {
        println!(
            "demo finished: the client saw {}.",
            plural(changes, "flag change", "flag changes")
        );
    }
    result
}

// ---------------------------------------------------------------------------------
// snapshot

async fn snapshot(args: SnapshotArgs) -> Result<(), CliError> {
    let timeout = seconds("--timeout", Some(args.timeout))?.unwrap_or_default();
    let opts = resolve(args.conn)?;
    let uri = source_name(&opts);
    let mut session = Session::start(&opts).map_err(CliError::usage)?;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last: Option<StatusSummary> = None;
    let started = Instant::now();
    let outcome = loop {
        let update = tokio::select! {
            u = session.next() => u,
            () = tokio::time::sleep_until(deadline) => {
                let why = last
                    .as_ref()
                    .and_then(|s| s.error.as_ref())
                    .map(|e| format!(" (last error: {})", describe_error(e)))
                    .unwrap_or_default();
                break Err(CliError::failed(format!(
                    "timed out after {:.1} s waiting for flag data from {uri}{why}. Raise --timeout, or check the URI",
                    timeout.as_secs_f64()
                )));
            }
        };
        match update {
            Some(Update::Ready) => break Ok(session.snapshot()),
            Some(Update::Status(s)) => {
                if let Some(e) = &s.error {
                    if e.permanent_store_fault {
                        break Err(CliError::failed(format!(
                            "{}. Check the --redis URL (password, database)",
                            e.message
                        )));
                    }
                    if e.key_rejected() {
                        break Err(CliError::failed(format!(
                            "the SDK key was rejected by {uri} (HTTP {}): check --sdk-key or FLAGSYNC_SDK_KEY",
                            e.status_code
                        )));
                    }
                    if e.unreachable() {
                        break Err(CliError::failed(format!(
                            "cannot reach {uri}: {}. Is the service running, and is the URI right (--stream-uri/--polling-uri)?",
                            e.message
                        )));
                    }
                    if s.state == State::Off {
                        break Err(CliError::failed(format!(
                            "{uri} refused the connection for good: {}",
                            describe_error(e)
                        )));
                    }
                }
                last = Some(s);
            }
            Some(Update::FlagChanged(_) | Update::Source(_) | Update::Store(..)) => {}
            None => {
                break Err(CliError::failed(
                    "the client stopped before it had the flag data",
                ));
            }
        }
    };
    let skipped = session.skipped_items();
    session.close().await;
    let snap = outcome?;
    if skipped > 0 {
        eprintln!(
            "flagsync: warning: {} in the store could not be decoded and {} skipped",
            plural(skipped as usize, "item", "items"),
            if skipped == 1 { "was" } else { "were" }
        );
    }
    eprintln!(
        "got {} and {} in {} ms",
        plural(snap.len(Kind::Flag), "flag", "flags"),
        plural(snap.len(Kind::Segment), "segment", "segments"),
        started.elapsed().as_millis()
    );
    println!("{}", snap.to_json());
    Ok(())
}

#[cfg(test)]
mod redact_tests {
    use super::redact_userinfo;

    #[test]
    fn user_info_never_shows() {
        assert_eq!(
            redact_userinfo("http://user:pw@host:1/base?x=a@b"),
            "http://***@host:1/base?x=a@b"
        );
        assert_eq!(redact_userinfo("https://host/a@b"), "https://host/a@b");
        assert_eq!(redact_userinfo("host:1"), "host:1");
    }
}
