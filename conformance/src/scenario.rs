//! The scenario file format (`conformance/scenarios/*.json`), documented in
//! `conformance/README.md`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use flagsync_core::config::{Fdv2Config, SourceSpec};
use flagsync_core::source::UnrecoverablePolicy;
use flagsync_core::{Config, ErrorKind, Mode, State};
use serde::Deserialize;

/// The SDK key every scenario uses.
pub const SDK_KEY: &str = "sdk-conformance-key";

/// The jitter seed every runner uses.
pub const SEED: u64 = 42;

/// One scenario: a client configuration, a server script and the expected transcript.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Named after the behaviour it pins; equals the file stem.
    pub name: String,
    /// What the scenario shows, with PROTOCOL.md references.
    pub description: String,
    /// The area, for the summary (e.g. `store`, `retry`).
    #[serde(default)]
    pub area: String,
    /// The client's settings.
    #[serde(default)]
    pub config: ClientConfig,
    /// One reply per connection attempt, in order. A request beyond the script fails.
    pub script: Vec<ReplySpec>,
    /// How long the scenario runs (virtual milliseconds).
    pub duration_ms: u64,
    /// Stop the client at this time (virtual ms).
    #[serde(default)]
    pub stop_at_ms: Option<u64>,
    /// The expected transcript.
    pub expect: Expect,
    /// How the live runner treats the scenario.
    #[serde(default)]
    pub live: LiveSpec,
    /// A known difference between flagsync and PROTOCOL.md that this scenario exposes.
    /// The expectations stay as PROTOCOL.md says; the runners list the scenario as a
    /// known deviation while it fails, and fail it once it passes (remove the field).
    #[serde(default)]
    pub known_deviation: Option<String>,
}

/// Streaming or polling.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ModeSpec {
    /// FDv1 streaming.
    #[default]
    Streaming,
    /// FDv1 polling.
    Polling,
    /// The FDv2 data system of `config.fdv2`.
    Fdv2,
}

/// The FDv2 data system of a scenario: a preset, or lists of sources, and the
/// coordinator timing (virtual ms, scaled live).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Fdv2Spec {
    /// `default`, `streaming`, `polling`, `custom` or `daemon`; the lists below replace
    /// the preset's when given.
    pub preset: String,
    /// Initializers, replacing the preset's.
    pub initializers: Option<Vec<SourceSpecJson>>,
    /// Synchronizers, replacing the preset's.
    pub synchronizers: Option<Vec<SourceSpecJson>>,
    /// FDv1 polling as directed fallback (`true`/`false`), replacing the preset's.
    pub fdv1_fallback: Option<bool>,
    /// Condition check interval.
    pub check_interval_ms: u64,
    /// Fallback when INITIALIZING this long.
    pub initializing_fallback_ms: u64,
    /// Fallback when INTERRUPTED this long.
    pub interrupted_fallback_ms: u64,
    /// Recovery to the first synchronizer after VALID this long.
    pub recovery_ms: u64,
}

impl Default for Fdv2Spec {
    fn default() -> Self {
        Self {
            preset: "default".into(),
            initializers: None,
            synchronizers: None,
            fdv1_fallback: None,
            check_interval_ms: 10_000,
            initializing_fallback_ms: 10_000,
            interrupted_fallback_ms: 60_000,
            recovery_ms: 300_000,
        }
    }
}

/// A data source in a scenario: `"streaming"`, `"polling"`, `"fdv1_polling"`, or
/// `{"polling": {"interval_ms": 5000}}` (also for `fdv1_polling`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SourceSpecJson {
    /// A source with the scenario's settings.
    Name(String),
    /// A polling source with its own interval.
    WithInterval(BTreeMap<String, IntervalSpec>),
}

/// A polling source's own interval.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntervalSpec {
    /// Poll interval (virtual ms; no minimum).
    pub interval_ms: u64,
}

