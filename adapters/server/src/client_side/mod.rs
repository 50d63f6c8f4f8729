//! LaunchDarkly's client-side (JavaScript) and mobile SDK endpoints: flags evaluated
//! for the SDK's context, polled (`evalx`) or streamed (`put`, then `patch` and
//! `delete` per change), goals, and the browser and mobile event endpoints.
//!
//! - [`path`]: which endpoint a path is, the context it carries.
//! - [`serve`]: authorization (the client-side ID in the path, the mobile key in
//!   `Authorization`), secure mode, CORS, and the answers.
//! - [`eval`]: the evaluated flags as the SDKs read them, written by [`json`].
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
//!
//! Streams: LaunchDarkly's service sends a client-side or mobile stream a `put` of the
//! flags evaluated for its context, then a `patch` (the flag's new evaluation) or a
//! `delete` per changed flag; the Relay Proxy sends `ping` instead (the SDK then polls
//! `evalx` again). Both are understood by every client-side SDK (js-core's
//! `DataSourceEventHandler`, the older js-client-sdk, Android, iOS); this server sends
//! what the service sends, so an SDK behind it makes no extra request per change, and
//! only flags whose evaluation may have changed are sent: the core's dependency index
//! names them (a segment's change names every flag using it,
//! `Data::changed_flags`); when it cannot
//! (nothing evaluated before the change) or names more than 64, a stream gets a whole
//! `put`. A flag gone, or no longer available to the stream's SDK, is a `delete`; a
//! changed flag whose value for the context did not change is still sent as a `patch`
//! (evaluating it twice to compare would cost as much as sending it).
//!
//! Evaluation never holds the server's lock: the environment's data for the engine is
//! taken under it (an O(1) snapshot), in the order of the changes, and evaluated by the
//! stream hub's thread, which writes each stream's events as it writes the shared
//! FDv1 and FDv2 frames (a change reaches 1,000 open client-side streams in about
//! 30 ms in a debug build, `tests/client_side_streams.rs`). Polls evaluate on the
//! request thread, after the lock is released.

pub(crate) mod cors;
pub(crate) mod environment;
pub(crate) mod eval;
pub(crate) mod json;
pub(crate) mod notify;
pub(crate) mod path;
pub(crate) mod serve;
pub(crate) mod settings;
