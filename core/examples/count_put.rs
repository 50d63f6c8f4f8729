//! One unit of work per run, for instruction counts that do not depend on machine load
//! (BENCHMARKS.md): `valgrind --tool=callgrind target/release/examples/count_put MODE FILE`
//! with MODE `ignore` (serde_json skipping the payload: a floor), `official` (serde_json
//! into the official evaluation model), `put` (our FDv1 put parse), `apply` (parse and
//! store) or `pipeline` (SSE framing in 16 KiB reads, parse and store).
use bytes::Bytes;
fn main() {
    let mode = std::env::args().nth(1).unwrap();
    let all = std::fs::read(std::env::args().nth(2).unwrap()).unwrap();
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
            #[derive(serde::Deserialize)]
            struct All {
                flags: std::collections::HashMap<String, launchdarkly_server_sdk_evaluation::Flag>,
                segments:
                    std::collections::HashMap<String, launchdarkly_server_sdk_evaluation::Segment>,
            }
            let all: All = serde_json::from_slice(&all).unwrap();
            assert!(all.flags.len() + all.segments.len() > 0);
        }
        "pipeline" => {
            let mut ev = b"event: put\ndata: ".to_vec();
            ev.extend_from_slice(&data);
            ev.extend_from_slice(b"\n\n");
            let mut parser = flagsync_core::sse::Parser::new(Default::default());
            let mut store = flagsync_core::store::Store::new();
            for chunk in ev.chunks(16 * 1024) {
                parser.handle_bytes(chunk);
                while let Some(Ok(flagsync_core::sse::Item::Event(e))) = parser.poll_item() {
                    let flagsync_core::fdv1::Event::Put(c) =
                        flagsync_core::fdv1::parse_event(&e.event_type, &e.data).unwrap()
                    else {
                        panic!()
                    };
                    store.apply(flagsync_core::store::ChangeSet::fdv1_full(c));
                }
            }
            assert!(store.initialized());
        }
        _ => panic!("mode"),
    }
}