impl SourceSpecJson {
    fn to_spec(&self, scale: f64) -> SourceSpec {
        let (name, interval) = match self {
            Self::Name(n) => (n.as_str(), None),
            Self::WithInterval(m) => match m.iter().next() {
                Some((n, i)) => (n.as_str(), Some(scaled(i.interval_ms, scale))),
                None => ("", None),
            },
        };
        match name {
            "streaming" => SourceSpec::streaming(),
            "fdv1_polling" => SourceSpec::Fdv1Polling {
                base_uri: None,
                interval,
            },
            _ => SourceSpec::Polling {
                base_uri: None,
                interval,
            },
        }
    }
}

impl Fdv2Spec {
    /// The core settings, durations scaled by `scale`.
    pub fn to_config(&self, scale: f64) -> Fdv2Config {
        let mut c = match self.preset.as_str() {
            "streaming" => Fdv2Config::streaming(),
            "polling" => Fdv2Config::polling(),
            "custom" => Fdv2Config::custom(),
            "daemon" => Fdv2Config::daemon(),
            _ => Fdv2Config::default(),
        };
        if let Some(list) = &self.initializers {
            c.initializers = list.iter().map(|s| s.to_spec(scale)).collect();
        }
        if let Some(list) = &self.synchronizers {
            c.synchronizers = list.iter().map(|s| s.to_spec(scale)).collect();
        }
        if let Some(on) = self.fdv1_fallback {
            c.fdv1_fallback = on.then(SourceSpec::fdv1_polling);
        }
        c.timing.check_interval = scaled(self.check_interval_ms, scale);
        c.timing.initializing_fallback = scaled(self.initializing_fallback_ms, scale);
        c.timing.interrupted_fallback = scaled(self.interrupted_fallback_ms, scale);
        c.timing.recovery = scaled(self.recovery_ms, scale);
        c
    }
}

/// The unrecoverable-status policy.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PolicySpec {
    /// The RETRY rule (the default).
    #[default]
    Retry,
    /// The legacy rule.
    Stop,
}

/// The client's settings (virtual milliseconds; the live runner scales them).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientConfig {
    /// Streaming or polling.
    pub mode: ModeSpec,
    /// Payload filter key.
    pub payload_filter: Option<String>,
    /// What 401/403/… do.
    pub unrecoverable: PolicySpec,
    /// Initial reconnect delay.
    pub initial_reconnect_delay_ms: u64,
    /// Normal-regime backoff ceiling.
    pub max_reconnect_delay_ms: u64,
    /// Healthy time that resets the backoff.
    pub backoff_reset_ms: u64,
    /// Connect timeout.
    pub connect_timeout_ms: u64,
    /// Polling read timeout.
    pub read_timeout_ms: u64,
    /// Stream read timeout.
    pub stream_read_timeout_ms: u64,
    /// Total deadline of a poll's response.
    pub poll_response_timeout_ms: u64,
    /// Deadline of a stream's response head.
    pub stream_head_timeout_ms: u64,
    /// Poll interval.
    pub poll_interval_ms: u64,
    /// Minimum poll interval.
    pub min_poll_interval_ms: u64,
    /// `X-LaunchDarkly-Tags` application id and version.
    pub application: Option<(String, String)>,
    /// Live runs: the client's subscription capacity
    /// (`ClientBuilder::subscription_capacity`).
    pub subscription_capacity: Option<usize>,
    /// The server speaks https (`https://localhost:<port>` live, with a test CA the
    /// client trusts; `https://flags.test:8030` virtual).
    pub tls: bool,
    /// The FDv2 data system (with `mode` `fdv2`).
    pub fdv2: Fdv2Spec,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            mode: ModeSpec::Streaming,
            payload_filter: None,
            unrecoverable: PolicySpec::Retry,
            initial_reconnect_delay_ms: 1000,
            max_reconnect_delay_ms: 30_000,
            backoff_reset_ms: 60_000,
            connect_timeout_ms: 10_000,
            read_timeout_ms: 15_000,
            stream_read_timeout_ms: 300_000,
            poll_response_timeout_ms: 60_000,
            stream_head_timeout_ms: 30_000,
            poll_interval_ms: 30_000,
            min_poll_interval_ms: 30_000,
            application: None,
            subscription_capacity: None,
            tls: false,
            fdv2: Fdv2Spec::default(),
        }
    }
}

