//! `flagsync serve --relay FILE` (or `--upstream URI --sdk-key KEY`): relay mode. Each
//! environment is kept in sync with its upstream flag service by flagsync's own client
//! (FDv2 by default, FDv1 on request), optionally written to Redis as it goes, and
//! served to downstream SDKs by the local server (FDv1 and FDv2, streaming and
//! polling), which picks the environment by the SDK key each request carries.
//! Downstream analytics events are forwarded to the environment's events service.

use std::collections::HashMap;
use std::time::Duration;

use flagsync::{Kind, Snapshot};
use flagsync_core::store::Item;
use flagsync_server::{Environment, EnvironmentHandle, RelayConfig, ServerError, UpstreamProtocol};
use serde_json::Value;

use crate::args::ServeArgs;
use crate::client::{Fdv2Preset, Options, RedisOptions, Session, Update};
use crate::error::{CliError, start_error};
use crate::forward::Forwarder;
use crate::options::redact_userinfo;
use crate::printer::plural;

/// How often an environment's data is compared with what is served, besides on every
/// change the client reports (a segment change that no flag uses reports none).
const RESYNC: Duration = Duration::from_secs(1);

/// More changes than this at once go out as one replacement of the whole data set.
const MAX_PATCHES: usize = 64;

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
        environments.insert("default".into(), serde_json::json!({"sdkKey": key}));
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
    RelayConfig::parse(file.to_string().as_bytes()).map_err(CliError::usage)
}

pub(crate) async fn relay(args: ServeArgs) -> Result<(), CliError> {
    let config = config(&args)?;
    let tls = args.redis_tls.read()?;
    let fds = crate::network::raise_fd_limit();
    let mut builder = crate::network::server_builder(&args, Some(&config.network))?;
    for env in &config.environments {
        let mut e = Environment::new(&env.name, &env.sdk_key).init_timeout(config.init_timeout);
        if let Some(id) = &env.env_id {
            e = e.env_id(id);
        }
        builder = builder.environment(e);
    }
    let server = builder
        .start()
        .map_err(|e| start_error(e, |other| CliError::failed(other.to_string())))?;
    let url = server.url();
    println!("flagsync: relaying on {url}");
    let mut sessions = Vec::new();
    for env in &config.environments {
        let redis = args.redis.as_ref().map(|url| RedisOptions {
            url: url.clone(),
            prefix: env.redis_prefix.clone().or_else(|| args.prefix.clone()),
            daemon: false,
            tls: tls.clone(),
        });
        let opts = Options {
            sdk_key: env.sdk_key.clone(),
            stream_uri: env.stream_uri.clone(),
            polling_uri: env.polling_uri.clone(),
            polling: false,
            filter: None,
            fdv2: (config.protocol == UpstreamProtocol::Fdv2).then_some(Fdv2Preset::Default),
            redis,
            events_uri: None,
            max_event_bytes: args
                .max_event_bytes
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            ca_pem: None,
        };
        let session = Session::start(&opts).map_err(CliError::usage)?;
        let handle = server
            .environment(&env.name)
            .ok_or_else(|| CliError::failed("an environment went missing"))?;
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
            if args.redis.is_some() {
                ", kept in Redis"
            } else {
                ""
            }
        );
        sessions.push(tokio::spawn(keep_in_sync(
            env.name.clone(),
            session,
            handle,
        )));
    }
    println!(
        "  SDKs: stream and polling URI {url}, events URI {url}; each with its environment's SDK key"
    );
    println!("  health: GET {url}/status, GET {url}/metrics (Prometheus)");
    println!("  descriptors: {fds}");
    let forwarder = Forwarder::start(&server, &config.environments);
    let _ = tokio::signal::ctrl_c().await;
    println!("stopping");
    for s in &sessions {
        s.abort();
    }
    tokio::task::spawn_blocking(move || {
        server.shutdown();
        forwarder.finish();
    })
    .await
    .map_err(|e| CliError::failed(e.to_string()))
}

/// Serve what `session` holds in `env`: the whole data set once it arrives, then each
/// change as the upstream sent it.
async fn keep_in_sync(name: String, mut session: Session, env: EnvironmentHandle) {
    let mut served = Served::default();
    let mut tick = tokio::time::interval(RESYNC);
    loop {
        let changed = tokio::select! {
            update = session.next() => match update {
                None => break,
                Some(Update::Ready | Update::FlagChanged(_)) => true,
                Some(Update::Status(s)) => {
                    if let Some(e) = &s.error {
                        eprintln!("flagsync: environment {name:?}: upstream: {} (still serving the last data)", e.message);
                    }
                    false
                }
                Some(_) => false,
            },
            _ = tick.tick() => true,
        };
        let snapshot = session.snapshot();
        if changed && snapshot.initialized() {
            match served.sync(&env, &snapshot) {
                Ok(0) => {}
                Ok(n) => eprintln!(
                    "flagsync: environment {name:?}: {} served",
                    plural(n, "change", "changes")
                ),
                Err(e) => eprintln!("flagsync: environment {name:?}: {e}"),
            }
        }
    }
}

