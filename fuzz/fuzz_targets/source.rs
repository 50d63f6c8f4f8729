//! One data source alone, driven through its own public API by an arbitrary script: the
//! SSE client (`EventStream`, with restarts and owner failures), the FDv1 or FDv2 stream
//! (`StreamSource`), or the poller in each format, polling for good or once (an FDv2
//! initializer). Checked after every step: no panic, at most one connection open, a
//! deadline that fired moves forward, nothing connects after a stop until the next start.
#![no_main]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use flagsync_core::endpoint::Url;
use flagsync_core::source::{
    EventStream, EventStreamConfig, PollConfig, PollFormat, Poller, SourceOutput, StreamOutput,
    StreamSource, UnrecoverablePolicy,
};
use flagsync_core::status::{Cause, ErrorInfo, ErrorKind};
use flagsync_core::store::Selector;
use flagsync_core::testing::{ScriptInput, Step, origin};
use flagsync_core::{Action, CloseCause, ConnId, IoCause};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Kind {
    Sse {
        restarts: bool,
    },
    Fdv1Stream,
    Fdv2Stream,
    Poll {
        format: u8,
        once: bool,
        stop_policy: bool,
    },
}

#[derive(Debug, Arbitrary)]
enum Op {
    Io(Step),
    /// The owner restarts the SSE client, or reports its data unusable.
    Restart(bool),
    /// A new selector for FDv2 sources.
    Basis(u8),
}

enum Source {
    Sse(EventStream),
    Stream(StreamSource),
    Poll(Poller),
}

fn url(path: &str) -> Url {
    Url::parse("http://127.0.0.1:1")
        .unwrap()
        .with_path(path, &[])
}

fn build(kind: &Kind) -> Source {
    let mut sc = EventStreamConfig::new(url("/all"));
    sc.sse.max_line_len = 4096;
    sc.sse.max_event_len = 4096;
    match kind {
        Kind::Sse { .. } => Source::Sse(EventStream::new(sc, 1, 0)),
        Kind::Fdv1Stream => Source::Stream(StreamSource::fdv1(sc, 1, 0)),
        Kind::Fdv2Stream => {
            sc.url = url("/sdk/stream");
            sc.unrecoverable = UnrecoverablePolicy::Stop;
            Source::Stream(StreamSource::fdv2(sc, 1, 0))
        }
        Kind::Poll {
            format,
            once,
            stop_policy,
        } => {
            let http = flagsync_core::http1::Config {
                max_body_len: Some(4096),
                ..Default::default()
            };
            Source::Poll(Poller::new(
                PollConfig {
                    url: url("/sdk/poll"),
                    headers: Vec::new(),
                    interval: Duration::from_secs(30),
                    connect_timeout: Duration::from_secs(10),
                    read_timeout: Duration::from_secs(15),
                    response_timeout: Duration::from_secs(60),
                    unrecoverable: if *stop_policy {
                        UnrecoverablePolicy::Stop
                    } else {
                        UnrecoverablePolicy::Retry
                    },
                    backoff: Default::default(),
                    http,
                    max_redirects: 3,
                    format: match format % 3 {
                        0 => PollFormat::Fdv1,
                        1 => PollFormat::Fdv1Fallback,
                        _ => PollFormat::Fdv2,
                    },
                    once: *once,
                },
                1,
                0,
            ))
        }
    }
}

struct Run {
    source: Source,
    now: Instant,
    conns: Vec<ConnId>,
    open: HashSet<ConnId>,
    stopped: bool,
}

impl Run {
    fn action(&mut self, a: Action) {
        match a {
            Action::Connect { conn, .. } => {
                assert!(!self.stopped, "connected after a stop");
                self.conns.push(conn);
                self.open.insert(conn);
                assert!(
                    self.open.len() <= 1,
                    "two connections open: {:?}",
                    self.open
                );
            }
            Action::Close { conn } => {
                self.open.remove(&conn);
            }
            _ => {}
        }
    }

    fn drain(&mut self) {
        loop {
            let action = match &mut self.source {
                Source::Sse(s) => match s.poll_output() {
                    Some(StreamOutput::Action(a)) => Some(a),
                    Some(_) => None,
                    None => break,
                },
                Source::Stream(s) => match s.poll_output() {
                    Some(SourceOutput::Action(a)) => Some(a),
                    Some(_) => None,
                    None => break,
                },
                Source::Poll(s) => match s.poll_output() {
                    Some(SourceOutput::Action(a)) => Some(a),
                    Some(_) => None,
                    None => break,
                },
            };
            if let Some(a) = action {
                self.action(a);
            }
        }
    }

    fn deadline(&self) -> Option<Instant> {
        match &self.source {
            Source::Sse(s) => s.poll_timeout(),
            Source::Stream(s) => s.poll_timeout(),
            Source::Poll(s) => s.poll_timeout(),
        }
    }

