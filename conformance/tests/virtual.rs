//! The `virtual` runner over every scenario file: the core `DataSystem` under virtual
//! time. One test runs them all and reports every failure by scenario name.

use flagsync_conformance::check::{Timing, verdict};
use flagsync_conformance::report::Report;
use flagsync_conformance::scenario::load_all;
use flagsync_conformance::virtual_run;

#[test]
fn virtual_runner_passes_every_scenario() {
    let scenarios = load_all().unwrap_or_else(|e| panic!("bad scenario files:\n{e}"));
    assert!(scenarios.len() >= 80, "{} scenarios", scenarios.len());
    let mut report = Report::new("virtual");
    for s in &scenarios {
        report.add(
            s,
            virtual_run::run(s).map(|obs| verdict(s, &obs, Timing::EXACT)),
        );
    }
    report.finish();
}
