//! One pass of the SSE bench workloads, for instruction counts that do not depend on
//! machine load (BENCHMARKS.md):
//!
//! ```text
//! cargo build --release -p flagsync-core --example count_sse
//! valgrind --tool=callgrind --toggle-collect='*count_sse*measured*' \
//!     target/release/examples/count_sse MODE
//! ```
//!
//! MODE is `patch` (200,000 ~80-byte `patch` events) or `put` (one 50 MB event), in
//! 16 KiB reads, parsed by flagsync's parser as the bench does: the parser is kept alive
//! and the stream is parsed once before the measured pass, and every event is dropped
//! as soon as it is polled. `sse-stream-patch` and `sse-stream-put` measure `sse-stream`
//! 0.3 on the same bytes (one fresh stream). `time-patch` and `time-put` time both
//! parsers alternately in batches of 8 reads (the fastest of 20 rounds per batch), a
//! quick check on a loaded machine between criterion runs. `FLAGSYNC_IN_PLACE=1` drains
//! flagsync's parser with `poll_ref` (events read in place). With `FLAGSYNC_COLD=1`, each
//! parser goes through the whole stream in turn, as in a criterion iteration.
use std::convert::Infallible;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use flagsync_core::sse::{Config, Item, ItemRef, Parser};
use futures_util::Stream;

const READ_SIZE: usize = 16 * 1024;

/// Feed reads with `handle_chunk` (as `EventStream` does) rather than `handle_bytes`;
/// `FLAGSYNC_BORROWED=1` selects `handle_bytes`.
static SHARED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Take events as owned `Item`s (`poll_item`); `FLAGSYNC_IN_PLACE=1` reads them in place
/// with `poll_ref`.
static IN_PLACE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

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

