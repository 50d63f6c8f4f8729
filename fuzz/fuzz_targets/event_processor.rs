//! The analytics event processor driven by an arbitrary script: contexts parsed from
//! arbitrary JSON, records, flushes, close, and arbitrary response bytes on its posts.
//! Checked after every step: no panic, the queue within its capacity, at most the
//! configured posts in flight (plus retries).
#![no_main]

use std::sync::Arc;
use std::time::Duration;

use arbitrary::Arbitrary;
use flagsync_core::events::{
    Custom, Evaluation, EventContext, EventProcessor, EventsConfig, Identify, Input, Output, Record,
};
use flagsync_core::testing::origin;
use flagsync_core::{Action, CloseCause, ConnId};
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
enum Step {
    Context(Vec<u8>),
    Eval {
        flag: u8,
        track: bool,
        debug_until: Option<u64>,
        ratio: Option<u8>,
        exclude: bool,
    },
    Custom {
        key: u8,
        metric: Option<f64>,
    },
    Identify,
    Flush,
    Close,
    Advance(u16),
    Connected,
    Data(Vec<u8>),
    Eof,
    Reset,
}

const CAPACITY: usize = 8;

fuzz_target!(|input: (bool, bool, Vec<Step>)| {
    let (gzip, omit_anonymous, steps) = input;
    let mut config = EventsConfig::new("fuzz-key");
    config.events_uri = "http://127.0.0.1:1".into();
    config.capacity = CAPACITY;
    config.gzip = gzip;
    config.omit_anonymous_contexts = omit_anonymous;
    config.private_attributes = vec!["name".into(), "/a/b".into()];
    let t0 = origin();
    let mut now = t0;
    let mut p = EventProcessor::new(config, 3, now, 1_700_000_000_000);
    let mut context =
        Arc::new(EventContext::parse(&serde_json::json!({"kind": "user", "key": "k"})).unwrap());
    let mut conns: Vec<ConnId> = Vec::new();
    let drain = |p: &mut EventProcessor, conns: &mut Vec<ConnId>| loop {
        match p.poll_output() {
            Output::Action(Action::Connect { conn, .. }) => conns.push(conn),
            Output::Action(_) | Output::Event(_) => {}
            Output::Wait(_) => break,
            _ => break,
        }
    };
    drain(&mut p, &mut conns);
    for step in steps {
        let at = 1_700_000_000_000 + u64::try_from((now - t0).as_millis()).unwrap_or(0);
        let input = match step {
            Step::Context(bytes) => {
                if let Ok(json) = serde_json::from_slice(&bytes)
                    && let Ok(c) = EventContext::parse(&json)
                {
                    context = Arc::new(c);
                }
                continue;
            }
            Step::Eval {
                flag,
                track,
                debug_until,
                ratio,
                exclude,
            } => Input::Record(Record::Evaluation(Evaluation {
                creation_date: at,
                context: context.clone(),
                key: format!("f{flag}"),
                version: Some(u64::from(flag)),
                variation: Some(usize::from(flag % 3)),
                value: serde_json::json!(flag),
                default: serde_json::Value::Null,
                reason: None,
                prereq_of: None,
                track_events: track,
                debug_events_until_date: debug_until,
                sampling_ratio: ratio.map(u64::from),
                exclude_from_summaries: exclude,
                summarized: false,
            })),
            Step::Custom { key, metric } => Input::Record(Record::Custom(Custom {
                creation_date: at,
                context: context.clone(),
                key: format!("e{key}"),
                data: None,
                metric_value: metric,
            })),
            Step::Identify => Input::Record(Record::Identify(Identify {
                creation_date: at,
                context: context.clone(),
            })),
            Step::Flush => Input::Flush,
            Step::Close => Input::Close,
            Step::Advance(ms) => {
                now += Duration::from_millis(u64::from(ms));
                Input::Timeout
            }
            Step::Connected => match conns.last() {
                Some(&conn) => Input::Connected { conn },
                None => continue,
            },
            Step::Data(ref bytes) => match conns.last() {
                Some(&conn) => Input::Data { conn, bytes },
                None => continue,
            },
            Step::Eof => match conns.pop() {
                Some(conn) => Input::Closed {
                    conn,
                    cause: CloseCause::Eof,
                },
                None => continue,
            },
            Step::Reset => match conns.pop() {
                Some(conn) => Input::Closed {
                    conn,
                    cause: CloseCause::Io(flagsync_core::IoCause {
                        kind: std::io::ErrorKind::ConnectionReset,
                        message: "reset".into(),
                    }),
                },
                None => continue,
            },
        };
        p.handle_input(now, input);
        drain(&mut p, &mut conns);
        assert!(p.queued() <= CAPACITY);
        assert!(p.in_flight() <= 5 + 1 + 5);
    }
});
