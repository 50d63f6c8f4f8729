use std::cell::Cell;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;
use crate::Client;
use crate::eval::{ContextBuilder, Detail, EvalError, Reason};
use crate::migration::Stage;

/// What the recording hooks saw, in call order.
type Log = Arc<Mutex<Vec<String>>>;

/// A hook that records each stage and behaves as told.
struct Recorder {
    name: &'static str,
    log: Log,
    /// Put into the data by `before_evaluation`.
    before_value: Option<i64>,
    fail_before: Option<Failure>,
    fail_after: Option<Failure>,
    fail_track: Option<Failure>,
}

#[derive(Debug, Clone, Copy)]
enum Failure {
    Error,
    Panic,
}

impl Recorder {
    fn new(name: &'static str, log: &Log) -> Self {
        Self {
            name,
            log: log.clone(),
            before_value: None,
            fail_before: None,
            fail_after: None,
            fail_track: None,
        }
    }

    fn push(&self, entry: String) {
        self.log.lock().expect("log").push(entry);
    }
}

fn fail<T>(failure: Option<Failure>, ok: T) -> Result<T, HookError> {
    match failure {
        None => Ok(ok),
        Some(Failure::Error) => Err("deliberate".into()),
        Some(Failure::Panic) => panic!("deliberate panic"),
    }
}

impl Hook for Recorder {
    fn metadata(&self) -> Metadata {
        Metadata::new(self.name)
    }

    fn before_evaluation(
        &self,
        series: &EvaluationSeriesContext<'_>,
        data: EvaluationSeriesData,
    ) -> Result<EvaluationSeriesData, HookError> {
        self.push(format!(
            "{} before {} {} {} {}",
            self.name,
            series.flag_key,
            series.method,
            series.default_value(),
            data.len()
        ));
        let data = match self.before_value {
            Some(v) => data.with("v", v),
            None => data,
        };
        fail(self.fail_before, data)
    }

    fn after_evaluation(
        &self,
        series: &EvaluationSeriesContext<'_>,
        data: EvaluationSeriesData,
        detail: &EvaluationDetail<'_>,
    ) -> Result<EvaluationSeriesData, HookError> {
        self.push(format!(
            "{} after {} {:?} {:?} {:?}",
            self.name,
            series.flag_key,
            data.get::<i64>("v"),
            Some(detail.value()),
            detail.reason()
        ));
        fail(self.fail_after, data)
    }

    fn after_track(&self, series: &TrackSeriesContext<'_>) -> Result<(), HookError> {
        self.push(format!(
            "{} track {} {:?} {:?}",
            self.name, series.key, series.data, series.metric_value
        ));
        fail(self.fail_track, ())
    }
}

fn client(hooks: Vec<Arc<dyn Hook>>) -> Client {
    Client::builder("k")
        .send_events(false)
        .hooks(hooks)
        .build()
        .expect("client")
}

fn log_of(log: &Log) -> Vec<String> {
    log.lock().expect("log").clone()
}

fn not_ready() -> String {
    format!("{:?}", Reason::error(EvalError::ClientNotReady))
}

#[test]
fn before_runs_in_order_after_in_reverse_and_each_hook_gets_its_own_data() {
    let log = Log::default();
    let mut a = Recorder::new("a", &log);
    a.before_value = Some(1);
    let mut b = Recorder::new("b", &log);
    b.before_value = Some(2);
    let client = client(vec![Arc::new(a), Arc::new(b)]);
    let context = ContextBuilder::new("u").build().expect("context");
    assert!(client.bool_variation("f", &context, true));
    let r = not_ready();
    assert_eq!(
        log_of(&log),
        [
            "a before f BoolVariation true 0".to_owned(),
            "b before f BoolVariation true 0".to_owned(),
            format!("b after f Some(2) Some(Bool(true)) {r}"),
            format!("a after f Some(1) Some(Bool(true)) {r}"),
        ]
    );
}

#[test]
fn every_typed_method_names_itself_and_gives_its_default_as_json() {
    let log = Log::default();
    let client = client(vec![Arc::new(Recorder::new("h", &log))]);
    let c = ContextBuilder::new("u").build().expect("context");
    client.string_variation_detail("s", &c, "d");
    client.int_variation("i", &c, 3);
    client.float_variation_detail("x", &c, 1.5);
    client.json_variation("j", &c, json!({"a": 1}));
    client.variation_detail("v", &c, false);
    let befores: Vec<String> = log_of(&log)
        .into_iter()
        .filter(|l| l.contains(" before "))
        .collect();
    assert_eq!(
        befores,
        [
            "h before s StringVariationDetail \"d\" 0",
            "h before i IntVariation 3 0",
            "h before x FloatVariationDetail 1.5 0",
            "h before j JsonVariation {\"a\":1} 0",
            "h before v VariationDetail false 0",
        ]
    );
}

