//! The `flagsync` binary against a hostile or unusual setup (issue 19): credentials
//! in a URI never echoed, the current error on every failing `watch --json` status,
//! `--max-event-bytes`, `--ca-file`, the help on passing the SDK key safely, and
//! doubtful data shown as a warning (issue 42).

mod common;

use std::process::{Command, Output};

use common::server::{After, Server};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_flagsync");
const PUT: &str = "event: put\ndata: {\"path\":\"/\",\"data\":{\"flags\":{\"a\":{\"key\":\"a\",\"version\":1,\"on\":true,\"variations\":[true,false]}},\"segments\":{}}}\n\n";

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_remove("FLAGSYNC_SDK_KEY")
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stream_server() -> Server {
    Server::start(|_, r| {
        r.send(common::SSE_HEAD);
        r.send(PUT);
        After::Hold
    })
}

#[test]
fn credentials_in_a_uri_are_never_echoed() {
    // Bind then drop: a port with nothing listening.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://someone:hunter2secret@127.0.0.1:{port}");
    let out = run(&[
        "snapshot",
        "--stream-uri",
        &url,
        "--sdk-key",
        "k",
        "--timeout",
        "10",
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("cannot reach"), "{err}");
    assert!(
        !err.contains("hunter2secret") && !err.contains("someone"),
        "{err}"
    );
    assert!(err.contains(&format!("***@127.0.0.1:{port}")), "{err}");
}

#[test]
fn watch_json_carries_the_current_error_while_failing() {
    let server = Server::start(|_, r| {
        r.send("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n");
        After::Close
    });
    let out = run(&[
        "watch",
        "--json",
        "--duration",
        "4",
        "--stream-uri",
        &server.url(),
        "--sdk-key",
        "k",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let statuses: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["type"] == "status")
        .collect();
    assert!(statuses.len() >= 2, "{statuses:?}");
    for s in &statuses {
        assert_eq!(s["state"], "initializing", "{s}");
        assert_eq!(
            s["error"]["status"], 503,
            "every failing status names the error: {s}"
        );
    }
}

#[test]
fn help_says_the_environment_variable_is_the_safe_way_to_pass_the_key() {
    let out = run(&["watch", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("FLAGSYNC_SDK_KEY"), "{help}");
    assert!(help.contains("`ps`"), "{help}");
}

#[test]
fn max_event_bytes_sets_the_sse_limits() {
    let server = stream_server();
    // The default limit (64 MiB) takes the put.
    let out = run(&[
        "snapshot",
        "--stream-uri",
        &server.url(),
        "--sdk-key",
        "k",
        "--timeout",
        "5",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    // A limit below its size refuses it, saying why.
    let out = run(&[
        "snapshot",
        "--stream-uri",
        &server.url(),
        "--sdk-key",
        "k",
        "--timeout",
        "3",
        "--max-event-bytes",
        "64",
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("bad event stream"),
        "{}",
        stderr(&out)
    );
    // And a raised one takes it too.
    let out = run(&[
        "snapshot",
        "--stream-uri",
        &server.url(),
        "--sdk-key",
        "k",
        "--timeout",
        "5",
        "--max-event-bytes",
        "200000000",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn ca_file_trusts_a_private_ca() {
    let certs = common::tls::certs(&["localhost"]);
    let server = Server::start_wrapped(common::tls::wrap(certs.server.clone()), |_, r| {
        r.send(common::SSE_HEAD);
        r.send(PUT);
        After::Hold
    });
    let port = server.url().rsplit(':').next().unwrap().to_owned();
    let url = format!("https://localhost:{port}");
    let dir = std::env::temp_dir().join(format!("flagsync-cli-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &certs.ca_pem).unwrap();
    let out = run(&[
        "snapshot",
        "--stream-uri",
        &url,
        "--sdk-key",
        "k",
        "--timeout",
        "3",
    ]);
    assert!(!out.status.success(), "an unknown CA is refused");
    let out = run(&[
        "snapshot",
        "--stream-uri",
        &url,
        "--sdk-key",
        "k",
        "--timeout",
        "5",
        "--ca-file",
        ca.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"a\""));
    let out = run(&[
        "snapshot",
        "--stream-uri",
        &url,
        "--sdk-key",
        "k",
        "--ca-file",
        "/nonexistent/ca.pem",
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot read --ca-file"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Data the official SDKs take but should not be taken silently: `watch` prints the
/// core's warning with the keys on standard error (issue 42).
#[test]
fn watch_warns_about_an_item_whose_body_names_another_key() {
    const ODD: &str = "event: put\ndata: {\"path\":\"/\",\"data\":{\"flags\":{\"a\":{\"key\":\"b\",\"version\":1,\"on\":true,\"variations\":[true,false]}},\"segments\":{}}}\n\n";
    let server = Server::start(|_, r| {
        r.send(common::SSE_HEAD);
        r.send(ODD);
        After::Hold
    });
    let out = run(&[
        "watch",
        "--stream-uri",
        &server.url(),
        "--sdk-key",
        "k",
        "--duration",
        "1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    let line = err
        .lines()
        .find(|l| l.contains("body names another key"))
        .unwrap_or_else(|| panic!("no warning:\n{err}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains(r#"features:"a" (body key "b")"#), "{line}");
    // Good data warns about nothing.
    let server = stream_server();
    let out = run(&[
        "watch",
        "--stream-uri",
        &server.url(),
        "--sdk-key",
        "k",
        "--duration",
        "1",
    ]);
    assert!(!stderr(&out).contains("WARN"), "{}", stderr(&out));
}
