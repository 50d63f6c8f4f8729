//! What `watch` and `demo` print: a client's updates, as text or JSON lines.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

use flagsync::{Snapshot, State};
use flagsync_core::Kind;
use serde_json::{Value, json};

use crate::client::{ErrorSummary, Session, SourceSummary, StatusSummary, Update};
use flagsync::persist::StoreStatus;

use crate::error::CliError;

pub(crate) struct Printer {
    json: bool,
    pub(crate) start: Instant,
    initialized: bool,
    /// What each flag was when last printed.
    known: HashMap<String, Seen>,
    last_error: Option<ErrorSummary>,
    pub(crate) changes: usize,
    /// Loading progress on stderr, until initialized.
    pub(crate) progress: Option<Progress>,
}

/// The loading progress line(s) on stderr: redrawn in place on a terminal, else one
/// line per update.
#[derive(Debug)]
pub(crate) struct Progress {
    pub(crate) terminal: bool,
}

impl Progress {
    const EVERY: Duration = Duration::from_millis(200);

    pub(crate) fn show(&self, line: &str, last: bool) {
        if self.terminal {
            // Return to the start of the line and clear it.
            eprint!("\r\x1b[K{line}{}", if last { "\n" } else { "" });
        } else {
            eprintln!("{line}");
        }
    }
}

/// `bytes` for people: B, kB, MB, GB (powers of 1000).
pub(crate) fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

pub(crate) fn human_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.1} kB", b / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", b / 1e6),
        _ => format!("{:.2} GB", b / 1e9),
    }
}

/// What `watch` remembers of a flag it printed: what describing its next change takes,
/// not its JSON. A parsed copy of every flag costs several times the data set (about
/// 3× a 50 MB one), and keeping the stored JSON would keep each payload's buffer alive
/// after the store let it go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    version: String,
    on: String,
    serves: String,
    rules: usize,
    /// Hashes of `rules`, `targets`, `prerequisites`, `variations` and the whole flag
    /// (as JSON values: the order of object members does not count).
    hashes: [u64; 5],
}

impl Seen {
    /// What to remember of flag `f`.
    pub(crate) fn of(f: &Value) -> Self {
        let hash = |v: &Value| {
            let mut h = DefaultHasher::new();
            hash_value(v, &mut h);
            h.finish()
        };
        Self {
            version: f["version"].to_string(),
            on: f["on"].to_string(),
            serves: serves(f),
            rules: f["rules"].as_array().map_or(0, Vec::len),
            hashes: [
                hash(&f["rules"]),
                hash(&f["targets"]),
                hash(&f["prerequisites"]),
                hash(&f["variations"]),
                hash(f),
            ],
        }
    }

    /// The flag in one line: version, on or off, rules, what it serves.
    pub(crate) fn summary(&self) -> String {
        format!(
            "v{}, {}, {}, serves {}",
            self.version,
            if self.on == "true" { "on" } else { "off" },
            plural(self.rules, "rule", "rules"),
            self.serves,
        )
    }
}

/// Hash a JSON value as its meaning: object members in key order.
fn hash_value(v: &Value, h: &mut DefaultHasher) {
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => (2u8, n.to_string()).hash(h),
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(a) => {
            (4u8, a.len()).hash(h);
            for v in a {
                hash_value(v, h);
            }
        }
        Value::Object(o) => {
            (5u8, o.len()).hash(h);
            let mut members: Vec<_> = o.iter().collect();
            members.sort_unstable_by(|a, b| a.0.cmp(b.0));
            for (k, v) in members {
                k.hash(h);
                hash_value(v, h);
            }
        }
    }
}

/// The flags of `snapshot` as `watch` remembers them.
pub(crate) fn flags_seen(snapshot: &Snapshot) -> HashMap<String, Seen> {
    snapshot
        .iter(Kind::Flag)
        .map(|(k, item)| {
            let value = serde_json::from_str(item.raw_str()).unwrap_or(Value::Null);
            (k.to_owned(), Seen::of(&value))
        })
        .collect()
}