/// What an environment serves: each item's version and whether it is deleted.
#[derive(Default)]
struct Served {
    ready: bool,
    items: [HashMap<String, (u64, bool)>; 2],
}

fn slot(kind: Kind) -> usize {
    usize::from(kind == Kind::Segment)
}

impl Served {
    /// Bring `env` to `snap`; the number of items changed.
    fn sync(&mut self, env: &EnvironmentHandle, snap: &Snapshot) -> Result<usize, ServerError> {
        let mut changes: Vec<(Kind, &str, &Item)> = Vec::new();
        // Served keys that `snap` still holds: fewer than are served means some
        // vanished (a full replacement upstream), which only a replacement removes.
        let mut kept = 0;
        for kind in [Kind::Flag, Kind::Segment] {
            let served = &self.items[slot(kind)];
            for (key, item) in snap.iter_including_deleted(kind) {
                match served.get(key) {
                    Some(&v) if v == (item.version, item.deleted) => {
                        kept += 1;
                        continue;
                    }
                    Some(_) => kept += 1,
                    None => {}
                }
                changes.push((kind, key, item));
            }
        }
        let vanished = self.items.iter().map(HashMap::len).sum::<usize>() > kept;
        if !self.ready || vanished || changes.len() > MAX_PATCHES {
            let n = if self.ready { changes.len().max(1) } else { 0 };
            env.replace_all(serde_json::from_str(&snap.to_json()).unwrap_or(Value::Null))?;
            self.ready = true;
            for (i, kind) in [Kind::Flag, Kind::Segment].into_iter().enumerate() {
                self.items[i] = snap
                    .iter_including_deleted(kind)
                    .map(|(k, item)| (k.to_owned(), (item.version, item.deleted)))
                    .collect();
            }
            return Ok(n);
        }
        let n = changes.len();
        for (kind, key, item) in changes {
            let value = (!item.deleted)
                .then(|| serde_json::from_str(item.raw_str()).unwrap_or(Value::Null));
            match (kind, value) {
                (Kind::Flag, Some(v)) => drop(env.set_flag(key, v)?),
                (Kind::Segment, Some(v)) => drop(env.set_segment(key, v)?),
                (Kind::Flag, None) => drop(env.delete_flag_version(key, item.version)),
                (Kind::Segment, None) => drop(env.delete_segment_version(key, item.version)),
            }
            self.items[slot(kind)].insert(key.to_owned(), (item.version, item.deleted));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flagsync_core::store::{ChangeSet, Store, split_all_data};
    use flagsync_server::Server;
    use serde_json::json;

    /// A snapshot of `flags` (a map of flag key → flag).
    fn snapshot(flags: Value) -> Snapshot {
        let data = json!({"flags": flags, "segments": {}});
        let whole = data.to_string().into_bytes().into();
        let mut store = Store::new();
        store.apply(ChangeSet::fdv1_full(split_all_data(&whole, false).unwrap()));
        store.snapshot()
    }

    fn flag(key: &str, version: u64) -> Value {
        json!({"key": key, "version": version, "on": true, "variations": [true],
               "fallthrough": {"variation": 0}, "offVariation": 0})
    }

    /// The flag keys `env` serves, with their versions.
    fn served_flags(env: &EnvironmentHandle) -> Vec<(String, u64)> {
        let data: Value = serde_json::from_str(&env.data_json()).unwrap();
        let mut flags: Vec<(String, u64)> = data["flags"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, f)| f["deleted"] != true)
            .map(|(k, f)| (k.clone(), f["version"].as_u64().unwrap()))
            .collect();
        flags.sort();
        flags
    }

    #[test]
    fn changes_are_patched_and_vanished_keys_replace_the_whole_set() {
        let server = Server::builder()
            .environment(Environment::new("e", "sdk-relay-unit"))
            .start()
            .unwrap();
        let env = server.environment("e").unwrap();
        let mut served = Served::default();
        let first = json!({"a": flag("a", 1), "b": flag("b", 1)});
        assert_eq!(served.sync(&env, &snapshot(first)).unwrap(), 0);
        assert_eq!(served_flags(&env), [("a".into(), 1), ("b".into(), 1)]);

        // One changed flag: one patch.
        let second = json!({"a": flag("a", 2), "b": flag("b", 1)});
        assert_eq!(served.sync(&env, &snapshot(second.clone())).unwrap(), 1);
        assert_eq!(served_flags(&env), [("a".into(), 2), ("b".into(), 1)]);
        assert_eq!(served.sync(&env, &snapshot(second)).unwrap(), 0);

        // "b" gone and "c" new in one sync (as many keys as before): "b" is no longer
        // served.
        let third = json!({"a": flag("a", 2), "c": flag("c", 1)});
        assert_eq!(served.sync(&env, &snapshot(third)).unwrap(), 1);
        assert_eq!(served_flags(&env), [("a".into(), 2), ("c".into(), 1)]);
    }
}