#[test]
fn an_error_or_panic_in_before_leaves_empty_data_and_the_evaluation_unaffected() {
    for failure in [Failure::Error, Failure::Panic] {
        let log = Log::default();
        let mut a = Recorder::new("a", &log);
        a.before_value = Some(1);
        a.fail_before = Some(failure);
        let mut b = Recorder::new("b", &log);
        b.before_value = Some(2);
        let client = client(vec![Arc::new(a), Arc::new(b)]);
        let c = ContextBuilder::new("u").build().expect("context");
        let detail = client.int_variation_detail("f", &c, 7);
        assert_eq!(detail.value, Some(7));
        let r = not_ready();
        assert_eq!(
            log_of(&log)[2..],
            [
                format!("b after f Some(2) Some(Number(7)) {r}"),
                format!("a after f None Some(Number(7)) {r}"),
            ]
        );
    }
}

#[test]
fn a_single_hook_gets_its_data_back_and_its_failures_are_contained() {
    // One hook runs on a path of its own (no data slots): the same contract.
    for failure in [None, Some(Failure::Error), Some(Failure::Panic)] {
        let log = Log::default();
        let mut a = Recorder::new("a", &log);
        a.before_value = Some(5);
        a.fail_before = failure;
        a.fail_after = failure;
        let client = client(vec![Arc::new(a)]);
        let c = ContextBuilder::new("u").build().expect("context");
        assert_eq!(client.int_variation_detail("f", &c, 7).value, Some(7));
        let data = if failure.is_some() { "None" } else { "Some(5)" };
        let r = not_ready();
        assert_eq!(
            log_of(&log)[1..],
            [format!("a after f {data} Some(Number(7)) {r}")],
            "{failure:?}"
        );
    }
}

#[test]
fn a_failing_after_stage_does_not_stop_the_others() {
    let log = Log::default();
    let mut a = Recorder::new("a", &log);
    a.fail_after = Some(Failure::Panic);
    let mut b = Recorder::new("b", &log);
    b.fail_after = Some(Failure::Error);
    let client = client(vec![Arc::new(a), Arc::new(b)]);
    let c = ContextBuilder::new("u").build().expect("context");
    assert_eq!(client.string_variation("f", &c, "d"), "d");
    let afters = log_of(&log)
        .iter()
        .filter(|l| l.contains(" after "))
        .count();
    assert_eq!(afters, 2);
}

#[test]
fn track_hooks_run_in_registration_order_and_survive_failures() {
    let log = Log::default();
    let mut a = Recorder::new("a", &log);
    a.fail_track = Some(Failure::Panic);
    let b = Recorder::new("b", &log);
    let client = client(vec![Arc::new(a), Arc::new(b)]);
    let c = ContextBuilder::new("u").build().expect("context");
    client.track("e", &c, Some(json!({"x": 1})), Some(2.5));
    client.track("e2", &c, None, None);
    assert_eq!(
        log_of(&log),
        [
            "a track e Some(Object {\"x\": Number(1)}) Some(2.5)",
            "b track e Some(Object {\"x\": Number(1)}) Some(2.5)",
            "a track e2 None None",
            "b track e2 None None",
        ]
    );
}

#[test]
fn a_hook_added_later_runs_after_the_registered_ones() {
    let log = Log::default();
    let client = client(Vec::new());
    let c = ContextBuilder::new("u").build().expect("context");
    client.bool_variation("before-any-hook", &c, false);
    assert!(log_of(&log).is_empty());
    client.add_hook(Arc::new(Recorder::new("late", &log)));
    client.add_hook(Arc::new(Recorder::new("later", &log)));
    client.bool_variation("f", &c, false);
    let stages: Vec<String> = log_of(&log)
        .iter()
        .map(|l| l.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        stages,
        ["late before", "later before", "later after", "late after"]
    );
}

#[test]
fn without_hooks_the_runner_has_nothing_to_run() {
    let client = client(Vec::new());
    assert!(client.inner.hooks.current().is_none());
    let c = ContextBuilder::new("u").build().expect("context");
    assert_eq!(client.int_variation("f", &c, 4), 4);
    client.track("e", &c, None, None);
}

#[test]
fn migration_variation_runs_the_evaluation_hooks_with_the_stage_names() {
    let log = Log::default();
    let client = client(vec![Arc::new(Recorder::new("h", &log))]);
    let c = ContextBuilder::new("u").build().expect("context");
    let (stage, _tracker) = client.migration_variation("m", &c, Stage::DualWrite);
    assert_eq!(stage, Stage::DualWrite);
    let r = not_ready();
    assert_eq!(
        log_of(&log),
        [
            "h before m MigrationVariation \"dualwrite\" 0".to_owned(),
            format!("h after m None Some(String(\"dualwrite\")) {r}"),
        ]
    );
}

#[test]
fn method_names_follow_the_value_type() {
    assert_eq!(method_name::<bool>(false), "BoolVariation");
    assert_eq!(method_name::<String>(true), "StringVariationDetail");
    assert_eq!(method_name::<crate::eval::FlagValue>(false), "Variation");
}

