//! An [OpenFeature](https://openfeature.dev) provider for flagsync: evaluate
//! LaunchDarkly-compatible flags through OpenFeature's Rust SDK (`open-feature` 0.3).
//!
//! [`FlagsyncProvider`] wraps an `Arc<`[`flagsync::Client`]`>` (shared: the application
//! keeps its own handle for what OpenFeature does not cover: migrations, `all_flags_state`,
//! events). It converts contexts, reasons and error codes as LaunchDarkly's own
//! OpenFeature providers do (Java, .NET and Node.js; see [`to_context`] and
//! [`resolve`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use flagsync_openfeature::FlagsyncProvider;
//! use open_feature::{EvaluationContext, OpenFeature};
//!
//! let client = Arc::new(flagsync::Client::builder("sdk-key").build()?);
//! let mut api = OpenFeature::singleton_mut().await;
//! // `set_provider` runs `initialize`: it starts the client and waits for its data.
//! api.set_provider(FlagsyncProvider::new(client)).await;
//! let of_client = api.create_client();
//! drop(api);
//!
//! let context = EvaluationContext::default()
//!     .with_targeting_key("user-123")
//!     .with_custom_field("email", "ada@example.com");
//! let dark = of_client.get_bool_value("dark-mode", Some(&context), None).await.unwrap_or(false);
//! # let _ = dark;
//! # Ok(())
//! # }
//! ```
//!
//! What OpenFeature's Rust SDK 0.3 lacks, the provider offers as its own methods:
//! provider events ([`FlagsyncProvider::events`]), tracking ([`FlagsyncProvider::track`])
//! and shutdown ([`FlagsyncProvider::close`]).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod cache;
#[cfg(test)]
mod cache_tests;
mod context;
mod events;
pub mod resolve;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use flagsync::Client;
use flagsync::eval::{AttributeValue, Context};
use open_feature::provider::{
    FeatureProvider, ProviderMetadata, ProviderStatus, ResolutionDetails,
};
use open_feature::{EvaluationContext, EvaluationResult, StructValue, async_trait};

pub use context::to_context;
pub use events::{ProviderEvent, ProviderEvents};

/// The provider's name in its metadata. LaunchDarkly's providers name their product
/// (`LaunchDarkly.OpenFeature.ServerProvider`, `launchdarkly-node-provider`); this one
/// names its own.
pub const PROVIDER_NAME: &str = "flagsync";

/// How long [`FeatureProvider::initialize`] waits for the client's data by default
/// (as LaunchDarkly's Node.js provider: 10 seconds).
pub const DEFAULT_INIT_TIMEOUT: Duration = Duration::from_secs(10);

/// How many converted contexts the provider keeps by default
/// ([`FlagsyncProvider::with_context_cache`]).
pub const DEFAULT_CONTEXT_CACHE_ENTRIES: usize = 1024;

/// The most bytes one cached context may hold by default
/// ([`FlagsyncProvider::with_context_cache`]): with
/// [`DEFAULT_CONTEXT_CACHE_ENTRIES`], the cache holds at most 4 MiB.
pub const DEFAULT_CONTEXT_CACHE_ENTRY_BYTES: usize = 4096;

/// An OpenFeature provider over a flagsync [`Client`]. Cloning it is cheap; clones share
/// the client and the state (the context cache too).
///
/// # Context conversion and its cache
///
/// Each resolution needs the flagsync context for OpenFeature's context ([`to_context`]).
/// The provider keeps the contexts it converted in a bounded cache keyed by the OpenFeature
/// context's content, so evaluating the same context again (the same user across flags
/// and requests, the same merged context from OpenFeature's client) costs a hash and a
/// comparison instead of a conversion. A context is stored from its second use on;
/// the cache holds at most `entries` contexts of at most `max_entry_bytes` each (larger
/// ones are converted on every call), and takes no lock. See
/// [`FlagsyncProvider::with_context_cache`].
#[derive(Clone)]
pub struct FlagsyncProvider {
    client: Arc<Client>,
    metadata: ProviderMetadata,
    init_timeout: Duration,
    reason_metadata: bool,
    init_failed: Arc<AtomicBool>,
    contexts: Arc<cache::ContextCache>,
}

