//! LaunchDarkly's client-side (JavaScript) and mobile SDK endpoints: flags evaluated
//! for the SDK's context, polled (`evalx`) or streamed (`put`, then `patch` and
//! `delete` per change), goals, and the browser and mobile event endpoints.
//!
//! - [`path`]: which endpoint a path is, the context it carries.
//! - [`serve`]: authorization (the client-side ID in the path, the mobile key in
//!   `Authorization`), secure mode, CORS, and the answers.
//! - [`eval`]: the evaluated flags as the SDKs read them.
//! - [`notify`]: a data change handed to the stream hub, which evaluates the changed
//!   flags for each open client-side and mobile stream.
//! - [`settings`], [`environment`]: the per-environment settings and their setters.
//!
//! Choosing the environment: a client-side request goes to the environment whose
//! client-side ID its path names; when no environment has one, to the default
//! environment (any ID is accepted, as `serve` without `--sdk-key` accepts any key),
//! or, when the default serves nobody, to the first added one. An unknown ID is `404`
//! (`{"message":"unknown environment ID"}`), as the Relay Proxy answers it. Mobile
//! requests likewise by mobile key (`Authorization: api_key KEY`, or the bare key);
//! an unknown key is `401`. Only environments without a payload filter are chosen.

pub(crate) mod cors;
pub(crate) mod environment;
pub(crate) mod eval;
pub(crate) mod notify;
pub(crate) mod path;
pub(crate) mod serve;
pub(crate) mod settings;
