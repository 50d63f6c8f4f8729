//! The summary both runner tests print: passed, skipped with reasons, known deviations
//! and failures, by scenario name.

use crate::check::Verdict;
use crate::scenario::Scenario;

/// Results of one runner (or one runner × runtime) over every scenario.
#[derive(Debug, Default)]
pub struct Report {
    /// `virtual`, `live tokio`, …
    pub runner: String,
    /// Scenarios that passed.
    pub passed: usize,
    /// (scenario, reason).
    pub skipped: Vec<(String, String)>,
    /// (scenario, deviation, failures).
    pub deviations: Vec<(String, String, Vec<String>)>,
    /// (scenario, failure).
    pub failures: Vec<(String, String)>,
    /// Remarks printed with the summary (e.g. scenarios that passed on a second run).
    pub notes: Vec<String>,
}

impl Report {
    /// An empty report for `runner`.
    pub fn new(runner: impl Into<String>) -> Self {
        Self {
            runner: runner.into(),
            ..Self::default()
        }
    }

    /// Add a remark to the summary.
    pub fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    /// Record the outcome for `s`.
    pub fn add(&mut self, s: &Scenario, outcome: Result<Verdict, String>) {
        match outcome {
            Ok(Verdict::Pass) => self.passed += 1,
            Ok(Verdict::Fail(fs)) => {
                self.failures
                    .extend(fs.into_iter().map(|f| (s.name.clone(), f)));
            }
            Ok(Verdict::KnownDeviation(fs)) => self.deviations.push((
                s.name.clone(),
                s.known_deviation.clone().unwrap_or_default(),
                fs,
            )),
            Err(e) => self
                .failures
                .push((s.name.clone(), format!("could not run: {e}"))),
        }
    }

    /// Record a skip.
    pub fn skip(&mut self, s: &Scenario, reason: &str) {
        self.skipped.push((s.name.clone(), reason.to_owned()));
    }

    /// Print the summary and panic if anything failed.
    pub fn finish(self) {
        let failed: std::collections::BTreeSet<&str> =
            self.failures.iter().map(|(n, _)| n.as_str()).collect();
        let mut out = format!(
            "{}: {} passed, {} failed, {} known deviations, {} skipped\n",
            self.runner,
            self.passed,
            failed.len(),
            self.deviations.len(),
            self.skipped.len()
        );
        for note in &self.notes {
            out.push_str(&format!("  note: {note}\n"));
        }
        for (name, reason) in &self.skipped {
            out.push_str(&format!("  skipped {name}: {reason}\n"));
        }
        for (name, why, fs) in &self.deviations {
            out.push_str(&format!("  known deviation {name}: {why}\n"));
            for f in fs {
                out.push_str(&format!("    {f}\n"));
            }
        }
        for (name, f) in &self.failures {
            out.push_str(&format!("  FAILED {name}: {f}\n"));
        }
        println!("{out}");
        assert!(self.failures.is_empty(), "{out}");
    }
}