#[test]
fn a_hook_can_be_tested_alone_with_hand_made_series_contexts() {
    let log = Log::default();
    let mut hook = Recorder::new("h", &log);
    hook.before_value = Some(5);
    let c = ContextBuilder::new("u").build().expect("context");
    let series = EvaluationSeriesContext::new("f", &c, json!(1), "IntVariation", None);
    let data = hook
        .before_evaluation(&series, EvaluationSeriesData::new())
        .expect("ok");
    assert_eq!(data.get::<i64>("v"), Some(&5));
    let data = json!({"x": true});
    hook.after_track(&TrackSeriesContext::new(
        "e",
        &c,
        Some(&data),
        None,
        Some("env".into()),
    ))
    .expect("ok");
    assert_eq!(log_of(&log).len(), 2);
}

/// A hook that reads, in `after_evaluation`, what it is told to.
struct Reader {
    default: bool,
    value: bool,
    environment: bool,
}

impl Hook for Reader {
    fn metadata(&self) -> Metadata {
        Metadata::new("reader")
    }

    fn after_evaluation(
        &self,
        series: &EvaluationSeriesContext<'_>,
        data: EvaluationSeriesData,
        detail: &EvaluationDetail<'_>,
    ) -> Result<EvaluationSeriesData, HookError> {
        if self.default {
            assert_eq!(series.default_value(), &json!(false));
        }
        if self.value {
            assert_eq!(detail.value(), &json!(true));
        }
        if self.environment {
            assert_eq!(series.environment_id(), Some("env-1"));
        }
        Ok(data)
    }
}

/// Runs one evaluation series over `hooks` (a result of `true`, variation 1); answers
/// how often the default, the result's value and the environment id were built.
fn built_by(hooks: Vec<Arc<dyn Hook>>) -> (usize, usize, usize) {
    let (defaults, values, environments) = (Cell::new(0), Cell::new(0), Cell::new(0));
    let c = ContextBuilder::new("u").build().expect("context");
    let default = || {
        defaults.set(defaults.get() + 1);
        json!(false)
    };
    let environment = || {
        environments.set(environments.get() + 1);
        Some("env-1".to_owned())
    };
    let series = EvaluationSeriesContext::lazy("f", &c, "BoolVariation", &default, &environment);
    let to_json = |v: &bool| {
        values.set(values.get() + 1);
        json!(*v)
    };
    let list = super::list::HookList::new(hooks);
    let result = super::runner::run_evaluation(
        list.snapshot().expect("hooks"),
        &series,
        || Detail {
            value: Some(true),
            variation_index: Some(1),
            reason: Reason::Off,
        },
        |d| d,
        &to_json,
    );
    assert_eq!(result.value, Some(true));
    (defaults.get(), values.get(), environments.get())
}

#[test]
fn a_hook_that_reads_nothing_builds_nothing() {
    let noop: Arc<dyn Hook> = Arc::new(Reader {
        default: false,
        value: false,
        environment: false,
    });
    assert_eq!(built_by(vec![noop.clone(), noop]), (0, 0, 0));
}

#[test]
fn what_hooks_read_is_built_once_per_evaluation() {
    let all: Arc<dyn Hook> = Arc::new(Reader {
        default: true,
        value: true,
        environment: true,
    });
    assert_eq!(built_by(vec![all.clone()]), (1, 1, 1));
    assert_eq!(built_by(vec![all.clone(), all.clone(), all]), (1, 1, 1));
    let value_only: Arc<dyn Hook> = Arc::new(Reader {
        default: false,
        value: true,
        environment: false,
    });
    assert_eq!(built_by(vec![value_only]), (0, 1, 0));
}

#[test]
fn more_hooks_than_the_inline_slots_keep_their_order_and_data() {
    let log = Log::default();
    let hooks: Vec<Arc<dyn Hook>> = (0..6)
        .map(|i| {
            let mut h = Recorder::new(["a", "b", "c", "d", "e", "f"][i], &log);
            h.before_value = Some(i as i64);
            Arc::new(h) as Arc<dyn Hook>
        })
        .collect();
    let client = client(hooks);
    let c = ContextBuilder::new("u").build().expect("context");
    client.bool_variation("f", &c, true);
    let afters: Vec<String> = log_of(&log)
        .into_iter()
        .filter(|l| l.contains(" after "))
        .map(|l| l.split(' ').take(4).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        afters,
        [
            "f after f Some(5)",
            "e after f Some(4)",
            "d after f Some(3)",
            "c after f Some(2)",
            "b after f Some(1)",
            "a after f Some(0)",
        ]
    );
}

#[test]
fn a_hand_made_detail_gives_its_value_and_reason() {
    let detail = Detail {
        value: None,
        variation_index: None,
        reason: Reason::Off,
    };
    let lent = EvaluationDetail::new(&detail);
    assert_eq!(lent.value(), &Value::Null);
    assert_eq!(lent.reason(), &Reason::Off);
    assert_eq!(lent.variation_index(), None);
    assert_eq!(lent.to_detail().value, Some(Value::Null));
    let c = ContextBuilder::new("u").build().expect("context");
    let series =
        EvaluationSeriesContext::new("f", &c, json!(3), "IntVariation", Some("env".into()));
    assert_eq!(series.default_value(), &json!(3));
    assert_eq!(series.environment_id(), Some("env"));
}
