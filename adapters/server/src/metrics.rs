//! The server's counters and their Prometheus text exposition (`GET /metrics`).
//!
//! Counters are atomics bumped where things happen (the request loop, the stream hub,
//! the events endpoints, a relay's forwarder); the per-environment figures (upstream
//! state, payload version, data age) are read from the environments when scraped.
//! Every name starts with `flagsync_server_`; counters end in `_total`, durations are
//! in seconds (Prometheus' naming rules, which `promtool check metrics` enforces).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use crate::health::{ConnectionState, EnvView};

/// The upper bounds of the fan-out latency histogram's buckets, in seconds.
const FANOUT_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// Why a connection was refused at accept.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RefusedBy {
    /// The open-connection limit.
    Limit,
    /// The process ran out of file descriptors.
    Descriptors,
}

/// What an event stream carries, as `/metrics` labels it (`protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamKind {
    /// A server-side FDv1 stream (`/all`, `/flags`).
    Fdv1,
    /// A server-side FDv2 stream (`/sdk/stream`).
    Fdv2,
    /// A client-side or mobile stream of evaluated flags (`/eval`, `/meval`).
    Client,
    /// An OFREP change-notice stream.
    Ofrep,
}

impl StreamKind {
    /// Every kind, in the order of the counters.
    pub(crate) const ALL: [Self; 4] = [Self::Fdv1, Self::Fdv2, Self::Client, Self::Ofrep];

    /// The `protocol` label.
    pub(crate) const fn label(self) -> &'static str {
        match self {
            Self::Fdv1 => "fdv1",
            Self::Fdv2 => "fdv2",
            Self::Client => "client",
            Self::Ofrep => "ofrep",
        }
    }

    /// True for FDv2 streams, which get the FDv2 frames and heartbeats.
    pub(crate) const fn fdv2(self) -> bool {
        matches!(self, Self::Fdv2)
    }
}

/// The server's counters.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    accepted: [AtomicU64; 2],
    refused: [AtomicU64; 2],
    timed_out: AtomicU64,
    /// Connections the request loop holds now (not yet streams).
    pub(crate) request_conns: AtomicUsize,
    streams_open: [AtomicUsize; StreamKind::ALL.len()],
    streams_total: [AtomicU64; StreamKind::ALL.len()],
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    events_received: [AtomicU64; 2],
    events_forwarded: AtomicU64,
    events_forward_failed: AtomicU64,
    fanout_buckets: [AtomicU64; FANOUT_BUCKETS.len()],
    fanout_count: AtomicU64,
    fanout_sum_nanos: AtomicU64,
}

