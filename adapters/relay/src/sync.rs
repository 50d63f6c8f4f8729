//! [`keep_in_sync`]: the task that serves what an environment's client holds.

use std::time::Duration;

use flagsync_server::EnvironmentHandle;
use tokio::sync::watch;

use crate::served::Served;
use crate::status::report_upstream_status;
use crate::upstream::Upstream;

/// How often an environment's data is compared with what is served, besides on every
/// change the client reports (a segment change that no flag uses reports none).
const RESYNC: Duration = Duration::from_secs(1);

/// Longer than any wait for the first data set.
const FOREVER: Duration = Duration::from_secs(365 * 86400);

/// Serve what `upstream`'s client holds in `env`: the whole data set once it arrives,
/// then each change as the upstream sent it; every status change of the client goes
/// to [`report_upstream_status`]. Until `stop` says so (or is dropped); then the
/// client is closed.
///
/// With a data store (`has_store`), the client may be ready before its upstream
/// answers, with what the store held: that is served at once, and `/status` says so
/// (`servedFrom: store`) until the upstream's data arrives, which then wins (and the
/// client writes it to the store).
pub(crate) async fn keep_in_sync(
    env: EnvironmentHandle,
    upstream: Upstream,
    has_store: bool,
    mut stop: watch::Receiver<bool>,
) {
    let Upstream {
        client,
        statuses,
        flags,
    } = upstream;
    let mut served = Served::default();
    let mut tick = tokio::time::interval(RESYNC);
    let mut waiting = true;
    // The upstream has delivered its data (the client was valid once).
    let mut from_upstream = false;
    loop {
        let changed = tokio::select! {
            _ = stop.changed() => break,
            status = statuses.recv() => match status {
                None => break,
                Some(s) => {
                    report_upstream_status(&env, &s);
                    if s.state == flagsync::State::Valid && !from_upstream {
                        from_upstream = true;
                        // What is served from now on is the upstream's.
                        true
                    } else {
                        false
                    }
                }
            },
            change = flags.recv() => match change {
                None => break,
                Some(_) => true,
            },
            ready = client.wait_for_initialization(FOREVER), if waiting => {
                waiting = false;
                ready
            }
            _ = tick.tick() => true,
        };
        if !changed {
            continue;
        }
        let snapshot = client.snapshot();
        if !snapshot.initialized() {
            continue;
        }
        let synced = served.sync(&env, &snapshot);
        if has_store && synced.is_ok() {
            env.report_served_from_store(!from_upstream);
        }
        match synced {
            Ok(0) => {}
            Ok(n) => tracing::debug!(environment = env.name(), changes = n, "changes served"),
            Err(e) => tracing::warn!(
                environment = env.name(),
                error = %e,
                "the client's data could not be served (still serving the previous data)"
            ),
        }
    }
    client.close().await;
}