impl std::fmt::Debug for FlagsyncProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlagsyncProvider")
            .field("metadata", &self.metadata)
            .field("init_timeout", &self.init_timeout)
            .field("reason_metadata", &self.reason_metadata)
            .finish_non_exhaustive()
    }
}

impl FlagsyncProvider {
    /// A provider over `client` (started or not: [`FeatureProvider::initialize`] starts
    /// it, which on tokio must happen inside a tokio runtime).
    pub fn new(client: Arc<Client>) -> Self {
        Self {
            client,
            metadata: ProviderMetadata::new(PROVIDER_NAME),
            init_timeout: DEFAULT_INIT_TIMEOUT,
            reason_metadata: false,
            init_failed: Arc::new(AtomicBool::new(false)),
            contexts: Arc::new(cache::ContextCache::new(
                DEFAULT_CONTEXT_CACHE_ENTRIES,
                DEFAULT_CONTEXT_CACHE_ENTRY_BYTES,
            )),
        }
    }

    /// Keep up to `entries` converted contexts (rounded up to a power of two; 0 turns
    /// the cache off: every resolution converts its context), each holding at most
    /// `max_entry_bytes` (its copy of the OpenFeature context and the flagsync context,
    /// estimated from their strings and structures; a larger context is converted on
    /// every call). Defaults: [`DEFAULT_CONTEXT_CACHE_ENTRIES`],
    /// [`DEFAULT_CONTEXT_CACHE_ENTRY_BYTES`].
    ///
    /// Two OpenFeature contexts share an entry only if equal: the same targeting key and
    /// the same fields, a structure field being the same structure (the same `Arc`).
    /// A context is stored the second time it is seen, so contexts used once cost the
    /// cache only their hash.
    #[must_use]
    pub fn with_context_cache(mut self, entries: usize, max_entry_bytes: usize) -> Self {
        self.contexts = Arc::new(cache::ContextCache::new(entries, max_entry_bytes));
        self
    }

    /// How long `initialize` waits for the client's data (default
    /// [`DEFAULT_INIT_TIMEOUT`]). After that the provider's status is `ERROR` until the
    /// data arrives. Zero does not wait at all: the status stays `NOT_READY` until the
    /// data arrives (as LaunchDarkly's .NET provider with a zero start wait time).
    #[must_use]
    pub fn with_init_timeout(mut self, timeout: Duration) -> Self {
        self.init_timeout = timeout;
        self
    }

    /// Also put LaunchDarkly's reason in each resolution's flag metadata, under the keys
    /// of [`resolve::metadata_keys`] (off by default: LaunchDarkly's providers add no
    /// flag metadata).
    #[must_use]
    pub fn with_reason_metadata(mut self, on: bool) -> Self {
        self.reason_metadata = on;
        self
    }

    /// The flagsync client, for what OpenFeature does not cover.
    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    /// The provider's events: `READY`, `ERROR`, `STALE` from the client's data-source
    /// status, and `CONFIGURATION_CHANGED` for each changed flag (from
    /// [`Client::flag_changes`]). OpenFeature's Rust SDK 0.3 has no provider events, so
    /// they are read here.
    pub fn events(&self) -> ProviderEvents {
        ProviderEvents::new(&self.client)
    }

    /// OpenFeature's tracking (`track(eventName, context, details)`), which the Rust SDK
    /// 0.3 does not have: a LaunchDarkly custom event `event_name` for `context`, with
    /// `value` as the metric value and `data` (the details' other fields) as its data, as
    /// LaunchDarkly's providers send it. Fails only for a context that makes no
    /// LaunchDarkly context.
    pub fn track(
        &self,
        event_name: &str,
        context: &EvaluationContext,
        value: Option<f64>,
        data: Option<&StructValue>,
    ) -> EvaluationResult<()> {
        let data = data
            .filter(|d| !d.fields.is_empty())
            .map(|d| {
                serde_json::to_value(context::value_to_attribute(&open_feature::Value::Struct(
                    d.clone(),
                )))
            })
            .transpose()
            .ok()
            .flatten();
        self.with_context(context, |context| {
            self.client.track(event_name, context, data, value)
        })
    }

    /// Flush the client's events and close it (OpenFeature's `shutdown`, which the Rust
    /// SDK 0.3 does not call on providers).
    pub async fn close(&self) {
        self.client.flush();
        self.client.close().await;
    }

