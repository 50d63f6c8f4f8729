//! Stages, the op tracker, the event JSON and the migrator (without a runtime: the
//! origins here are ready or pending futures, driven by `futures_lite::future`).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use crate::eval::engine::Flag;
use crate::eval::{Context, ContextBuilder, Detail, EvalError, Reason};
use futures_lite::future::{self, block_on};
use serde_json::{Value, json};

use super::*;
use crate::Client;

fn context() -> Context {
    ContextBuilder::new("user-1").build().unwrap()
}

fn flag(extra: Value) -> Arc<Flag> {
    let mut f = json!({"key": "mig", "version": 7, "on": true, "salt": "s", "targets": [],
        "rules": [], "prerequisites": [], "fallthrough": {"variation": 3}, "offVariation": 0,
        "variations": ["off", "dualwrite", "shadow", "live", "rampdown", "complete"]});
    for (k, v) in extra.as_object().unwrap() {
        f[k] = v.clone();
    }
    Arc::new(Flag::from_json(f.to_string().as_bytes(), "mig").unwrap())
}

fn tracker(flag: Option<Arc<Flag>>) -> OpTracker {
    let detail = Detail {
        value: Some(Stage::Live),
        variation_index: Some(3),
        reason: Reason::Fallthrough {
            in_experiment: false,
            big_segments_status: None,
        },
    };
    OpTracker::new("mig", flag, context(), detail, Stage::Off)
}

#[test]
fn stage_names_round_trip() {
    for stage in Stage::ALL {
        assert_eq!(stage.as_str().parse::<Stage>(), Ok(stage));
    }
    assert_eq!("Live".parse::<Stage>(), Err(UnknownStage));
    assert_eq!(Stage::DualWrite.to_string(), "dualwrite");
    for stage in Stage::ALL {
        let value = crate::eval::FlagValue::from(stage);
        assert_eq!(value, crate::eval::FlagValue::Str(stage.as_str().into()));
        assert_eq!(Stage::try_from(value), Ok(stage));
    }
    assert_eq!(
        Stage::try_from(crate::eval::FlagValue::Bool(true)),
        Err(UnknownStage)
    );
    assert_eq!(
        Stage::try_from(crate::eval::FlagValue::Str("Live".into())),
        Err(UnknownStage)
    );
}

/// PROTOCOL.md B §6.1, row by row.
#[test]
fn read_and_write_origins_per_stage() {
    use Origin::{New, Old};
    let table = [
        (Stage::Off, (Old, None), (Old, None)),
        (Stage::DualWrite, (Old, None), (Old, Some(New))),
        (Stage::Shadow, (Old, Some(New)), (Old, Some(New))),
        (Stage::Live, (New, Some(Old)), (New, Some(Old))),
        (Stage::Rampdown, (New, None), (New, Some(Old))),
        (Stage::Complete, (New, None), (New, None)),
    ];
    for (stage, read, write) in table {
        assert_eq!(stage.read_origins(), read, "{stage} read");
        assert_eq!(stage.write_origins(), write, "{stage} write");
        assert_eq!(stage.authoritative(), read.0);
    }
}

#[test]
fn tracker_build_checks_run_in_order() {
    let mut t = tracker(None);
    assert_eq!(t.build().unwrap_err(), TrackerError::NoOperation);
    t.operation(Operation::Read);
    assert_eq!(t.build().unwrap_err(), TrackerError::NothingInvoked);
    t.latency(Origin::New, Duration::from_millis(1));
    t.error(Origin::New);
    t.invoked(Origin::Old);
    assert_eq!(
        t.build().unwrap_err(),
        TrackerError::LatencyWithoutInvocation(Origin::New)
    );
    let mut t2 = tracker(None);
    t2.operation(Operation::Write);
    t2.invoked(Origin::Old);
    t2.error(Origin::New);
    assert_eq!(
        t2.build().unwrap_err(),
        TrackerError::ErrorWithoutInvocation(Origin::New)
    );
    let mut t3 = tracker(None);
    t3.operation(Operation::Read);
    t3.invoked(Origin::Old);
    assert!(t3.consistent(|| true));
    assert_eq!(
        t3.build().unwrap_err(),
        TrackerError::ConsistencyWithoutBothInvocations
    );
    t3.invoked(Origin::New);
    assert!(t3.build().is_ok());
    let mut empty = OpTracker::new(
        "",
        None,
        context(),
        tracker(None).detail().clone(),
        Stage::Off,
    );
    empty.operation(Operation::Read);
    assert_eq!(empty.build().unwrap_err(), TrackerError::EmptyKey);
}

