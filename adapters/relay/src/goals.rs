//! Goals (LaunchDarkly's click and page-view goals of the JavaScript SDK): fetched for
//! each environment with a client-side ID from its client-side service,
//! `GET {clientSideUri}/sdk/goals/{envId}`, when the relay starts and then every
//! [`INTERVAL`], and served at `GET /sdk/goals/{envId}` (`[]` until fetched). A fetch
//! that fails keeps the goals served; a body that is not JSON, or longer than
//! [`MAX_GOALS_BYTES`], is not served.

use std::time::Duration;

use flagsync_server::EnvironmentHandle;
use tokio::sync::watch;

use crate::forward::agent;

/// How often goals are fetched again.
pub(crate) const INTERVAL: Duration = Duration::from_secs(300);

/// The largest goals body taken.
pub(crate) const MAX_GOALS_BYTES: u64 = 4 << 20;

/// Fetch the goals of `env` (client-side ID `env_id`) from `base` now and every
/// [`INTERVAL`] until `stop`.
pub(crate) async fn keep_goals(
    env: EnvironmentHandle,
    base: String,
    env_id: String,
    mut stop: watch::Receiver<bool>,
) {
    let url = format!("{}/sdk/goals/{env_id}", base.trim_end_matches('/'));
    loop {
        let fetch_url = url.clone();
        let fetched = tokio::task::spawn_blocking(move || fetch(&fetch_url)).await;
        match fetched {
            Ok(Ok(goals)) => env.set_goals(goals.into()),
            Ok(Err(why)) => tracing::debug!(environment = env.name(), why, "goals not fetched"),
            Err(_) => {}
        }
        tokio::select! {
            _ = stop.changed() => return,
            () = tokio::time::sleep(INTERVAL) => {}
        }
    }
}

/// `GET url`: the body when it is JSON.
fn fetch(url: &str) -> Result<Vec<u8>, String> {
    let mut response = agent()
        .get(url)
        .header("Accept", "application/json")
        .call()
        // Not the error's text: it may hold the URI, credentials included.
        .map_err(|_| "the request failed".to_owned())?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(format!("HTTP {status}"));
    }
    let body = response
        .body_mut()
        .with_config()
        .limit(MAX_GOALS_BYTES)
        .read_to_vec()
        .map_err(|_| "the body could not be read, or is too large".to_owned())?;
    serde_json::from_slice::<serde_json::Value>(&body).map_err(|_| "not JSON".to_owned())?;
    Ok(body)
}
