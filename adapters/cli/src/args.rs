//! The command line: clap's definitions of the commands and their options.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use flagsync_server::Endpoint;

use crate::client::Fdv2Preset;
use crate::client_args::ClientArgs;
use crate::redis_args::RedisArgs;

use crate::error::CliError;

/// Keep a feature-flag store in sync with a LaunchDarkly-compatible flag delivery
/// service, or serve one locally.
#[derive(Debug, Parser)]
#[command(name = "flagsync", version, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Serve flags from a JSON file (or from Redis) as a LaunchDarkly-compatible
    /// service (FDv1 and FDv2), until Ctrl-C. Edits to the file (or the Redis data) are
    /// pushed to connected clients. Analytics events (POST /bulk, /diagnostic) are
    /// accepted, and shown with --events. Faults can be injected to test clients.
    Serve(Box<ServeArgs>),
    /// Run a local server with sample flags that change every few seconds, connect a
    /// client to it and print what it sees. Works offline.
    Demo(DemoArgs),
    /// Connect to a flag delivery service and print status changes and flag changes
    /// (with FDv2, also the data availability and the active source). With --redis,
    /// also keep the flags in Redis; with --redis and --daemon, only read them there.
    Watch(WatchArgs),
    /// Wait for the full flag data and print it as {"flags":{…},"segments":{…}}.
    Snapshot(SnapshotArgs),
    /// Evaluate the flags of a data file (as `serve --data` takes it) for a context,
    /// offline, with flagsync's engine, and print one JSON object:
    /// {"KEY":{"value":…,"variationIndex":N|null,"reason":{…}},…}.
    Eval(EvalArgs),
}