/// The reference SDK's messages (PROTOCOL.md B §6.5, §6.7), which users may match on.
#[test]
fn error_messages_are_the_references() {
    let cases: [(&dyn std::fmt::Display, &str); 8] = [
        (&TrackerError::NoOperation, "operation not provided"),
        (
            &TrackerError::EmptyKey,
            "migration operation cannot contain an empty key",
        ),
        (&TrackerError::NothingInvoked, "no origins were invoked"),
        (
            &TrackerError::LatencyWithoutInvocation(Origin::Old),
            "provided latency for origin 'old' without recording invocation",
        ),
        (
            &TrackerError::ErrorWithoutInvocation(Origin::New),
            "provided error for origin 'new' without recording invocation",
        ),
        (
            &TrackerError::ConsistencyWithoutBothInvocations,
            "provided consistency without recording both invocations",
        ),
        (&BuildError::NoReadConfig, "read configuration not provided"),
        (
            &BuildError::NoWriteConfig,
            "write configuration not provided",
        ),
    ];
    for (error, message) in cases {
        assert_eq!(error.to_string(), message);
    }
}

#[test]
fn event_json_with_every_measurement() {
    let f = flag(json!({"samplingRatio": 10, "migration": {"checkRatio": 1}}));
    let mut t = tracker(Some(f));
    t.operation(Operation::Read);
    t.invoked(Origin::Old);
    t.invoked(Origin::New);
    t.latency(Origin::Old, Duration::from_micros(12_500));
    t.latency(Origin::New, Duration::from_millis(3));
    t.error(Origin::New);
    assert!(t.consistent(|| false));
    let event = t
        .build_at(UNIX_EPOCH + Duration::from_millis(1_700_000_000_123))
        .unwrap();
    let got: Value = serde_json::from_str(&event.to_json()).unwrap();
    assert_eq!(
        got,
        json!({
            "kind": "migration_op",
            "creationDate": 1_700_000_000_123_u64,
            "operation": "read",
            "context": {"kind": "user", "key": "user-1"},
            "evaluation": {"key": "mig", "value": "live", "version": 7, "default": "off",
                           "variation": 3, "reason": {"kind": "FALLTHROUGH"}},
            "samplingRatio": 10,
            "measurements": [
                {"key": "invoked", "values": {"old": true, "new": true}},
                {"key": "consistent", "value": false},
                {"key": "latency_ms", "values": {"old": 12.5, "new": 3.0}},
                {"key": "error", "values": {"new": true}},
            ]
        })
    );
}

/// The measurements in the order of PROTOCOL.md B §6.6 and Python's event output
/// (ldclient/impl/events/event_processor_common.py): invoked, consistent, latency_ms,
/// error; `measurements` is the last member of the event.
#[test]
fn event_json_measurements_are_in_the_reference_order() {
    let f = flag(json!({"migration": {"checkRatio": 4}}));
    let mut t = tracker(Some(f));
    t.operation(Operation::Read);
    t.invoked(Origin::Old);
    t.invoked(Origin::New);
    t.error(Origin::Old);
    t.latency(Origin::New, Duration::from_micros(2_250));
    t.latency(Origin::Old, Duration::from_millis(4));
    // A check ratio of 4 samples one call in four: call until one does.
    while !t.consistent(|| true) {}
    let json = t.build_at(UNIX_EPOCH).unwrap().to_json();
    let want = concat!(
        r#","measurements":["#,
        r#"{"key":"invoked","values":{"old":true,"new":true}},"#,
        r#"{"key":"consistent","value":true,"samplingRatio":4},"#,
        r#"{"key":"latency_ms","values":{"old":4.0,"new":2.25}},"#,
        r#"{"key":"error","values":{"old":true}}"#,
        "]}"
    );
    assert!(json.ends_with(want), "{json}");
}

