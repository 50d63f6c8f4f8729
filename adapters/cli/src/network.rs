//! Where and how `serve` listens: its addresses, TLS and connection limits, from the
//! command line, the environment (each option's FLAGSYNC_… variable) or a relay's
//! file; the relay's environments named by FLAGSYNC_ENV_<NAME> variables; and the
//! descriptor limit raised at start.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use flagsync_server::{NetworkConfig, Server, ServerBuilder, TlsSettings};
use serde_json::{Map, Value, json};

use crate::args::{NetworkArgs, ServeArgs, seconds};
use crate::error::CliError;

/// The port served when none is given.
const DEFAULT_PORT: u16 = 8030;

/// The prefix of the variables that name a relay's environments by SDK key.
const ENV_PREFIX: &str = "FLAGSYNC_ENV_";
/// … their environment IDs.
const ENV_ID_PREFIX: &str = "FLAGSYNC_ENV_ID_";
/// … their Redis prefixes.
const REDIS_PREFIX_PREFIX: &str = "FLAGSYNC_REDIS_PREFIX_";
/// `FLAGSYNC_PAYLOAD_FILTERS_<NAME>`: the payload filters served for `<NAME>`,
/// comma-separated.
const FILTERS_PREFIX: &str = "FLAGSYNC_PAYLOAD_FILTERS_";
/// `FLAGSYNC_MOBILE_KEY_<NAME>`: its mobile key.
const MOBILE_KEY_PREFIX: &str = "FLAGSYNC_MOBILE_KEY_";
/// `FLAGSYNC_SECURE_MODE_<NAME>`: `true` requires client-side secure mode.
const SECURE_MODE_PREFIX: &str = "FLAGSYNC_SECURE_MODE_";
/// `FLAGSYNC_ALLOWED_ORIGIN_<NAME>`: the origins browsers may call from,
/// comma-separated.
const ALLOWED_ORIGIN_PREFIX: &str = "FLAGSYNC_ALLOWED_ORIGIN_";

/// A comma-separated list of payload filter keys, as the relay file's
/// `payloadFilters`.
pub(crate) fn filter_list(list: &str) -> Value {
    list.split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(Value::from)
        .collect()
}

/// The server builder for `args` (over what a relay's file says, if any).
///
/// Without an address: `127.0.0.1:PORT` with `--port`; else a relay listens on
/// `0.0.0.0:8030` (it is there to be reached by other hosts, as LaunchDarkly's Relay
/// Proxy is, which listens on every interface) and `serve --data`/`--redis` on
/// `127.0.0.1:8030` (a local server for development: this host only).
pub(crate) fn server_builder(
    args: &ServeArgs,
    file: Option<&NetworkConfig>,
) -> Result<ServerBuilder, CliError> {
    let mut builder = Server::builder().heartbeat(Duration::from_secs(args.heartbeat));
    let mut file_listen = Vec::new();
    if let Some(file) = file {
        let mut rest = file.clone();
        file_listen = std::mem::take(&mut rest.listen);
        builder = rest.apply(builder);
    }
    let default_ip = if file.is_some() {
        Ipv4Addr::UNSPECIFIED
    } else {
        Ipv4Addr::LOCALHOST
    };
    // The command line (or environment) wins over the file, --listen over --port.
    let listen = if !args.network.listen.is_empty() {
        args.network.listen.clone()
    } else if let Some(port) = args.port {
        vec![SocketAddr::from((Ipv4Addr::LOCALHOST, port))]
    } else if !file_listen.is_empty() {
        file_listen
    } else {
        vec![SocketAddr::from((default_ip, DEFAULT_PORT))]
    };
    for addr in listen {
        builder = builder.listen(addr);
    }
    apply_args(builder, &args.network)
}

fn apply_args(mut builder: ServerBuilder, net: &NetworkArgs) -> Result<ServerBuilder, CliError> {
    if let (Some(cert), Some(key)) = (&net.tls_cert, &net.tls_key) {
        let mut tls = TlsSettings::new(cert, key);
        if let Some(ca) = &net.tls_client_ca {
            tls = tls.client_ca(ca);
        }
        builder = builder.tls(tls);
    }
    if let Some(n) = net.max_connections {
        builder = builder.max_connections(usize::try_from(n).unwrap_or(usize::MAX));
    }
    if let Some(t) = seconds("--head-timeout", net.head_timeout)? {
        builder = builder.head_timeout(t);
    }
    if let Some(t) = seconds("--body-timeout", net.body_timeout)? {
        builder = builder.body_timeout(t);
    }
    if let Some(t) = seconds("--idle-timeout", net.idle_timeout)? {
        builder = builder.idle_timeout(t);
    }
    if let Some(t) = seconds("--max-stream-lifetime", net.max_stream_lifetime)? {
        builder = builder.max_stream_lifetime(t);
    }
    if let Some(t) = seconds("--disconnected-status-time", net.disconnected_status_time)? {
        builder = builder.disconnected_status_time(t);
    }
    Ok(builder)
}

