//! A local LaunchDarkly-compatible flag server (FDv1 and FDv2), for offline development
//! and tests.
//!
//! Every connection is served by two event-loop threads (`mio`), whatever their
//! number: the request loop accepts, reads requests within their deadlines and answers
//! them, and hands each stream to the stream hub, which holds them all and writes each
//! change to every one of them from a single encoding. So it works whatever async
//! runtime (if any) the rest of the program uses, holds tens of thousands of streams
//! and idle connections, and a client that trickles its request is cut off by the
//! request's deadline ([`ServerBuilder::head_timeout`]). It listens on `127.0.0.1`
//! unless told otherwise ([`ServerBuilder::listen`]: any IPv4 or IPv6 address), over
//! TLS when asked ([`ServerBuilder::tls`], [`TlsSettings`]: certificates reloaded when
//! their files change, optional client certificates), and serves at most
//! [`ServerBuilder::max_connections`] connections (past it, `503` with `Retry-After`).
//! Several environments can be served at once, each chosen by its SDK key
//! ([`Environment`]): `flagsync serve --relay` uses this to relay upstream
//! environments ([`RelayConfig`]).
//!
//! # Health and metrics
//! `GET /status` (no SDK key asked, none shown) answers with each environment's
//! connection state, last upstream error, data store state and data age, and an
//! overall `healthy` or `degraded`, in the shape of LaunchDarkly's Relay Proxy's status
//! resource ([`ConnectionState`], [`EnvironmentHandle::report_upstream`]). `GET
//! /metrics` answers in Prometheus' text exposition format: connections open (by kind)
//! and accepted, refused and timed out; requests by route and status; streams by
//! protocol; events received, forwarded and dropped; each environment's connection,
//! payload version and data age; and a histogram of the time a change takes to reach
//! every stream of its environment.
//!
//! | Request | Answer |
//! | --- | --- |
//! | `GET …/all` | FDv1 `text/event-stream`: an `event: put` with every flag and segment, then a `patch` or `delete` for every change (a replaced data set too, up to 64 changes; past that a new `put`), and a `:` comment heartbeat every [`ServerBuilder::heartbeat`] |
//! | `GET …/sdk/latest-all` | FDv1 `{"flags":{…},"segments":{…}}` with an `ETag`; `If-None-Match` → `304`; gzip when accepted |
//! | `GET …/sdk/stream[?basis=S]` | FDv2 `text/event-stream`: `server-intent` (`xfer-full`, or `none` when `basis` is the current selector state), a `put-object` per flag and segment, `payload-transferred {state, version}`; then each change as an `xfer-changes` payload (`put-object` or `delete-object`, `payload-transferred`), a replaced data set as its changes (one `xfer-changes` payload; past 64 changes, a new `xfer-full` payload), and a `heart-beat` event every heartbeat interval |
//! | `GET …/sdk/poll[?basis=S]` | FDv2 `{"events":[{"event":…,"data":{…}},…]}`: the same first payload as the stream, with an `ETag` naming the selector state; `If-None-Match` → `304`; gzip when accepted |
//! | `POST …/bulk` | analytics events, a JSON array (optionally `Content-Encoding: gzip`): `202 Accepted`, empty body |
//! | `POST …/diagnostic` | one diagnostic event object (optionally gzip): `202 Accepted`, empty body |
//! | `GET /sdk/evalx/{id}/contexts/{ctx}`, `REPORT /sdk/evalx/{id}/context` (and `…/users/{user}`, `…/user`) | client-side (JavaScript) SDKs: every flag available to them evaluated for the context, `{"key":{"value","variation","version","flagVersion","trackEvents",…}}`; `?withReasons=true`, `?h=` (secure mode); CORS, `OPTIONS` preflights ([`Environment::client_side_id`]) |
//! | `GET /eval/{id}/{ctx}`, `REPORT /eval/{id}` | client-side streams: a `put` of the same, then a `patch` or `delete` per changed flag |
//! | `GET /msdk/evalx/contexts/{ctx}`, `REPORT /msdk/evalx/context`, `GET /meval/{ctx}`, `REPORT /meval` | the same for mobile SDKs, by mobile key ([`Environment::mobile_key`]) |
//! | `POST /events/bulk/{id}`, `/events/diagnostic/{id}`, `GET /a/{id}.gif?d=…`; `POST /mobile/events/bulk`, `/mobile/events/diagnostic` (`/mobile`, `/mobile/events`) | browser and mobile events: `202` (the image: a 1×1 GIF), published with their [`EventOrigin`] |
//! | `GET /sdk/goals/{id}` | the environment's goals ([`Environment::goals`]; `[]` unless set) |
//! | `GET /status` | the health document (see above), `application/json` |
//! | `GET /metrics` | the metrics, `text/plain; version=0.0.4` |
//!
//! Every change raises the payload version by one; the selector state is
//! `<server epoch>-<version>` ([`ServerHandle::fdv2_state`]), so a client's `basis`
//! from an older version (or another server run) gets a full transfer. Any path prefix
//! is accepted (so a base URI with a path works) and a `?filter=` query is accepted and
//! ignored. When an SDK key is configured, a request whose `Authorization` header
//! differs gets `401`. Every response carries a `Date` header (SDKs compare
//! `debugEventsUntilDate` with the `Date` of an events response).
//!
//! Streams are answered as LaunchDarkly's streaming service answers them, so the
//! official SDKs read them unchanged: `Content-Type: text/event-stream; charset=utf-8`,
//! `Cache-Control: no-cache`, and `Transfer-Encoding: chunked` with every write (the
//! first payload, each change, each heartbeat) one chunk, so a reader that waits for
//! framed data (urllib3 in the Python SDK) sees each event when it is sent. A stream
//! that the server ends (a `goodbye`, [`ServerHandle::drop_streams`], shutdown) ends
//! with the last chunk, then the connection closes. (An HTTP/1.0 request, which knows
//! no chunks, gets the events unframed, ended by the connection's end.)
//!
//! # Events
//! The events endpoints answer as LaunchDarkly's events service does: `202 Accepted`
//! with an empty body; `400` for a body that is not JSON of the endpoint's shape (an
//! array for `/bulk`, an object for `/diagnostic`), `401` for a wrong SDK key, `413`
//! for a body longer than [`ServerBuilder::max_body`] (as sent, or once gunzipped),
//! `415` for a `Content-Encoding` other than gzip. Bodies are read as HTTP/1.1 frames
//! them: `Content-Length` or `Transfer-Encoding: chunked` (trailers skipped; a malformed
//! chunk is `400` and the connection closes), with `Expect: 100-continue` answered by
//! `100 Continue` before the body is read (or by the final status, without reading it,
//! when the request is refused anyway), on keep-alive connections. Accepted
//! payloads go to every [`EventSubscription`] ([`ServerHandle::subscribe_events`]) as
//! [`EventPayload`]s; a subscription that is full drops and counts, so a slow reader
//! never holds up a request. The faults apply to [`Endpoint::Bulk`] and
//! [`Endpoint::Diagnostic`] too.
//!
//! # Faults
//! For testing clients, [`ServerHandle`] scripts faults; each takes effect with the next
//! request: [`fail_next`](ServerHandle::fail_next) and
//! [`fail_endpoint`](ServerHandle::fail_endpoint) (answer with an HTTP status),
//! [`hang`](ServerHandle::hang) and [`hang_endpoint`](ServerHandle::hang_endpoint)
//! (accept, never answer), [`drop_streams`](ServerHandle::drop_streams), and for FDv2
//! [`fdv1_fallback`](ServerHandle::fdv1_fallback) (`X-LD-FD-Fallback: true` on every
//! FDv2 response), [`goodbye_next`](ServerHandle::goodbye_next) (a `goodbye` after a
//! stream's first payload, then the stream closes) and
//! [`payload_error_next`](ServerHandle::payload_error_next) (an `error` event half-way
//! through a full payload, which is then sent again).
//!
//! ```no_run
//! use flagsync_server::{Endpoint, Server};
//! use serde_json::json;
//!
//! let server = Server::builder()
//!     .sdk_key(Some("sdk-test".into()))
//!     .data(json!({"flags": {"dark-mode": {"on": true, "variations": [false, true],
//!                  "fallthrough": {"variation": 1}, "offVariation": 0}}}))
//!     .start()?;
//! println!("stream and poll URI: {}", server.url());
//! server.set_flag("dark-mode", json!({"on": false, "variations": [false, true],
//!                  "fallthrough": {"variation": 1}, "offVariation": 0}))?; // version 2, pushed as a patch
//! server.fail_next(2, 503); // the next two requests get 503
//! server.fail_endpoint(Endpoint::Fdv2Stream, Some(401)); // FDv2 streams are refused
//! server.shutdown();
//! # Ok::<(), flagsync_server::ServerError>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(unreachable_pub, clippy::use_self, elided_lifetimes_in_paths)]

