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
