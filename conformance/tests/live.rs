//! The `live` runner over every scenario file: a 127.0.0.1 server replays each script
//! to the real `flagsync::Client`, once per runtime feature. Scenarios marked
//! `"live": {"skip": "…"}` are listed with their reason.

use std::collections::BTreeSet;

use flagsync_conformance::check::check;
use flagsync_conformance::live::{self, RuntimeKind};
use flagsync_conformance::scenario::load_all;

fn run_all(kind: RuntimeKind) {
    let scenarios = load_all().unwrap_or_else(|e| panic!("bad scenario files:\n{e}"));
    let only = std::env::var("CONFORMANCE_ONLY").ok();
    let mut failures = Vec::new();
    let mut failed = BTreeSet::new();
    let mut skipped = Vec::new();
    let mut ran = 0;
    for s in &scenarios {
        if only.as_ref().is_some_and(|o| !s.name.contains(o.as_str())) {
            continue;
        }
        let timing = match live::timing(s) {
            Ok(t) => t,
            Err(reason) => {
                skipped.push(format!("  {}: {reason}", s.name));
                continue;
            }
        };
        ran += 1;
        let result = kind.block_on(|rt| live::run(s, rt, timing));
        match result {
            Ok(obs) => {
                for f in check(s, &obs, timing) {
                    failed.insert(s.name.clone());
                    failures.push(format!("{}: {f}", s.name));
                }
            }
            Err(e) => {
                failed.insert(s.name.clone());
                failures.push(format!("{}: could not run: {e}", s.name));
            }
        }
    }
    println!(
        "live {}: {ran} run, {} passed, {} skipped:\n{}",
        kind.name(),
        ran - failed.len(),
        skipped.len(),
        skipped.join("\n")
    );
    assert!(
        failures.is_empty(),
        "live {}: {} failures:\n{}",
        kind.name(),
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn live_tokio() {
    run_all(RuntimeKind::Tokio);
}

#[test]
fn live_smol() {
    run_all(RuntimeKind::Smol);
}

#[test]
fn live_async_std() {
    run_all(RuntimeKind::AsyncStd);
}
