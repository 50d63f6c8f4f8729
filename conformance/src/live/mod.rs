//! The `live` runner: a scenario served from a 127.0.0.1 std-thread server to the real
//! `flagsync::Client`, once per runtime feature, with durations scaled down.

mod server;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flagsync::runtime::Runtime;
use flagsync::{Client, DataSourceStatus};

pub use server::ScriptServer;

use crate::check::{Observed, Timing};
use crate::scenario::{Checkpoint, LiveSpec, ObservedStatus, SDK_KEY, SEED, Scenario, scaled};

/// A runtime feature the live runner drives the client on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeKind {
    /// tokio (multi-thread, two workers).
    Tokio,
    /// smol.
    Smol,
    /// async-std.
    AsyncStd,
}

impl RuntimeKind {
    /// Every runtime.
    pub const ALL: [Self; 3] = [Self::Tokio, Self::Smol, Self::AsyncStd];

    /// The feature name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Tokio => "tokio",
            Self::Smol => "smol",
            Self::AsyncStd => "async-std",
        }
    }

    /// Block the current thread on `body`, run on this runtime.
    pub fn block_on<T, F: Future<Output = T>>(self, body: impl FnOnce(Arc<dyn Runtime>) -> F) -> T {
        match self {
            Self::Tokio => {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .expect("tokio runtime");
                rt.block_on(async {
                    let runtime: Arc<dyn Runtime> = Arc::new(
                        flagsync::runtime::TokioRuntime::try_current().expect("inside tokio"),
                    );
                    body(runtime).await
                })
            }
            Self::Smol => smol::block_on(body(Arc::new(flagsync::runtime::SmolRuntime))),
            Self::AsyncStd => {
                async_std::task::block_on(body(Arc::new(flagsync::runtime::AsyncStdRuntime)))
            }
        }
    }
}

/// The timing tolerance of a live run of `s`, or why it is skipped.
pub fn timing(s: &Scenario) -> Result<Timing, String> {
    match &s.live {
        LiveSpec::Skip { skip } => Err(skip.clone()),
        LiveSpec::Run {
            time_scale,
            slack_ms,
        } => Ok(Timing {
            scale: *time_scale,
            early: Duration::from_millis(3),
            late: Duration::from_millis(*slack_ms),
        }),
    }
}

async fn sleep_until(rt: &Arc<dyn Runtime>, at: Instant) {
    if at > Instant::now() {
        rt.sleep_until(at).await;
    }
}

fn observed(s: &DataSourceStatus) -> ObservedStatus {
    ObservedStatus {
        state: s.state,
        error: s.error.as_ref().map(|e| (e.kind, e.status_code)),
    }
}

/// How long after its scaled time a store check, a stop or the end is taken.
pub const SETTLE: Duration = Duration::from_millis(20);

/// Run `s` live on `rt`.
pub async fn run(s: &Scenario, rt: Arc<dyn Runtime>, timing: Timing) -> Result<Observed, String> {
    let scale = timing.scale;
    let server = ScriptServer::start(&s.script, scale, s.config.tls).map_err(|e| e.to_string())?;
    let base = server.base();
    let mut builder = Client::builder(SDK_KEY);
    if let Some(capacity) = s.config.subscription_capacity {
        builder = builder.subscription_capacity(capacity);
    }
    if let Some(ca) = server.ca_pem() {
        builder = builder
            .tls_built_in_roots(false)
            .add_root_certificate_pem(ca.as_bytes().to_vec());
    }
    let client = builder
        .stream_uri(base.clone())
        .polling_uri(base)
        .runtime(rt.clone())
        .no_proxy()
        .seed(SEED)
        .close_timeout(Duration::from_secs(3))
        .core_config(|c| {
            s.apply(c, scale);
            if let Some((id, version)) = &s.config.application {
                c.identity.application_id = Some(id.clone());
                c.identity.application_version = Some(version.clone());
            }
        })
        .build()
        .map_err(|e| e.to_string())?;
    let statuses = client.status_changes();
    // A subscriber that never reads, for `stalled_subscriber_holds_at_most`.
    let stalled = s
        .expect
        .stalled_subscriber_holds_at_most
        .map(|_| client.flag_changes());
    // A store check waits a little past its time, so that data sent at that moment
    // has arrived; a "no more than" count is taken on time (lateness only helps it).
    let settle = SETTLE;
    let mut points: Vec<(Duration, Checkpoint)> = s
        .checkpoints()
        .into_iter()
        .map(|(ms, point)| {
            let pad = match point {
                Checkpoint::MaxRequests(_) => Duration::ZERO,
                Checkpoint::MinRequests(_) => timing.late,
                Checkpoint::Store(_) | Checkpoint::Stop => settle,
            };
            (scaled(ms, scale) + pad, point)
        })
        .collect();
    points.sort();
    let mut obs = Observed::for_scenario(s);
    let t0 = Instant::now();
    server.set_origin(t0);
    client.start().map_err(|e| e.to_string())?;
    let mut stopped = false;
    for (at, point) in points {
        sleep_until(&rt, t0 + at).await;
        match point {
            Checkpoint::MaxRequests(i) => obs.max_counts[i] = server.request_count(),
            Checkpoint::MinRequests(i) => obs.min_counts[i] = server.request_count(),
            Checkpoint::Store(i) => obs.snapshots[i] = Some(client.snapshot()),
            Checkpoint::Stop => {
                obs.final_status = Some(observed(&client.status()));
                obs.initialized = client.initialized();
                obs.availability = Some(client.data_availability());
                client.close().await;
                let deadline = Instant::now() + Duration::from_secs(3);
                while server.open_connections() > 0 && Instant::now() < deadline {
                    sleep_until(&rt, Instant::now() + Duration::from_millis(5)).await;
                }
                obs.open_after_stop = Some(server.open_connections());
                stopped = true;
            }
        }
    }
    sleep_until(&rt, t0 + scaled(s.duration_ms, scale) + settle).await;
    if !stopped {
        obs.final_status = Some(observed(&client.status()));
        obs.initialized = client.initialized();
        obs.availability = Some(client.data_availability());
    }
    obs.env_id = client.environment_id();
    obs.requests = server.requests();
    obs.stalled_subscriber = stalled.map(|sub| (sub.len(), sub.lagged()));
    // Statuses up to now (a scripted stop's OFF included); the OFF of the runner's own
    // close below is not part of the scenario.
    let mut all = Vec::new();
    while let Some(st) = statuses.try_recv() {
        all.push(observed(&st));
    }
    if !stopped {
        client.close().await;
    }
    obs.statuses = all;
    drop(server);
    Ok(obs)
}
