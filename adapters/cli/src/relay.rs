//! `flagsync serve --relay FILE` (or `--upstream URI --sdk-key KEY`): relay mode, the
//! [`flagsync_relay`] crate's relay started with the command line's settings. Each
//! environment is kept in sync with its upstream flag service by flagsync's own client
//! (FDv2 by default, FDv1 on request), optionally written to Redis as it goes, and
//! served to downstream SDKs by the local server (FDv1 and FDv2, streaming and
//! polling), which picks the environment by the SDK key each request carries.
//! Downstream analytics events are forwarded to the environment's events service.

use flagsync_relay::{Relay, RelayError, redact_userinfo};
use flagsync_server::{RelayConfig, UpstreamProtocol};
use serde_json::Value;

use crate::args::ServeArgs;
use crate::error::{CliError, start_error};

/// The relay's configuration from the command line.
pub(crate) fn config(args: &ServeArgs) -> Result<RelayConfig, CliError> {
    if let Some(path) = &args.relay {
        let bytes = std::fs::read(path)
            .map_err(|e| CliError::usage(format!("cannot read --relay {}: {e}", path.display())))?;
        return RelayConfig::parse(&bytes)
            .map_err(|e| CliError::usage(format!("{}: {e}", path.display())));
    }
    let upstream = args.upstream.clone().unwrap_or_default();
    let mut environments = crate::network::env_environments(std::env::vars())?;
    if let Some(key) = &args.sdk_key {
        let mut env = serde_json::json!({"sdkKey": key});
        if let Some(filters) = &args.payload_filters {
            env["payloadFilters"] = crate::network::filter_list(filters);
        }
        args.client.relay_fields(&mut env);
        environments.insert("default".into(), env);
    }
    if environments.is_empty() {
        return Err(CliError::usage(
            "--upstream needs an SDK key: --sdk-key (or FLAGSYNC_SDK_KEY), or FLAGSYNC_ENV_<NAME> variables",
        ));
    }
    let mut file = serde_json::json!({
        "upstream": upstream,
        "protocol": if args.upstream_fdv1 { "fdv1" } else { "fdv2" },
        "environments": environments,
    });
    if let Some(events) = &args.upstream_events {
        file["eventsUri"] = Value::from(events.clone());
    }
    if let Some(uri) = &args.client.upstream_client_side {
        file["clientSideUri"] = Value::from(uri.clone());
    }
    RelayConfig::parse(file.to_string().as_bytes()).map_err(CliError::usage)
}

pub(crate) async fn relay(args: ServeArgs) -> Result<(), CliError> {
    let config = config(&args)?;
    let fds = crate::network::raise_fd_limit();
    let server = crate::network::server_builder(&args, Some(&config.network))?;
    let mut builder = Relay::builder(config.clone()).server(server);
    // Checked here for the message that says what --redis expects.
    if let Some(opts) = args.redis.options(false)? {
        builder = builder.redis(opts.builder());
    }
    if let Some(n) = args.max_event_bytes {
        builder = builder.max_event_bytes(usize::try_from(n).unwrap_or(usize::MAX));
    }
    log_warnings();
    let relay = builder.start().map_err(relay_error)?;
    let url = relay.server().url();
    println!("flagsync: relaying on {url}");
    for env in &config.environments {
        println!(
            "  environment {:?}: upstream {} ({}){}{}",
            env.name,
            redact_userinfo(&env.stream_uri),
            match config.protocol {
                UpstreamProtocol::Fdv2 => "FDv2",
                UpstreamProtocol::Fdv1 => "FDv1",
            },
            env.events_uri
                .as_deref()
                .map(|u| format!(", events to {}", redact_userinfo(u)))
                .unwrap_or_default(),
            if args.redis.given() {
                ", kept in Redis"
            } else {
                ""
            }
        );
        for filter in &env.payload_filters {
            println!(
                "    payload filter {filter:?}: served as {:?}",
                format!("{}/{filter}", env.name)
            );
        }
    }
    println!(
        "  SDKs: stream and polling URI {url}, events URI {url}; each with its environment's SDK key"
    );
    println!(
        "  client-side and mobile SDKs: base, stream and events URI {url}; each with its environment's envId (client-side ID) or mobile key"
    );
    println!("  health: GET {url}/status, GET {url}/metrics (Prometheus)");
    println!("  descriptors: {fds}");
    let _ = tokio::signal::ctrl_c().await;
    println!("stopping");
    // The forwarder's losses are in the relay's log.
    tokio::task::spawn_blocking(move || {
        relay.shutdown();
    })
    .await
    .map_err(|e| CliError::failed(e.to_string()))
}

/// The relay's warnings (an upstream outage, events not forwarded) on standard error.
fn log_warnings() {
    crate::logs::warnings_to_stderr("flagsync_relay");
}

/// Why the relay did not start, with the exit code: the settings given (2), or the
/// port or the system (1).
fn relay_error(e: RelayError) -> CliError {
    match e {
        RelayError::Server(e) => start_error(e, |other| CliError::failed(other.to_string())),
        e @ (RelayError::Redis { .. } | RelayError::Client { .. }) => {
            CliError::usage(e.to_string())
        }
        e => CliError::failed(e.to_string()),
    }
}