/// The server's answer to one connection attempt.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ReplySpec {
    /// Send a response.
    Respond(RespondSpec),
    /// Fail the connection before any response (virtual: refused; live: accepted, the
    /// request read, then reset).
    Refuse,
    /// Send nothing (virtual: the connect never completes; live: accepted and silent).
    /// Scenarios using it set the connect timeout equal to the read timeout that
    /// applies, so both runners time out at the same moment.
    Hang,
}

/// How a response ends.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EndSpec {
    /// Close cleanly after the last chunk.
    #[default]
    Close,
    /// Keep the connection open and silent.
    Hang,
    /// Reset the connection after the last chunk.
    Reset,
}

/// A scripted response.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RespondSpec {
    /// Status code (default 200).
    #[serde(default = "ok")]
    pub status: u16,
    /// Headers; when absent, a 200 gets `Content-Type: text/event-stream; charset=utf-8`.
    /// `{base}` in a value becomes the server's base URL; `{http_base}` the same with
    /// `http://` (a downgrade of an https base); `{other_origin}` the same server under
    /// another host name (`localhost` for `127.0.0.1`): another origin that reaches the
    /// same server.
    #[serde(default)]
    pub headers: Option<Vec<(String, String)>>,
    /// Body chunks.
    #[serde(default)]
    pub body: Vec<ChunkSpec>,
    /// What happens after the last chunk.
    #[serde(default)]
    pub end: EndSpec,
}

fn ok() -> u16 {
    200
}

/// A body chunk: a bare string (sent at once) or a chunk with a delay.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ChunkSpec {
    /// Text sent without delay.
    Text(String),
    /// The texts of `repeat`, in turn, `times` times over, sent at once (a flood).
    Repeated {
        /// The texts.
        repeat: Vec<String>,
        /// How many times the whole list is sent.
        times: usize,
    },
    /// A chunk after a delay.
    Timed {
        /// Delay after the previous chunk (virtual ms).
        #[serde(default)]
        delay_ms: u64,
        /// Text to send.
        #[serde(default)]
        text: Option<String>,
        /// Text to gzip, then send.
        #[serde(default)]
        gzip: Option<String>,
    },
}

/// A response ready to send: the head and timed body chunks.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// Status code.
    pub status: u16,
    /// Headers, placeholders filled, `Content-Length` added where needed.
    pub headers: Vec<(String, String)>,
    /// (delay, bytes) pairs.
    pub chunks: Vec<(Duration, Vec<u8>)>,
    /// The end.
    pub end: EndSpec,
}

impl Prepared {
    /// The response head bytes.
    pub fn head(&self) -> Vec<u8> {
        let mut s = format!("HTTP/1.1 {} Scripted\r\n", self.status);
        for (n, v) in &self.headers {
            s.push_str(&format!("{n}: {v}\r\n"));
        }
        s.push_str("\r\n");
        s.into_bytes()
    }
}

/// `base` (`scheme://host:port`) with its host replaced by `localhost`.
fn other_origin(base: &str) -> String {
    let (scheme, rest) = base.split_once("://").unwrap_or(("http", base));
    let port = rest.rsplit_once(':').map_or("", |(_, p)| p);
    format!("{scheme}://localhost:{port}")
}

