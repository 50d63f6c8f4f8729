//! Properties of the FDv2 coordinator over generated server behaviour (issue: "never
//! runs two synchronizers at once, never busy-loops, never loses a completed payload").

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use proptest::prelude::*;

use super::*;
use crate::config::{Fdv2Config, SourceSpec};
use crate::testing::{End, Reply, Response};

/// What one endpoint does on one attempt. Every payload is a full transfer of one flag
/// `p<N>` at version N with selector `s<N>` (or, for FDv1, `v<N>` and no selector), so
/// any mix of two payloads is visible.
#[derive(Debug, Clone)]
enum Behaviour {
    Payload { fallback: bool, close: bool },
    Partial,
    Goodbye,
    ServerError,
    Status(u16, bool),
    Refuse,
    Hang,
    Garbage,
}

fn behaviour() -> impl Strategy<Value = Behaviour> {
    prop_oneof![
        4 => (prop::bool::weighted(0.1), any::<bool>())
            .prop_map(|(fallback, close)| Behaviour::Payload { fallback, close }),
        1 => Just(Behaviour::Partial),
        1 => Just(Behaviour::Goodbye),
        1 => Just(Behaviour::ServerError),
        2 => (prop_oneof![Just(304u16), Just(400), Just(401), Just(500), Just(503)], prop::bool::weighted(0.1))
            .prop_map(|(c, f)| Behaviour::Status(c, f)),
        1 => Just(Behaviour::Refuse),
        1 => Just(Behaviour::Hang),
        1 => Just(Behaviour::Garbage),
    ]
}

fn preset() -> impl Strategy<Value = Fdv2Config> {
    prop_oneof![
        Just(Fdv2Config::default()),
        Just(Fdv2Config::streaming()),
        Just(Fdv2Config::polling()),
        Just(
            Fdv2Config::custom()
                .initializers([SourceSpec::polling(), SourceSpec::fdv1_polling()])
                .synchronizers([SourceSpec::polling(), SourceSpec::streaming()])
        ),
        Just(Fdv2Config::custom().synchronizers([SourceSpec::streaming()])),
    ]
}

fn sse_event(name: &str, data: &str) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn put_object(n: usize) -> (String, String) {
    (
        "put-object".into(),
        format!(
            r#"{{"version":{n},"kind":"flag","key":"p{n}","object":{}}}"#,
            flag_json(&format!("p{n}"), n as u64)
        ),
    )
}

fn intent_full() -> (String, String) {
    (
        "server-intent".into(),
        r#"{"payloads":[{"intentCode":"xfer-full"}]}"#.into(),
    )
}

fn transferred(n: usize) -> (String, String) {
    (
        "payload-transferred".into(),
        format!(r#"{{"state":"s{n}","version":{n}}}"#),
    )
}

/// The events of a behaviour, numbered `n`.
fn events(b: &Behaviour, n: usize) -> Vec<(String, String)> {
    match b {
        Behaviour::Payload { .. } => vec![intent_full(), put_object(n), transferred(n)],
        Behaviour::Partial => vec![intent_full(), put_object(n)],
        Behaviour::Goodbye => vec![
            intent_full(),
            put_object(n),
            ("goodbye".into(), r#"{"reason":"r"}"#.into()),
        ],
        Behaviour::ServerError => vec![
            intent_full(),
            put_object(n + 1000),
            ("error".into(), r#"{"payloadId":"x","reason":"r"}"#.into()),
            put_object(n),
            transferred(n),
        ],
        _ => Vec::new(),
    }
}

fn reply(path: &str, b: &Behaviour, n: usize) -> Reply {
    let fallback = matches!(
        b,
        Behaviour::Payload { fallback: true, .. } | Behaviour::Status(_, true)
    );
    let mut r = match b {
        Behaviour::Refuse => return Reply::Refuse,
        Behaviour::Hang => return Reply::Hang,
        Behaviour::Status(code, _) => Response::status(*code, ""),
        Behaviour::Garbage => Response::sse("event: server-intent\ndata: {oops\n\n", End::Close),
        _ if path == "/sdk/stream" => {
            let body: String = events(b, n).iter().map(|(e, d)| sse_event(e, d)).collect();
            let end = match b {
                Behaviour::Payload { close: true, .. } => End::Close,
                _ => End::Hang,
            };
            Response::sse(&body, end)
        }
        _ if path == "/sdk/poll" => {
            let list: Vec<String> = events(b, n)
                .iter()
                .map(|(e, d)| format!(r#"{{"event":"{e}","data":{d}}}"#))
                .collect();
            Response::status(200, &format!(r#"{{"events":[{}]}}"#, list.join(",")))
        }
        _ => Response::status(200, &all_data(&[(&format!("v{n}"), n as u64)], &[])),
    };
    if fallback {
        r = r.header("X-LD-FD-Fallback", "true");
    }
    Reply::Respond(r)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn coordinator_invariants(
        cfg in preset(),
        script in proptest::collection::vec((0usize..3, behaviour()), 1..40),
        minutes in 1u64..20,
    ) {
        let mut c = config(Mode::Fdv2);
        c.fdv2 = cfg;
        c.poll_interval = secs(30);
        let mut h = harness(c);
        let paths = ["/sdk/stream", "/sdk/poll", "/sdk/latest-all"];
        for (i, (p, b)) in script.iter().enumerate() {
            h.reply_to(paths[*p], reply(paths[*p], b, i + 1));
        }
        // Checked after every drain: the store holds nothing, or exactly one complete
        // payload; once it holds data it never goes back to nothing.
        let seen_data = Rc::new(RefCell::new(false));
        let seen = Rc::clone(&seen_data);
        h.on_drain = Some(Box::new(move |system, at| {
            let flags: BTreeMap<String, u64> = system
                .snapshot()
                .sorted(Kind::Flag)
                .into_iter()
                .map(|(k, i)| (k.to_owned(), i.version))
                .collect();
            if flags.is_empty() {
                assert!(!*seen.borrow(), "a completed payload was lost at {at:?}");
                return;
            }
            *seen.borrow_mut() = true;
            assert_eq!(flags.len(), 1, "a mix of payloads at {at:?}: {flags:?}");
            let (key, version) = flags.into_iter().next().unwrap();
            let selector = system.store().selector();
            match key.strip_prefix('p') {
                Some(n) => {
                    assert_eq!(n.parse::<u64>().unwrap(), version);
                    assert_eq!(selector.state, format!("s{n}"));
                }
                None => assert!(!selector.is_defined(), "FDv1 data with a selector"),
            }
            // Availability follows the selector.
            assert_eq!(
                system.data_availability() == crate::DataAvailability::Refreshed,
                selector.is_defined()
            );
        }));
        // The harness itself asserts that every deadline moves forward (no busy loop).
        h.start(secs(60 * minutes));
        prop_assert!(h.max_open <= 1, "{} connections open at once", h.max_open);
        // Nothing hangs forever unnoticed: either a source runs (and has a deadline), or
        // the system stopped for good and says OFF.
        match h.system.poll_output() {
            crate::Output::Wait(Some(_)) => prop_assert!(h.system.active_source().is_some()),
            crate::Output::Wait(None) => {
                prop_assert_eq!(h.system.status().state, crate::State::Off);
                prop_assert!(h.system.ready());
            }
            other => prop_assert!(false, "undrained output {:?}", other),
        }
    }
}
