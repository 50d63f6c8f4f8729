//! The `flagsync` binary with Redis, run as a user would, against a real
//! redis-server that requires a password (which must never be printed).

#[allow(unused_macros, unused_imports)] // the runtime harness is not used here
#[macro_use]
mod common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::redis_server::RedisServer;
use common::serve::Serve;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_flagsync");
const PASSWORD: &str = "s3cret-redis-pw";

fn data() -> Value {
    json!({
        "flags": {
            "checkout": {"key": "checkout", "version": 5, "on": true, "variations": [false, true],
                         "fallthrough": {"variation": 1}, "offVariation": 0,
                         "prerequisites": [{"key": "limit", "variation": 0}], "salt": "abc"},
            "limit": {"key": "limit", "version": 1, "on": false, "variations": [1, 10],
                      "fallthrough": {"variation": 0}, "offVariation": 1, "salt": "def"}
        },
        "segments": {"beta": {"key": "beta", "version": 2, "included": ["u1"], "salt": "ghi"}}
    })
}

fn temp_file(name: &str, contents: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("flagsync-cli-redis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

fn run(args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("FLAGSYNC_SDK_KEY")
        .output()
        .unwrap();
    for text in [&out.stdout, &out.stderr] {
        assert!(
            !String::from_utf8_lossy(text).contains(PASSWORD),
            "the Redis password was printed: {}",
            String::from_utf8_lossy(text)
        );
    }
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn watch_writes_through_then_daemon_snapshot_and_serve_read_redis() {
    let redis = RedisServer::start_with_password(Some(PASSWORD));
    let url = redis.url();
    let file = temp_file("source.json", &data().to_string());
    let service = Serve::start(&["--sdk-key", "sdk-r", "--data", file.to_str().unwrap()]);

    // watch --redis: the flags go to Redis under the prefix, in the LaunchDarkly layout.
    let out = run(&[
        "watch",
        "--json",
        "--duration",
        "3",
        "--stream-uri",
        &service.url,
        "--sdk-key",
        "sdk-r",
        "--redis",
        &url,
        "--prefix",
        "env1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("kept in Redis 127.0.0.1:"),
        "{}",
        stderr(&out)
    );
    assert_eq!(redis.cli(&["EXISTS", "env1:$inited"]), "1");
    assert_eq!(redis.cli(&["HLEN", "env1:features"]), "2");
    let stored: Value =
        serde_json::from_str(&redis.cli(&["HGET", "env1:features", "checkout"])).unwrap();
    assert_eq!(stored, data()["flags"]["checkout"]);

    // snapshot --daemon: no flag service, the data another process left in Redis.
    let out = run(&["snapshot", "--redis", &url, "--prefix", "env1", "--daemon"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got, data());

    // serve --redis: a flag service over what Redis holds, following its changes.
    let from_redis = Serve::start(&["--sdk-key", "sdk-r", "--redis", &url, "--prefix", "env1"]);
    let snapshot = || {
        let out = run(&[
            "snapshot",
            "--stream-uri",
            &from_redis.url,
            "--sdk-key",
            "sdk-r",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    assert_eq!(snapshot(), data());
    redis.cli(&[
        "HSET",
        "env1:features",
        "limit",
        r#"{"key":"limit","version":2,"on":true,"variations":[1,10],"fallthrough":{"variation":1},"offVariation":1,"salt":"def"}"#,
    ]);
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        if snapshot()["flags"]["limit"]["version"] == 2 {
            break;
        }
        assert!(
            Instant::now() < end,
            "serve did not follow the change in Redis"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn redis_options_are_checked() {
    // --daemon needs --redis; --prefix needs --redis.
    let out = run(&["snapshot", "--daemon"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = run(&[
        "watch",
        "--prefix",
        "p",
        "--stream-uri",
        "http://127.0.0.1:1",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // A malformed URL is a usage error that says what is expected.
    let out = run(&["snapshot", "--daemon", "--redis", "nonsense"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--redis redis://"),
        "{}",
        stderr(&out)
    );
    // serve needs --data or --redis.
    let out = run(&["serve", "--port", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // Nothing listens on port 1: a daemon snapshot times out and names Redis, not the
    // password.
    let out = run(&[
        "snapshot",
        "--daemon",
        "--redis",
        &format!("redis://:{PASSWORD}@127.0.0.1:1/0"),
        "--timeout",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Redis 127.0.0.1:1/0"),
        "{}",
        stderr(&out)
    );
}

/// A wrong password or a missing database will not clear by waiting: `snapshot` says
/// so at once, with the store's reason (never the password), instead of waiting out
/// its timeout (issue 19).
#[test]
fn snapshot_stops_at_once_on_a_wrong_password_or_database() {
    let redis = RedisServer::start_with_password(Some(PASSWORD));
    let port = redis.port();
    for (url, reason) in [
        (
            format!("redis://:wrong-{PASSWORD}@127.0.0.1:{port}/0"),
            "authentication",
        ),
        (format!("redis://127.0.0.1:{port}/0"), "authentication"),
        (
            format!("redis://:{PASSWORD}@127.0.0.1:{port}/99"),
            "configuration",
        ),
    ] {
        let started = Instant::now();
        let out = Command::new(BIN)
            .args(["snapshot", "--daemon", "--redis", &url, "--timeout", "20"])
            .env_remove("FLAGSYNC_SDK_KEY")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success(), "{err}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}: {err}",
            started.elapsed()
        );
        assert!(err.contains(reason), "{url}: {err}");
        assert!(!err.contains(PASSWORD), "{err}");
    }
}

/// Undecodable items are skipped as before, but counted and warned about (issue 19).
#[test]
fn snapshot_warns_about_undecodable_items() {
    let redis = RedisServer::start_with_password(Some(PASSWORD));
    let good = r#"{"key":"good","version":1,"on":true,"variations":[true,false]}"#;
    redis.cli(&["HSET", "launchdarkly:features", "good", good]);
    for bad in ["bad1", "bad2", "bad3"] {
        redis.cli(&["HSET", "launchdarkly:features", bad, "{not json"]);
    }
    redis.cli(&["SET", "launchdarkly:$inited", ""]);
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}/0", redis.port());
    let out = Command::new(BIN)
        .args(["snapshot", "--daemon", "--redis", &url, "--timeout", "10"])
        .env_remove("FLAGSYNC_SDK_KEY")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let snap: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        snap["flags"].as_object().map(|f| f.len()),
        Some(1),
        "{snap}"
    );
    assert!(
        err.contains("3 items in the store could not be decoded and were skipped"),
        "{err}"
    );
}

/// `snapshot --daemon` started while Redis is down prints the flags once Redis is
/// back with data, within its timeout (issue 19, defect 6).
#[test]
fn daemon_snapshot_started_while_redis_is_down_waits_for_it() {
    let mut redis = RedisServer::start_with_password(Some(PASSWORD));
    // What Redis holds when it is back, saved now so that the restart loads it: were it
    // written after the restart, a read in between would find no data, and that "no"
    // is not asked again within the cache TTL (15 s, as the SDKs cache it).
    let good = r#"{"key":"good","version":1,"on":true,"variations":[true,false]}"#;
    redis.cli(&["HSET", "launchdarkly:features", "good", good]);
    redis.cli(&["SET", "launchdarkly:$inited", ""]);
    redis.cli(&["SAVE"]);
    redis.stop();
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}/0", redis.port());
    let started = Instant::now();
    let child = Command::new(BIN)
        .args(["snapshot", "--daemon", "--redis", &url, "--timeout", "15"])
        .env_remove("FLAGSYNC_SDK_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    redis.restart();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let snap: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(snap["flags"]["good"]["version"], 1, "{snap}");
}

/// `--redis rediss://…` with a private CA and a client certificate (mutual TLS
/// required), as an ACL user: the daemon snapshot reads what Redis holds; without the
/// CA, or without the client certificate, it stops at once saying why.
#[test]
fn snapshot_over_tls_with_a_private_ca_and_a_client_certificate() {
    use common::redis_server::{TestCerts, Tls};
    let certs = TestCerts::new();
    let redis = RedisServer::start_with(
        None,
        Some(Tls {
            certs: certs.clone(),
            auth_clients: "yes",
            client_cert: true,
        }),
    );
    redis.cli(&[
        "ACL",
        "SETUSER",
        "app",
        "on",
        &format!(">{PASSWORD}"),
        "~launchdarkly:*",
        "+@all",
    ]);
    for (key, flag) in data()["flags"].as_object().unwrap() {
        redis.cli(&["HSET", "launchdarkly:features", key, &flag.to_string()]);
    }
    for (key, seg) in data()["segments"].as_object().unwrap() {
        redis.cli(&["HSET", "launchdarkly:segments", key, &seg.to_string()]);
    }
    redis.cli(&["SET", "launchdarkly:$inited", ""]);
    let url = redis.user_url("app", PASSWORD);
    assert!(url.starts_with("rediss://app:"), "{url}");
    let ca = temp_file("redis-ca.pem", &certs.ca_pem);
    let cert = temp_file("redis-client.pem", &certs.client_cert_pem);
    let key = temp_file("redis-client.key", &certs.client_key_pem);
    let (ca, cert, key) = (
        ca.to_str().unwrap(),
        cert.to_str().unwrap(),
        key.to_str().unwrap(),
    );
    let out = run(&[
        "snapshot",
        "--daemon",
        "--redis",
        &url,
        "--redis-ca-file",
        ca,
        "--redis-client-cert",
        cert,
        "--redis-client-key",
        key,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got, data());
    for (args, reason) in [
        (
            vec!["--redis-client-cert", cert, "--redis-client-key", key],
            "not trusted",
        ),
        (vec!["--redis-ca-file", ca], "client certificate"),
    ] {
        let started = Instant::now();
        let out = run(&[
            &["snapshot", "--daemon", "--timeout", "20", "--redis", &url][..],
            &args,
        ]
        .concat());
        let err = stderr(&out);
        assert!(!out.status.success(), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10), "{err}");
        assert!(err.contains(reason), "{args:?}: {err}");
    }
}
