//! The client-side and mobile settings of an environment: setters on
//! [`Environment`], on [`ServerBuilder`] (the default environment) and on the running
//! [`EnvironmentHandle`] and [`ServerHandle`] (goals).

use bytes::Bytes;

use crate::builder::ServerBuilder;
use crate::client_side::settings::ClientSettings;
use crate::env::{Environment, EnvironmentHandle};
use crate::handle::ServerHandle;
use crate::state::Shared;

/// The setters shared by [`Environment`] and [`ServerBuilder`].
fn set(client: &mut ClientSettings, f: impl FnOnce(&mut ClientSettings)) {
    f(client);
}

impl Environment {
    /// Serve client-side (JavaScript) SDKs that name this client-side ID (LaunchDarkly's
    /// environment ID) in their paths: `/sdk/evalx/{id}/…`, `/eval/{id}/…`,
    /// `/sdk/goals/{id}`, `/events/bulk/{id}`. Without one on any environment, any ID
    /// reaches the default environment.
    ///
    /// ```
    /// use flagsync_server::{Environment, Server};
    ///
    /// let server = Server::builder()
    ///     .environment(Environment::new("prod", "sdk-1").client_side_id("env-1")
    ///         .mobile_key("mob-1").secure_mode(true)
    ///         .allowed_origin("https://app.example"))
    ///     .start()?;
    /// # Ok::<(), flagsync_server::ServerError>(())
    /// ```
    pub fn client_side_id(mut self, id: impl Into<String>) -> Self {
        set(&mut self.client, |c| c.client_side_id = Some(id.into()));
        self
    }

    /// Serve mobile SDKs whose `Authorization` carries this mobile key (`/msdk/evalx/…`,
    /// `/meval/…`, `/mobile/…`). Never logged.
    pub fn mobile_key(mut self, key: impl Into<String>) -> Self {
        set(&mut self.client, |c| c.mobile_key = Some(key.into()));
        self
    }

    /// Require secure mode of client-side SDKs: each request carries `h`, the
    /// HMAC-SHA256 of its context's canonical key with the SDK key
    /// ([`flagsync_eval::SecureModeKey`]); a missing or wrong `h` gets `400`, as the
    /// Relay Proxy answers it.
    pub fn secure_mode(mut self, on: bool) -> Self {
        set(&mut self.client, |c| c.secure_mode = on);
        self
    }

    /// Allow browsers on `origin` (e.g. `https://app.example`) to call the client-side
    /// endpoints (repeatable). With none, any origin is allowed.
    pub fn allowed_origin(mut self, origin: impl Into<String>) -> Self {
        set(&mut self.client, |c| c.allowed_origins.push(origin.into()));
        self
    }

    /// The JSON that `GET /sdk/goals/{id}` answers (default `[]`).
    pub fn goals(mut self, goals: Bytes) -> Self {
        set(&mut self.client, |c| c.goals = Some(goals));
        self
    }
}

impl ServerBuilder {
    /// The default environment's client-side ID: see [`Environment::client_side_id`].
    pub fn client_side_id(mut self, id: Option<String>) -> Self {
        set(&mut self.client, |c| c.client_side_id = id);
        self
    }

    /// The default environment's mobile key: see [`Environment::mobile_key`].
    pub fn mobile_key(mut self, key: Option<String>) -> Self {
        set(&mut self.client, |c| c.mobile_key = key);
        self
    }

    /// Secure mode for the default environment: see [`Environment::secure_mode`].
    pub fn secure_mode(mut self, on: bool) -> Self {
        set(&mut self.client, |c| c.secure_mode = on);
        self
    }

    /// An origin allowed to call the default environment from a browser: see
    /// [`Environment::allowed_origin`].
    pub fn allowed_origin(mut self, origin: impl Into<String>) -> Self {
        set(&mut self.client, |c| c.allowed_origins.push(origin.into()));
        self
    }

    /// The default environment's goals: see [`Environment::goals`].
    pub fn goals(mut self, goals: Bytes) -> Self {
        set(&mut self.client, |c| c.goals = Some(goals));
        self
    }
}

fn set_goals(shared: &Shared, env: usize, goals: Bytes) {
    shared.lock().envs[env].client.goals = Some(goals);
}

impl EnvironmentHandle {
    /// Replace the JSON `GET /sdk/goals/{id}` answers (a relay sets what it fetched
    /// from its upstream).
    pub fn set_goals(&self, goals: Bytes) {
        set_goals(&self.shared, self.index, goals);
    }
}

impl ServerHandle {
    /// Replace the default environment's goals: see [`EnvironmentHandle::set_goals`].
    pub fn set_goals(&self, goals: Bytes) {
        set_goals(&self.shared, 0, goals);
    }
}
