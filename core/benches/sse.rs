//! SSE parsing throughput: flagsync's parser against `sse-stream` 0.3 and a memchr floor.
//!
//! Run with `cargo bench -p flagsync-core --bench sse`. Every contender sees the same
//! bytes, delivered in the same 16 KiB reads.
//!
//! Two setups, identical for both parsers:
//!
//! - `flagsync` / `sse_stream`: one parser lives across iterations, as on one long-lived
//!   connection; every iteration feeds it the same bytes again (the stream ends on an
//!   event boundary, so each iteration starts in the same state). flagsync's parser is
//!   fed with `handle_chunk`, as `EventStream` feeds it the HTTP body's `Bytes`;
//!   sse-stream's `SseByteStream` reads an input stream that is refilled each iteration
//!   and is `Pending` (not ended) in between, so neither parser is rebuilt. Each consumer
//!   drops every event right away.
//! - `flagsync_in_place`: the same kept-alive parser and `handle_chunk` reads, drained
//!   with `poll_ref`: each event is read in place (type, data and id borrowed from the
//!   parser) instead of being taken as an owned `Event`.
//! - `flagsync_handle_bytes`: the same kept-alive parser fed with borrowed `&[u8]` reads
//!   (`handle_bytes`), for callers without `Bytes`.
//! - `*_fresh_parser`: a new parser per iteration, so every buffer is allocated (and, for
//!   the 50 MB line, page-faulted) again.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::hint::black_box;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use flagsync_core::sse::{Config, Item, ItemRef, Parser};
use futures_util::Stream;

const READ_SIZE: usize = 16 * 1024;