impl RespondSpec {
    /// Chunks as bytes, headers with `{base}` replaced, delays scaled.
    pub fn prepare(&self, base: &str, scale: f64) -> Prepared {
        let chunks: Vec<(Duration, Vec<u8>)> = self
            .body
            .iter()
            .map(|c| match c {
                ChunkSpec::Text(t) => (Duration::ZERO, t.as_bytes().to_vec()),
                ChunkSpec::Repeated { repeat, times } => {
                    let one: Vec<u8> = repeat.concat().into_bytes();
                    (Duration::ZERO, one.repeat(*times))
                }
                ChunkSpec::Timed {
                    delay_ms,
                    text,
                    gzip,
                } => {
                    let bytes = match (text, gzip) {
                        (_, Some(g)) => gzip_bytes(g.as_bytes()),
                        (Some(t), None) => t.as_bytes().to_vec(),
                        (None, None) => Vec::new(),
                    };
                    (scaled(*delay_ms, scale), bytes)
                }
            })
            .collect();
        let mut headers: Vec<(String, String)> = match &self.headers {
            Some(h) => h
                .iter()
                .map(|(n, v)| {
                    let v = v
                        .replace("{base}", base)
                        .replace("{http_base}", &base.replacen("https://", "http://", 1))
                        .replace("{other_origin}", &other_origin(base));
                    (n.clone(), v)
                })
                .collect(),
            None if self.status == 200 => vec![(
                "Content-Type".into(),
                "text/event-stream; charset=utf-8".into(),
            )],
            None => Vec::new(),
        };
        let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
        let sse = headers.iter().any(|(n, v)| {
            n.eq_ignore_ascii_case("content-type") && v.starts_with("text/event-stream")
        });
        if self.end == EndSpec::Close && !sse && !has("content-length") && !has("transfer-encoding")
        {
            let len: usize = chunks.iter().map(|(_, b)| b.len()).sum();
            headers.push(("Content-Length".into(), len.to_string()));
        }
        Prepared {
            status: self.status,
            headers,
            chunks,
            end: self.end,
        }
    }
}

fn gzip_bytes(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
}

/// `ms` virtual milliseconds scaled for a run.
pub fn scaled(ms: u64, scale: f64) -> Duration {
    Duration::from_secs_f64(ms as f64 * scale / 1000.0)
}

/// The expected client-side transcript.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Expect {
    /// The i-th entry checks the i-th request.
    pub requests: Vec<RequestSpec>,
    /// Exactly this many requests during the scenario.
    pub request_count: Option<usize>,
    /// No more than `max` requests by `by_ms`.
    pub max_requests: Vec<MaxRequests>,
    /// At least `min` requests by `by_ms`.
    pub min_requests: Vec<MinRequests>,
    /// Store contents at given times.
    pub store: Vec<StoreSpec>,
    /// The exact status sequence (every change, in order).
    pub statuses: Option<Vec<StatusSpec>>,
    /// The status at the end (before a scripted stop takes effect, if any).
    pub final_status: Option<StatusSpec>,
    /// Whether the client is initialized at the end.
    pub initialized: Option<bool>,
    /// The environment id at the end.
    pub env_id: Option<String>,
    /// No environment id at the end.
    pub no_env_id: bool,
    /// Open connections after the scripted stop (live: within 3 s).
    pub open_connections_after_stop: Option<usize>,
    /// Live runs: a flag-change subscriber that never reads holds at most this many
    /// changes at the end, and missed some (it lagged). The virtual runner has no
    /// subscribers and skips this check.
    pub stalled_subscriber_holds_at_most: Option<usize>,
    /// The data availability at the end (`defaults`, `cached`, `refreshed`).
    pub availability: Option<String>,
}

/// Checks on one request.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RequestSpec {
    /// `GET`.
    pub method: Option<String>,
    /// Path and query, e.g. `/all?filter=x`.
    pub target: Option<String>,
    /// Headers with exact values (names case-insensitive).
    pub headers: BTreeMap<String, String>,
    /// Headers that must be present.
    pub present: Vec<String>,
    /// Headers that must be absent.
    pub absent: Vec<String>,
    /// Virtual time window `[from, to]` of the request.
    pub at_ms: Option<(u64, u64)>,
    /// Window `[from, to]` of the time since the previous request.
    pub gap_ms: Option<(u64, u64)>,
}

