#![allow(clippy::disallowed_methods, missing_docs)]
use bytes::Bytes;
use flagsync_core::fdv1::{Event, parse_event};
use flagsync_core::store::{ChangeSet, Kind, Store, decode};
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::time::Instant;
fn main() {
    let all = std::fs::read("target/payloads/flags-50000.json").unwrap();
    let mut v = b"{\"path\":\"/\",\"data\":".to_vec();
    v.extend_from_slice(&all);
    v.push(b'}');
    let data = Bytes::from(v);
    let allb = Bytes::from(all);
    for _ in 0..3 {
        let t = Instant::now();
        #[derive(serde::Deserialize)]
        struct A<'a> {
            #[serde(borrow)]
            flags: HashMap<&'a str, &'a RawValue>,
        }
        let a: A<'_> = serde_json::from_slice(&allb).unwrap();
        let t_raw = t.elapsed();
        let t = Instant::now();
        let mut n = 0;
        for (_, r) in &a.flags {
            let b = Bytes::copy_from_slice(r.get().as_bytes());
            n += decode(Kind::Flag, b).unwrap().depends_on.len();
        }
        let t_dec = t.elapsed();
        let bs: Vec<Bytes> = a
            .flags
            .values()
            .map(|r| Bytes::copy_from_slice(r.get().as_bytes()))
            .collect();
        let t = Instant::now();
        for b in &bs {
            let _: serde::de::IgnoredAny = serde_json::from_slice(b).unwrap();
        }
        let t_ign = t.elapsed();
        let t = Instant::now();
        for b in &bs {
            let _ = decode(Kind::Flag, b.clone()).unwrap();
        }
        let t_dec2 = t.elapsed();
        println!("per-item ignored {:?} decode {:?}", t_ign, t_dec2);
        let t = Instant::now();
        let ev = parse_event("put", &data).unwrap();
        let t_parse = t.elapsed();
        let Event::Put(c) = ev else { panic!() };
        let t = Instant::now();
        let mut s = Store::new();
        let a2 = s.apply(ChangeSet::fdv1_full(c));
        let t_apply = t.elapsed();
        println!(
            "raw {:?} decode {:?} ({n} deps) parse_event {:?}  apply {:?} ({} changed)",
            t_raw,
            t_dec,
            t_parse,
            t_apply,
            a2.changed_flags.len()
        );
    }
}
