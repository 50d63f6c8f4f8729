//! What a runner observed, and the one comparison both runners use.

use std::time::Duration;

use flagsync_core::{Kind, Snapshot};

use crate::scenario::{ItemSpec, ObservedStatus, Scenario, StoreSpec, scaled};

/// A request as the (virtual or live) server saw it.
#[derive(Debug, Clone)]
pub struct ObservedRequest {
    /// Time since the client started (real time for live runs).
    pub at: Duration,
    /// `GET`.
    pub method: String,
    /// Path and query.
    pub target: String,
    /// Headers in order.
    pub headers: Vec<(String, String)>,
}

impl ObservedRequest {
    /// A header by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The client-side transcript of one run.
#[derive(Debug, Default)]
pub struct Observed {
    /// Every request.
    pub requests: Vec<ObservedRequest>,
    /// Every status change, in order (including the one a scripted stop causes).
    pub statuses: Vec<ObservedStatus>,
    /// The status at the end, before a scripted stop.
    pub final_status: Option<ObservedStatus>,
    /// The store at each `expect.store` time, by index.
    pub snapshots: Vec<Option<Snapshot>>,
    /// Requests seen at each `expect.max_requests` time, by index.
    pub max_counts: Vec<usize>,
    /// Requests seen at each `expect.min_requests` time, by index.
    pub min_counts: Vec<usize>,
    /// Initialized at the end.
    pub initialized: bool,
    /// Environment id at the end.
    pub env_id: Option<String>,
    /// Open connections after a scripted stop.
    pub open_after_stop: Option<usize>,
    /// Data availability at the end (before a scripted stop).
    pub availability: Option<flagsync_core::DataAvailability>,
    /// Live runs: what a flag-change subscriber that never read held at the end, and
    /// how many changes it missed.
    pub stalled_subscriber: Option<(usize, u64)>,
}

impl Observed {
    /// An empty observation with one slot per checkpoint of `s`.
    pub fn for_scenario(s: &crate::scenario::Scenario) -> Self {
        let e = &s.expect;
        Self {
            snapshots: vec![None; e.store.len()],
            max_counts: vec![0; e.max_requests.len()],
            min_counts: vec![0; e.min_requests.len()],
            ..Self::default()
        }
    }
}

/// How observed times are compared with the scenario's virtual times.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Factor applied to virtual times.
    pub scale: f64,
    /// Earliness allowed.
    pub early: Duration,
    /// Lateness allowed.
    pub late: Duration,
}

impl Timing {
    /// Exact virtual time.
    pub const EXACT: Self = Self {
        scale: 1.0,
        early: Duration::ZERO,
        late: Duration::ZERO,
    };

    fn window(&self, (lo, hi): (u64, u64)) -> (Duration, Duration) {
        (
            scaled(lo, self.scale).saturating_sub(self.early),
            scaled(hi, self.scale) + self.late,
        )
    }
}