/// Raise the soft descriptor limit to the hard one (thousands of SDKs need more than
/// the usual 1,024); what to tell the operator.
pub(crate) fn raise_fd_limit() -> String {
    let show = |n: Option<u64>| n.map_or_else(|| "unlimited".to_owned(), |n| n.to_string());
    match flagsync_server::raise_fd_limit() {
        Ok((before, after)) => format!(
            "soft limit {} (was {}), hard limit {}",
            show(after.soft),
            show(before.soft),
            show(after.hard)
        ),
        Err(e) => {
            let now = flagsync_server::fd_limit();
            format!(
                "soft limit {} (could not raise it to the hard limit {}: {e})",
                show(now.soft),
                show(now.hard)
            )
        }
    }
}

/// The relay environments named by FLAGSYNC_ENV_<NAME>=<SDK key> variables, as the
/// relay file's `environments` object: `{NAME: {"sdkKey": …, "envId": …,
/// "redisPrefix": …, "payloadFilters": […], "mobileKey": …, "secureMode": …,
/// "allowedOrigin": […]}}` (from `FLAGSYNC_ENV_ID_<NAME>` (the client-side ID),
/// `FLAGSYNC_REDIS_PREFIX_<NAME>`, `FLAGSYNC_PAYLOAD_FILTERS_<NAME>`,
/// `FLAGSYNC_MOBILE_KEY_<NAME>`, `FLAGSYNC_SECURE_MODE_<NAME>`,
/// `FLAGSYNC_ALLOWED_ORIGIN_<NAME>`). Errors name the variable, never its value.
pub(crate) fn env_environments(
    vars: impl Iterator<Item = (String, String)>,
) -> Result<Map<String, Value>, CliError> {
    let vars: Vec<(String, String)> = vars.collect();
    let mut envs = Map::new();
    for (name, value) in &vars {
        let Some(env) = name.strip_prefix(ENV_PREFIX) else {
            continue;
        };
        if env.is_empty() || name.starts_with(ENV_ID_PREFIX) {
            continue;
        }
        if value.is_empty() {
            return Err(CliError::usage(format!(
                "{name} is empty: set it to the environment's SDK key"
            )));
        }
        let mut e = json!({"sdkKey": value});
        let find = |prefix: &str| {
            vars.iter()
                .find(|(n, _)| n.strip_prefix(prefix) == Some(env))
                .map(|(_, v)| v.clone())
        };
        if let Some(id) = find(ENV_ID_PREFIX) {
            e["envId"] = Value::from(id);
        }
        if let Some(prefix) = find(REDIS_PREFIX_PREFIX) {
            e["redisPrefix"] = Value::from(prefix);
        }
        if let Some(filters) = find(FILTERS_PREFIX) {
            e["payloadFilters"] = filter_list(&filters);
        }
        if let Some(key) = find(MOBILE_KEY_PREFIX) {
            e["mobileKey"] = Value::from(key);
        }
        if let Some(on) = find(SECURE_MODE_PREFIX) {
            e["secureMode"] = Value::from(matches!(on.trim(), "true" | "1" | "yes"));
        }
        if let Some(origins) = find(ALLOWED_ORIGIN_PREFIX) {
            e["allowedOrigin"] = filter_list(&origins);
        }
        envs.insert(env.to_owned(), e);
    }
    Ok(envs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environments_from_variables() {
        let vars = [
            ("FLAGSYNC_ENV_prod", "sdk-prod"),
            ("FLAGSYNC_ENV_ID_prod", "id-prod"),
            ("FLAGSYNC_REDIS_PREFIX_prod", "{ld}:prod"),
            ("FLAGSYNC_ENV_staging", "sdk-staging"),
            ("FLAGSYNC_PAYLOAD_FILTERS_staging", "mobile, web"),
            ("FLAGSYNC_ENV_ID_other", "x"),
            ("FLAGSYNC_MOBILE_KEY_prod", "mob-prod"),
            ("FLAGSYNC_SECURE_MODE_prod", "true"),
            (
                "FLAGSYNC_ALLOWED_ORIGIN_staging",
                "https://a.example, https://b.example",
            ),
            ("PATH", "/bin"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let envs = env_environments(vars.into_iter()).unwrap();
        assert_eq!(
            Value::Object(envs),
            json!({"prod": {"sdkKey": "sdk-prod", "envId": "id-prod", "redisPrefix": "{ld}:prod",
                            "mobileKey": "mob-prod", "secureMode": true},
                   "staging": {"sdkKey": "sdk-staging", "payloadFilters": ["mobile", "web"],
                               "allowedOrigin": ["https://a.example", "https://b.example"]}})
        );
        let empty = [("FLAGSYNC_ENV_x".to_owned(), String::new())];
        let e = env_environments(empty.into_iter()).unwrap_err();
        assert!(e.message.contains("FLAGSYNC_ENV_x"), "{}", e.message);
    }
}
