//! One unit of work per run, for instruction counts that do not depend on machine load
//! (BENCHMARKS.md): `valgrind --tool=callgrind target/release/examples/count_put MODE FILE`
//! with MODE `ignore` (serde_json skipping the payload: a floor), `official` (serde_json
//! into the official evaluation model), `put` (our FDv1 put parse), `apply` (parse and
//! store), `pipeline` (SSE framing in 16 KiB reads, parse and store) or `patches` (the
//! store from FILE, then 10,000 `patch` events through SSE, FDv1 and the store, as in the
//! `patches` bench; count only the patches with `--toggle-collect='*apply_patches*'`).
//!
//! With `FLAGSYNC_ROUNDS=N`, MODE `pipeline` or `official` runs N times in this process
//! and prints each round's time and minor page faults, the inputs prepared beforehand
//! and each result dropped after its round is timed: round 0 is the work as a process
//! does it at start-up, on a fresh heap.
use bytes::Bytes;

#[path = "../benches/common/mod.rs"]
mod common;
/// The official model of a full data set.
#[derive(serde::Deserialize)]
#[allow(dead_code, reason = "built to be measured, never read")]
struct All {
    flags: std::collections::HashMap<String, launchdarkly_server_sdk_evaluation::Flag>,
    segments: std::collections::HashMap<String, launchdarkly_server_sdk_evaluation::Segment>,
}

/// Minor page faults of this process so far (`/proc/self/stat`, field 10).
fn minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    fields
        .split_whitespace()
        .nth(7)
        .and_then(|f| f.parse().ok())
        .unwrap_or(0)
}

#[allow(
    clippy::disallowed_methods,
    reason = "a benchmark tool outside the core: it has to read the clock"
)]
fn rounds(mode: &str, all: &[u8], rounds: usize) {
    let ev = common::put_event(all);
    for round in 0..rounds {
        let faults = minor_faults();
        let start = std::time::Instant::now();
        let out: Box<dyn std::any::Any> = match mode {
            "pipeline" => {
                let mut store = flagsync_core::store::Store::new();
                common::apply_stream(&mut store, &ev);
                assert!(store.initialized());
                Box::new(store)
            }
            "official" => Box::new(serde_json::from_slice::<All>(all).unwrap()),
            _ => panic!("FLAGSYNC_ROUNDS takes MODE pipeline or official"),
        };
        let elapsed = start.elapsed();
        let faults = minor_faults() - faults;
        drop(out);
        println!(
            "{mode} round {round}: {:.1} ms, {faults} minor faults",
            elapsed.as_secs_f64() * 1e3
        );
    }
}

fn main() {
    let mode = std::env::args().nth(1).unwrap();
    let all = std::fs::read(std::env::args().nth(2).unwrap()).unwrap();
    if let Some(n) = std::env::var("FLAGSYNC_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        return rounds(&mode, &all, n);
    }
    let mut v = b"{\"path\":\"/\",\"data\":".to_vec();
    v.extend_from_slice(&all);
    v.push(b'}');
    let data = Bytes::from(v);
    match mode.as_str() {
        "ignore" => drop(serde_json::from_slice::<serde::de::IgnoredAny>(&data).unwrap()),
        "value" => drop(serde_json::from_slice::<serde_json::Value>(&data).unwrap()),
        "put" => drop(flagsync_core::fdv1::parse_event("put", &data).unwrap()),
        "apply" => {
            let flagsync_core::fdv1::Event::Put(c) =
                flagsync_core::fdv1::parse_event("put", &data).unwrap()
            else {
                panic!()
            };
            let mut s = flagsync_core::store::Store::new();
            s.apply(flagsync_core::store::ChangeSet::fdv1_full(c));
        }
        "official" => {
            let all: All = serde_json::from_slice(&all).unwrap();
            assert!(all.flags.len() + all.segments.len() > 0);
        }
        "pipeline" => {
            let mut ev = b"event: put\ndata: ".to_vec();
            ev.extend_from_slice(&data);
            ev.extend_from_slice(b"\n\n");
            let mut store = flagsync_core::store::Store::new();
            common::apply_stream(&mut store, &Bytes::from(ev));
            assert!(store.initialized());
        }
        "patches" => {
            let flagsync_core::fdv1::Event::Put(c) =
                flagsync_core::fdv1::parse_event("put", &data).unwrap()
            else {
                panic!()
            };
            let mut s = flagsync_core::store::Store::new();
            s.apply(flagsync_core::store::ChangeSet::fdv1_full(c));
            let keys: Vec<String> = s
                .data()
                .iter(flagsync_core::Kind::Flag)
                .map(|(k, _)| k.to_owned())
                .collect();
            let mut ev = Vec::new();
            for i in 0..10_000 {
                let key = &keys[i % keys.len()];
                ev.extend_from_slice(
                    format!(
                        "event: patch\ndata: {{\"path\":\"/flags/{key}\",\"data\":{{\"key\":\"{key}\",\"version\":{},\"on\":true,\"variations\":[true,false],\"fallthrough\":{{\"variation\":0}},\"offVariation\":1,\"salt\":\"s\"}}}}\n\n",
                        1_000_000 + i
                    )
                    .as_bytes(),
                );
            }
            // As in the bench: the patches land on a clone, so shared parts get copied.
            let before = s.clone();
            let n = apply_patches(&mut s, &ev);
            assert_eq!(n, 10_000);
            drop(before);
        }
        _ => panic!("mode"),
    }
}

/// 10,000 patches through SSE, FDv1 and the store (a function of its own so that
/// callgrind can count it alone).
#[inline(never)]
fn apply_patches(s: &mut flagsync_core::store::Store, ev: &[u8]) -> usize {
    let mut parser = flagsync_core::sse::Parser::new(Default::default());
    let mut n = 0;
    for chunk in ev.chunks(16 * 1024) {
        parser.handle_bytes(chunk);
        while let Some(Ok(flagsync_core::sse::Item::Event(e))) = parser.poll_item() {
            if let Ok(flagsync_core::fdv1::Event::Patch(c)) =
                flagsync_core::fdv1::parse_event(&e.event_type, &e.data)
            {
                n += s
                    .apply(flagsync_core::store::ChangeSet::fdv1_upsert(c))
                    .written;
            }
        }
    }
    n
}
