//! The event processor in virtual time.

use std::io::Read as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::{Action, CloseCause, ConnId};

const T: u64 = 1_700_000_000_000;

struct Rig {
    p: EventProcessor,
    t0: Instant,
    now: Instant,
    events: Vec<Event>,
}

/// A request the processor sent.
#[derive(Debug)]
struct Sent {
    conn: ConnId,
    target: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Sent {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn parse_request(request: &[u8]) -> (String, Vec<(String, String)>, Vec<u8>) {
    let split = request
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a request head");
    let head = std::str::from_utf8(&request[..split]).unwrap();
    let body = request[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap();
    let target = first.split(' ').nth(1).unwrap().to_owned();
    let headers = lines
        .map(|l| {
            let (n, v) = l.split_once(": ").unwrap();
            (n.to_owned(), v.to_owned())
        })
        .collect();
    (target, headers, body)
}

fn config() -> EventsConfig {
    let mut c = EventsConfig::new("sdk-key-123456");
    c.events_uri = "http://events.test/".into();
    c
}

impl Rig {
    fn new(config: EventsConfig) -> Self {
        let t0 = crate::testing::origin();
        Self {
            p: EventProcessor::new(config, 42, t0, T),
            t0,
            now: t0,
            events: Vec::new(),
        }
    }

    fn input(&mut self, input: Input<'_>) -> Vec<Sent> {
        self.p.handle_input(self.now, input);
        self.drain()
    }

    fn drain(&mut self) -> Vec<Sent> {
        let mut sent = Vec::new();
        loop {
            match self.p.poll_output() {
                Output::Action(Action::Connect { conn, request, .. }) => {
                    let (target, headers, body) = parse_request(&request);
                    let gz = headers
                        .iter()
                        .any(|(n, v)| n == "Content-Encoding" && v == "gzip");
                    let body = if gz {
                        let mut out = Vec::new();
                        flate2::read::GzDecoder::new(&body[..])
                            .read_to_end(&mut out)
                            .unwrap();
                        out
                    } else {
                        body
                    };
                    sent.push(Sent {
                        conn,
                        target,
                        headers,
                        body: serde_json::from_slice(&body).unwrap(),
                    });
                }
                Output::Action(_) => {}
                Output::Event(e) => self.events.push(e),
                Output::Wait(_) => return sent,
            }
        }
    }

    fn answer(&mut self, conn: ConnId, status: u16, date: Option<&str>) -> Vec<Sent> {
        self.input(Input::Connected { conn });
        let date = date.map(|d| format!("Date: {d}\r\n")).unwrap_or_default();
        let head = format!("HTTP/1.1 {status} X\r\n{date}Content-Length: 0\r\n\r\n");
        self.input(Input::Data {
            conn,
            bytes: head.as_bytes(),
        })
    }

    fn advance(&mut self, d: Duration) -> Vec<Sent> {
        self.now += d;
        self.input(Input::Timeout)
    }

    fn wall(&self) -> u64 {
        T + u64::try_from((self.now - self.t0).as_millis()).unwrap()
    }

    fn eval(&mut self, context: &Arc<EventContext>, key: &str, track: bool) -> Vec<Sent> {
        let e = evaluation(self.wall(), context, key, track);
        self.input(Input::Record(Record::Evaluation(e)))
    }

    fn flush(&mut self) -> Sent {
        let mut sent = self.input(Input::Flush);
        assert_eq!(sent.len(), 1, "one payload");
        sent.remove(0)
    }
}

fn context(v: Value) -> Arc<EventContext> {
    Arc::new(EventContext::parse(&v).unwrap())
}

fn user(key: &str) -> Arc<EventContext> {
    context(json!({"kind": "user", "key": key, "name": "N"}))
}

fn evaluation(at: u64, context: &Arc<EventContext>, key: &str, track: bool) -> Evaluation {
    Evaluation {
        creation_date: at,
        context: context.clone(),
        key: key.into(),
        version: Some(7),
        variation: Some(1),
        value: json!(true),
        default: json!(false),
        reason: None,
        prereq_of: None,
        track_events: track,
        debug_events_until_date: None,
        sampling_ratio: None,
        exclude_from_summaries: false,
        summarized: false,
    }
}

fn kinds(body: &Value) -> Vec<&str> {
    body.as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect()
}

#[test]
fn a_flush_posts_the_queue_with_schema_payload_id_and_key() {
    let mut r = Rig::new(config());
    let u = user("u1");
    r.eval(&u, "f", false);
    let sent = r.flush();
    assert_eq!(sent.target, "/bulk");
    assert_eq!(sent.header("Authorization"), Some("sdk-key-123456"));
    assert_eq!(sent.header("X-LaunchDarkly-Event-Schema"), Some("4"));
    assert_eq!(sent.header("Content-Type"), Some("application/json"));
    assert_eq!(
        sent.header("X-LaunchDarkly-Payload-ID").map(str::len),
        Some(36)
    );
    assert_eq!(kinds(&sent.body), ["index", "summary"]);
    assert_eq!(
        sent.body[0]["context"],
        json!({"kind":"user","key":"u1","name":"N"})
    );
    assert_eq!(sent.body[1]["features"]["f"]["counters"][0]["count"], 1);
    r.answer(sent.conn, 202, None);
    assert!(r.events.contains(&Event::Delivered { events: 2 }));
    // Nothing new: nothing sent.
    assert!(r.input(Input::Flush).is_empty());
}

#[test]
fn index_events_once_per_context_and_feature_events_when_tracked() {
    let mut r = Rig::new(config());
    let u = user("u1");
    r.eval(&u, "f", true);
    r.eval(&u, "f", true);
    r.eval(&user("u2"), "g", false);
    let sent = r.flush();
    assert_eq!(
        kinds(&sent.body),
        ["index", "feature", "feature", "index", "summary"]
    );
    let feature = &sent.body[1];
    assert_eq!(feature["key"], "f");
    assert_eq!(feature["version"], 7);
    assert_eq!(feature["variation"], 1);
    assert_eq!(feature["value"], true);
    assert_eq!(feature["default"], false);
    assert_eq!(feature["context"]["key"], "u1");
    assert!(feature.get("reason").is_none());
    // The flush interval also flushes, and u1 is still remembered.
    r.answer(sent.conn, 202, None);
    r.eval(&u, "f", false);
    let sent = r.advance(Duration::from_secs(5));
    assert_eq!(kinds(&sent[0].body), ["summary"]);
    // After the context-keys interval it is indexed again.
    r.answer(sent[0].conn, 202, None);
    for _ in 0..60 {
        r.advance(Duration::from_secs(5));
    }
    r.eval(&u, "f", false);
    assert_eq!(kinds(&r.flush().body), ["index", "summary"]);
}

#[test]
fn debug_events_until_the_later_of_local_and_server_time() {
    let mut r = Rig::new(config());
    let u = user("u1");
    let mut e = evaluation(T, &u, "f", false);
    e.debug_events_until_date = Some(T + 60_000);
    r.input(Input::Record(Record::Evaluation(e.clone())));
    let sent = r.flush();
    assert_eq!(kinds(&sent.body), ["index", "debug", "summary"]);
    assert_eq!(
        sent.body[1]["context"]["name"], "N",
        "debug events are not redacted as anonymous"
    );
    // The server's clock says it is past the deadline.
    r.answer(sent.conn, 202, Some("Tue, 14 Nov 2023 22:15:00 GMT"));
    r.input(Input::Record(Record::Evaluation(e.clone())));
    assert_eq!(kinds(&r.flush().body), ["summary"]);
    // A deadline before the evaluation's own time: no debug event either.
    let mut r = Rig::new(config());
    e.debug_events_until_date = Some(T - 1);
    r.input(Input::Record(Record::Evaluation(e)));
    assert_eq!(kinds(&r.flush().body), ["index", "summary"]);
}

#[test]
fn a_failed_post_is_retried_once_with_the_same_payload_id() {
    let mut r = Rig::new(config());
    r.eval(&user("u1"), "f", false);
    let first = r.flush();
    assert!(r.answer(first.conn, 503, None).is_empty());
    assert!(matches!(
        r.events.last(),
        Some(Event::Failed { retrying: true, .. })
    ));
    assert!(r.advance(Duration::from_millis(999)).is_empty());
    let again = r.advance(Duration::from_millis(1));
    assert_eq!(again.len(), 1);
    assert_eq!(
        again[0].header("X-LaunchDarkly-Payload-ID"),
        first.header("X-LaunchDarkly-Payload-ID")
    );
    assert_eq!(again[0].body, first.body);
    // A network error on the retry: dropped.
    r.input(Input::Closed {
        conn: again[0].conn,
        cause: CloseCause::Io(crate::IoCause {
            kind: std::io::ErrorKind::ConnectionReset,
            message: "reset".into(),
        }),
    });
    assert!(matches!(
        r.events.last(),
        Some(Event::Failed {
            retrying: false,
            events: 2,
            ..
        })
    ));
    assert_eq!(r.p.in_flight(), 0);
    // The next payload has a new id.
    r.eval(&user("u2"), "f", false);
    let next = r.flush();
    assert_ne!(
        next.header("X-LaunchDarkly-Payload-ID"),
        first.header("X-LaunchDarkly-Payload-ID")
    );
}

#[test]
fn an_unrecoverable_status_stops_delivery_for_good() {
    for status in [401, 403, 404] {
        let mut r = Rig::new(config());
        r.eval(&user("u1"), "f", false);
        let sent = r.flush();
        r.answer(sent.conn, status, None);
        assert!(r.events.contains(&Event::Disabled { status }));
        assert!(r.p.is_disabled());
        r.eval(&user("u2"), "f", true);
        assert!(r.input(Input::Flush).is_empty());
        assert!(r.advance(Duration::from_secs(10)).is_empty());
    }
    // 400, 408, 429 and 5xx are not final.
    for status in [400, 408, 429, 500] {
        let mut r = Rig::new(config());
        r.eval(&user("u1"), "f", false);
        let sent = r.flush();
        r.answer(sent.conn, status, None);
        assert!(!r.p.is_disabled(), "{status}");
    }
}

#[test]
fn the_queue_drops_beyond_its_capacity_and_counts() {
    let mut c = config();
    c.capacity = 3;
    let mut r = Rig::new(c);
    for i in 0..5 {
        r.eval(&user(&format!("u{i}")), "f", true);
    }
    assert_eq!(r.p.queued(), 3);
    assert_eq!(r.p.dropped(), 7);
    assert!(r.events.contains(&Event::QueueFull { capacity: 3 }));
    let sent = r.flush();
    assert_eq!(kinds(&sent.body), ["index", "feature", "index", "summary"]);
    assert_eq!(
        sent.body[3]["features"]["f"]["counters"][0]["count"], 5,
        "the summary counts everything"
    );
}

#[test]
fn identify_custom_and_anonymous_contexts() {
    let mut c = config();
    c.omit_anonymous_contexts = true;
    let mut r = Rig::new(c);
    let anon = context(json!({"kind":"user","key":"a","anonymous":true,"name":"x"}));
    let multi = context(
        json!({"kind":"multi","user":{"key":"a","anonymous":true},"org":{"key":"o","name":"O"}}),
    );
    r.input(Input::Record(Record::Identify(Identify {
        creation_date: T,
        context: anon.clone(),
    })));
    r.input(Input::Record(Record::Identify(Identify {
        creation_date: T,
        context: multi.clone(),
    })));
    r.input(Input::Record(Record::Custom(Custom {
        creation_date: T,
        context: anon.clone(),
        key: "clicked".into(),
        data: Some(json!({"a": 1})),
        metric_value: Some(2.5),
    })));
    let sent = r.flush();
    assert_eq!(kinds(&sent.body), ["identify", "custom"]);
    assert_eq!(
        sent.body[0]["context"],
        json!({"kind":"org","key":"o","name":"O"})
    );
    let custom = &sent.body[1];
    assert_eq!(custom["key"], "clicked");
    assert_eq!(custom["data"], json!({"a": 1}));
    assert_eq!(custom["metricValue"], 2.5);
    assert_eq!(
        custom["context"],
        json!({"kind":"user","key":"a","anonymous":true,"_meta":{"redactedAttributes":["name"]}})
    );
}

#[test]
fn gzip_and_diagnostics() {
    let mut c = config();
    c.gzip = true;
    c.diagnostics = Some(DiagnosticInfo {
        configuration: json!({"eventsCapacity": 10000}),
        sdk: json!({"name": "flagsync"}),
        platform: json!({"name": "rust"}),
    });
    let mut r = Rig::new(c);
    let init = r.drain();
    assert_eq!(init.len(), 1);
    assert_eq!(init[0].target, "/diagnostic");
    assert_eq!(init[0].body["kind"], "diagnostic-init");
    assert_eq!(init[0].body["creationDate"], T);
    assert_eq!(init[0].body["id"]["sdkKeySuffix"], "123456");
    assert!(init[0].header("X-LaunchDarkly-Payload-ID").is_none());
    r.answer(init[0].conn, 202, None);
    assert!(r.events.contains(&Event::DiagnosticDelivered));
    r.eval(&user("u1"), "f", false);
    let sent = r.flush();
    assert_eq!(sent.header("Content-Encoding"), Some("gzip"));
    assert_eq!(kinds(&sent.body), ["index", "summary"]);
    r.answer(sent.conn, 202, None);
    r.input(Input::StreamInit {
        at: T,
        duration_ms: 12,
        failed: false,
    });
    let mut periodic = Vec::new();
    for _ in 0..180 {
        periodic.extend(r.advance(Duration::from_secs(5)));
    }
    let diag: Vec<&Sent> = periodic
        .iter()
        .filter(|s| s.target == "/diagnostic")
        .collect();
    assert_eq!(diag.len(), 1);
    let d = &diag[0].body;
    assert_eq!(d["kind"], "diagnostic");
    assert_eq!(d["creationDate"], T + 900_000);
    assert_eq!(d["dataSinceDate"], T);
    assert_eq!(d["eventsInLastBatch"], 0);
    assert_eq!(
        d["streamInits"],
        json!([{"timestamp": T, "durationMillis": 12, "failed": false}])
    );
}

#[test]
fn close_flushes_and_reports_closed_when_every_request_ended() {
    let mut r = Rig::new(config());
    r.eval(&user("u1"), "f", false);
    let sent = r.input(Input::Close);
    assert_eq!(sent.len(), 1);
    assert!(!r.events.contains(&Event::Closed));
    r.answer(sent[0].conn, 202, None);
    assert!(r.events.contains(&Event::Closed));
    // Nothing is accepted or scheduled after.
    r.eval(&user("u2"), "f", true);
    assert!(r.input(Input::Flush).is_empty());
    assert!(matches!(r.p.poll_output(), Output::Wait(None)));
}

#[test]
fn sampling_ratio_zero_keeps_no_full_event_but_counts() {
    let mut r = Rig::new(config());
    let mut e = evaluation(T, &user("u1"), "f", true);
    e.sampling_ratio = Some(0);
    r.input(Input::Record(Record::Evaluation(e.clone())));
    e.exclude_from_summaries = true;
    r.input(Input::Record(Record::Evaluation(e)));
    let sent = r.flush();
    assert_eq!(kinds(&sent.body), ["index", "summary"]);
    assert_eq!(sent.body[1]["features"]["f"]["counters"][0]["count"], 1);
}

#[test]
fn a_bad_events_uri_sends_nothing() {
    let mut c = config();
    c.events_uri = "not a url".into();
    let mut r = Rig::new(c);
    r.eval(&user("u1"), "f", true);
    assert!(r.input(Input::Flush).is_empty());
}

/// What a property test does next.
#[derive(Debug, Clone)]
enum Step {
    Eval { ctx: u8, flag: u8, track: bool },
    Merged(u8),
    Flush,
    Answer(u16),
    Advance(u16),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u8..20, 0u8..4, any::<bool>()).prop_map(|(ctx, flag, track)| Step::Eval {
            ctx,
            flag,
            track
        }),
        (1u8..5).prop_map(Step::Merged),
        Just(Step::Flush),
        prop_oneof![Just(202u16), Just(503), Just(500)].prop_map(Step::Answer),
        (0u16..3000).prop_map(Step::Advance),
    ]
}

proptest! {
    /// Every evaluation is counted exactly once in what is sent, whatever the order of
    /// flushes, merges and retries; the queue never exceeds its capacity.
    #[test]
    fn summaries_count_every_evaluation_and_the_queue_stays_bounded(
        steps in proptest::collection::vec(step(), 1..80),
        capacity in 1usize..8,
    ) {
        let mut c = config();
        c.capacity = capacity;
        let mut r = Rig::new(c);
        let mut recorded = 0u64;
        let mut pending: Vec<Sent> = Vec::new();
        let mut counted = 0u64;
        let mut ids: std::collections::HashMap<String, Value> = std::collections::HashMap::new();
        let mut take = |sent: Vec<Sent>, pending: &mut Vec<Sent>| {
            for s in sent {
                if let Some(id) = s.header("X-LaunchDarkly-Payload-ID") {
                    // The same id always carries the same payload.
                    if let Some(body) = ids.get(id) {
                        assert_eq!(body, &s.body);
                    }
                    ids.insert(id.to_owned(), s.body.clone());
                }
                pending.push(s);
            }
        };
        for s in steps {
            let sent = match s {
                Step::Eval { ctx, flag, track } => {
                    recorded += 1;
                    r.eval(&user(&format!("u{ctx}")), &format!("f{flag}"), track)
                }
                Step::Merged(n) => {
                    let mut s = Summarizer::new();
                    for _ in 0..n {
                        recorded += 1;
                        s.record(T, "m", ["user"], Some(0), Some(1), || json!(1), || json!(0));
                    }
                    r.input(Input::Summary(s))
                }
                Step::Flush => r.input(Input::Flush),
                Step::Answer(status) => match pending.pop() {
                    Some(p) => {
                        let n = r.events.len();
                        let more = r.answer(p.conn, status, None);
                        if r.events[n..].iter().any(|e| matches!(e, Event::Delivered { .. })) {
                            counted += count_summary(&p.body);
                        }
                        more
                    }
                    None => Vec::new(),
                },
                Step::Advance(ms) => r.advance(Duration::from_millis(u64::from(ms))),
            };
            take(sent, &mut pending);
            prop_assert!(r.p.queued() <= capacity);
        }
        // Deliver everything that is left.
        take(r.input(Input::Flush), &mut pending);
        for _ in 0..10 {
            while let Some(p) = pending.pop() {
                let n = r.events.len();
                let more = r.answer(p.conn, 202, None);
                if r.events[n..].iter().any(|e| matches!(e, Event::Delivered { .. })) {
                    counted += count_summary(&p.body);
                }
                take(more, &mut pending);
            }
            let more = r.advance(Duration::from_secs(1));
            take(more, &mut pending);
        }
        prop_assert_eq!(r.p.in_flight(), 0);
        // Payloads that failed twice are lost; count them as the processor reports.
        let lost: u64 = r.events.iter().filter_map(|e| match e {
            Event::Failed { retrying: false, .. } => Some(1),
            _ => None,
        }).sum();
        if lost == 0 {
            prop_assert_eq!(counted, recorded);
        } else {
            prop_assert!(counted <= recorded);
        }
    }
}

fn count_summary(body: &Value) -> u64 {
    body.as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "summary")
        .flat_map(|e| e["features"].as_object().unwrap().values())
        .flat_map(|f| f["counters"].as_array().unwrap().iter())
        .map(|c| c["count"].as_u64().unwrap())
        .sum()
}

#[test]
fn close_sends_what_waited_for_a_free_sender() {
    let mut c = config();
    c.max_concurrent_posts = 2;
    let mut r = Rig::new(c);
    let mut posts = Vec::new();
    for i in 0..2 {
        r.eval(&user(&format!("u{i}")), "f", true);
        posts.push(r.flush());
    }
    // Both senders busy: this flush keeps its events.
    r.eval(&user("u9"), "f", true);
    assert!(r.input(Input::Flush).is_empty());
    assert!(r.input(Input::Close).is_empty());
    assert!(!r.events.contains(&Event::Closed));
    // A sender frees up: the rest goes out, and closed follows its answer.
    let last = r.answer(posts[0].conn, 202, None);
    assert_eq!(last.len(), 1);
    assert_eq!(kinds(&last[0].body), ["index", "feature", "summary"]);
    r.answer(posts[1].conn, 202, None);
    assert!(!r.events.contains(&Event::Closed));
    r.answer(last[0].conn, 202, None);
    assert!(r.events.contains(&Event::Closed));
}
