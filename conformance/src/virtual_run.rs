//! The `virtual` runner: a scenario fed straight into the core's `DataSystem` through
//! `flagsync_core::testing::Harness`, under virtual time, with no sockets.

use std::time::Duration;

use bytes::Bytes;
use flagsync_core::testing::{End, Harness, Reply, Response, origin};
use flagsync_core::{Command, DataSystem, Event, Input, Status};

use crate::check::{Observed, ObservedRequest};
use crate::scenario::{Checkpoint, EndSpec, ObservedStatus, ReplySpec, SEED, Scenario};

/// The base URL of the virtual server.
pub const BASE: &str = "http://flags.test:8030";

/// The base URL of the virtual server of a scenario with `"tls": true`.
pub const TLS_BASE: &str = "https://flags.test:8030";

/// A core status as the checks see it.
pub fn observed_status(s: &Status) -> ObservedStatus {
    ObservedStatus {
        state: s.state,
        error: s.error.as_ref().map(|e| (e.kind, e.status_code)),
    }
}

fn reply(spec: &ReplySpec, base: &str) -> Reply {
    match spec {
        ReplySpec::Refuse => Reply::Refuse,
        ReplySpec::Hang => Reply::Hang,
        ReplySpec::Respond(r) => {
            let p = r.prepare(base, 1.0);
            Reply::Respond(Response {
                status: p.status,
                headers: p.headers,
                chunks: p
                    .chunks
                    .into_iter()
                    .map(|(d, b)| (d, Bytes::from(b)))
                    .collect(),
                end: match p.end {
                    EndSpec::Close => End::Close,
                    EndSpec::Hang => End::Hang,
                    EndSpec::Reset => End::Reset,
                },
            })
        }
    }
}

/// Run `s` under virtual time.
pub fn run(s: &Scenario) -> Result<Observed, String> {
    let t0 = origin();
    let base = if s.config.tls { TLS_BASE } else { BASE };
    let system = DataSystem::new(s.core_config(base, 1.0), SEED, t0).map_err(|e| e.to_string())?;
    let mut h = Harness::new(system, t0);
    for r in &s.script {
        h.reply(reply(r, base));
    }
    let points = s.checkpoints();
    let mut obs = Observed::for_scenario(s);
    h.start(Duration::ZERO);
    let mut stopped = false;
    for (at, point) in points {
        h.run_until(Duration::from_millis(at));
        match point {
            Checkpoint::MaxRequests(i) => obs.max_counts[i] = h.requests.len(),
            Checkpoint::MinRequests(i) => obs.min_counts[i] = h.requests.len(),
            Checkpoint::Store(i) => obs.snapshots[i] = Some(h.system.snapshot()),
            Checkpoint::Stop => {
                obs.final_status = Some(observed_status(h.system.status()));
                obs.initialized = h.system.initialized();
                obs.availability = Some(h.system.data_availability());
                h.input(Input::Command(Command::Stop));
                obs.open_after_stop = Some(h.open_connections());
                stopped = true;
            }
        }
    }
    h.run_until(Duration::from_millis(s.duration_ms));
    if !stopped {
        obs.final_status = Some(observed_status(h.system.status()));
        obs.initialized = h.system.initialized();
        obs.availability = Some(h.system.data_availability());
    }
    obs.env_id = h.system.environment_id().map(str::to_owned);
    obs.statuses = h
        .events
        .iter()
        .filter_map(|(_, e)| match e {
            Event::StatusChanged(s) => Some(observed_status(s)),
            _ => None,
        })
        .collect();
    obs.requests = h
        .requests
        .iter()
        .map(|r| ObservedRequest {
            at: r.at,
            method: r.line.split(' ').next().unwrap_or("").to_owned(),
            target: r.target().to_owned(),
            headers: r.headers.clone(),
        })
        .collect();
    Ok(obs)
}
