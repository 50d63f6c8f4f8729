//! The one place where an environment's upstream connection state is reported.

use flagsync::{DataSourceStatus, State};
use flagsync_server::{ConnectionState, EnvironmentHandle, UpstreamError};

/// Report a change of `env`'s upstream connection: `status` is the data-source status
/// of the environment's client (its connection to the upstream flag service), as the
/// client published it. Every status the client publishes comes here, and only here.
///
/// The server's `GET /status` and `GET /metrics` show it (the state, and while it is
/// not valid, the error as `lastError`). It is also logged: a failure at `warn` (before the first data set, the environment
/// answers `503` meanwhile; after it, it keeps serving its last data), a stop for good
/// at `error`, a healthy connection at `info`. The
/// message comes from the SDK, which never puts an SDK key or a password in it.
pub(crate) fn report_upstream_status(env: &EnvironmentHandle, status: &DataSourceStatus) {
    let connection = match status.state {
        State::Valid => ConnectionState::Valid,
        State::Interrupted => ConnectionState::Interrupted,
        State::Off => ConnectionState::Off,
        _ => ConnectionState::Initializing,
    };
    let error = status
        .error
        .as_ref()
        .filter(|_| status.state != State::Valid)
        .map(|e| UpstreamError::new(e.kind.as_str().to_ascii_uppercase(), e.message.clone()));
    env.report_upstream(connection, error);
    let environment = env.name();
    let state = status.state.as_str();
    match (&status.error, status.state) {
        (_, State::Valid) => {
            tracing::info!(environment, state, "upstream: connected, data current");
        }
        (Some(e), State::Off) => tracing::error!(
            environment,
            state,
            status_code = e.status_code,
            "upstream: {} (stopped for good; still serving the last data)",
            e.message
        ),
        (Some(e), state_now) => {
            let meanwhile = if state_now == State::Initializing {
                "no data yet; retrying"
            } else {
                "still serving the last data"
            };
            tracing::warn!(
                environment,
                state,
                status_code = e.status_code,
                "upstream: {} ({meanwhile})",
                e.message
            );
        }
        (None, _) => tracing::info!(environment, state, "upstream: {state}"),
    }
}