/// Every difference between `s.expect` and `obs`, as readable lines.
pub fn check(s: &Scenario, obs: &Observed, timing: Timing) -> Vec<String> {
    let mut f = Vec::new();
    let e = &s.expect;
    if obs.requests.len() > s.script.len() {
        f.push(format!(
            "{} requests but the script has {} replies (last at {:?})",
            obs.requests.len(),
            s.script.len(),
            obs.requests.last().map(|r| r.at)
        ));
    }
    for (i, spec) in e.requests.iter().enumerate() {
        let Some(r) = obs.requests.get(i) else {
            f.push(format!(
                "request #{i} missing ({} made)",
                obs.requests.len()
            ));
            continue;
        };
        if let Some(m) = &spec.method
            && *m != r.method
        {
            f.push(format!("request #{i}: method {} != {m}", r.method));
        }
        if let Some(t) = &spec.target
            && *t != r.target
        {
            f.push(format!("request #{i}: target {} != {t}", r.target));
        }
        for (name, value) in &spec.headers {
            if r.header(name) != Some(value.as_str()) {
                f.push(format!(
                    "request #{i}: header {name} = {:?}, want {value:?}",
                    r.header(name)
                ));
            }
        }
        for name in &spec.present {
            if r.header(name).is_none() {
                f.push(format!("request #{i}: header {name} missing"));
            }
        }
        for name in &spec.absent {
            if let Some(v) = r.header(name) {
                f.push(format!("request #{i}: header {name} = {v:?}, want none"));
            }
        }
        if let Some(w) = spec.at_ms {
            let (lo, hi) = timing.window(w);
            if r.at < lo || r.at > hi {
                f.push(format!("request #{i} at {:?}, want {lo:?}..={hi:?}", r.at));
            }
        }
        if let Some(w) = spec.gap_ms {
            let (lo, hi) = timing.window(w);
            match i.checked_sub(1).and_then(|p| obs.requests.get(p)) {
                Some(prev) => {
                    let gap = r.at.saturating_sub(prev.at);
                    if gap < lo || gap > hi {
                        f.push(format!(
                            "request #{i}: gap {gap:?} after the previous, want {lo:?}..={hi:?}"
                        ));
                    }
                }
                None => f.push(format!("request #{i}: gap_ms needs a previous request")),
            }
        }
    }
    if let Some(n) = e.request_count
        && obs.requests.len() != n
    {
        f.push(format!(
            "{} requests, want exactly {n} (at {:?})",
            obs.requests.len(),
            obs.requests.iter().map(|r| r.at).collect::<Vec<_>>()
        ));
    }
    for (m, got) in e.max_requests.iter().zip(&obs.max_counts) {
        if *got > m.max {
            f.push(format!(
                "{got} requests by {} ms, want at most {}",
                m.by_ms, m.max
            ));
        }
    }
    for (m, got) in e.min_requests.iter().zip(&obs.min_counts) {
        if *got < m.min {
            f.push(format!(
                "{got} requests by {} ms, want at least {}",
                m.by_ms, m.min
            ));
        }
    }
    for (spec, snap) in e.store.iter().zip(&obs.snapshots) {
        match snap {
            Some(snap) => check_store(spec, snap, &mut f),
            None => f.push(format!("no store snapshot at {} ms", spec.at_ms)),
        }
    }
    if let Some(want) = &e.statuses {
        let ok = want.len() == obs.statuses.len()
            && want.iter().zip(&obs.statuses).all(|(w, g)| w.matches(g));
        if !ok {
            f.push(format!(
                "statuses [{}], want [{}]",
                join(&obs.statuses),
                join(want)
            ));
        }
    }
    if let Some(want) = &e.final_status {
        match &obs.final_status {
            Some(got) if want.matches(got) => {}
            got => f.push(format!(
                "final status {}, want {want}",
                got.map_or("none".into(), |g| g.to_string())
            )),
        }
    }
    if let Some(want) = e.initialized
        && want != obs.initialized
    {
        f.push(format!("initialized {}, want {want}", obs.initialized));
    }
    if let Some(want) = &e.env_id
        && obs.env_id.as_ref() != Some(want)
    {
        f.push(format!("environment id {:?}, want {want:?}", obs.env_id));
    }
    if e.no_env_id && obs.env_id.is_some() {
        f.push(format!("environment id {:?}, want none", obs.env_id));
    }
    if let Some(want) = &e.availability {
        let got = obs.availability.map(|a| a.as_str());
        if got != Some(want.as_str()) {
            f.push(format!("data availability {got:?}, want {want:?}"));
        }
    }
    if let (Some(max), Some((held, lagged))) =
        (e.stalled_subscriber_holds_at_most, obs.stalled_subscriber)
    {
        if held > max {
            f.push(format!(
                "a stalled subscriber holds {held} changes, want at most {max}"
            ));
        }
        if lagged == 0 {
            f.push("a stalled subscriber missed no change: the flood did not fill it".into());
        }
    }
    if let Some(want) = e.open_connections_after_stop
        && obs.open_after_stop != Some(want)
    {
        f.push(format!(
            "{:?} open connections after stop, want {want}",
            obs.open_after_stop
        ));
    }
    f
}

fn join<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn check_store(spec: &StoreSpec, snap: &Snapshot, f: &mut Vec<String>) {
    for (kind, want) in [(Kind::Flag, &spec.flags), (Kind::Segment, &spec.segments)] {
        for (key, item) in want {
            let got = snap.get_including_deleted(kind, key);
            let ok = match (item, got) {
                (None, None) => true,
                (None, Some(g)) => g.deleted,
                (Some(ItemSpec::Version(v)), Some(g)) => !g.deleted && g.version == *v,
                (Some(ItemSpec::Tombstone { tombstone }), Some(g)) => {
                    g.deleted && g.version == *tombstone
                }
                (Some(_), None) => false,
            };
            if !ok {
                f.push(format!(
                    "at {} ms {kind} {key:?} is {}, want {}",
                    spec.at_ms,
                    match got {
                        None => "absent".to_owned(),
                        Some(g) if g.deleted => format!("tombstone v{}", g.version),
                        Some(g) => format!("v{}", g.version),
                    },
                    match item {
                        None => "absent".to_owned(),
                        Some(ItemSpec::Version(v)) => format!("v{v}"),
                        Some(ItemSpec::Tombstone { tombstone }) => {
                            format!("tombstone v{tombstone}")
                        }
                    }
                ));
            }
        }
        if spec.exact {
            for (key, _) in snap.iter(kind) {
                if !want.contains_key(key) {
                    f.push(format!("at {} ms unexpected {kind} {key:?}", spec.at_ms));
                }
            }
        }
    }
}

/// The verdict on one scenario run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every expectation holds.
    Pass,
    /// Expectations failed, as listed.
    Fail(Vec<String>),
    /// A known deviation still shows (the failures, for the report).
    KnownDeviation(Vec<String>),
}

/// [`check`], with the scenario's `known_deviation` taken into account.
pub fn verdict(s: &Scenario, obs: &Observed, timing: Timing) -> Verdict {
    let failures = check(s, obs, timing);
    match (&s.known_deviation, failures.is_empty()) {
        (None, true) => Verdict::Pass,
        (None, false) => Verdict::Fail(failures),
        (Some(_), false) => Verdict::KnownDeviation(failures),
        (Some(d), true) => Verdict::Fail(vec![format!(
            "passes now, but is marked as a known deviation ({d}): remove known_deviation"
        )]),
    }
}
