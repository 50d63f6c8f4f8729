//! The core's side of a persistent store: what it writes, in which order, and the
//! outage and recovery rules (PROTOCOL.md B §4.2–4.5, §5.8–5.9, A.4.1, A.4.8, A.4.9).

use super::*;
use crate::config::Fdv2Config;
use crate::status::{ErrorKind, State};
use crate::{Event, Input, Persist, PersistenceConfig, StoreMode, StoreStatus};

fn with_store(mode: Mode, store: StoreMode) -> Harness {
    let mut c = config(mode);
    c.persistence = Some(PersistenceConfig {
        mode: store,
        ..PersistenceConfig::default()
    });
    harness(c)
}

/// (kind, key, version, deleted) of each item of an init.
fn init_items(p: &Persist) -> Vec<(Kind, String, u64, bool)> {
    match p {
        Persist::Init(items) => items
            .iter()
            .map(|(k, key, i)| (*k, key.clone(), i.version, i.deleted))
            .collect(),
        other => panic!("not an init: {other:?}"),
    }
}

fn upserts(h: &Harness) -> Vec<(Kind, String, u64, bool)> {
    h.persisted
        .iter()
        .filter_map(|(_, p)| match p {
            Persist::Upsert(k, key, i) => Some((*k, key.clone(), i.version, i.deleted)),
            _ => None,
        })
        .collect()
}

fn store_statuses(h: &Harness) -> Vec<StoreStatus> {
    h.events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::StoreStatusChanged(s) => Some(*s),
            _ => None,
        })
        .collect()
}

fn prereq_flag(key: &str, version: u64, prereq: &str) -> String {
    format!(
        r#"{{"key":"{key}","version":{version},"prerequisites":[{{"key":"{prereq}","variation":0}}]}}"#
    )
}

#[test]
fn put_is_written_in_dependency_order_and_patches_are_upserted() {
    let mut h = with_store(Mode::Streaming, StoreMode::ReadWrite);
    let data = format!(
        r#"{{"flags":{{"a":{},"b":{}}},"segments":{{"s":{{"key":"s","version":1}}}}}}"#,
        prereq_flag("a", 1, "b"),
        flag_json("b", 1)
    );
    let body = format!("event: put\ndata: {{\"data\":{data}}}\n\n")
        + &patch(Kind::Flag, "b", 2)
        + &patch(Kind::Flag, "b", 1) // stale: not applied, not written
        + &delete(Kind::Flag, "a", 5);
    h.reply(stream(&body));
    h.start(ms(100));
    assert_eq!(
        init_items(&h.persisted[0].1),
        [
            (Kind::Segment, "s".into(), 1, false),
            (Kind::Flag, "b".into(), 1, false),
            (Kind::Flag, "a".into(), 1, false),
        ]
    );
    assert_eq!(
        upserts(&h),
        [
            (Kind::Flag, "b".into(), 2, false),
            (Kind::Flag, "a".into(), 5, true)
        ]
    );
    assert_eq!(
        h.system.store_status(),
        Some(StoreStatus {
            available: true,
            stale: false
        })
    );
}

#[test]
fn read_only_mode_never_writes() {
    let mut h = with_store(Mode::Streaming, StoreMode::ReadOnly);
    h.reply(stream(
        &(put(&[("a", 1)], &[]) + &patch(Kind::Flag, "a", 2)),
    ));
    h.start(ms(100));
    assert!(h.persisted.is_empty());
    assert_eq!(items(&h, Kind::Flag), [("a".to_owned(), 2)]);
}

#[test]
fn without_a_store_nothing_is_persisted() {
    let mut h = harness(config(Mode::Streaming));
    h.reply(stream(&put(&[("a", 1)], &[])));
    h.start(ms(100));
    assert!(h.persisted.is_empty());
    assert_eq!(h.system.store_status(), None);
}

#[test]
fn outage_holds_writes_polls_and_rewrites_everything_on_recovery() {
    let mut h = with_store(Mode::Streaming, StoreMode::ReadWrite);
    h.reply(Reply::Respond(
        Response::sse(&put(&[("a", 1), ("b", 1)], &[]), End::Hang)
            .then(secs(1), &patch(Kind::Flag, "a", 2))
            .then(secs(1), &delete(Kind::Flag, "b", 3)),
    ));
    h.start(ms(500));
    assert_eq!(h.persisted.len(), 1);
    // The init failed.
    h.input(Input::StoreFailed);
    let st = h.system.status();
    assert_eq!(st.state, State::Interrupted);
    assert_eq!(st.error.as_ref().unwrap().kind, ErrorKind::StoreError);
    assert_eq!(
        store_statuses(&h),
        [StoreStatus {
            available: false,
            stale: true
        }]
    );
    assert_eq!(h.persisted[1].1, Persist::CheckAvailable);
    // Two more updates arrive during the outage: applied in memory, with change events
    // (A.4.9), but not sent to the store.
    h.run_until(ms(2600));
    assert_eq!(items(&h, Kind::Flag), [("a".to_owned(), 2)]);
    assert!(upserts(&h).is_empty());
    let checks: Vec<Duration> = h
        .persisted
        .iter()
        .filter(|(_, p)| *p == Persist::CheckAvailable)
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(
        checks,
        [ms(500), ms(1000), ms(1500), ms(2000), ms(2500)],
        "every 0.5 s"
    );
    h.input(Input::StoreAvailable(false));
    h.run_until(ms(3000));
    h.input(Input::StoreAvailable(true));
    // The whole memory data set, tombstone included, is written back.
    let last = &h.persisted.last().unwrap().1;
    assert_eq!(
        init_items(last),
        [
            (Kind::Flag, "a".into(), 2, false),
            (Kind::Flag, "b".into(), 3, true)
        ]
    );
    assert_eq!(
        store_statuses(&h).last(),
        Some(&StoreStatus {
            available: true,
            stale: false
        })
    );
    assert_eq!(h.system.status().state, State::Valid);
    // No more checks.
    let n = h.persisted.len();
    h.run_until(secs(10));
    assert_eq!(h.persisted.len(), n);
}

