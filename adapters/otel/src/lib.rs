//! An OpenTelemetry tracing hook for [flagsync](flagsync): every flag evaluation adds a
//! `feature_flag.evaluation` event to the active span, and optionally runs in a span of
//! its own, as LaunchDarkly's OpenTelemetry integrations do (its open SDK
//! specification, OTEL 1.2) with the current OpenTelemetry semantic conventions for
//! feature flags.
//!
//! ```no_run
//! use std::sync::Arc;
//! use flagsync::hooks::Hook;
//! use flagsync_otel::TracingHook;
//!
//! let hook = TracingHook::builder().include_value(true).spans(true).build();
//! let client = flagsync::Client::builder("sdk-key")
//!     .hooks([Arc::new(hook) as Arc<dyn Hook>])
//!     .build()?;
//! # Ok::<(), flagsync::Error>(())
//! ```
//!
//! # The event
//! Added in the `after_evaluation` stage to the span active on the evaluating thread
//! (`opentelemetry::Context::current()`); with no active span nothing is added and
//! nothing is allocated.
//!
//! | attribute | value |
//! | --- | --- |
//! | `feature_flag.key` | the flag's key |
//! | `feature_flag.provider.name` | `LaunchDarkly` (the protocol's name, as LaunchDarkly's hooks write it, so dashboards built for them work) |
//! | `feature_flag.context.id` | the context's canonical key (`user-key`, `org:acme`, `org:acme:user:bob`) |
//! | `feature_flag.result.variant` | the variation index, as a string (the OpenFeature convention); absent without one |
//! | `feature_flag.result.variationIndex` | the variation index, as a number (LaunchDarkly's); absent without one |
//! | `feature_flag.result.reason.inExperiment` | `true` when the result is part of an experiment; absent otherwise |
//! | `feature_flag.result.value` | the value as JSON text, only with [`TracingHookBuilder::include_value`] |
//! | `feature_flag.set.id` | the environment id: the one configured ([`TracingHookBuilder::environment_id`]), else the one the flag service reported |
//!
//! [`TracingHookBuilder::legacy_event_name`] names the event `feature_flag`, as
//! LaunchDarkly's hooks before the semantic conventions' `feature_flag.evaluation` did.
//!
//! # Spans
//! With [`TracingHookBuilder::spans`], `before_evaluation` starts a span under the active
//! context, named as LaunchDarkly's hooks name it (`LDClient.boolVariation`,
//! `LDClient.stringVariationDetail`, `LDClient.migrationVariation`, …) with the
//! `feature_flag.key` and `feature_flag.context.key` attributes; `after_evaluation` ends it
//! before adding the event, so the event lands on the caller's span. The span is not made
//! the active one: OpenTelemetry's context guards belong to one stack frame, and the two
//! stages are two calls.
//!
//! # Tracers
//! Spans come from the global tracer provider (`opentelemetry::global`, scope
//! `flagsync`) unless [`TracingHookBuilder::tracer`] gives one. The event needs no tracer.
//! The hook is built on the `opentelemetry` crate 0.33: the application's OpenTelemetry
//! SDK must use the same major version for the active span to be seen.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![warn(unreachable_pub, clippy::use_self, elided_lifetimes_in_paths)]

mod hook;

pub use hook::{TracingHook, TracingHookBuilder};

/// The README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
