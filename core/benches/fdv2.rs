//! FDv2 against FDv1 on the same data (BENCHMARKS.md, "FDv2 full transfer"), in one run:
//! - `transfer_to_ready`: the 50,000-flag payload from stream bytes to a ready store
//!   through the whole `DataSystem` under a virtual clock, in 16 KiB reads: FDv1
//!   (`Mode::Streaming`, one `put`) against FDv2 (`Fdv2Config::streaming()`,
//!   `server-intent` `xfer-full`, one `put-object` per flag and segment,
//!   `payload-transferred`);
//! - `events_to_store`: the same data below SSE: FDv1 `fdv1::parse_event` of the `put`
//!   then `Store::apply`, against `fdv2::parse_event` of each event, `Protocol` and
//!   `Store::apply`; event data are slices of one buffer, as the SSE parser hands
//!   them out;
//! - `poll_body`: the same events as an FDv2 polling body, parsed whole
//!   (`fdv2::parse_poll_or_fdv1_with`) against read as it arrives in 16 KiB pieces
//!   (`fdv2::PollReader`), alone and against a store holding the same data (a repeated
//!   poll: every object takes the stored buffer);
//! - `sse_only`: the SSE parser alone over each stream (every event dropped), to show
//!   how much of the difference is framing.
//!
//! Payloads come from `../shared/tools/gen_payload.py` (generated into
//! `target/payloads/` on first run). Run: `cargo bench -p flagsync-core --bench fdv2`.
//!
//! Two more modes of the same binary (`cargo bench -p flagsync-core --bench fdv2
//! --no-run` prints its path): `FDV2_BENCH_PAIRED=N` times FDv1 and FDv2 back to back
//! for N rounds, so that both see the same load on a noisy machine, and prints medians
//! and the median per-round ratio; `FDV2_BENCH_ONCE=MODE` (`system-fdv1`,
//! `system-fdv2`, `events-fdv1`, `events-fdv2`, `poll-whole`, `poll-reader`) does one
//! unit of work, for
//! `valgrind --tool=callgrind --toggle-collect='fdv2::to_ready'
//! --toggle-collect='fdv2::fdv1_events_to_store' --toggle-collect='fdv2::fdv2_events_to_store'`.

mod common;

use common::{payload, put_event};

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group};
use flagsync_core::config::Fdv2Config;
use flagsync_core::fdv2::{self, Action, Protocol};
use flagsync_core::sse::{self, Item};
use flagsync_core::store::{ChangeSet, Selector, Store};
use flagsync_core::{Action as IoAction, Command, Config, DataSystem, Input, Mode, Output};
use serde_json::value::RawValue;

#[derive(serde::Deserialize)]
struct AllData<'a> {
    #[serde(borrow)]
    flags: BTreeMap<String, &'a RawValue>,
    #[serde(borrow)]
    segments: BTreeMap<String, &'a RawValue>,
}

#[derive(serde::Deserialize)]
struct Versioned {
    version: u64,
}

/// The FDv2 events of a full transfer of `all`: (event name, data).
fn fdv2_events(all: &[u8]) -> Vec<(&'static str, String)> {
    let data: AllData<'_> = serde_json::from_slice(all).unwrap();
    let mut events = vec![(
        "server-intent",
        r#"{"payloads":[{"id":"bench","target":1,"intentCode":"xfer-full","reason":"payload-missing"}]}"#
            .to_owned(),
    )];
    for (kind, map) in [("flag", &data.flags), ("segment", &data.segments)] {
        for (key, object) in map {
            let version = serde_json::from_str::<Versioned>(object.get())
                .unwrap()
                .version;
            let key = serde_json::to_string(key).unwrap();
            events.push((
                "put-object",
                format!(
                    r#"{{"version":{version},"kind":"{kind}","key":{key},"object":{}}}"#,
                    object.get()
                ),
            ));
        }
    }
    events.push((
        "payload-transferred",
        r#"{"state":"(p:bench:1)","version":1}"#.to_owned(),
    ));
    events
}

