//! The `flagsync` binary with Redis behind Sentinel and on Redis Cluster, and big
//! segments from Redis, run as a user would, against real redis-server processes
//! (the Redis crate's topologies: a master, its replica and three sentinels, all
//! password-protected; a cluster of three masters). No password is ever printed.

#[allow(unused_macros, unused_imports)] // the runtime harness is not used here
#[macro_use]
mod common;

use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::redis_server::RedisServer;
use common::serve::Serve;
use common::topology::{MASTER_NAME, RedisCluster, SentinelAuth, SentinelSet};
use flagsync_core::bigseg::context_hash;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_flagsync");
const MASTER_PW: &str = "m4ster-pw-never-shown";
const SENTINEL_PW: &str = "s3ntinel-pw-never-shown";

fn data() -> Value {
    json!({
        "flags": {
            "checkout": {"key": "checkout", "version": 5, "on": true, "variations": [false, true],
                         "fallthrough": {"variation": 1}, "offVariation": 0, "salt": "abc"},
            "beta-ui": {"key": "beta-ui", "version": 2, "on": true, "variations": ["off", "on"],
                        "rules": [{"id": "r1", "variation": 1, "clauses": [
                            {"attribute": "key", "op": "segmentMatch", "values": ["big"]}]}],
                        "fallthrough": {"variation": 0}, "offVariation": 0, "salt": "def"}
        },
        "segments": {"big": {"key": "big", "version": 1, "unbounded": true, "generation": 3,
                             "salt": "ghi"}}
    })
}

