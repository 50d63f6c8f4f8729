//! Unit and property tests of the FDv2 events, change-set builder, protocol and polling
//! payloads, one file per topic; the helpers they share are here.

use proptest::prelude::*;

use super::*;
use crate::store::{ApplyMode, ChangeSet, Item, Snapshot, Store, Transfer};

mod change_set_builder;
mod event_shapes;
mod poll_reading;
mod polling;
mod properties;
mod protocol;

fn parse(name: &str, data: &str) -> Result<Event, Error> {
    parse_event(name, &Bytes::copy_from_slice(data.as_bytes()))
}

fn ev(name: &str, data: &str) -> Event {
    parse(name, data).unwrap_or_else(|e| panic!("{name} {data}: {e:?}"))
}

fn intent(code: &str) -> Event {
    ev(
        "server-intent",
        &format!(r#"{{"payloads":[{{"id":"p","target":3,"intentCode":"{code}","reason":"r"}}]}}"#),
    )
}

fn put(kind: &str, key: &str, env_version: u64, obj_version: u64) -> Event {
    ev(
        "put-object",
        &format!(
            r#"{{"version":{env_version},"kind":"{kind}","key":"{key}","object":{{"key":"{key}","version":{obj_version}}}}}"#
        ),
    )
}

fn del(kind: &str, key: &str, version: u64) -> Event {
    ev(
        "delete-object",
        &format!(r#"{{"version":{version},"kind":"{kind}","key":"{key}"}}"#),
    )
}

fn transferred(state: &str, version: u64) -> Event {
    ev(
        "payload-transferred",
        &format!(r#"{{"state":"{state}","version":{version}}}"#),
    )
}

fn sel(state: &str, version: u64) -> Selector {
    Selector {
        state: state.into(),
        version,
    }
}

/// Feed `events` to `protocol`, applying every change set to `store`; return the
/// actions.
fn run(protocol: &mut Protocol, store: &mut Store, events: Vec<Event>) -> Vec<Action> {
    events
        .into_iter()
        .map(|e| {
            let a = protocol.handle_event(e).unwrap();
            if let Action::Apply(cs) = &a {
                store.apply(cs.clone());
            }
            a
        })
        .collect()
}

fn flags(store: &Store) -> Vec<(String, u64)> {
    store
        .data()
        .sorted(Kind::Flag)
        .into_iter()
        .map(|(k, i)| (k.to_owned(), i.version))
        .collect()
}

fn schema(event: &'static str) -> Error {
    Error::Schema { event }
}

/// Parse a polling response body.
fn poll(body: &str) -> Result<ChangeSet, Error> {
    parse_poll(&Bytes::copy_from_slice(body.as_bytes()))
}

// Polling response elements (E 38).
const INTENT_FULL: &str = r#"{"event":"server-intent","data":{"payloads":[{"id":"p","target":1,"intentCode":"xfer-full"}]}}"#;
const PUT_A: &str = r#"{"event":"put-object","data":{"version":461,"kind":"flag","key":"a","object":{"key":"a","version":112}}}"#;
const DEL_B: &str = r#"{"event":"delete-object","data":{"version":5,"kind":"segment","key":"b"}}"#;
const DONE: &str = r#"{"event":"payload-transferred","data":{"state":"s","version":1}}"#;

/// A polling response body of `list`.
fn events(list: &[&str]) -> String {
    format!(r#"{{"events":[{}]}}"#, list.join(","))
}