#[test]
fn event_json_minimal_and_without_a_flag() {
    let mut t = tracker(None);
    t.operation(Operation::Write);
    t.invoked(Origin::Old);
    let got: Value = serde_json::from_str(&t.build_at(UNIX_EPOCH).unwrap().to_json()).unwrap();
    assert_eq!(
        got,
        json!({
            "kind": "migration_op", "creationDate": 0, "operation": "write",
            "context": {"kind": "user", "key": "user-1"},
            "evaluation": {"key": "mig", "value": "live", "default": "off", "variation": 3,
                           "reason": {"kind": "FALLTHROUGH"}},
            "measurements": [{"key": "invoked", "values": {"old": true}}]
        })
    );
}

#[test]
fn anonymous_contexts_are_redacted_in_events() {
    let mut b = ContextBuilder::new("anon-1");
    b.anonymous(true)
        .name("Ann")
        .set_string("email", "a@example.com");
    let detail = Detail {
        value: Some(Stage::Off),
        variation_index: None,
        reason: Reason::error(EvalError::FlagNotFound),
    };
    let mut t = OpTracker::new("mig", None, b.build().unwrap(), detail, Stage::Off);
    t.operation(Operation::Read);
    t.invoked(Origin::Old);
    let got: Value = serde_json::from_str(&t.build().unwrap().to_json()).unwrap();
    let ctx = &got["context"];
    assert_eq!(ctx["key"], "anon-1");
    assert!(
        ctx.get("email").is_none() && ctx.get("name").is_none(),
        "{ctx}"
    );
    assert_eq!(
        ctx["_meta"]["redactedAttributes"].as_array().unwrap().len(),
        2
    );
    assert_eq!(
        got["evaluation"]["reason"],
        json!({"kind": "ERROR", "errorKind": "FLAG_NOT_FOUND"})
    );
    assert!(got["evaluation"].get("variation").is_none());
}

#[test]
fn consistency_checks_are_sampled_by_check_ratio() {
    let f = flag(json!({"migration": {"checkRatio": 4}}));
    let mut rng = fastrand::Rng::with_seed(3);
    let mut ran = 0;
    for _ in 0..4000 {
        let mut t = tracker(Some(f.clone())).with_rng(rng.fork());
        assert_eq!(t.check_ratio(), 4);
        let mut called = false;
        let sampled = t.consistent(|| {
            called = true;
            true
        });
        assert_eq!(called, sampled);
        ran += usize::from(sampled);
    }
    assert!((850..1150).contains(&ran), "{ran} of 4000 at ratio 4");
    let never = flag(json!({"migration": {"checkRatio": 0}}));
    let mut t = tracker(Some(never));
    assert!(!t.consistent(|| panic!("not sampled")));
    // No flag: ratio 1, always.
    assert!(tracker(None).consistent(|| true));
}

// ---- the migrator ------------------------------------------------------------------

type Calls = Arc<Mutex<Vec<(Operation, Origin)>>>;

/// A migrator over a client without data: every operation uses the default stage.
fn migrator(
    calls: &Calls,
    sink: &Arc<MemorySink>,
    fail: Option<Origin>,
) -> MigratorBuilder<u32, String, String> {
    let origin = |op: Operation, origin: Origin| {
        let calls = calls.clone();
        move |p: u32| {
            calls.lock().unwrap().push((op, origin));
            let r = if fail == Some(origin) {
                Err(format!("{origin} failed"))
            } else {
                Ok(format!("{op} {p} on {origin}"))
            };
            future::ready(r)
        }
    };
    let client = Client::builder("sdk-key").build().unwrap();
    Migrator::builder(client)
        .read_with_comparison(
            origin(Operation::Read, Origin::Old),
            origin(Operation::Read, Origin::New),
            |a: &String, b: &String| a.len() == b.len(),
        )
        .write(
            origin(Operation::Write, Origin::Old),
            origin(Operation::Write, Origin::New),
        )
        .event_sink(sink.clone())
        .read_execution_order(ExecutionOrder::Serial)
        .rng(fastrand::Rng::with_seed(1))
}