fn fdv2_stream(events: &[(&'static str, String)]) -> Vec<u8> {
    let mut v = Vec::new();
    for (name, data) in events {
        v.extend_from_slice(b"event: ");
        v.extend_from_slice(name.as_bytes());
        v.extend_from_slice(b"\ndata: ");
        v.extend_from_slice(data.as_bytes());
        v.extend_from_slice(b"\n\n");
    }
    v
}

#[allow(
    clippy::disallowed_methods,
    reason = "one real origin for the virtual clock"
)]
fn origin() -> Instant {
    Instant::now()
}

/// Drain until `Wait`; return the connection of the first `Connect`.
fn drain(system: &mut DataSystem) -> Option<flagsync_core::ConnId> {
    let mut conn = None;
    loop {
        match system.poll_output() {
            Output::Wait(_) => return conn,
            Output::Action(IoAction::Connect { conn: c, .. }) => conn = conn.or(Some(c)),
            _ => {}
        }
    }
}

/// Start `config`'s data system and feed it `stream` in 16 KiB reads under a virtual
/// clock (1 ms per read) until the store is initialized and the system ready.
#[inline(never)]
fn to_ready(config: &Config, t0: Instant, stream: &[u8]) -> DataSystem {
    let mut system = DataSystem::new(config.clone(), 1, t0).unwrap();
    let mut now = t0;
    system.handle_input(now, Input::Command(Command::Start));
    let conn = drain(&mut system).expect("a connection");
    system.handle_input(now, Input::Connected { conn });
    drain(&mut system);
    let head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n\r\n";
    system.handle_input(now, Input::Data { conn, bytes: head });
    drain(&mut system);
    for chunk in stream.chunks(16 * 1024) {
        now += Duration::from_millis(1);
        system.handle_input(now, Input::Data { conn, bytes: chunk });
        drain(&mut system);
        if system.initialized() && system.ready() {
            return system;
        }
    }
    panic!("the store never became ready");
}

/// FDv1 below SSE: the `put` event's data parsed and applied.
#[inline(never)]
fn fdv1_events_to_store(data: &Bytes) -> Store {
    let mut store = Store::new();
    match flagsync_core::fdv1::parse_event("put", data).unwrap() {
        flagsync_core::fdv1::Event::Put(changes) => {
            store.apply(ChangeSet::fdv1_full(changes));
        }
        _ => unreachable!(),
    }
    store
}

/// FDv2 below SSE: each event parsed, through the protocol machine, and applied.
#[inline(never)]
fn fdv2_events_to_store(events: &[(&str, Bytes)]) -> Store {
    let mut store = Store::new();
    let mut protocol = Protocol::new();
    for (name, data) in events {
        let event = fdv2::parse_event(name, data).unwrap();
        if let Action::Apply(cs) = protocol.handle_event(event).unwrap() {
            store.apply(cs);
        }
    }
    assert_ne!(store.selector(), &Selector::default());
    store
}

fn sse_events(stream: &[u8]) -> usize {
    let mut parser = sse::Parser::new(sse::Config::default());
    let mut n = 0;
    for chunk in stream.chunks(16 * 1024) {
        parser.handle_bytes(chunk);
        while let Some(item) = parser.poll_item() {
            if let Ok(Item::Event(_)) = item {
                n += 1;
            }
        }
    }
    n
}

