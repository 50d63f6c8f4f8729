//! The `virtual` runner over every scenario file: the core `DataSystem` under virtual
//! time. One test runs them all and reports every failure by scenario name.

use flagsync_conformance::check::{Timing, check};
use flagsync_conformance::scenario::load_all;
use flagsync_conformance::virtual_run;

#[test]
fn virtual_runner_passes_every_scenario() {
    let scenarios = load_all().unwrap_or_else(|e| panic!("bad scenario files:\n{e}"));
    let mut failures = Vec::new();
    for s in &scenarios {
        match virtual_run::run(s) {
            Ok(obs) => {
                for f in check(s, &obs, Timing::EXACT) {
                    failures.push(format!("{}: {f}", s.name));
                }
            }
            Err(e) => failures.push(format!("{}: could not run: {e}", s.name)),
        }
    }
    println!(
        "virtual: {} scenarios, {} passed",
        scenarios.len(),
        scenarios.len()
            - failures
                .iter()
                .map(|f| f.split(':').next().unwrap_or(""))
                .collect::<std::collections::BTreeSet<_>>()
                .len()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