#[derive(Debug, Args)]
pub(crate) struct EvalArgs {
    /// The flag data: {"flags":{…},"segments":{…}} or {"flagValues":{…}}, as `serve
    /// --data` reads it.
    #[arg(long, value_name = "FILE")]
    pub(crate) data: PathBuf,
    /// The context to evaluate for, as LaunchDarkly context JSON.
    #[arg(long, value_name = "JSON")]
    pub(crate) context: String,
    /// Evaluate only this flag (repeatable; default: every flag). A flag not in the
    /// data is shown with the reason ERROR (FLAG_NOT_FOUND).
    #[arg(long, value_name = "KEY")]
    pub(crate) flag: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// The flag data: {"flags":{…},"segments":{…}} (as `flagsync snapshot` prints), or
    /// {"flagValues":{"key": value}} for simple flags. Edits are pushed to clients
    /// within a second; an edited flag or segment is served with a version above the
    /// one served before (versions never go back), whatever the file says.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present_any = ["redis_target", "relay", "upstream"],
        conflicts_with_all = ["redis_target", "relay", "upstream"]
    )]
    pub(crate) data: Option<PathBuf>,
    /// With --data: serve FILE to SDKs configured with the payload filter KEY
    /// (requests with ?filter=KEY), as LaunchDarkly serves a filtered environment;
    /// repeatable, one file per filter, each reloaded when it changes. A request for a
    /// filter not given is answered 404 naming it (never with the whole data).
    #[arg(long, value_name = "KEY=FILE", requires = "data")]
    pub(crate) filter_data: Vec<String>,
    /// Relay mode: keep the environments of FILE (JSON: {"upstream": URI, "eventsUri":
    /// URI, "protocol": "fdv2"|"fdv1", "environments": {NAME: {"sdkKey": KEY, …}}}) in
    /// sync with their upstream flag service and serve them to SDKs, each by its SDK
    /// key, as LaunchDarkly's Relay Proxy does; events are forwarded upstream. With
    /// --redis, each environment is also written to Redis (prefix "redisPrefix", or
    /// --prefix).
    #[arg(
        long,
        value_name = "FILE",
        env = "FLAGSYNC_RELAY",
        conflicts_with = "upstream"
    )]
    pub(crate) relay: Option<PathBuf>,
    /// Relay mode: keep the flags of --sdk-key (and of every environment named by a
    /// FLAGSYNC_ENV_<NAME>=<SDK key> variable, with FLAGSYNC_ENV_ID_<NAME> and
    /// FLAGSYNC_REDIS_PREFIX_<NAME> optional) in sync with the flag service at URI
    /// (streaming and polling) and serve them.
    #[arg(long, value_name = "URI", env = "FLAGSYNC_UPSTREAM")]
    pub(crate) upstream: Option<String>,
    /// With --upstream: forward SDKs' events to this events service.
    #[arg(
        long,
        value_name = "URI",
        env = "FLAGSYNC_UPSTREAM_EVENTS",
        requires = "upstream"
    )]
    pub(crate) upstream_events: Option<String>,
    /// With --upstream: the payload filters to serve for --sdk-key's environment
    /// (comma-separated keys; FLAGSYNC_PAYLOAD_FILTERS_<NAME> for the others): each is
    /// kept in sync upstream with filter=KEY and served to SDKs asking for it; any
    /// other filter is answered 404.
    #[arg(
        long,
        value_name = "KEYS",
        env = "FLAGSYNC_PAYLOAD_FILTERS",
        requires = "upstream"
    )]
    pub(crate) payload_filters: Option<String>,
    /// With --upstream: use FDv1 streaming upstream (default: FDv2).
    #[arg(long, env = "FLAGSYNC_UPSTREAM_FDV1", requires = "upstream")]
    pub(crate) upstream_fdv1: bool,
    /// Relay mode: the largest SSE event accepted from upstream, in bytes (default
    /// 64 MiB).
    #[arg(long, value_name = "BYTES", env = "FLAGSYNC_MAX_EVENT_BYTES")]
    pub(crate) max_event_bytes: Option<u64>,
    /// Redis (--redis URL, --redis-sentinel, or --redis-cluster): serve the flags kept
    /// there (LaunchDarkly key layout, as the Relay Proxy, other SDKs or `flagsync
    /// watch --redis` write them) instead of a file, changes pushed to clients within
    /// a second; in relay mode, keep each environment there as it arrives.
    #[command(flatten)]
    pub(crate) redis: RedisArgs,
    /// Listen on 127.0.0.1:PORT (0 picks a free one) [default: 8030]. Without --listen
    /// and --port, `serve --data` and `--redis` listen on 127.0.0.1:8030 (this host
    /// only), a relay on 0.0.0.0:8030 (every IPv4 interface: a relay is there to be
    /// reached by other hosts, as LaunchDarkly's Relay Proxy is).
    #[arg(long, env = "FLAGSYNC_PORT", conflicts_with = "listen")]
    pub(crate) port: Option<u16>,
    #[command(flatten)]
    pub(crate) network: NetworkArgs,
    #[command(flatten)]
    pub(crate) client: ClientArgs,
    /// Require this SDK key in the Authorization header (default: accept any); with
    /// --upstream, the relayed environment's key. A command-line argument is visible
    /// to every user of this machine (`ps`): set FLAGSYNC_SDK_KEY instead.
    #[arg(
        long,
        value_name = "KEY",
        env = "FLAGSYNC_SDK_KEY",
        hide_env_values = true
    )]
    pub(crate) sdk_key: Option<String>,
    /// Seconds between stream heartbeats.
    #[arg(long, value_name = "SECS", env = "FLAGSYNC_HEARTBEAT", default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) heartbeat: u64,
    /// Write the analytics events SDKs send (POST /bulk, POST /diagnostic; always
    /// accepted with 202) to FILE, created or truncated, or to standard output with `-`
    /// (the other messages then go to standard error). One JSON line per event, a bulk
    /// payload's events one line each: {"receivedAt":MS,"endpoint":"/bulk",
    /// "payloadId":ID|null,"schema":S|null,"userAgent":UA|null,"event":{…}}
    /// (receivedAt: milliseconds since the Unix epoch; endpoint: /bulk or /diagnostic;
    /// payloadId, schema, userAgent: the request's X-LaunchDarkly-Payload-ID,
    /// X-LaunchDarkly-Event-Schema and User-Agent headers). Payloads the output cannot
    /// keep up with are dropped and counted on standard error.
    #[arg(long, value_name = "FILE|-")]
    pub(crate) events: Option<PathBuf>,
    /// Send `X-LD-FD-Fallback: true` on every FDv2 response (success or error), which
    /// moves FDv2 clients to FDv1 polling (/sdk/latest-all) for good.
    #[arg(long, help_heading = FAULTS)]
    pub(crate) fdv1_fallback: bool,
    /// End the first COUNT FDv2 streams with a `goodbye` event after their first
    /// payload, then close them (`always`: every stream). Clients reconnect with their
    /// `basis`.
    #[arg(long, value_name = "COUNT", value_parser = parse_count, help_heading = FAULTS)]
    pub(crate) goodbye: Option<usize>,
    /// Interrupt the first COUNT FDv2 full payloads (stream or poll) half-way with an
    /// `error` event, then send them again in full (`always`: every one).
    #[arg(long, value_name = "COUNT", value_parser = parse_count, help_heading = FAULTS)]
    pub(crate) payload_error: Option<usize>,
    /// Answer every request to ENDPOINT with HTTP STATUS, e.g. `/sdk/stream=401`.
    /// ENDPOINT is /all, /sdk/latest-all, /sdk/stream, /sdk/poll, /bulk or
    /// /diagnostic. Repeatable.
    #[arg(long, value_name = "ENDPOINT=STATUS", value_parser = parse_fail, help_heading = FAULTS)]
    pub(crate) fail: Vec<(Endpoint, u16)>,
    /// Accept requests to ENDPOINT but never answer them. Repeatable.
    #[arg(long, value_name = "ENDPOINT", help_heading = FAULTS)]
    pub(crate) hang: Vec<Endpoint>,
}