/// The inputs of every measurement.
struct Inputs {
    v1: Bytes,
    v2: Vec<u8>,
    events: Vec<(&'static str, String)>,
    fdv1: Config,
    fdv2: Config,
}

fn inputs() -> Inputs {
    let all = payload(50_000);
    let v1 = put_event(&all);
    let events = fdv2_events(&all);
    let v2 = fdv2_stream(&events);
    let mut fdv1 = Config::new("bench-key");
    fdv1.stream_uri = "http://127.0.0.1:1".into();
    let mut fdv2 = fdv1.clone();
    fdv2.mode = Mode::Fdv2;
    fdv2.fdv2 = Fdv2Config::streaming();
    fdv1.mode = Mode::Streaming;
    Inputs {
        v1,
        v2,
        events,
        fdv1,
        fdv2,
    }
}

/// Below SSE: event data as the parser hands it out (slices of shared buffers).
fn event_data(inputs: &Inputs) -> (Bytes, Vec<(&'static str, Bytes)>) {
    let v1 = &inputs.v1;
    let v1_data = Bytes::copy_from_slice(&v1[b"event: put\ndata: ".len()..v1.len() - 2]);
    let mut joined = Vec::new();
    let mut ranges = Vec::new();
    for (name, data) in &inputs.events {
        ranges.push((*name, joined.len()..joined.len() + data.len()));
        joined.extend_from_slice(data.as_bytes());
    }
    let joined = Bytes::from(joined);
    let v2_events = ranges
        .into_iter()
        .map(|(name, r)| (name, joined.slice(r)))
        .collect();
    (v1_data, v2_events)
}

/// The FDv2 polling body `{"events":[…]}` of `events`.
fn poll_body(events: &[(&'static str, String)]) -> Bytes {
    let mut body = br#"{"events":["#.to_vec();
    for (i, (name, data)) in events.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(format!(r#"{{"event":"{name}","data":{data}}}"#).as_bytes());
    }
    body.extend_from_slice(b"]}");
    Bytes::from(body)
}

/// `body` through a [`fdv2::PollReader`] in 16 KiB pieces.
fn read_poll(body: &[u8], stored: Option<&flagsync_core::Snapshot>) -> ChangeSet {
    let mut reader = fdv2::PollReader::new(fdv2::PayloadLimits::default());
    for piece in body.chunks(16 << 10) {
        reader.feed(piece, stored);
    }
    reader.finish().unwrap()
}

/// `FDV2_BENCH_ONCE=MODE`: one unit of work and exit, for instruction counts
/// (BENCHMARKS.md): `system-fdv1`, `system-fdv2`, `events-fdv1`, `events-fdv2`,
/// `poll-whole`, `poll-reader`.
fn once(mode: &str) {
    let inputs = inputs();
    let t0 = origin();
    let (v1_data, v2_events) = event_data(&inputs);
    match mode {
        "system-fdv1" => drop(to_ready(&inputs.fdv1, t0, &inputs.v1)),
        "system-fdv2" => drop(to_ready(&inputs.fdv2, t0, &inputs.v2)),
        "events-fdv1" => drop(fdv1_events_to_store(&v1_data)),
        "events-fdv2" => drop(fdv2_events_to_store(&v2_events)),
        "poll-whole" => {
            let body = poll_body(&inputs.events);
            drop(fdv2::parse_poll_or_fdv1_with(
                &body,
                fdv2::PayloadLimits::default(),
            ));
        }
        "poll-reader" => drop(read_poll(&poll_body(&inputs.events), None)),
        other => panic!("unknown FDV2_BENCH_ONCE mode {other}"),
    }
}

fn bench(c: &mut Criterion) {
    let inputs = inputs();
    let Inputs {
        v1,
        v2,
        events,
        fdv1,
        fdv2,
    } = &inputs;
    println!(
        "FDv1 stream: {:.1} MB, 1 event; FDv2 stream: {:.1} MB, {} events",
        v1.len() as f64 / 1e6,
        v2.len() as f64 / 1e6,
        events.len()
    );
    let t0 = origin();

    // Both paths end with the same data.
    {
        let a = to_ready(fdv1, t0, v1);
        let b = to_ready(fdv2, t0, v2);
        assert_eq!(a.snapshot().to_json(), b.snapshot().to_json());
        assert!(b.store().selector().is_defined());
    }

    let mut g = c.benchmark_group("transfer_to_ready");
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Elements(events.len() as u64 - 2));
    // Freeing the result is left out on both sides (`iter_with_large_drop`).
    g.bench_function("fdv1_put", |b| {
        b.iter_with_large_drop(|| to_ready(fdv1, t0, v1))
    });
    g.bench_function("fdv2_xfer_full", |b| {
        b.iter_with_large_drop(|| to_ready(fdv2, t0, v2))
    });
    g.finish();

    let (v1_data, v2_events) = event_data(&inputs);

    let mut g = c.benchmark_group("events_to_store");
    g.sample_size(10).measurement_time(Duration::from_secs(15));
    g.throughput(Throughput::Elements(events.len() as u64 - 2));
    g.bench_function("fdv1_parse_put_apply", |b| {
        b.iter_with_large_drop(|| fdv1_events_to_store(&v1_data))
    });
    g.bench_function("fdv2_parse_protocol_apply", |b| {
        b.iter_with_large_drop(|| fdv2_events_to_store(&v2_events))
    });
    g.finish();

    // A polling body of the same events, read whole or as it arrives (issue 42).
    let poll = poll_body(events);
    let limits = fdv2::PayloadLimits::default();
    let whole = fdv2::parse_poll_or_fdv1_with(&poll, limits).unwrap();
    assert_eq!(read_poll(&poll, None), whole);
    let mut stored = Store::new();
    stored.apply(whole);
    let stored = stored.snapshot();
    let mut g = c.benchmark_group("poll_body");
    g.sample_size(10).measurement_time(Duration::from_secs(15));
    g.throughput(Throughput::Bytes(poll.len() as u64));
    g.bench_function("whole", |b| {
        b.iter_with_large_drop(|| fdv2::parse_poll_or_fdv1_with(&poll, limits).unwrap())
    });
    g.bench_function("as_it_arrives", |b| {
        b.iter_with_large_drop(|| read_poll(&poll, None))
    });
    g.bench_function("as_it_arrives_against_the_same_store", |b| {
        b.iter_with_large_drop(|| read_poll(&poll, Some(&stored)))
    });
    g.finish();

    let mut g = c.benchmark_group("sse_only");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.bench_function("fdv1_put", |b| b.iter(|| sse_events(v1)));
    g.bench_function("fdv2_xfer_full", |b| b.iter(|| sse_events(v2)));
    g.finish();
}

criterion_group!(benches, bench);

/// `FDV2_BENCH_PAIRED=N`: N rounds, each timing one FDv1 and one FDv2 unit of work
/// back to back (alternating which goes first), so both see the same machine load;
/// prints the medians and the median of the per-round ratios (BENCHMARKS.md).
#[allow(
    clippy::disallowed_methods,
    reason = "wall-clock timing of whole runs, outside the core"
)]
fn paired(rounds: usize) {
    let inputs = inputs();
    let t0 = origin();
    let (v1_data, v2_events) = event_data(&inputs);
    // Freeing the result is left out, as in the Criterion groups.
    let time = |f: &mut dyn FnMut() -> Box<dyn std::any::Any>| {
        let start = Instant::now();
        let result = f();
        let ms = start.elapsed().as_secs_f64() * 1e3;
        drop(result);
        ms
    };
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    type Unit<'a> = Box<dyn FnMut() -> Box<dyn std::any::Any> + 'a>;
    let pairs: [(&str, Unit<'_>, Unit<'_>); 2] = [
        (
            "transfer_to_ready",
            Box::new(|| Box::new(to_ready(&inputs.fdv1, t0, &inputs.v1))),
            Box::new(|| Box::new(to_ready(&inputs.fdv2, t0, &inputs.v2))),
        ),
        (
            "events_to_store",
            Box::new(|| Box::new(fdv1_events_to_store(&v1_data))),
            Box::new(|| Box::new(fdv2_events_to_store(&v2_events))),
        ),
    ];
    for (name, mut v1, mut v2) in pairs {
        let (mut a, mut b, mut r) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            let (x, y) = if round % 2 == 0 {
                let x = time(&mut v1);
                (x, time(&mut v2))
            } else {
                let y = time(&mut v2);
                (time(&mut v1), y)
            };
            a.push(x);
            b.push(y);
            r.push(y / x);
        }
        println!(
            "{name}: FDv1 median {:.1} ms, FDv2 median {:.1} ms, median per-round FDv2/FDv1 {:.2} ({rounds} rounds)",
            median(&mut a),
            median(&mut b),
            median(&mut r)
        );
    }
}

fn main() {
    if let Ok(mode) = std::env::var("FDV2_BENCH_ONCE") {
        return once(&mode);
    }
    if let Ok(rounds) = std::env::var("FDV2_BENCH_PAIRED") {
        return paired(rounds.parse().expect("a number of rounds"));
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