/// One `put` event with a realistic ~50 MB flag set on a single `data` line.
fn put_stream() -> Vec<u8> {
    let mut out = br#"event: put
data: {"path":"/","data":{"segments":{},"flags":{"#
        .to_vec();
    let mut i = 0_u64;
    while out.len() < 50_000_000 {
        if i > 0 {
            out.push(b',');
        }
        out.extend(format!(
            r#""flag-{i}":{{"key":"flag-{i}","version":{v},"on":true,"prerequisites":[],"targets":[{{"values":["user-{i}"],"variation":0}}],"rules":[{{"id":"rule-{i}","variation":0,"clauses":[{{"attribute":"email","op":"endsWith","values":["@example.com"],"negate":false}}],"trackEvents":false}}],"fallthrough":{{"variation":1}},"offVariation":1,"variations":[true,false],"clientSide":false,"salt":"a1b2c3d4{i}","trackEvents":false,"trackEventsFallthrough":false,"debugEventsUntilDate":null,"deleted":false}}"#,
            v = i % 97 + 1
        ).as_bytes());
        i += 1;
    }
    out.extend(b"}}}\n\n");
    out
}

/// 200,000 `patch` events of about 80 bytes each.
fn patch_stream() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..200_000_u32 {
        out.extend(
            format!(
                "event: patch\ndata: {{\"path\":\"/flags/f{i}\",\"data\":{{\"key\":\"f{i}\",\"version\":{}}}}}\n\n",
                i % 1000 + 2
            )
            .as_bytes(),
        );
    }
    out
}

fn reads(stream: Vec<u8>) -> Vec<Bytes> {
    let stream = Bytes::from(stream);
    (0..stream.len())
        .step_by(READ_SIZE)
        .map(|start| stream.slice(start..(start + READ_SIZE).min(stream.len())))
        .collect()
}

fn flagsync(parser: &mut Parser, chunks: &[Bytes]) -> usize {
    let mut events = 0;
    for chunk in chunks {
        parser.handle_chunk(chunk);
        while let Some(item) = parser.poll_item() {
            if let Ok(Item::Event(event)) = black_box(item) {
                events += usize::from(!event.data.is_empty());
            }
        }
    }
    events
}

fn flagsync_in_place(parser: &mut Parser, chunks: &[Bytes]) -> usize {
    let mut events = 0;
    for chunk in chunks {
        parser.handle_chunk(chunk);
        while let Some(item) = parser.poll_ref() {
            if let Ok(ItemRef::Event(event)) = black_box(item) {
                events += usize::from(!event.data().is_empty());
            }
        }
    }
    events
}

fn flagsync_borrowed(parser: &mut Parser, chunks: &[Bytes]) -> usize {
    let mut events = 0;
    for chunk in chunks {
        parser.handle_bytes(chunk);
        while let Some(item) = parser.poll_item() {
            if let Ok(Item::Event(event)) = black_box(item) {
                events += usize::from(!event.data.is_empty());
            }
        }
    }
    events
}

fn flagsync_fresh(chunks: &[Bytes]) -> usize {
    let mut parser = Parser::new(Config::default());
    let events = flagsync(&mut parser, chunks);
    parser.handle_eof();
    events
}

/// The input of a long-lived `SseByteStream`: the reads queued so far, then `Pending`.
type Reads = Rc<RefCell<VecDeque<Bytes>>>;

fn persistent_sse_stream(
    reads: Reads,
) -> impl Stream<Item = Result<sse_stream::Sse, sse_stream::Error>> {
    let input = futures_util::stream::poll_fn(move |_| match reads.borrow_mut().pop_front() {
        Some(read) => Poll::Ready(Some(Ok::<_, Infallible>(read))),
        None => Poll::Pending,
    });
    sse_stream::SseByteStream::new(input)
}

/// Feed one iteration's reads to a long-lived `SseByteStream` and drain it.
fn sse_stream_persistent<S>(
    stream: &mut std::pin::Pin<&mut S>,
    reads: &Reads,
    chunks: &[Bytes],
) -> usize
where
    S: Stream<Item = Result<sse_stream::Sse, sse_stream::Error>>,
{
    reads.borrow_mut().extend(chunks.iter().cloned());
    let mut cx = Context::from_waker(Waker::noop());
    let mut events = 0;
    loop {
        match stream.as_mut().poll_next(&mut cx) {
            Poll::Ready(Some(Ok(sse))) => {
                let sse = black_box(sse);
                events += usize::from(sse.data.is_some_and(|data| !data.is_empty()));
            }
            Poll::Ready(Some(Err(error))) => panic!("sse-stream error: {error}"),
            Poll::Ready(None) => unreachable!("the input never ends"),
            Poll::Pending => return events,
        }
    }
}

fn sse_stream(chunks: &[Bytes]) -> usize {
    let input = futures_util::stream::iter(chunks.iter().cloned().map(Ok::<_, Infallible>));
    let mut stream = pin!(sse_stream::SseByteStream::new(input));
    let mut cx = Context::from_waker(Waker::noop());
    let mut events = 0;
    loop {
        match stream.as_mut().poll_next(&mut cx) {
            Poll::Ready(Some(Ok(sse))) => {
                let sse = black_box(sse);
                events += usize::from(sse.data.is_some_and(|data| !data.is_empty()));
            }
            Poll::Ready(Some(Err(error))) => panic!("sse-stream error: {error}"),
            Poll::Ready(None) => return events,
            Poll::Pending => unreachable!("an iterator stream is always ready"),
        }
    }
}

fn memchr_floor(chunks: &[Bytes]) -> usize {
    chunks
        .iter()
        .map(|chunk| memchr::memchr_iter(b'\n', chunk).count())
        .sum()
}

fn workload(c: &mut Criterion, name: &str, stream: Vec<u8>, expected_events: usize) {
    let len = stream.len() as u64;
    let chunks = reads(stream);
    let mut parser = Parser::new(Config::default());
    let mut borrowing_parser = Parser::new(Config::default());
    let mut in_place_parser = Parser::new(Config::default());
    let queue = Reads::default();
    let mut stream = pin!(persistent_sse_stream(Rc::clone(&queue)));
    for _ in 0..2 {
        assert_eq!(
            flagsync(&mut parser, &chunks),
            expected_events,
            "flagsync event count"
        );
        assert_eq!(
            sse_stream_persistent(&mut stream, &queue, &chunks),
            expected_events,
            "sse-stream event count"
        );
        assert_eq!(
            flagsync_borrowed(&mut borrowing_parser, &chunks),
            expected_events,
            "flagsync event count"
        );
        assert_eq!(
            flagsync_in_place(&mut in_place_parser, &chunks),
            expected_events,
            "flagsync event count"
        );
    }
    assert_eq!(
        flagsync_fresh(&chunks),
        expected_events,
        "flagsync event count"
    );
    assert_eq!(
        sse_stream(&chunks),
        expected_events,
        "sse-stream event count"
    );
    let mut group = c.benchmark_group(name);
    group
        .throughput(Throughput::Bytes(len))
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    group.bench_function("flagsync", |b| {
        b.iter(|| flagsync(&mut parser, black_box(&chunks)))
    });
    group.bench_function("sse_stream", |b| {
        b.iter(|| sse_stream_persistent(&mut stream, &queue, black_box(&chunks)))
    });
    group.bench_function("flagsync_in_place", |b| {
        b.iter(|| flagsync_in_place(&mut in_place_parser, black_box(&chunks)))
    });
    group.bench_function("flagsync_handle_bytes", |b| {
        b.iter(|| flagsync_borrowed(&mut borrowing_parser, black_box(&chunks)))
    });
    group.bench_function("flagsync_fresh_parser", |b| {
        b.iter(|| flagsync_fresh(black_box(&chunks)))
    });
    group.bench_function("sse_stream_fresh_parser", |b| {
        b.iter(|| sse_stream(black_box(&chunks)))
    });
    group.bench_function("memchr_floor", |b| {
        b.iter(|| memchr_floor(black_box(&chunks)))
    });
    group.finish();
}

fn put_50mb(c: &mut Criterion) {
    workload(c, "sse_put_50mb_16k_reads", put_stream(), 1);
}

fn patch_200k(c: &mut Criterion) {
    workload(c, "sse_patch_200k_16k_reads", patch_stream(), 200_000);
}

criterion_group!(benches, put_50mb, patch_200k);
criterion_main!(benches);