/// Where and how `serve` listens: addresses, TLS and connection limits. Each also
/// comes from the environment variable named; a relay's --relay file may set them too
/// (the command line and the environment win).
#[derive(Debug, Args, Default)]
pub(crate) struct NetworkArgs {
    /// Listen on ADDR:PORT (repeatable, or comma-separated in FLAGSYNC_LISTEN): IPv4
    /// or IPv6, e.g. 0.0.0.0:8030 (every IPv4 interface), [::]:8030, 127.0.0.2:8030,
    /// [::1]:8030.
    #[arg(long, value_name = "ADDR:PORT", env = "FLAGSYNC_LISTEN", value_delimiter = ',', help_heading = NETWORK)]
    pub(crate) listen: Vec<std::net::SocketAddr>,
    /// Serve HTTPS with this certificate chain (PEM, leaf first); with --tls-key.
    /// Reloaded within a second when the file changes (certificate rotation without a
    /// restart).
    #[arg(long, value_name = "PEM", env = "FLAGSYNC_TLS_CERT", requires = "tls_key", help_heading = NETWORK)]
    pub(crate) tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "PEM", env = "FLAGSYNC_TLS_KEY", requires = "tls_cert", help_heading = NETWORK)]
    pub(crate) tls_key: Option<PathBuf>,
    /// Mutual TLS: require every client to present a certificate signed by a CA in
    /// this PEM file.
    #[arg(long, value_name = "PEM", env = "FLAGSYNC_TLS_CLIENT_CA", requires = "tls_cert", help_heading = NETWORK)]
    pub(crate) tls_client_ca: Option<PathBuf>,
    /// The most connections open at once, streams included; past it a connection gets
    /// 503 with Retry-After and is closed [default: the file-descriptor limit less 64].
    #[arg(long, value_name = "N", env = "FLAGSYNC_MAX_CONNECTIONS", value_parser = clap::value_parser!(u64).range(1..), help_heading = NETWORK)]
    pub(crate) max_connections: Option<u64>,
    /// Seconds a client has to send a whole request head (408 and close after) [default: 10].
    #[arg(long, value_name = "SECS", env = "FLAGSYNC_HEAD_TIMEOUT", help_heading = NETWORK)]
    pub(crate) head_timeout: Option<f64>,
    /// Seconds a client has to send a request body (408 and close after) [default: 30].
    #[arg(long, value_name = "SECS", env = "FLAGSYNC_BODY_TIMEOUT", help_heading = NETWORK)]
    pub(crate) body_timeout: Option<f64>,
    /// Seconds an idle keep-alive connection is kept open [default: 60].
    #[arg(long, value_name = "SECS", env = "FLAGSYNC_IDLE_TIMEOUT", help_heading = NETWORK)]
    pub(crate) idle_timeout: Option<f64>,
    /// End each stream after at most SECS (each between 3/4 of it and all of it), so
    /// SDKs spread over every instance again after a rolling restart [default: never].
    #[arg(long, value_name = "SECS", env = "FLAGSYNC_MAX_STREAM_LIFETIME", help_heading = NETWORK)]
    pub(crate) max_stream_lifetime: Option<f64>,
    /// Seconds an environment whose upstream is interrupted still counts as connected
    /// in GET /status [default: 60].
    #[arg(long, value_name = "SECS", env = "FLAGSYNC_DISCONNECTED_STATUS_TIME", help_heading = NETWORK)]
    pub(crate) disconnected_status_time: Option<f64>,
}