fn data_file(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("flagsync-cli-topo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, data().to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

/// `flagsync args` with `vars` set; checks that no password was printed.
fn run_env(args: &[&str], vars: &[(&str, &str)]) -> Output {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("FLAGSYNC_SDK_KEY")
        .envs(vars.iter().copied())
        .output()
        .unwrap();
    for text in [&out.stdout, &out.stderr] {
        let text = String::from_utf8_lossy(text);
        for pw in [MASTER_PW, SENTINEL_PW] {
            assert!(!text.contains(pw), "a password was printed: {text}");
        }
    }
    out
}

fn run(args: &[&str]) -> Output {
    run_env(args, &[])
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `snapshot` of a flag service at `url`.
fn snapshot_of(url: &str) -> Value {
    let out = run(&["snapshot", "--stream-uri", url, "--sdk-key", "sdk-t"]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The `evaluation` lines of `watch --json` output.
fn evaluations(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "evaluation")
        .collect()
}

/// Mark context `key` as included in big segment `big` (generation 3) in the layout
/// the Relay Proxy writes, under `prefix`, synchronized now.
fn include_in_big_segment(cli: impl Fn(&[&str]) -> String, prefix: &str, key: &str) {
    let include = format!("{prefix}:big_segment_include:{}", context_hash(key));
    cli(&["SADD", &include, "big.g3"]);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    cli(&[
        "SET",
        &format!("{prefix}:big_segments_synchronized_on"),
        &now.as_millis().to_string(),
    ]);
}

/// `watch --evaluate beta-ui` for context `key` with `redis_args`, daemon mode.
fn evaluate_from_redis(redis_args: &[&str], vars: &[(&str, &str)], key: &str) -> Value {
    let context = json!({"kind": "user", "key": key}).to_string();
    let args = [
        &[
            "watch",
            "--json",
            "--duration",
            "2",
            "--daemon",
            "--evaluate",
            "beta-ui",
            "--context",
            &context,
            "--events-uri",
            "http://127.0.0.1:1",
        ][..],
        redis_args,
    ]
    .concat();
    let out = run_env(&args, vars);
    assert!(out.status.success(), "{}", stderr(&out));
    let evals = evaluations(&out);
    assert!(!evals.is_empty(), "no evaluation: {}", stderr(&out));
    evals[0].clone()
}

#[test]
fn watch_snapshot_serve_and_big_segments_through_sentinel() {
    let set = SentinelSet::start_with(SentinelAuth {
        sentinel_password: Some(SENTINEL_PW.into()),
        master_password: Some(MASTER_PW.into()),
    });
    let sentinels = set.sentinel_urls();
    let service = Serve::start(&["--sdk-key", "sdk-t", "--data", &data_file("s.json")]);
    // The master's password from its variable; the sentinels' in their URLs, one
    // --redis-sentinel each.
    let mut via_sentinel: Vec<&str> = vec!["--redis-master", MASTER_NAME, "--prefix", "env1"];
    for s in &sentinels {
        via_sentinel.extend(["--redis-sentinel", s.as_str()]);
    }
    let pw = [("FLAGSYNC_REDIS_MASTER_PASSWORD", MASTER_PW)];

    // watch: written through to the master the sentinels name.
    let out = run_env(
        &[
            &[
                "watch",
                "--json",
                "--duration",
                "3",
                "--stream-uri",
                &service.url,
                "--sdk-key",
                "sdk-t",
            ][..],
            &via_sentinel,
        ]
        .concat(),
        &pw,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("kept in Redis"), "{}", stderr(&out));
    let master = set.master();
    assert_eq!(master.cli(&["EXISTS", "env1:$inited"]), "1");
    assert_eq!(master.cli(&["HLEN", "env1:features"]), "2");

    // Without the master's password, the master refuses: no data, and no password shown.
    let out = run(&[
        &["snapshot", "--daemon", "--timeout", "5"][..],
        &via_sentinel,
    ]
    .concat());
    assert!(!out.status.success(), "{}", stderr(&out));

    // snapshot --daemon: the password as an option this time, the sentinels as the
    // comma-separated variable.
    let out = run_env(
        &[
            "snapshot",
            "--daemon",
            "--redis-master",
            MASTER_NAME,
            "--redis-master-password",
            MASTER_PW,
            "--prefix",
            "env1",
        ],
        &[("FLAGSYNC_REDIS_SENTINELS", &sentinels.join(","))],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got, data());

    // serve from Redis behind Sentinel.
    let served = Serve::with_env(
        &[
            &["serve", "--port", "0", "--sdk-key", "sdk-t"][..],
            &via_sentinel,
        ]
        .concat(),
        &pw,
    );
    assert_eq!(snapshot_of(&served.url), data());

    // Big segments from the same Redis and prefix.
    include_in_big_segment(|a| set.master().cli(a), "env1", "u-in");
    let mut with_bigseg = via_sentinel.clone();
    with_bigseg.push("--big-segments");
    let hit = evaluate_from_redis(&with_bigseg, &pw, "u-in");
    assert_eq!(hit["value"], "on", "{hit}");
    assert_eq!(hit["reason"]["kind"], "RULE_MATCH", "{hit}");
    assert_eq!(hit["reason"]["bigSegmentsStatus"], "HEALTHY", "{hit}");
    let miss = evaluate_from_redis(&with_bigseg, &pw, "u-out");
    assert_eq!(miss["value"], "off", "{miss}");
}

#[test]
fn watch_snapshot_serve_and_big_segments_on_a_cluster() {
    let cluster = RedisCluster::start();
    let seeds = cluster.seeds();
    let service = Serve::start(&["--sdk-key", "sdk-t", "--data", &data_file("c.json")]);
    let mut on_cluster: Vec<&str> = vec!["--prefix", "{env2}"];
    for s in &seeds {
        on_cluster.extend(["--redis-cluster", s.as_str()]);
    }
    let out = run(&[
        &[
            "watch",
            "--json",
            "--duration",
            "3",
            "--stream-uri",
            &service.url,
            "--sdk-key",
            "sdk-t",
        ][..],
        &on_cluster,
    ]
    .concat());
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(cluster.cli(&["EXISTS", "{env2}:$inited"]), "1");
    assert_eq!(cluster.cli(&["HLEN", "{env2}:features"]), "2");

    // A prefix without a hash tag is refused, saying what is expected.
    let out = run(&[
        "snapshot",
        "--daemon",
        "--redis-cluster",
        &seeds[0],
        "--prefix",
        "env2",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("hash tag"), "{}", stderr(&out));

    // snapshot --daemon, the seeds from the variable.
    let out = run_env(
        &["snapshot", "--daemon", "--prefix", "{env2}"],
        &[("FLAGSYNC_REDIS_CLUSTER", &seeds.join(","))],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got, data());

    let served = Serve::start(&[&["--sdk-key", "sdk-t"][..], &on_cluster].concat());
    assert_eq!(snapshot_of(&served.url), data());

    include_in_big_segment(|a| cluster.cli(a), "{env2}", "u-in");
    let mut with_bigseg = on_cluster.clone();
    with_bigseg.push("--big-segments");
    let hit = evaluate_from_redis(&with_bigseg, &[], "u-in");
    assert_eq!(hit["value"], "on", "{hit}");
    assert_eq!(hit["reason"]["bigSegmentsStatus"], "HEALTHY", "{hit}");
}

#[test]
fn big_segments_are_evaluated_only_with_the_option() {
    let redis = RedisServer::start();
    let url = redis.url();
    let service = Serve::start(&["--sdk-key", "sdk-t", "--data", &data_file("b.json")]);
    include_in_big_segment(|a| redis.cli(a), "launchdarkly", "u-in");
    let watch = |extra: &[&str]| {
        let context = json!({"kind": "user", "key": "u-in"}).to_string();
        let out = run(&[
            &[
                "watch",
                "--json",
                "--duration",
                "2",
                "--stream-uri",
                &service.url,
                "--sdk-key",
                "sdk-t",
                "--redis",
                &url,
                "--evaluate",
                "beta-ui",
                "--context",
                &context,
            ][..],
            extra,
        ]
        .concat());
        assert!(out.status.success(), "{}", stderr(&out));
        evaluations(&out)[0].clone()
    };
    // Without --big-segments: as before, NOT_CONFIGURED and no match.
    let without = watch(&[]);
    assert_eq!(without["value"], "off", "{without}");
    assert_eq!(without["reason"]["kind"], "FALLTHROUGH", "{without}");
    assert_eq!(
        without["reason"]["bigSegmentsStatus"], "NOT_CONFIGURED",
        "{without}"
    );
    // With it: the membership in Redis decides, as in LaunchDarkly's SDKs.
    let with = watch(&["--big-segments"]);
    assert_eq!(with["value"], "on", "{with}");
    assert_eq!(with["reason"]["kind"], "RULE_MATCH", "{with}");
    assert_eq!(with["reason"]["bigSegmentsStatus"], "HEALTHY", "{with}");
    // Stale data (synchronized long ago) is still used, and said to be stale.
    redis.cli(&["SET", "launchdarkly:big_segments_synchronized_on", "1000"]);
    let stale = watch(&["--big-segments"]);
    assert_eq!(stale["value"], "on", "{stale}");
    assert_eq!(stale["reason"]["bigSegmentsStatus"], "STALE", "{stale}");
    // The option needs --evaluate and Redis.
    let started = Instant::now();
    let out = run(&["watch", "--stream-uri", &service.url, "--big-segments"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(started.elapsed() < Duration::from_secs(5));
}