mod builder;
mod client_side;
mod conn;
mod crypto;
mod data;
mod env;
mod error;
mod evaluated;
mod events;
mod fault;
mod fdv2;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod handle;
mod health;
mod http;
mod hub;
mod listen;
mod metrics;
mod ofrep;
mod reader;
mod recorded;
mod relay_config;
mod request_loop;
mod routes;
mod state;
mod tls;
mod transport;

pub use builder::{
    DEFAULT_BODY_TIMEOUT, DEFAULT_HEAD_TIMEOUT, DEFAULT_IDLE_TIMEOUT, Server, ServerBuilder,
};
pub use crypto::crypto_provider_name;
pub use data::FlagData;
pub use env::{Environment, EnvironmentHandle};
pub use error::ServerError;
pub use events::{EventOrigin, EventPayload, EventSubscription, PayloadKind};
pub use fault::{Endpoint, UnknownEndpoint};
pub use handle::ServerHandle;
pub use health::{ConnectionState, UpstreamError};
pub use listen::{FdLimit, fd_limit, raise_fd_limit};
pub use ofrep::context::{OfrepContextError, ofrep_context};
pub use recorded::RecordedRequest;
pub use relay_config::{
    DEFAULT_CLIENT_SIDE_URI, MAX_RELAY_CONFIG_BYTES, NetworkConfig, RelayConfig, RelayEnvironment,
    UpstreamProtocol,
};
pub use tls::TlsSettings;