impl Metrics {
    pub(crate) fn accepted(&self, tls: bool) {
        self.accepted[usize::from(tls)].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn refused(&self, by: RefusedBy) {
        self.refused[by as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A request head or body did not arrive in time.
    pub(crate) fn timed_out(&self) {
        self.timed_out.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stream_opened(&self, kind: StreamKind) {
        self.streams_open[kind as usize].fetch_add(1, Ordering::Relaxed);
        self.streams_total[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stream_closed(&self, kind: StreamKind) {
        self.streams_open[kind as usize].fetch_sub(1, Ordering::Relaxed);
    }

    /// A request to `route` answered with `status`.
    pub(crate) fn request(&self, route: &'static str, status: u16) {
        let mut map = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        *map.entry((route, status)).or_default() += 1;
    }

    /// An events payload accepted (`diagnostic`: `/diagnostic`, else `/bulk`).
    pub(crate) fn events_received(&self, diagnostic: bool) {
        self.events_received[usize::from(diagnostic)].fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn events_forwarded(&self, forwarded: u64, failed: u64) {
        self.events_forwarded
            .fetch_add(forwarded, Ordering::Relaxed);
        self.events_forward_failed
            .fetch_add(failed, Ordering::Relaxed);
    }

    /// One change written to every stream of its environment in `took`.
    pub(crate) fn fanout_written(&self, took: Duration) {
        let secs = took.as_secs_f64();
        for (bound, count) in FANOUT_BUCKETS.iter().zip(&self.fanout_buckets) {
            if secs <= *bound {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.fanout_count.fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.fanout_sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// The exposition: these counters, and each environment's figures.
    pub(crate) fn render(
        &self,
        envs: &[EnvView<'_>],
        events_dropped: u64,
        now: SystemTime,
    ) -> String {
        let mut out = String::with_capacity(4096);
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let loadu = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        family(
            &mut out,
            "connections_open",
            "gauge",
            "Connections open now, by kind.",
        );
        let streams: usize = self.streams_open.iter().map(loadu).sum();
        sample(
            &mut out,
            "connections_open",
            &[("kind", "request")],
            loadu(&self.request_conns),
        );
        sample(&mut out, "connections_open", &[("kind", "stream")], streams);
        family(
            &mut out,
            "connections_accepted_total",
            "counter",
            "Connections accepted, by transport.",
        );
        sample(
            &mut out,
            "connections_accepted_total",
            &[("transport", "plain")],
            load(&self.accepted[0]),
        );
        sample(
            &mut out,
            "connections_accepted_total",
            &[("transport", "tls")],
            load(&self.accepted[1]),
        );
        family(
            &mut out,
            "connections_refused_total",
            "counter",
            "Connections refused at accept: over the connection limit, or out of file descriptors.",
        );
        sample(
            &mut out,
            "connections_refused_total",
            &[("reason", "limit")],
            load(&self.refused[0]),
        );
        sample(
            &mut out,
            "connections_refused_total",
            &[("reason", "descriptors")],
            load(&self.refused[1]),
        );
        family(
            &mut out,
            "requests_timed_out_total",
            "counter",
            "Requests whose head or body did not arrive within its deadline (408).",
        );
        sample(
            &mut out,
            "requests_timed_out_total",
            &[],
            load(&self.timed_out),
        );
        family(
            &mut out,
            "streams_open",
            "gauge",
            "Event streams open now, by protocol.",
        );
        for kind in StreamKind::ALL {
            sample(
                &mut out,
                "streams_open",
                &[("protocol", kind.label())],
                loadu(&self.streams_open[kind as usize]),
            );
        }
        family(
            &mut out,
            "streams_opened_total",
            "counter",
            "Event streams opened, by protocol.",
        );
        for kind in StreamKind::ALL {
            sample(
                &mut out,
                "streams_opened_total",
                &[("protocol", kind.label())],
                load(&self.streams_total[kind as usize]),
            );
        }
        family(
            &mut out,
            "requests_total",
            "counter",
            "Requests answered, by route and status.",
        );
        let requests = self
            .requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for ((route, status), n) in requests {
            let status = status.to_string();
            sample(
                &mut out,
                "requests_total",
                &[("route", route), ("status", &status)],
                n,
            );
        }
        family(
            &mut out,
            "events_received_total",
            "counter",
            "Analytics event payloads accepted, by endpoint.",
        );
        sample(
            &mut out,
            "events_received_total",
            &[("endpoint", "bulk")],
            load(&self.events_received[0]),
        );
        sample(
            &mut out,
            "events_received_total",
            &[("endpoint", "diagnostic")],
            load(&self.events_received[1]),
        );
        family(
            &mut out,
            "events_forwarded_total",
            "counter",
            "Analytics event payloads forwarded upstream (a relay).",
        );
        sample(
            &mut out,
            "events_forwarded_total",
            &[],
            load(&self.events_forwarded),
        );
        family(
            &mut out,
            "events_forward_failed_total",
            "counter",
            "Analytics event payloads that could not be forwarded upstream (a relay).",
        );
        sample(
            &mut out,
            "events_forward_failed_total",
            &[],
            load(&self.events_forward_failed),
        );
        family(
            &mut out,
            "events_dropped_total",
            "counter",
            "Analytics event payloads dropped because a full queue could not take them.",
        );
        sample(&mut out, "events_dropped_total", &[], events_dropped);
        family(
            &mut out,
            "fanout_write_seconds",
            "histogram",
            "Time to write one change to every stream of its environment.",
        );
        for (bound, count) in FANOUT_BUCKETS.iter().zip(&self.fanout_buckets) {
            let le = bound.to_string();
            sample(
                &mut out,
                "fanout_write_seconds_bucket",
                &[("le", &le)],
                load(count),
            );
        }
        let count = load(&self.fanout_count);
        sample(
            &mut out,
            "fanout_write_seconds_bucket",
            &[("le", "+Inf")],
            count,
        );
        let sum = Duration::from_nanos(load(&self.fanout_sum_nanos)).as_secs_f64();
        let _ = writeln!(out, "flagsync_server_fanout_write_seconds_sum {sum}");
        sample(&mut out, "fanout_write_seconds_count", &[], count);
        family(
            &mut out,
            "environment_connected",
            "gauge",
            "1 while the environment's data is current (its upstream connection is valid, or its data came from a file), else 0.",
        );
        for e in envs {
            let up = u8::from(e.health.connection == ConnectionState::Valid);
            sample(
                &mut out,
                "environment_connected",
                &[("environment", e.name)],
                up,
            );
        }
        family(
            &mut out,
            "environment_payload_version",
            "gauge",
            "The payload version served: 1 for the first data, plus one per change.",
        );
        for e in envs {
            sample(
                &mut out,
                "environment_payload_version",
                &[("environment", e.name)],
                e.version,
            );
        }
        family(
            &mut out,
            "environment_data_age_seconds",
            "gauge",
            "Seconds since the environment's data last changed (or was confirmed current).",
        );
        for e in envs {
            let age = now
                .duration_since(e.health.data_updated)
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "flagsync_server_environment_data_age_seconds{{environment=\"{}\"}} {}",
                escape(e.name),
                age.as_secs_f64()
            );
        }
        out
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP flagsync_server_{name} {help}");
    let _ = writeln!(out, "# TYPE flagsync_server_{name} {kind}");
}

fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
    let _ = write!(out, "flagsync_server_{name}");
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape(v));
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// A label value as the text format quotes it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
