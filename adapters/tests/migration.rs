//! The migrator on every runtime feature, with origins that sleep on the runtime's
//! timer: read execution order timing (PROTOCOL.md B §6.3) and a write cancelled by a
//! timeout (B §6.7). The migrator itself spawns nothing and uses no timer.
#![cfg(feature = "eval")]
#![cfg_attr(
    not(any(feature = "tokio", feature = "smol", feature = "async-std")),
    allow(dead_code, unused_imports)
)]

#[macro_use]
#[allow(unused_imports)] // the scripted server is not used here
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use flagsync::eval::ContextBuilder;
use flagsync::migration::{ExecutionOrder, MemorySink, Migrator, Origin, Stage};

const READ: Duration = Duration::from_millis(100);

runtime_tests!(
    parallel_reads_take_as_long_as_one,
    serial_reads_take_as_long_as_both,
    random_reads_take_as_long_as_both,
    a_write_cancelled_by_a_timeout_is_reported,
);

/// A migrator whose reads (and writes) sleep `READ` on `rt`; its client has no data, so
/// each operation runs at the stage it is given.
fn migrator(rt: &Rt, order: ExecutionOrder, sink: &Arc<MemorySink>) -> Migrator<u32, u32, ()> {
    let sleeping = |rt: &Rt, d: Duration| {
        let rt = rt.clone();
        move |p: u32| {
            let rt = rt.clone();
            async move {
                rt.sleep_until(Instant::now() + d).await;
                Ok(p)
            }
        }
    };
    let client = flagsync::Client::builder("sdk-key").build().unwrap();
    Migrator::builder(client)
        .read_with_comparison(sleeping(rt, READ), sleeping(rt, READ), |a, b| a == b)
        .write(sleeping(rt, 10 * READ), sleeping(rt, Duration::ZERO))
        .read_execution_order(order)
        .event_sink(sink.clone())
        .rng(fastrand::Rng::with_seed(9))
        .build()
        .unwrap()
}

/// Time a shadow read; check both origins ran and their latencies.
async fn timed_read(rt: &Rt, order: ExecutionOrder) -> Duration {
    let sink = Arc::new(MemorySink::new());
    let m = migrator(rt, order, &sink);
    let ctx = ContextBuilder::new("u").build().unwrap();
    let started = Instant::now();
    let read = m.read("mig", &ctx, Stage::Shadow, 3).await;
    let took = started.elapsed();
    assert_eq!((read.origin, read.result), (Origin::Old, Ok(3)));
    let event = &sink.take()[0];
    assert!(event.invoked.old && event.invoked.new);
    assert_eq!(event.consistent, Some(true));
    for (_, latency) in event.latencies.iter() {
        assert!(latency.unwrap() >= READ, "{latency:?}");
    }
    took
}

async fn parallel_reads_take_as_long_as_one(rt: Rt) {
    let took = timed_read(&rt, ExecutionOrder::Parallel).await;
    assert!(took >= READ && took < READ * 19 / 10, "{took:?}");
}

async fn serial_reads_take_as_long_as_both(rt: Rt) {
    let took = timed_read(&rt, ExecutionOrder::Serial).await;
    assert!(took >= 2 * READ, "{took:?}");
}

async fn random_reads_take_as_long_as_both(rt: Rt) {
    let took = timed_read(&rt, ExecutionOrder::Random).await;
    assert!(took >= 2 * READ, "{took:?}");
}

async fn a_write_cancelled_by_a_timeout_is_reported(rt: Rt) {
    let sink = Arc::new(MemorySink::new());
    let m = migrator(&rt, ExecutionOrder::Parallel, &sink);
    let ctx = ContextBuilder::new("u").build().unwrap();
    // `live` writes new (instant here) then old (1 s): cancelled after 200 ms.
    let outcome = timeout(&rt, 2 * READ, m.write("mig", &ctx, Stage::Live, 1)).await;
    assert!(outcome.is_none());
    let events = sink.take();
    assert_eq!(events.len(), 1);
    assert!(events[0].invoked.new && !events[0].invoked.old);
}
