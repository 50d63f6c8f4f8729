//! The client options of `watch` and `snapshot`: resolved from the connection
//! arguments, and described for the messages.

use flagsync_core::config::{DEFAULT_POLLING_URI, DEFAULT_STREAM_URI, sdk_key_is_well_formed};
use flagsync_core::endpoint::Url;

use crate::client::{Fdv2Preset, Options};

use crate::args::ConnArgs;
use crate::error::CliError;

pub(crate) fn check_uri(flag: &str, uri: &str) -> Result<(), CliError> {
    Url::parse(uri).map(|_| ()).map_err(|e| {
        CliError::usage(format!(
            "invalid {flag} {uri:?}: {e}. Expected a base URL such as http://127.0.0.1:8030 or {DEFAULT_STREAM_URI}"
        ))
    })
}

pub(crate) fn resolve(conn: ConnArgs) -> Result<Options, CliError> {
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
    if !sdk_key_is_well_formed(&sdk_key) {
        return Err(CliError::usage(
            "the SDK key is malformed: it may only contain letters, digits, '.', '_' and '-' (check --sdk-key or FLAGSYNC_SDK_KEY)",
        ));
    }
    let redis = conn.redis.options(conn.daemon)?;
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
        big_segments: false,
    })
}

/// Where the data comes from, for people: the service URI, or Redis in daemon mode
/// (`host:port/db`, never the password).
pub(crate) fn source_name(opts: &Options) -> String {
    match &opts.redis {
        Some(r) if r.daemon => r
            .store()
            .map_or_else(|_| "Redis".into(), |s| format!("Redis {}", s.target())),
        _ => redact_userinfo(target(opts)),
    }
}

/// Where the flags are also kept, for people.
pub(crate) fn describe_redis(opts: &Options) -> String {
    match &opts.redis {
        Some(r) if !r.daemon => r.store().map_or_else(
            |_| String::new(),
            |s| format!(", kept in Redis {} (prefix {})", s.target(), s.prefix()),
        ),
        _ => String::new(),
    }
}

/// `uri` for people: user info (`user:password@`) replaced by `***@`.
pub(crate) use flagsync_relay::redact_userinfo;

pub(crate) fn target(opts: &Options) -> &str {
    match opts.fdv2 {
        Some(Fdv2Preset::Streaming) => &opts.stream_uri,
        Some(_) => &opts.polling_uri,
        None if opts.polling => &opts.polling_uri,
        None => &opts.stream_uri,
    }
}

/// The data system, for people.
pub(crate) fn describe_mode(opts: &Options) -> &'static str {
    if opts.redis.as_ref().is_some_and(|r| r.daemon) {
        return "daemon mode: read-only, no flag service";
    }
    match opts.fdv2 {
        Some(preset) => preset.describe(),
        None if opts.polling => "polling",
        None => "streaming",
    }
}
