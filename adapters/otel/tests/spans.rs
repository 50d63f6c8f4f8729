//! The tracing hook on a real client (flags from the local flag server), its events and
//! spans read back from OpenTelemetry's in-memory exporter.

use std::sync::Arc;
use std::time::Duration;

use flagsync::eval::{Context as LdContext, ContextBuilder, MultiContextBuilder};
use flagsync::hooks::Hook;
use flagsync_otel::TracingHook;
use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::{SpanId, TraceContextExt, Tracer, TracerProvider as _};
use opentelemetry::{Context, Key, KeyValue, Value as OtelValue};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;

/// Flags: `f` serves `true` to alice (a target) and `false` otherwise; `exp` puts
/// everyone in an experiment (a tracked fallthrough rollout).
fn data() -> serde_json::Value {
    json!({"flags": {
        "f": {"key": "f", "version": 1, "on": true, "salt": "s", "variations": [false, true],
              "fallthrough": {"variation": 0}, "offVariation": 0,
              "targets": [{"values": ["alice"], "variation": 1}], "rules": [], "prerequisites": []},
        "exp": {"key": "exp", "version": 1, "on": true, "salt": "s", "variations": ["a", "b"],
                "fallthrough": {"rollout": {"kind": "experiment", "seed": 7,
                    "variations": [{"variation": 0, "weight": 100000}, {"variation": 1, "weight": 0}]}},
                "offVariation": 0, "targets": [], "rules": [], "prerequisites": [],
                "trackEvents": false}
    }})
}

struct Setup {
    exporter: InMemorySpanExporter,
    provider: SdkTracerProvider,
    server: flagsync::server::ServerHandle,
    rt: tokio::runtime::Runtime,
}

fn setup() -> Setup {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let server = flagsync::server::Server::builder()
        .data(data())
        .env_id(Some("env-9".into()))
        .start()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    Setup {
        exporter,
        provider,
        server,
        rt,
    }
}

/// A started client with `hook`, initialized.
fn client(s: &Setup, hook: TracingHook) -> flagsync::Client {
    let client = flagsync::Client::builder("sdk-key")
        .stream_uri(s.server.url())
        .polling_uri(s.server.url())
        .send_events(false)
        .no_proxy()
        .hooks([Arc::new(hook) as Arc<dyn Hook>])
        .build()
        .unwrap();
    s.rt.block_on(async {
        client.start().unwrap();
        assert!(client.wait_for_initialization(Duration::from_secs(5)).await);
    });
    client
}

fn tracer(s: &Setup) -> BoxedTracer {
    BoxedTracer::new(Box::new(s.provider.tracer("test")))
}

fn attr<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a OtelValue> {
    attributes
        .iter()
        .find(|kv| kv.key == Key::from(key.to_owned()))
        .map(|kv| &kv.value)
}

/// Run `body` inside an active span named `request`, and return every finished span.
fn in_request(s: &Setup, body: impl FnOnce()) -> Vec<SpanData> {
    let span = s.provider.tracer("test").start("request");
    let cx = Context::current_with_span(span);
    {
        let _active = cx.clone().attach();
        body();
    }
    cx.span().end();
    s.provider.force_flush().unwrap();
    s.exporter.get_finished_spans().unwrap()
}

fn alice() -> LdContext {
    ContextBuilder::new("alice").build().unwrap()
}