    fn step(&mut self, step: &Step) {
        self.now += Duration::from_millis(u64::from(step.advance_ms));
        let now = self.now;
        let pick =
            |conns: &[ConnId], i: u8| conns.get(usize::from(i) % conns.len().max(1)).copied();
        let head;
        let io: Option<(ConnId, Io<'_>)> = match &step.input {
            ScriptInput::Start => {
                // Starting again after a stop is the owner's explicit choice.
                self.stopped = false;
                match &mut self.source {
                    Source::Sse(s) => s.handle_start(now),
                    Source::Stream(s) => s.handle_start(now),
                    Source::Poll(s) => s.handle_start(now),
                }
                None
            }
            ScriptInput::Stop => {
                self.stopped = true;
                match &mut self.source {
                    Source::Sse(s) => s.handle_stop(),
                    Source::Stream(s) => s.handle_stop(now),
                    Source::Poll(s) => s.handle_stop(now),
                }
                None
            }
            ScriptInput::Timeout => {
                match &mut self.source {
                    Source::Sse(s) => s.handle_timeout(now),
                    Source::Stream(s) => s.handle_timeout(now),
                    Source::Poll(s) => s.handle_timeout(now),
                }
                self.drain();
                if let Some(d) = self.deadline() {
                    assert!(d > now, "deadline {d:?} did not move past {now:?}");
                }
                return;
            }
            ScriptInput::Connected(i) => pick(&self.conns, *i).map(|c| (c, Io::Connected)),
            ScriptInput::Head(i, status, sse) | ScriptInput::FallbackHead(i, status, sse) => {
                let ct = if *sse {
                    "text/event-stream"
                } else {
                    "application/json"
                };
                let extra = if matches!(step.input, ScriptInput::FallbackHead(..)) {
                    "X-LD-FD-Fallback: true\r\n"
                } else {
                    ""
                };
                head = format!("HTTP/1.1 {status} X\r\nContent-Type: {ct}\r\n{extra}\r\n");
                pick(&self.conns, *i).map(|c| (c, Io::Data(head.as_bytes())))
            }
            ScriptInput::Data(i, bytes) => pick(&self.conns, *i).map(|c| (c, Io::Data(bytes))),
            ScriptInput::Closed(i, clean) => pick(&self.conns, *i).map(|c| {
                self.open.remove(&c);
                (
                    c,
                    Io::Closed(if *clean {
                        CloseCause::Eof
                    } else {
                        CloseCause::Io(IoCause {
                            kind: std::io::ErrorKind::ConnectionReset,
                            message: "reset".into(),
                        })
                    }),
                )
            }),
        };
        if let Some((conn, io)) = io {
            match (&mut self.source, io) {
                (Source::Sse(s), Io::Connected) => s.handle_connected(now, conn),
                (Source::Sse(s), Io::Data(b)) => s.handle_data(now, conn, b),
                (Source::Sse(s), Io::Closed(c)) => s.handle_closed(now, conn, c),
                (Source::Stream(s), Io::Connected) => s.handle_connected(now, conn),
                (Source::Stream(s), Io::Data(b)) => s.handle_data(now, conn, b),
                (Source::Stream(s), Io::Closed(c)) => s.handle_closed(now, conn, c),
                (Source::Poll(s), Io::Connected) => s.handle_connected(now, conn),
                (Source::Poll(s), Io::Data(b)) => s.handle_data(now, conn, b),
                (Source::Poll(s), Io::Closed(c)) => s.handle_closed(now, conn, c),
            }
        }
        self.drain();
    }
}

enum Io<'a> {
    Connected,
    Data(&'a [u8]),
    Closed(CloseCause),
}

fuzz_target!(|input: (Kind, Vec<Op>)| {
    let (kind, ops) = input;
    let restarts = matches!(kind, Kind::Sse { restarts: true });
    let mut run = Run {
        source: build(&kind),
        now: origin(),
        conns: Vec::new(),
        open: HashSet::new(),
        stopped: false,
    };
    for op in &ops {
        match op {
            Op::Io(step) => run.step(step),
            Op::Restart(fail) => {
                if let Source::Sse(s) = &mut run.source
                    && restarts
                    && !run.stopped
                {
                    let now = run.now;
                    if *fail {
                        s.fail(
                            now,
                            ErrorInfo::new(now, ErrorKind::InvalidData, Cause::StreamClosed),
                        );
                    } else {
                        s.handle_restart(now);
                    }
                    run.drain();
                }
            }
            Op::Basis(n) => {
                let sel = Selector {
                    state: format!("s{n}"),
                    version: u64::from(*n),
                };
                match &mut run.source {
                    Source::Stream(s) => s.set_basis(&sel),
                    Source::Poll(p) => p.set_basis(&sel),
                    Source::Sse(_) => {}
                }
            }
        }
    }
});