fn put_stream() -> Vec<u8> {
    let mut out = br#"event: put
data: {"path":"/","data":{"segments":{},"flags":{"#
        .to_vec();
    let mut i = 0_u64;
    while out.len() < 50_000_000 {
        if i > 0 {
            out.push(b',');
        }
        out.extend(format!(r#""flag-{i}":{{"key":"flag-{i}","version":{v},"on":true,"salt":"a1b2c3d4{i}","deleted":false}}"#, v = i % 97 + 1).as_bytes());
        i += 1;
    }
    out.extend(b"}}}\n\n");
    out
}

fn flagsync(parser: &mut Parser, chunks: &[Bytes]) -> usize {
    let mut events = 0;
    for chunk in chunks {
        if SHARED.load(std::sync::atomic::Ordering::Relaxed) {
            parser.handle_chunk(chunk);
        } else {
            parser.handle_bytes(chunk);
        }
        if IN_PLACE.load(std::sync::atomic::Ordering::Relaxed) {
            while let Some(item) = parser.poll_ref() {
                if let Ok(ItemRef::Event(event)) = black_box(item) {
                    events += usize::from(!event.data().is_empty());
                }
            }
            continue;
        }
        while let Some(item) = parser.poll_item() {
            if let Ok(Item::Event(event)) = black_box(item) {
                events += usize::from(!event.data.is_empty());
            }
        }
    }
    events
}

#[inline(never)]
fn measured_flagsync(parser: &mut Parser, chunks: &[Bytes]) -> usize {
    flagsync(parser, chunks)
}

#[inline(never)]
fn measured_sse_stream(chunks: &[Bytes]) -> usize {
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

/// The input of a long-lived `SseByteStream`: the reads queued so far, then `Pending`.
type Reads = std::rc::Rc<std::cell::RefCell<std::collections::VecDeque<Bytes>>>;

fn sse_stream_batch<S>(stream: &mut std::pin::Pin<&mut S>, reads: &Reads, chunks: &[Bytes]) -> usize
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

/// Time both parsers (kept alive) over batches of 8 reads; the sum over batches of the
/// fastest of 20 rounds hides preemption by other processes on a loaded machine.
#[allow(
    clippy::disallowed_methods,
    reason = "a benchmark tool outside the core: it has to read the clock"
)]
fn time(chunks: &[Bytes], expected: usize) {
    let mut parser = Parser::new(Config::default());
    let reads = Reads::default();
    let reads_in = std::rc::Rc::clone(&reads);
    let input = futures_util::stream::poll_fn(move |_| match reads_in.borrow_mut().pop_front() {
        Some(read) => Poll::Ready(Some(Ok::<_, Infallible>(read))),
        None => Poll::Pending,
    });
    let mut stream = pin!(sse_stream::SseByteStream::new(input));
    let batches: Vec<&[Bytes]> = chunks.chunks(8).collect();
    let mut ours = vec![u128::MAX; batches.len()];
    let mut theirs = vec![u128::MAX; batches.len()];
    let cold = std::env::var_os("FLAGSYNC_COLD").is_some();
    for round in 0..20 {
        let (mut a, mut b) = (0, 0);
        if cold {
            // Each parser reads the whole stream in turn, as in a criterion iteration:
            // the input comes from memory, not from a cache the other parser warmed.
            for (i, batch) in batches.iter().enumerate() {
                let start = std::time::Instant::now();
                a += flagsync(&mut parser, batch);
                ours[i] = ours[i].min(start.elapsed().as_nanos());
            }
            for (i, batch) in batches.iter().enumerate() {
                let start = std::time::Instant::now();
                b += sse_stream_batch(&mut stream, &reads, batch);
                theirs[i] = theirs[i].min(start.elapsed().as_nanos());
            }
            assert_eq!((a, b), (expected, expected));
            continue;
        }
        for (i, batch) in batches.iter().enumerate() {
            // Alternate which parser reads the batch first (from colder caches).
            for turn in 0..2 {
                if (round + turn) % 2 == 0 {
                    let start = std::time::Instant::now();
                    a += flagsync(&mut parser, batch);
                    ours[i] = ours[i].min(start.elapsed().as_nanos());
                } else {
                    let start = std::time::Instant::now();
                    b += sse_stream_batch(&mut stream, &reads, batch);
                    theirs[i] = theirs[i].min(start.elapsed().as_nanos());
                }
            }
        }
        assert_eq!((a, b), (expected, expected));
    }
    let ours: u128 = ours.iter().sum();
    let theirs: u128 = theirs.iter().sum();
    let ms = |ns: u128| ns as f64 / 1e6;
    println!(
        "best-of-20 per batch: flagsync {:.2} ms, sse-stream {:.2} ms, ratio {:.2}",
        ms(ours),
        ms(theirs),
        theirs as f64 / ours as f64
    );
}

fn main() {
    if std::env::var_os("FLAGSYNC_IN_PLACE").is_some() {
        IN_PLACE.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    if std::env::var_os("FLAGSYNC_BORROWED").is_some() {
        SHARED.store(false, std::sync::atomic::Ordering::Relaxed);
    }
    let mode = std::env::args().nth(1).expect("MODE");
    let (stream, expected) = match mode.as_str() {
        "patch" | "sse-stream-patch" | "time-patch" => (patch_stream(), 200_000),
        "put" | "sse-stream-put" | "time-put" => (put_stream(), 1),
        _ => panic!("unknown mode {mode}"),
    };
    let stream = Bytes::from(stream);
    let chunks: Vec<Bytes> = (0..stream.len())
        .step_by(READ_SIZE)
        .map(|start| stream.slice(start..(start + READ_SIZE).min(stream.len())))
        .collect();
    if mode.starts_with("time") {
        time(&chunks, expected);
        return;
    }
    let events = if mode.starts_with("sse-stream") {
        measured_sse_stream(&chunks)
    } else {
        let mut parser = Parser::new(Config::default());
        assert_eq!(flagsync(&mut parser, &chunks), expected);
        measured_flagsync(&mut parser, &chunks)
    };
    assert_eq!(events, expected);
}