#[test]
fn each_evaluation_adds_an_event_to_the_active_span() {
    let s = setup();
    let client = client(&s, TracingHook::new());
    let spans = in_request(&s, || {
        assert!(client.bool_variation("f", &alice(), false));
        let org = ContextBuilder::new("acme").kind("org").build().unwrap();
        let multi = MultiContextBuilder::new()
            .add_context(org)
            .add_context(ContextBuilder::new("bob").build().unwrap())
            .build()
            .unwrap();
        assert!(!client.bool_variation("f", &multi, true));
        assert!(!client.bool_variation("missing", &alice(), false));
    });
    assert_eq!(spans.len(), 1, "no span of its own by default");
    let request = &spans[0];
    assert_eq!(request.name, "request");
    let events: Vec<_> = request.events.iter().collect();
    assert_eq!(events.len(), 3);
    for e in &events {
        assert_eq!(e.name, "feature_flag.evaluation");
        assert_eq!(
            attr(&e.attributes, "feature_flag.provider.name"),
            Some(&OtelValue::from("LaunchDarkly"))
        );
        assert_eq!(
            attr(&e.attributes, "feature_flag.set.id"),
            Some(&OtelValue::from("env-9")),
            "the environment id the service reported"
        );
        assert!(
            attr(&e.attributes, "feature_flag.result.value").is_none(),
            "opt-in"
        );
        assert!(attr(&e.attributes, "feature_flag.result.reason.inExperiment").is_none());
    }
    let a = &events[0].attributes;
    assert_eq!(attr(a, "feature_flag.key"), Some(&OtelValue::from("f")));
    assert_eq!(
        attr(a, "feature_flag.context.id"),
        Some(&OtelValue::from("alice"))
    );
    assert_eq!(
        attr(a, "feature_flag.result.variant"),
        Some(&OtelValue::from("1"))
    );
    assert_eq!(
        attr(a, "feature_flag.result.variationIndex"),
        Some(&OtelValue::I64(1))
    );
    assert_eq!(
        attr(&events[1].attributes, "feature_flag.context.id"),
        Some(&OtelValue::from("org:acme:user:bob"))
    );
    let missing = &events[2].attributes;
    assert_eq!(
        attr(missing, "feature_flag.key"),
        Some(&OtelValue::from("missing"))
    );
    assert!(attr(missing, "feature_flag.result.variant").is_none());
    assert!(attr(missing, "feature_flag.result.variationIndex").is_none());
    s.rt.block_on(client.close());
}

#[test]
fn values_experiments_and_a_configured_environment_id() {
    let s = setup();
    let hook = TracingHook::builder()
        .include_value(true)
        .environment_id("configured-env")
        .legacy_event_name(true)
        .build();
    let client = client(&s, hook);
    let spans = in_request(&s, || {
        assert_eq!(client.string_variation("exp", &alice(), "x"), "a");
        client.json_variation("f", &alice(), json!(null));
    });
    let events = &spans[0].events.events;
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].name, "feature_flag");
    let e = &events[0].attributes;
    assert_eq!(
        attr(e, "feature_flag.result.value"),
        Some(&OtelValue::from("\"a\""))
    );
    assert_eq!(
        attr(e, "feature_flag.result.reason.inExperiment"),
        Some(&OtelValue::Bool(true))
    );
    assert_eq!(
        attr(e, "feature_flag.set.id"),
        Some(&OtelValue::from("configured-env"))
    );
    assert_eq!(
        attr(&events[1].attributes, "feature_flag.result.value"),
        Some(&OtelValue::from("true"))
    );
    s.rt.block_on(client.close());
}

#[test]
fn spans_per_evaluation_end_before_the_event_on_the_callers_span() {
    let s = setup();
    let hook = TracingHook::builder()
        .spans(true)
        .tracer(tracer(&s))
        .build();
    let client = client(&s, hook);
    let spans = in_request(&s, || {
        client.bool_variation_detail("f", &alice(), false);
        client.string_variation("exp", &alice(), "x");
    });
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "LDClient.boolVariationDetail",
            "LDClient.stringVariation",
            "request"
        ]
    );
    let request = &spans[2];
    for child in &spans[..2] {
        assert_eq!(child.parent_span_id, request.span_context.span_id());
        assert_eq!(
            child.span_context.trace_id(),
            request.span_context.trace_id()
        );
        assert!(
            child.events.is_empty(),
            "the event goes to the caller's span"
        );
        assert!(attr(&child.attributes, "feature_flag.key").is_some());
        assert_eq!(
            attr(&child.attributes, "feature_flag.context.key"),
            Some(&OtelValue::from("alice"))
        );
    }
    assert_eq!(request.events.len(), 2);
    s.rt.block_on(client.close());
}

#[test]
fn without_an_active_span_nothing_is_recorded() {
    let s = setup();
    let client = client(&s, TracingHook::new());
    assert!(!Context::current().has_active_span());
    assert!(client.bool_variation("f", &alice(), false));
    s.provider.force_flush().unwrap();
    assert!(s.exporter.get_finished_spans().unwrap().is_empty());
    // With spans on and no parent, the evaluation's span is a root of its own.
    let hook = TracingHook::builder()
        .spans(true)
        .tracer(tracer(&s))
        .build();
    let client2 = self::client(&s, hook);
    client2.bool_variation("f", &alice(), false);
    s.provider.force_flush().unwrap();
    let spans = s.exporter.get_finished_spans().unwrap();
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].parent_span_id, SpanId::INVALID);
    assert!(spans[0].events.is_empty());
    s.rt.block_on(client.close());
    s.rt.block_on(client2.close());
}