#[test]
fn migrator_builder_requires_read_and_write() {
    let client = Client::builder("sdk-key").build().unwrap();
    let none = Migrator::<u32, u32, ()>::builder(client.clone()).build();
    assert_eq!(none.unwrap_err(), BuildError::NoReadConfig);
    let read_only = Migrator::builder(client)
        .read(
            |p: u32| future::ready(Ok::<_, ()>(p)),
            |p| future::ready(Ok(p)),
        )
        .build();
    assert_eq!(read_only.unwrap_err(), BuildError::NoWriteConfig);
}

/// Which origins each stage invokes (the reference's `TestTrackingInvoked`), in order,
/// and what the events say.
#[test]
fn migrator_invokes_the_origins_of_each_stage() {
    use Origin::{New, Old};
    let table = [
        (Stage::Off, vec![Old], vec![Old]),
        (Stage::DualWrite, vec![Old], vec![Old, New]),
        (Stage::Shadow, vec![Old, New], vec![Old, New]),
        (Stage::Live, vec![New, Old], vec![New, Old]),
        (Stage::Rampdown, vec![New], vec![New, Old]),
        (Stage::Complete, vec![New], vec![New]),
    ];
    for (stage, reads, writes) in table {
        let calls = Calls::default();
        let sink = Arc::new(MemorySink::new());
        let m = migrator(&calls, &sink, None).build().unwrap();
        let read = block_on(m.read("mig", &context(), stage, 5));
        assert_eq!(read.origin, stage.authoritative());
        assert_eq!(
            read.result,
            Ok(format!("read 5 on {}", stage.authoritative()))
        );
        let write = block_on(m.write("mig", &context(), stage, 6));
        assert_eq!(write.authoritative.origin, writes[0]);
        assert_eq!(
            write.nonauthoritative.map(|r| r.origin),
            writes.get(1).copied()
        );
        let expected: Vec<_> = reads
            .iter()
            .map(|&o| (Operation::Read, o))
            .chain(writes.iter().map(|&o| (Operation::Write, o)))
            .collect();
        assert_eq!(*calls.lock().unwrap(), expected, "{stage}");
        let events = sink.take();
        assert_eq!(events.len(), 2);
        for (event, origins) in events.iter().zip([&reads, &writes]) {
            assert_eq!(event.value, stage);
            assert_eq!(event.reason, Reason::error(EvalError::ClientNotReady));
            for origin in [Old, New] {
                assert_eq!(*event.invoked.get(origin), origins.contains(&origin));
                assert_eq!(
                    event.latencies.get(origin).is_some(),
                    origins.contains(&origin)
                );
            }
            assert_eq!(event.errors, PerOrigin::default());
        }
        // Consistency is checked for two successful reads only.
        assert_eq!(events[0].consistent, (reads.len() == 2).then_some(true));
        assert_eq!(events[1].consistent, None);
    }
}

#[test]
fn a_failed_authoritative_write_skips_the_other() {
    let calls = Calls::default();
    let sink = Arc::new(MemorySink::new());
    let m = migrator(&calls, &sink, Some(Origin::New)).build().unwrap();
    let write = block_on(m.write("mig", &context(), Stage::Live, 1));
    assert_eq!(write.authoritative.result, Err("new failed".into()));
    assert!(write.nonauthoritative.is_none());
    assert_eq!(*calls.lock().unwrap(), [(Operation::Write, Origin::New)]);
    let event = &sink.take()[0];
    assert_eq!((event.invoked.new, event.invoked.old), (true, false));
    assert_eq!((event.errors.new, event.errors.old), (true, false));
    // A failed non-authoritative write is reported, and returned.
    let m = migrator(&calls, &sink, Some(Origin::Old)).build().unwrap();
    let write = block_on(m.write("mig", &context(), Stage::Live, 1));
    assert_eq!(
        write.nonauthoritative.unwrap().result,
        Err("old failed".into())
    );
    assert!(sink.take()[0].errors.old);
}

