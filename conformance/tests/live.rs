//! The `live` runner over every scenario file: a 127.0.0.1 server replays each script
//! to the real `flagsync::Client`, once per runtime feature. Scenarios marked
//! `"live": {"skip": "…"}` are listed with their reason. Set `CONFORMANCE_ONLY=<part of
//! a name>` to run a subset.
//!
//! Real time on a shared machine can miss a timing window that virtual time never
//! misses, so a scenario that fails live is run once more before it counts as failed;
//! the summary names every scenario that needed the second run. The virtual runner,
//! which has the same expectations, never retries.

use flagsync_conformance::check::{Verdict, verdict};
use flagsync_conformance::live::{self, RuntimeKind};
use flagsync_conformance::report::Report;
use flagsync_conformance::scenario::load_all;

fn run_all(kind: RuntimeKind) {
    let scenarios = load_all().unwrap_or_else(|e| panic!("bad scenario files:\n{e}"));
    let only = std::env::var("CONFORMANCE_ONLY").ok();
    let mut report = Report::new(format!("live {}", kind.name()));
    for s in &scenarios {
        if only.as_ref().is_some_and(|o| !s.name.contains(o.as_str())) {
            continue;
        }
        match live::timing(s) {
            Ok(timing) => {
                let run = || {
                    kind.block_on(|rt| live::run(s, rt, timing))
                        .map(|obs| verdict(s, &obs, timing))
                };
                let mut outcome = run();
                if matches!(outcome, Ok(Verdict::Fail(_)) | Err(_)) {
                    eprintln!(
                        "live {}: {} failed once; running it again",
                        kind.name(),
                        s.name
                    );
                    outcome = run();
                    if matches!(outcome, Ok(Verdict::Pass)) {
                        report.note(format!("{} passed on the second run", s.name));
                    }
                }
                report.add(s, outcome);
            }
            Err(reason) => report.skip(s, &reason),
        }
    }
    report.finish();
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
