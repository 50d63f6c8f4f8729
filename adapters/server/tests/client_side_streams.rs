//! The client-side and mobile streams (`GET /eval/{envId}/{ctx}`, `REPORT /meval`):
//! a `put` of the evaluated flags, then a `patch` or `delete` per changed flag, and
//! the fan-out of a change to many streams.

mod common;

use common::client::*;

use std::time::{Duration, Instant};

use flagsync_server::Server;
use serde_json::json;

#[test]
fn streams_put_then_patch_and_delete() {
    let server = start();
    let addr = server.addr();
    let ctx = ctx_path(&json!({"kind": "user", "key": "u-out"}));
    let mut cs = get_stream(addr, &format!("/eval/{ENV_ID}/{ctx}?withReasons=true"));
    assert_eq!(cs.status, 200);
    assert!(
        cs.header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert!(cs.header("access-control-allow-origin").is_some());
    let mut mobile = open_stream(
        addr,
        "REPORT",
        "/meval",
        &[("Authorization", MOBILE_KEY)],
        br#"{"kind":"user","key":"u-out"}"#,
    );
    assert_eq!(mobile.status, 200);
    let (name, put) = cs.next_event();
    assert_eq!(name, "put");
    assert_eq!(put["cs"]["value"], 1);
    assert_eq!(put["cs"]["reason"]["kind"], "FALLTHROUGH");
    assert!(put.get("mobile-only").is_none());
    let (name, mput) = mobile.next_event();
    assert_eq!(name, "put");
    assert_eq!(mput["mobile-only"]["value"], "b");
    // `/metrics` counts both as client streams, not as server-side SDKs' streams.
    let text = String::from_utf8_lossy(&get(addr, "/metrics").body).into_owned();
    for (protocol, open) in [("client", 2), ("fdv1", 0), ("fdv2", 0), ("ofrep", 0)] {
        let line = format!("flagsync_server_streams_open{{protocol=\"{protocol}\"}} {open}\n");
        assert!(text.contains(&line), "{line} in {text}");
    }
    let v0 = put["cs"]["version"].as_u64().unwrap();

    // A segment change changes `cs` for this context: a patch, with a newer version.
    server
        .set_segment(
            "seg",
            json!({"key": "seg", "version": 2, "included": ["u-in", "u-out"],
        "excluded": [], "rules": [], "salt": "s"}),
        )
        .unwrap();
    let (name, patch) = cs.next_event();
    assert_eq!(name, "patch");
    assert_eq!(patch["key"], "cs");
    assert_eq!(patch["value"], 2);
    assert_eq!(patch["variation"], 1);
    assert_eq!(patch["flagVersion"], 3);
    assert_eq!(patch["reason"]["kind"], "RULE_MATCH");
    assert!(patch["version"].as_u64().unwrap() > v0);
    let (name, mpatch) = mobile.next_event();
    assert_eq!((name.as_str(), &mpatch["key"]), ("patch", &json!("cs")));

    // A flag no longer available client-side: a delete for the browser, a patch for
    // mobile.
    let mut f = sample()["flags"]["legacy"].clone();
    f["clientSide"] = json!(false);
    f["clientSideAvailability"] = json!({"usingEnvironmentId": false, "usingMobileKey": true});
    f["version"] = json!(4);
    server.set_flag("legacy", f).unwrap();
    let (name, del) = cs.next_event();
    assert_eq!(name, "delete");
    assert_eq!(del["key"], "legacy");
    assert!(del["version"].as_u64().is_some());
    let (name, mpatch) = mobile.next_event();
    assert_eq!((name.as_str(), &mpatch["key"]), ("patch", &json!("legacy")));

    // A server-only flag's change sends a browser nothing it can see (a delete it
    // ignores), and a deleted flag a delete.
    server.delete_flag("cs");
    let (name, del) = cs.next_event();
    assert_eq!((name.as_str(), &del["key"]), ("delete", &json!("cs")));
    let (name, del) = mobile.next_event();
    assert_eq!((name.as_str(), &del["key"]), ("delete", &json!("cs")));

    // A whole replacement with many changes: a put.
    let mut big = sample();
    for i in 0..70 {
        big["flags"][format!("f{i}")] = flag(
            &format!("f{i}"),
            json!([i, i + 1]),
            json!({"clientSideAvailability": {"usingEnvironmentId": true, "usingMobileKey": true}}),
            json!({}),
        );
    }
    server.replace_all(big).unwrap();
    let (name, put) = cs.next_event();
    assert_eq!(name, "put");
    assert_eq!(put["f69"]["value"], 69);
    assert_eq!(put["cs"]["value"], 1);
    server.shutdown();
}

#[test]
fn many_changes_among_many_more_flags_go_as_patches() {
    // 70 changed flags (more than 64) among 300: fewer than half, so patches (each
    // evaluates one flag for the stream), not a put of all 300.
    let cs_flag = |i: usize, v: usize| {
        flag(
            &format!("f{i}"),
            json!([v, v + 1]),
            json!({"clientSideAvailability": {"usingEnvironmentId": true, "usingMobileKey": true}}),
            json!({}),
        )
    };
    let mut data = sample();
    for i in 0..300 {
        data["flags"][format!("f{i}")] = cs_flag(i, i);
    }
    let server = Server::builder()
        .client_side_id(Some(ENV_ID.into()))
        .data(data.clone())
        .start()
        .unwrap();
    let ctx = ctx_path(&json!({"kind": "user", "key": "u-out"}));
    let mut cs = get_stream(server.addr(), &format!("/eval/{ENV_ID}/{ctx}"));
    assert_eq!(cs.next_event().0, "put");
    for i in 0..70 {
        data["flags"][format!("f{i}")] = cs_flag(i, i + 1000);
    }
    server.replace_all(data).unwrap();
    let mut patched = std::collections::BTreeSet::new();
    while patched.len() < 70 {
        let (name, patch) = cs.next_event();
        assert_eq!(name, "patch", "{patch}");
        let key = patch["key"].as_str().unwrap().to_owned();
        let i: usize = key[1..].parse().unwrap();
        assert_eq!(patch["value"], json!(i + 1000), "{key}");
        patched.insert(key);
    }
    server.shutdown();
}

#[test]
fn a_change_reaches_many_streams_quickly() {
    let _ = flagsync_server::raise_fd_limit();
    let limit = flagsync_server::fd_limit().soft.unwrap_or(1024);
    let n = 1000.min(usize::try_from(limit).unwrap_or(1024).saturating_sub(200) / 2);
    let server = Server::builder()
        .client_side_id(Some(ENV_ID.into()))
        .max_connections(n + 50)
        .data(sample())
        .start()
        .unwrap();
    let addr = server.addr();
    let mut streams: Vec<Stream> = (0..n)
        .map(|i| {
            let ctx = ctx_path(&json!({"key": format!("u{i}")}));
            get_stream(addr, &format!("/eval/{ENV_ID}/{ctx}"))
        })
        .collect();
    for s in &mut streams {
        assert_eq!(s.next_event().0, "put");
    }
    let started = Instant::now();
    server
        .set_flag(
            "cs",
            flag(
                "cs",
                json!([7, 8]),
                json!({"clientSideAvailability": {"usingEnvironmentId": true}}),
                json!({"version": 9}),
            ),
        )
        .unwrap();
    for s in &mut streams {
        let (name, patch) = s.next_event();
        assert_eq!((name.as_str(), &patch["value"]), ("patch", &json!(7)));
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "{n} streams took {took:?}");
    eprintln!("a change reached {n} client-side streams in {took:?}");
    server.shutdown();
}