/// "No more than `max` requests by `by_ms`".
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MaxRequests {
    /// Virtual time.
    pub by_ms: u64,
    /// Most requests.
    pub max: usize,
}

/// "At least `min` requests by `by_ms`".
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinRequests {
    /// Virtual time.
    pub by_ms: u64,
    /// Fewest requests.
    pub min: usize,
}

/// An expected store item: a live version, or a tombstone.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum ItemSpec {
    /// A live item with this version.
    Version(u64),
    /// A tombstone with this version (invisible to readers).
    Tombstone {
        /// The tombstone's version.
        tombstone: u64,
    },
}

/// Store contents at a time. `null` means absent (unknown or deleted).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreSpec {
    /// Virtual time of the check.
    pub at_ms: u64,
    /// Flags by key.
    #[serde(default)]
    pub flags: BTreeMap<String, Option<ItemSpec>>,
    /// Segments by key.
    #[serde(default)]
    pub segments: BTreeMap<String, Option<ItemSpec>>,
    /// The listed live items are all there is.
    #[serde(default)]
    pub exact: bool,
}

/// An expected status.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusSpec {
    /// `initializing`, `valid`, `interrupted` or `off`.
    pub state: String,
    /// Error kind (`unknown`, `network_error`, `error_response`, `invalid_data`,
    /// `store_error`), or `none` for no error. Unchecked when absent.
    #[serde(default)]
    pub kind: Option<String>,
    /// HTTP status code of the error (0 for none). Unchecked when absent.
    #[serde(default)]
    pub code: Option<u16>,
}

impl StatusSpec {
    /// Does `(state, error)` match?
    pub fn matches(&self, got: &ObservedStatus) -> bool {
        if self.state != got.state.as_str() {
            return false;
        }
        if let Some(kind) = &self.kind {
            let k = got.error.map_or("none", |(k, _)| k.as_str());
            if kind != k {
                return false;
            }
        }
        if let Some(code) = self.code
            && got.error.map_or(0, |(_, c)| c) != code
        {
            return false;
        }
        true
    }
}

/// A status as a runner saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObservedStatus {
    /// The state.
    pub state: State,
    /// Error kind and status code.
    pub error: Option<(ErrorKind, u16)>,
}

impl std::fmt::Display for ObservedStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.error {
            Some((k, c)) => write!(f, "{}({},{c})", self.state.as_str(), k.as_str()),
            None => write!(f, "{}", self.state.as_str()),
        }
    }
}

impl std::fmt::Display for StatusSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.state)?;
        if self.kind.is_some() || self.code.is_some() {
            write!(
                f,
                "({},{})",
                self.kind.as_deref().unwrap_or("*"),
                self.code.map_or("*".into(), |c| c.to_string())
            )?;
        }
        Ok(())
    }
}

/// How the live runner treats a scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum LiveSpec {
    /// Not run live, for this reason.
    Skip {
        /// The reason, listed in the test output.
        skip: String,
    },
    /// Run live with times multiplied by `time_scale`.
    Run {
        /// Factor applied to every duration (default 0.01).
        #[serde(default = "default_scale")]
        time_scale: f64,
        /// Extra lateness allowed for each timed check, in real ms (default 150).
        #[serde(default = "default_slack")]
        slack_ms: u64,
    },
}

impl Default for LiveSpec {
    fn default() -> Self {
        Self::Run {
            time_scale: default_scale(),
            slack_ms: default_slack(),
        }
    }
}

fn default_scale() -> f64 {
    0.01
}

fn default_slack() -> u64 {
    150
}

impl Scenario {
    /// The core configuration, durations scaled by `scale`, both base URIs `base`.
    pub fn core_config(&self, base: &str, scale: f64) -> Config {
        let c = &self.config;
        let mut config = Config::new(SDK_KEY);
        config.stream_uri = base.to_owned();
        config.polling_uri = base.to_owned();
        self.apply(&mut config, scale);
        if let Some((id, version)) = &c.application {
            config.identity.application_id = Some(id.clone());
            config.identity.application_version = Some(version.clone());
        }
        config
    }

