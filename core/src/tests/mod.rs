//! Whole-system tests under virtual time: PROTOCOL.md C.2 (FDv1 rows), Part E 16–27 and
//! 39–40, and the B §7 defects.

mod fdv1_poll;
mod fdv1_stream;
mod fdv2;
mod fdv2_limits;
mod fdv2_properties;
mod hostile;
mod persistence;
mod properties;

use std::time::Duration;

use crate::testing::{End, Harness, Reply, Response, origin};
use crate::{Config, DataSystem, Kind, Mode};

pub(crate) fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

pub(crate) fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

pub(crate) fn config(mode: Mode) -> Config {
    let mut c = Config::new("sdk-test-key");
    c.stream_uri = "http://stream.test:8030/".into();
    c.polling_uri = "http://poll.test:8031".into();
    c.mode = mode;
    c
}

pub(crate) fn harness(config: Config) -> Harness {
    let t0 = origin();
    Harness::new(DataSystem::new(config, 42, t0).unwrap(), t0)
}

pub(crate) fn flag_json(key: &str, version: u64) -> String {
    format!(r#"{{"key":"{key}","version":{version},"on":true,"variations":[true,false]}}"#)
}

pub(crate) fn all_data(flags: &[(&str, u64)], segments: &[(&str, u64)]) -> String {
    let f: Vec<String> = flags
        .iter()
        .map(|(k, v)| format!(r#""{k}":{}"#, flag_json(k, *v)))
        .collect();
    let s: Vec<String> = segments
        .iter()
        .map(|(k, v)| format!(r#""{k}":{{"key":"{k}","version":{v}}}"#))
        .collect();
    format!(
        r#"{{"flags":{{{}}},"segments":{{{}}}}}"#,
        f.join(","),
        s.join(",")
    )
}

pub(crate) fn put(flags: &[(&str, u64)], segments: &[(&str, u64)]) -> String {
    format!(
        "event: put\ndata: {{\"path\":\"/\",\"data\":{}}}\n\n",
        all_data(flags, segments)
    )
}

pub(crate) fn patch(kind: Kind, key: &str, version: u64) -> String {
    let prefix = kind.fdv1_path_prefix();
    format!(
        "event: patch\ndata: {{\"path\":\"{prefix}{key}\",\"data\":{}}}\n\n",
        flag_json(key, version)
    )
}

pub(crate) fn delete(kind: Kind, key: &str, version: u64) -> String {
    let prefix = kind.fdv1_path_prefix();
    format!("event: delete\ndata: {{\"path\":\"{prefix}{key}\",\"version\":{version}}}\n\n")
}

pub(crate) fn stream(body: &str) -> Reply {
    Reply::Respond(Response::sse(body, End::Hang))
}

/// Live items of `kind` as (key, version), sorted.
pub(crate) fn items(h: &Harness, kind: Kind) -> Vec<(String, u64)> {
    h.system
        .snapshot()
        .sorted(kind)
        .into_iter()
        .map(|(k, i)| (k.to_owned(), i.version))
        .collect()
}