#[test]
fn a_failed_read_is_not_compared_and_tracking_can_be_off() {
    let calls = Calls::default();
    let sink = Arc::new(MemorySink::new());
    let m = migrator(&calls, &sink, Some(Origin::New))
        .track_latency(false)
        .track_errors(false)
        .build()
        .unwrap();
    let read = block_on(m.read("mig", &context(), Stage::Shadow, 1));
    assert_eq!(read.result, Ok("read 1 on old".into()));
    let event = &sink.take()[0];
    assert_eq!(event.consistent, None);
    assert_eq!(event.errors, PerOrigin::default());
    assert_eq!(event.latencies, PerOrigin::default());
    assert_eq!(
        event.invoked,
        PerOrigin {
            old: true,
            new: true
        }
    );
}

#[test]
fn random_order_runs_either_read_first() {
    let calls = Calls::default();
    let sink = Arc::new(MemorySink::new());
    let m = migrator(&calls, &sink, None)
        .read_execution_order(ExecutionOrder::Random)
        .build()
        .unwrap();
    let mut other_first = 0;
    for _ in 0..200 {
        calls.lock().unwrap().clear();
        let read = block_on(m.read("mig", &context(), Stage::Live, 1));
        assert_eq!(read.origin, Origin::New);
        if calls.lock().unwrap()[0].1 == Origin::Old {
            other_first += 1;
        }
    }
    assert!((70..130).contains(&other_first), "{other_first} of 200");
}

/// Poll `fut` once, then drop it.
fn poll_once_then_drop<F: Future>(fut: F) {
    let mut fut = std::pin::pin!(fut);
    assert!(
        block_on(future::poll_once(&mut fut)).is_none(),
        "still pending"
    );
}

#[test]
fn a_cancelled_write_still_reports_what_ran() {
    let sink = Arc::new(MemorySink::new());
    let client = Client::builder("sdk-key").build().unwrap();
    let m = Migrator::builder(client)
        .read(
            |_: u8| future::ready(Ok::<u8, ()>(0)),
            |_| future::ready(Ok(0)),
        )
        .write(
            |_: u8| future::ready(Ok::<u8, ()>(1)),
            |_| future::pending::<Result<u8, ()>>(),
        )
        .event_sink(sink.clone())
        .build()
        .unwrap();
    // Cancelled during the second write: the first one is reported.
    poll_once_then_drop(m.write("mig", &context(), Stage::DualWrite, 0));
    let events = sink.take();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].operation, Operation::Write);
    assert_eq!(
        events[0].invoked,
        PerOrigin {
            old: true,
            new: false
        }
    );
    assert!(events[0].latencies.old.is_some());
    // Cancelled during the only (authoritative) write: nothing finished, nothing to report.
    poll_once_then_drop(m.write("mig", &context(), Stage::Complete, 0));
    assert!(sink.is_empty());
    // A cancelled read reports nothing.
    let m = Migrator::builder(Client::builder("sdk-key").build().unwrap())
        .read(
            |_: u8| future::ready(Ok::<u8, ()>(0)),
            |_| future::pending(),
        )
        .write(
            |_: u8| future::ready(Ok::<u8, ()>(0)),
            |_| future::ready(Ok(0)),
        )
        .read_execution_order(ExecutionOrder::Serial)
        .event_sink(sink.clone())
        .build()
        .unwrap();
    poll_once_then_drop(m.read("mig", &context(), Stage::Shadow, 0));
    assert!(sink.is_empty());
}

#[test]
fn migration_variation_without_data_gives_the_default_stage() {
    let client = Client::builder("sdk-key").build().unwrap();
    let (stage, tracker) = client.migration_variation("mig", &context(), Stage::Rampdown);
    assert_eq!(stage, Stage::Rampdown);
    assert_eq!(
        tracker.detail().reason,
        Reason::error(EvalError::ClientNotReady)
    );
    assert_eq!(tracker.detail().variation_index, None);
    assert_eq!(tracker.check_ratio(), 1);
}

#[test]
fn migrator_futures_are_send() {
    fn is_send<T: Send>(_: &T) {}
    let calls = Calls::default();
    let sink = Arc::new(MemorySink::new());
    let m = migrator(&calls, &sink, None).build().unwrap();
    let ctx = context();
    is_send(&m.read("mig", &ctx, Stage::Off, 1));
    is_send(&m.write("mig", &ctx, Stage::Off, 1));
}