/// The help heading of `serve`'s network options.
pub(crate) const NETWORK: &str = "Network (each also from its FLAGSYNC_… variable)";

/// The help heading of `serve`'s fault options.
pub(crate) const FAULTS: &str = "Faults (for testing clients)";

/// A count, or `always`.
pub(crate) fn parse_count(s: &str) -> Result<usize, String> {
    if s == "always" {
        return Ok(usize::MAX);
    }
    s.parse()
        .map_err(|_| format!("expected a number of times or `always`, not {s:?}"))
}

/// `ENDPOINT=STATUS`.
pub(crate) fn parse_fail(s: &str) -> Result<(Endpoint, u16), String> {
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
pub(crate) struct DemoArgs {
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_name = "SECS")]
    pub(crate) duration: Option<f64>,
    /// Seconds between the server's flag changes.
    #[arg(long, value_name = "SECS", default_value_t = 2.5)]
    pub(crate) interval: f64,
    /// Have the client poll instead of stream.
    #[arg(long)]
    pub(crate) polling: bool,
    /// Have the client use the FDv2 data system with this preset.
    #[arg(long, value_name = "PRESET", value_enum, conflicts_with = "polling")]
    pub(crate) fdv2: Option<Fdv2Preset>,
    /// Print JSON lines instead of text.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Where and how to connect (shared by the client subcommands).
