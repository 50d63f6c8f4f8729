//! What an environment needs to serve client-side (JavaScript) and mobile SDKs: the
//! client-side ID and mobile key that choose it, secure mode, the origins allowed to
//! call it from a browser, and its goals.

use bytes::Bytes;

/// An environment's client-side and mobile settings (set with
/// [`Environment::client_side_id`](crate::Environment::client_side_id) and its
/// siblings, or the [`ServerBuilder`](crate::ServerBuilder)'s for the default one).
#[derive(Clone, Default)]
pub(crate) struct ClientSettings {
    /// The client-side ID (environment ID) that client-side requests name in their
    /// path; `None`: see [`crate::client_side`]'s rule for environments without one.
    pub(crate) client_side_id: Option<String>,
    /// The mobile key mobile requests carry in `Authorization`.
    pub(crate) mobile_key: Option<String>,
    /// Client-side requests must carry the context's secure mode hash (`h`).
    pub(crate) secure_mode: bool,
    /// The origins browsers may call from; empty: any.
    pub(crate) allowed_origins: Vec<String>,
    /// The JSON `GET /sdk/goals/{envId}` answers; `None`: `[]`.
    pub(crate) goals: Option<Bytes>,
}

impl std::fmt::Debug for ClientSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the mobile key.
        f.debug_struct("ClientSettings")
            .field("client_side_id", &self.client_side_id)
            .field("has_mobile_key", &self.mobile_key.is_some())
            .field("secure_mode", &self.secure_mode)
            .field("allowed_origins", &self.allowed_origins)
            .field("has_goals", &self.goals.is_some())
            .finish()
    }
}