    /// Run `with` on the flagsync context for `context` (cached, or converted).
    fn with_context<R>(
        &self,
        context: &EvaluationContext,
        with: impl FnOnce(&Context) -> R,
    ) -> EvaluationResult<R> {
        self.contexts.with_context(context, to_context, with)
    }
}

#[async_trait]
impl FeatureProvider for FlagsyncProvider {
    /// Start the client and wait up to the init timeout for its data: `READY` after,
    /// `ERROR` if it did not come (the client keeps trying; the status turns `READY` when
    /// the data comes).
    async fn initialize(&mut self, _context: &EvaluationContext) {
        if let Err(e) = self.client.start() {
            tracing::error!("The flagsync client could not start: {e}");
            self.init_failed.store(true, Ordering::Relaxed);
            return;
        }
        if self.init_timeout.is_zero() {
            return;
        }
        if !self.client.wait_for_initialization(self.init_timeout).await {
            tracing::error!(
                "The flagsync client did not initialize within {:?}.",
                self.init_timeout
            );
            self.init_failed.store(true, Ordering::Relaxed);
        }
    }

    /// From the client's data-source status: `VALID` is `READY`, `INTERRUPTED` is
    /// `STALE`, `OFF` (closed, or a permanent error) is `ERROR`; `INITIALIZING` is
    /// `NOT_READY`, or `ERROR` once `initialize` gave up waiting; a client with data
    /// (e.g. from a persistent store) is `READY`.
    fn status(&self) -> ProviderStatus {
        events::status_of(&self.client, self.init_failed.load(Ordering::Relaxed))
    }

    fn metadata(&self) -> &ProviderMetadata {
        &self.metadata
    }

    async fn resolve_bool_value(
        &self,
        flag_key: &str,
        evaluation_context: &EvaluationContext,
    ) -> EvaluationResult<ResolutionDetails<bool>> {
        let detail = self.with_context(evaluation_context, |context| {
            self.client.bool_variation_detail(flag_key, context, false)
        })?;
        resolve::resolution(detail, self.reason_metadata)
    }

    /// LaunchDarkly's integer rule: a number flag's value truncated toward zero (within
    /// ±(2^53 − 1)), as `intVariationDetail` in LaunchDarkly's SDKs.
    async fn resolve_int_value(
        &self,
        flag_key: &str,
        evaluation_context: &EvaluationContext,
    ) -> EvaluationResult<ResolutionDetails<i64>> {
        let detail = self.with_context(evaluation_context, |context| {
            self.client.int_variation_detail(flag_key, context, 0)
        })?;
        resolve::resolution(detail, self.reason_metadata)
    }

    async fn resolve_float_value(
        &self,
        flag_key: &str,
        evaluation_context: &EvaluationContext,
    ) -> EvaluationResult<ResolutionDetails<f64>> {
        let detail = self.with_context(evaluation_context, |context| {
            self.client.float_variation_detail(flag_key, context, 0.0)
        })?;
        resolve::resolution(detail, self.reason_metadata)
    }

    async fn resolve_string_value(
        &self,
        flag_key: &str,
        evaluation_context: &EvaluationContext,
    ) -> EvaluationResult<ResolutionDetails<String>> {
        let detail = self.with_context(evaluation_context, |context| {
            self.client.string_variation_detail(flag_key, context, "")
        })?;
        resolve::resolution(detail, self.reason_metadata)
    }

    /// A JSON object flag as a structure (integers as `Int`, other numbers as `Float`,
    /// `null` fields left out); any other JSON value is `TYPE_MISMATCH`.
    async fn resolve_struct_value(
        &self,
        flag_key: &str,
        evaluation_context: &EvaluationContext,
    ) -> EvaluationResult<ResolutionDetails<StructValue>> {
        let detail = self.with_context(evaluation_context, |context| {
            self.client
                .json_variation_detail(flag_key, context, serde_json::Value::Null)
        })?;
        resolve::resolution(resolve::struct_detail(detail), self.reason_metadata)
    }
}

/// An OpenFeature value as a flagsync attribute value (integers and floats become
/// numbers).
pub fn value_to_attribute(value: &open_feature::Value) -> AttributeValue {
    context::value_to_attribute(value)
}

/// The README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