#[derive(Debug, Args)]
pub(crate) struct ConnArgs {
    /// The SDK key. A command-line argument is visible to every user of this machine
    /// (`ps`): set the environment variable FLAGSYNC_SDK_KEY instead, the safe way.
    #[arg(
        long,
        env = "FLAGSYNC_SDK_KEY",
        value_name = "KEY",
        hide_env_values = true
    )]
    pub(crate) sdk_key: Option<String>,
    /// The streaming base URI [default: https://stream.launchdarkly.com, or the
    /// --polling-uri if only that is given].
    #[arg(long, value_name = "URL")]
    pub(crate) stream_uri: Option<String>,
    /// The polling base URI [default: https://app.launchdarkly.com, or the
    /// --stream-uri if only that is given].
    #[arg(long, value_name = "URL")]
    pub(crate) polling_uri: Option<String>,
    /// Poll instead of streaming (FDv1).
    #[arg(long)]
    pub(crate) polling: bool,
    /// Use the FDv2 data system (/sdk/stream, /sdk/poll, with the FDv1 fallback) with
    /// this preset instead of FDv1.
    #[arg(long, value_name = "PRESET", value_enum, conflicts_with = "polling")]
    pub(crate) fdv2: Option<Fdv2Preset>,
    /// A payload filter key.
    #[arg(long, value_name = "KEY")]
    pub(crate) filter: Option<String>,
    /// Also keep the flags in Redis (--redis URL, --redis-sentinel, or
    /// --redis-cluster), in the key layout of the LaunchDarkly SDKs and Relay Proxy.
    /// Until the service delivers, the flags already there are served; an outage of
    /// Redis is survived and repaired when it returns.
    #[command(flatten)]
    pub(crate) redis: RedisArgs,
    /// Daemon mode: connect to no flag service; serve the flags another process keeps
    /// in Redis (re-read every 15 s).
    #[arg(long, requires = "redis_target", conflicts_with_all = ["polling", "fdv2", "filter", "stream_uri", "polling_uri"])]
    pub(crate) daemon: bool,
    /// The largest SSE line and event accepted, in bytes [default: 64 MiB]: raise it
    /// for a data set whose `put` is larger. Also the most of an FDv2 payload held
    /// before its payload-transferred.
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) max_event_bytes: Option<u64>,
    /// Also trust the CA certificate(s) in this PEM file (a private CA, or a local
    /// server's self-signed certificate).
    #[arg(long, value_name = "PEM")]
    pub(crate) ca_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    #[command(flatten)]
    pub(crate) conn: ConnArgs,
    /// Print JSON lines instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long, value_name = "SECS")]
    pub(crate) duration: Option<f64>,
    /// Show the loading progress of the initial data on stderr (the default when
    /// stderr is a terminal).
    #[arg(long)]
    pub(crate) progress: bool,
    /// Evaluate this flag (repeatable) for --context once the data is in and after
    /// every flag change, print the result, and report the evaluation as analytics
    /// events (to --events-uri): with `flagsync serve --events -` on the other side,
    /// a local loop of what an SDK would report.
    #[arg(long, value_name = "KEY")]
    pub(crate) evaluate: Vec<String>,
    /// The context to evaluate for, as LaunchDarkly context JSON.
    #[arg(
        long,
        value_name = "JSON",
        default_value = r#"{"kind":"user","key":"flagsync-cli"}"#,
        requires = "evaluate"
    )]
    pub(crate) context: String,
    /// Where the evaluations' analytics events go [default: the --stream-uri, which is
    /// right for `flagsync serve`; LaunchDarkly's events service for LaunchDarkly].
    #[arg(long, value_name = "URL", requires = "evaluate")]
    pub(crate) events_uri: Option<String>,
    /// With --evaluate: evaluate big segments with the memberships kept in the same
    /// Redis (settings and prefix), as LaunchDarkly's SDKs do with a Redis big-segment
    /// store; without it a flag using a big segment reports NOT_CONFIGURED.
    #[arg(long, env = "FLAGSYNC_BIG_SEGMENTS", requires_all = ["evaluate", "redis_target"])]
    pub(crate) big_segments: bool,
}

#[derive(Debug, Args)]
pub(crate) struct SnapshotArgs {
    #[command(flatten)]
    pub(crate) conn: ConnArgs,
    /// Give up after this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 15.0)]
    pub(crate) timeout: f64,
}

pub(crate) fn seconds(flag: &str, secs: Option<f64>) -> Result<Option<Duration>, CliError> {
    secs.map(|s| {
        Duration::try_from_secs_f64(s).map_err(|_| {
            CliError::usage(format!("{flag} must be a non-negative number of seconds"))
        })
    })
    .transpose()
}