    /// Set every scenario-controlled field of `config` (not the URIs or the key).
    pub fn apply(&self, config: &mut Config, scale: f64) {
        let c = &self.config;
        config.mode = match c.mode {
            ModeSpec::Streaming => Mode::Streaming,
            ModeSpec::Polling => Mode::Polling,
            ModeSpec::Fdv2 => Mode::Fdv2,
        };
        config.fdv2 = c.fdv2.to_config(scale);
        config.payload_filter = c.payload_filter.clone();
        config.unrecoverable = match c.unrecoverable {
            PolicySpec::Retry => UnrecoverablePolicy::Retry,
            PolicySpec::Stop => UnrecoverablePolicy::Stop,
        };
        config.backoff.initial = scaled(c.initial_reconnect_delay_ms, scale);
        config.backoff.max = scaled(c.max_reconnect_delay_ms, scale);
        config.backoff.reset_after = scaled(c.backoff_reset_ms, scale);
        config.backoff.extended_initial = scaled(300_000, scale);
        config.backoff.extended_max = scaled(3_600_000, scale);
        config.connect_timeout = scaled(c.connect_timeout_ms, scale);
        config.read_timeout = scaled(c.read_timeout_ms, scale);
        config.stream_read_timeout = scaled(c.stream_read_timeout_ms, scale);
        config.poll_response_timeout = scaled(c.poll_response_timeout_ms, scale);
        config.stream_head_timeout = scaled(c.stream_head_timeout_ms, scale);
        config.poll_interval = scaled(c.poll_interval_ms, scale);
        config.min_poll_interval = scaled(c.min_poll_interval_ms, scale);
    }
}

/// The scenario directory of this crate.
pub fn scenario_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

/// Every scenario, sorted by name. A file that does not parse is an error.
pub fn load_all() -> Result<Vec<Scenario>, String> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let dir = scenario_dir();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        match serde_json::from_str::<Scenario>(&text) {
            Ok(s) => {
                let stem = path.file_stem().unwrap_or_default().to_string_lossy();
                if s.name != stem {
                    errors.push(format!(
                        "{}: name {:?} != file stem",
                        path.display(),
                        s.name
                    ));
                }
                out.push(s);
            }
            Err(e) => errors.push(format!("{}: {e}", path.display())),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors.join("\n"))
    }
}

/// A moment at which a runner observes something the scenario expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Checkpoint {
    /// Count requests for `expect.max_requests[i]`.
    MaxRequests(usize),
    /// Count requests for `expect.min_requests[i]`.
    MinRequests(usize),
    /// Take a store snapshot for `expect.store[i]`.
    Store(usize),
    /// Stop the client (`stop_at_ms`).
    Stop,
}

impl Scenario {
    /// Every checkpoint with its time in scenario milliseconds, sorted; both runners
    /// observe the same points (the live runner scales and pads the times).
    pub fn checkpoints(&self) -> Vec<(u64, Checkpoint)> {
        let e = &self.expect;
        let mut points: Vec<(u64, Checkpoint)> = Vec::new();
        points.extend(
            e.max_requests
                .iter()
                .enumerate()
                .map(|(i, m)| (m.by_ms, Checkpoint::MaxRequests(i))),
        );
        points.extend(
            e.min_requests
                .iter()
                .enumerate()
                .map(|(i, m)| (m.by_ms, Checkpoint::MinRequests(i))),
        );
        points.extend(
            e.store
                .iter()
                .enumerate()
                .map(|(i, m)| (m.at_ms, Checkpoint::Store(i))),
        );
        if let Some(at) = self.stop_at_ms {
            points.push((at, Checkpoint::Stop));
        }
        points.sort();
        points
    }
}
