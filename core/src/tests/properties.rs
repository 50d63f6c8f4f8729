//! Properties over generated server behaviour (STYLE.md §3.10).

use proptest::prelude::*;

use super::*;
use crate::testing::{End, Harness, Reply, Response};

#[derive(Debug, Clone)]
enum Fault {
    Put(Vec<(u8, u8)>),
    PutThenPatches(Vec<(u8, u8)>, Vec<(u8, u8)>),
    Refuse,
    Status(u16),
    Malformed,
    Truncated(Vec<(u8, u8)>),
    Reset,
}

fn fault() -> impl Strategy<Value = Fault> {
    let flags = || proptest::collection::vec((0u8..5, 0u8..5), 0..4);
    prop_oneof![
        flags().prop_map(Fault::Put),
        (flags(), flags()).prop_map(|(a, b)| Fault::PutThenPatches(a, b)),
        Just(Fault::Refuse),
        prop_oneof![Just(400u16), Just(401), Just(500), Just(503)].prop_map(Fault::Status),
        Just(Fault::Malformed),
        flags().prop_map(Fault::Truncated),
        Just(Fault::Reset),
    ]
}

fn named(v: &[(u8, u8)]) -> Vec<(String, u64)> {
    let mut m = std::collections::BTreeMap::new();
    for (k, ver) in v {
        m.insert(format!("f{k}"), u64::from(*ver));
    }
    m.into_iter().collect()
}

fn put_of(v: &[(u8, u8)]) -> String {
    let n = named(v);
    let refs: Vec<(&str, u64)> = n.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    put(&refs, &[])
}

fn reply(f: &Fault) -> Reply {
    match f {
        Fault::Put(v) => Reply::Respond(Response::sse(&put_of(v), End::Close)),
        Fault::PutThenPatches(v, p) => {
            let patches: String = p
                .iter()
                .map(|(k, ver)| patch(Kind::Flag, &format!("f{k}"), u64::from(*ver)))
                .collect();
            Reply::Respond(Response::sse(&(put_of(v) + &patches), End::Close))
        }
        Fault::Refuse => Reply::Refuse,
        Fault::Status(code) => Reply::Respond(Response::status(*code, "")),
        Fault::Malformed => {
            Reply::Respond(Response::sse("event: put\ndata: {sorry\n\n", End::Hang))
        }
        Fault::Truncated(v) => {
            let full = put_of(v);
            let cut = &full[..full.len() - 3];
            Reply::Respond(Response::sse(cut, End::Close))
        }
        Fault::Reset => Reply::Respond(Response::sse(": hi\n", End::Reset)),
    }
}

fn run(
    t0: std::time::Instant,
    faults: &[Fault],
    last: &[(u8, u8)],
    split: Option<usize>,
) -> Harness {
    let mut c = config(Mode::Streaming);
    // The last stream stays open and silent: keep it from timing out.
    c.stream_read_timeout = secs(24 * 3600);
    let mut h = Harness::new(crate::DataSystem::new(c, 42, t0).unwrap(), t0);
    h.split = split;
    for f in faults {
        h.reply(reply(f));
    }
    h.reply(Reply::Respond(Response::sse(&put_of(last), End::Hang)));
    h.start(secs(6 * 3600));
    h
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Chunking the server's bytes differently never changes the store, the events
    /// (statuses included) or the requests.
    #[test]
    fn chunking_never_changes_the_outcome(
        faults in proptest::collection::vec(fault(), 0..6),
        last in proptest::collection::vec((0u8..5, 0u8..5), 0..4),
        split in 1usize..40,
    ) {
        let t0 = crate::testing::origin();
        let whole = run(t0, &faults, &last, None);
        let pieces = run(t0, &faults, &last, Some(split));
        prop_assert_eq!(&whole.requests, &pieces.requests);
        prop_assert_eq!(&whole.events, &pieces.events);
        prop_assert_eq!(items(&whole, Kind::Flag), items(&pieces, Kind::Flag));
    }

    /// After any sequence of faults, the store equals the server's last complete data
    /// and no connection but the live one is open.
    #[test]
    fn store_ends_equal_to_the_last_complete_data(
        faults in proptest::collection::vec(fault(), 0..6),
        last in proptest::collection::vec((0u8..5, 0u8..5), 0..4),
    ) {
        let h = run(crate::testing::origin(), &faults, &last, None);
        prop_assert_eq!(items(&h, Kind::Flag), named(&last));
        prop_assert_eq!(h.system.status().state, crate::State::Valid);
        prop_assert_eq!(h.open_connections(), 1);
    }
}

/// The fuzz target's script runner, on a hand-written script: its invariant checks
/// run in every `cargo test`, not only under the fuzzer.
#[test]
fn script_runner_checks_hold_on_a_session_with_faults() {
    use crate::testing::{ScriptInput as S, ScriptRun, Step};
    let t0 = crate::testing::origin();
    let system = crate::DataSystem::new(config(Mode::Streaming), 3, t0).unwrap();
    let mut run = ScriptRun::new(system, t0);
    let steps = [
        (0, S::Start),
        (5, S::Connected(0)),
        (1, S::Head(0, 200, true)),
        (1, S::Data(0, put(&[("a", 5), ("b", 1)], &[]).into_bytes())),
        (1, S::Data(0, patch(Kind::Flag, "a", 3).into_bytes())),
        (1, S::Data(0, b"event: patch\ndata: {sorry\n\n".to_vec())),
        (2_000, S::Timeout),
        (5, S::Connected(1)),
        (1, S::Head(1, 503, false)),
        (1, S::Closed(1, true)),
        (40_000, S::Timeout),
        (1, S::Head(2, 200, true)),
        (1, S::Data(2, put(&[("a", 1)], &[]).into_bytes())),
        (301_000, S::Timeout),
        (1, S::Stop),
    ];
    for (advance_ms, input) in steps {
        run.step(&Step { advance_ms, input });
    }
    assert_eq!(items_of(&run.system), [("a".to_owned(), 1)]);
    assert_eq!(run.system.status().state, crate::State::Off);
}

fn items_of(system: &crate::DataSystem) -> Vec<(String, u64)> {
    system
        .snapshot()
        .sorted(Kind::Flag)
        .into_iter()
        .map(|(k, i)| (k.to_owned(), i.version))
        .collect()
}