impl Printer {
    pub(crate) fn new(json: bool) -> Self {
        Self {
            json,
            start: Instant::now(),
            initialized: false,
            known: HashMap::new(),
            last_error: None,
            changes: 0,
            progress: None,
        }
    }

    pub(crate) fn elapsed(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    pub(crate) fn line(&self, text: &str) {
        println!("[{:7.3}s] {text}", self.elapsed());
    }

    pub(crate) fn json_line(&self, mut v: Value) {
        v["t"] = json!((self.elapsed() * 1000.0).round() / 1000.0);
        println!("{v}");
    }

    pub(crate) fn status(&mut self, s: &StatusSummary) {
        // The client keeps the last error after a recovery: show an error only when new.
        let new_error = s
            .error
            .as_ref()
            .filter(|e| Some(*e) != self.last_error.as_ref());
        if self.json {
            // While failing, every line carries the error in force (the same error again
            // included); once valid, only an error that is new.
            let shown = if s.state == State::Valid {
                new_error
            } else {
                s.error.as_ref()
            };
            let error = shown.map(
                |e| json!({"kind": e.kind.as_str(), "status": e.status_code, "message": e.message}),
            );
            let mut line = json!({"type": "status", "state": s.state.as_str(), "error": error});
            if let Some(source) = &s.source {
                line["availability"] = json!(source.availability.as_str());
                line["source"] = json!(source.active);
            }
            self.json_line(line);
        } else {
            let mut text = format!("status: {}", s.state.as_str());
            if let Some(source) = &s.source {
                text.push_str(&format!("  [{}]", describe_source(source)));
            }
            if let Some(e) = new_error {
                text.push_str(&format!("  ({})", describe_error(e)));
            }
            self.line(&text);
        }
        if s.error.is_some() {
            self.last_error = s.error.clone();
        }
    }

    /// FDv2: the data availability or the active source changed.
    pub(crate) fn source(&self, s: &SourceSummary) {
        if self.json {
            self.json_line(json!({
                "type": "source", "availability": s.availability.as_str(), "source": s.active,
            }));
        } else {
            self.line(&describe_source(s));
        }
    }

    /// The persistent store became unavailable or available again.
    pub(crate) fn store(&self, s: &StoreStatus, why: Option<&str>) {
        if self.json {
            self.json_line(json!({
                "type": "store", "available": s.available, "stale": s.stale, "error": why,
            }));
        } else {
            let text = match (s.available, s.stale) {
                (true, _) => "data store: available",
                (false, true) => {
                    "data store: unavailable (updates kept in memory, written when it returns)"
                }
                (false, false) => "data store: unavailable",
            };
            match why {
                Some(why) => self.line(&format!("{text}: {why}")),
                None => self.line(text),
            }
        }
    }

    /// Show how much of the initial data has arrived.
    pub(crate) fn loading(&self, bytes: u64) {
        if let Some(p) = &self.progress {
            p.show(
                &format!(
                    "loading: {} received ({:.1} s)",
                    human_bytes(bytes),
                    self.elapsed()
                ),
                false,
            );
        }
    }

    pub(crate) fn ready(&mut self, snapshot: &Snapshot, bytes: u64) {
        self.initialized = true;
        self.known = flags_seen(snapshot);
        let (flags, segments) = (snapshot.len(Kind::Flag), snapshot.len(Kind::Segment));
        let ms = self.start.elapsed().as_millis();
        if let Some(p) = self.progress.take() {
            p.show(
                &format!(
                    "initialized in {ms} ms: {} ({} received)",
                    plural(flags, "flag", "flags"),
                    human_bytes(bytes)
                ),
                true,
            );
        }
        if self.json {
            self.json_line(json!({"type": "initialized", "flags": flags, "segments": segments, "elapsed_ms": ms}));
        } else {
            self.line(&format!(
                "initialized in {ms} ms: {} and {}",
                plural(flags, "flag", "flags"),
                plural(segments, "segment", "segments")
            ));
            let mut keys: Vec<_> = self.known.iter().collect();
            keys.sort_by(|a, b| a.0.cmp(b.0));
            for (key, flag) in keys {
                self.line(&format!("flag {key}: {}", flag.summary()));
            }
        }
    }

    pub(crate) fn evaluation(&mut self, key: &str, detail: &flagsync::eval::Detail<Value>) {
        let reason = serde_json::to_value(&detail.reason).unwrap_or(Value::Null);
        if self.json {
            self.json_line(json!({
                "type": "evaluation", "key": key, "value": detail.value,
                "variation": detail.variation_index, "reason": reason,
            }));
        } else {
            let value = detail.value.clone().unwrap_or(Value::Null);
            self.line(&format!("evaluate {key}: {value} ({reason})"));
        }
    }

    pub(crate) fn flag_changed(&mut self, key: &str, snapshot: &Snapshot) {
        if !self.initialized {
            return; // the initial data, printed at initialization
        }
        let new = snapshot
            .get(Kind::Flag, key)
            .and_then(|i| serde_json::from_str::<Value>(i.raw_str()).ok());
        let seen = new.as_ref().map(Seen::of);
        let old = self.known.get(key);
        self.changes += 1;
        if self.json {
            self.json_line(json!({
                "type": "flag", "key": key, "deleted": new.is_none(),
                "version": new.as_ref().map(|f| f["version"].clone()), "flag": new,
            }));
        } else {
            self.line(&format!(
                "flag {key}: {}",
                describe_change(old, seen.as_ref())
            ));
        }
        match seen {
            Some(v) => self.known.insert(key.to_owned(), v),
            None => self.known.remove(key),
        };
    }
}

pub(crate) fn describe_source(s: &SourceSummary) -> String {
    format!(
        "data: {}, source: {}",
        s.availability.as_str(),
        s.active.unwrap_or("none")
    )
}

pub(crate) fn describe_error(e: &ErrorSummary) -> String {
    if e.key_rejected() {
        format!("HTTP {}: the SDK key was rejected", e.status_code)
    } else if e.unreachable() {
        format!("unreachable: {}", e.message)
    } else {
        format!("{}: {}", e.kind.as_str(), e.message)
    }
}

/// What the flag serves to everyone not matched by targets or rules.
pub(crate) fn serves(f: &Value) -> String {
    let variation = |i: &Value| {
        i.as_u64()
            .and_then(|i| f["variations"].get(i as usize))
            .map_or_else(|| "?".to_owned(), Value::to_string)
    };
    if f["on"].as_bool() != Some(true) {
        return variation(&f["offVariation"]);
    }
    let ft = &f["fallthrough"];
    if let Some(list) = ft["rollout"]["variations"].as_array() {
        let parts: Vec<_> = list
            .iter()
            .map(|wv| {
                let pct = wv["weight"].as_f64().unwrap_or(0.0) / 1000.0;
                format!("{} {pct}%", variation(&wv["variation"]))
            })
            .collect();
        return format!("a rollout ({})", parts.join(" / "));
    }
    variation(&ft["variation"])
}

pub(crate) fn describe_change(old: Option<&Seen>, new: Option<&Seen>) -> String {
    let (old, new) = match (old, new) {
        (_, None) => return "deleted".into(),
        (None, Some(n)) => return format!("added: {}", n.summary()),
        (Some(o), Some(n)) => (o, n),
    };
    if old.hashes[4] == new.hashes[4] {
        return "affected by a change to a prerequisite or segment".into();
    }
    let mut parts = vec![format!("v{} → v{}", old.version, new.version)];
    if old.on != new.on {
        parts.push(format!("on: {} → {}", old.on, new.on));
    }
    if old.serves != new.serves {
        parts.push(format!("serves {} → {}", old.serves, new.serves));
    }
    if old.hashes[0] != new.hashes[0] {
        if old.rules == new.rules {
            parts.push("rules edited".into());
        } else {
            parts.push(format!("rules: {} → {}", old.rules, new.rules));
        }
    }
    for (i, field) in ["targets", "prerequisites", "variations"]
        .iter()
        .enumerate()
    {
        if old.hashes[i + 1] != new.hashes[i + 1] {
            parts.push(format!("{field} edited"));
        }
    }
    parts.join(", ")
}

/// Print updates until `duration`, Ctrl-C, or the client stops.
/// Flags to evaluate after every update, and for whom.
pub(crate) struct Evaluations {
    pub(crate) keys: Vec<String>,
    pub(crate) context: flagsync::eval::Context,
}

impl Evaluations {
    pub(crate) fn run(&self, session: &Session, printer: &mut Printer) {
        for key in &self.keys {
            let detail = session.evaluate(key, &self.context);
            printer.evaluation(key, &detail);
        }
    }
}

pub(crate) async fn print_updates(
    session: &mut Session,
    printer: &mut Printer,
    duration: Option<Duration>,
    evaluations: Option<&Evaluations>,
) -> Result<(), CliError> {
    let deadline = duration.map(|d| tokio::time::Instant::now() + d);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut progress = tokio::time::interval(Progress::EVERY);
    progress.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = &mut ctrl_c => return Ok(()),
            () = sleep => return Ok(()),
            _ = progress.tick(), if printer.progress.is_some() => {
                printer.loading(session.bytes_received());
            }
            update = session.next() => match update {
                None => return Ok(()),
                Some(Update::Status(s)) => printer.status(&s),
                Some(Update::Ready) => {
                    printer.ready(&session.snapshot(), session.bytes_received());
                    if let Some(e) = evaluations {
                        e.run(session, printer);
                    }
                }
                Some(Update::FlagChanged(key)) => {
                    printer.flag_changed(&key, &session.snapshot());
                    if let Some(e) = evaluations.filter(|_| printer.initialized) {
                        e.run(session, printer);
                    }
                }
                Some(Update::Source(s)) => printer.source(&s),
                Some(Update::Store(s, why)) => printer.store(&s, why.as_deref()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(v: Value) -> Seen {
        Seen::of(&v)
    }

    #[test]
    fn a_change_is_described_from_what_was_remembered() {
        let old = seen(json!({"key":"f","version":1,"on":false,"offVariation":1,
            "variations":[true,false],"rules":[],"fallthrough":{"variation":0}}));
        let new = seen(json!({"key":"f","version":2,"on":true,"offVariation":1,
            "variations":[true,false],"rules":[{"clauses":[]}],"fallthrough":{"variation":0}}));
        assert_eq!(
            describe_change(Some(&old), Some(&new)),
            "v1 → v2, on: false → true, serves false → true, rules: 0 → 1"
        );
        assert_eq!(describe_change(Some(&old), None), "deleted");
        assert_eq!(
            describe_change(None, Some(&new)),
            "added: v2, on, 1 rule, serves true"
        );
        // The same flag with its members in another order is the same flag.
        let reordered = seen(json!({"fallthrough":{"variation":0},"rules":[],
            "variations":[true,false],"offVariation":1,"on":false,"version":1,"key":"f"}));
        assert_eq!(
            describe_change(Some(&old), Some(&reordered)),
            "affected by a change to a prerequisite or segment"
        );
        let targets = seen(json!({"key":"f","version":1,"on":false,"offVariation":1,
            "variations":[true,false],"rules":[],"fallthrough":{"variation":0},
            "targets":[{"values":["a"],"variation":0}]}));
        assert_eq!(
            describe_change(Some(&old), Some(&targets)),
            "v1 → v1, targets edited"
        );
    }
}
