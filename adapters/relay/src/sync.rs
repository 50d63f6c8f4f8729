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
pub(crate) async fn keep_in_sync(
    env: EnvironmentHandle,
    upstream: Upstream,
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
    loop {
        let changed = tokio::select! {
            _ = stop.changed() => break,
            status = statuses.recv() => match status {
                None => break,
                Some(s) => {
                    report_upstream_status(&env, &s);
                    false
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
        match served.sync(&env, &snapshot) {
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