#[test]
fn read_only_outage_recovers_without_writing() {
    let mut h = with_store(Mode::Streaming, StoreMode::ReadOnly);
    h.reply(stream(&put(&[("a", 1)], &[])));
    h.start(ms(100));
    h.input(Input::StoreFailed);
    h.input(Input::StoreAvailable(true));
    assert!(
        h.persisted
            .iter()
            .all(|(_, p)| *p == Persist::CheckAvailable)
    );
    assert_eq!(
        store_statuses(&h),
        [
            StoreStatus {
                available: false,
                stale: false
            },
            StoreStatus {
                available: true,
                stale: false
            }
        ]
    );
}

#[test]
fn fdv2_full_transfer_inits_and_changes_upsert_without_version_checks() {
    let mut c = config(Mode::Fdv2);
    c.fdv2 = Fdv2Config::custom().synchronizers([crate::config::SourceSpec::streaming()]);
    c.persistence = Some(PersistenceConfig::default());
    let mut h = harness(c);
    let ev = |name: &str, data: &str| format!("event: {name}\ndata: {data}\n\n");
    let put_obj = |k: &str, v: u64| {
        ev(
            "put-object",
            &format!(
                r#"{{"version":{v},"kind":"flag","key":"{k}","object":{}}}"#,
                flag_json(k, v)
            ),
        )
    };
    let body = ev(
        "server-intent",
        r#"{"payloads":[{"intentCode":"xfer-full"}]}"#,
    ) + &put_obj("a", 5)
        + &ev("payload-transferred", r#"{"state":"s1","version":1}"#)
        + &ev(
            "server-intent",
            r#"{"payloads":[{"intentCode":"xfer-changes"}]}"#,
        )
        + &put_obj("a", 1)
        + &ev(
            "delete-object",
            r#"{"version":7,"kind":"flag","key":"gone"}"#,
        )
        + &ev("payload-transferred", r#"{"state":"s2","version":2}"#);
    h.reply(stream(&body));
    h.start(ms(100));
    assert_eq!(
        init_items(&h.persisted[0].1),
        [(Kind::Flag, "a".into(), 5, false)]
    );
    assert_eq!(
        upserts(&h),
        [
            (Kind::Flag, "a".into(), 1, false),
            (Kind::Flag, "gone".into(), 7, true)
        ]
    );
}

/// Daemon mode has no data source to report on the data: once the driver has read an
/// initialized store the status is VALID, and again when the store is back after a
/// failure (issue 19, defect 6). Before, it stayed INITIALIZING forever.
#[test]
fn daemon_mode_is_valid_once_an_initialized_store_was_read() {
    let mut c = config(Mode::Fdv2);
    c.fdv2 = Fdv2Config::daemon();
    c.persistence = Some(crate::PersistenceConfig {
        mode: crate::StoreMode::ReadOnly,
        ..Default::default()
    });
    let mut h = harness(c);
    h.start(ms(10));
    assert_eq!(h.system.status().state, State::Initializing);
    // A failed first read (the store is down): still initializing, with the error.
    h.input(Input::StoreFailed);
    assert_eq!(h.system.status().state, State::Initializing);
    h.input(Input::StoreInitialized);
    assert_eq!(h.system.status().state, State::Valid);
    h.input(Input::StoreFailed);
    assert_eq!(h.system.status().state, State::Interrupted);
    h.input(Input::StoreAvailable(true));
    assert_eq!(h.system.status().state, State::Valid);
    h.input(Input::Command(crate::Command::Stop));
    h.input(Input::StoreInitialized);
    assert_eq!(h.system.status().state, State::Off);
}

/// With a data source, the source decides the status.
#[test]
fn store_initialized_is_ignored_with_a_data_source() {
    let mut h = harness(config(Mode::Streaming));
    h.start(ms(10));
    h.input(Input::StoreInitialized);
    assert_eq!(h.system.status().state, State::Initializing);
}

/// A store failure reported with its kind and message shows both in the status (issue
/// 19: a wrong password and a dead server no longer read the same).
#[test]
fn a_store_fault_carries_its_kind_and_message_into_the_status() {
    use crate::status::{Cause, StoreFault, StoreFaultKind};
    let mut h = with_store(Mode::Streaming, StoreMode::ReadWrite);
    h.start(ms(10));
    let fault = StoreFault {
        kind: StoreFaultKind::Authentication,
        message: "WRONGPASS invalid username-password pair".into(),
    };
    h.input(Input::StoreFault(fault.clone()));
    let error = h.system.status().error.clone().unwrap();
    assert_eq!(error.kind, ErrorKind::StoreError);
    assert_eq!(error.cause, Cause::StoreFault(fault));
    assert!(StoreFaultKind::Authentication.is_permanent());
    assert!(!StoreFaultKind::Unreachable.is_permanent());
    assert_eq!(h.system.store_status().map(|s| s.available), Some(false));
}
