//! The fixture shared by the peers' bench (`benches/events.rs`) and instruction
//! counter (`examples/count_events.rs`): one realistic flag served by flagsync's local
//! flag server, a pool of user contexts, an events sink on 127.0.0.1 that answers 202
//! to every POST, and the three contenders reading the same flag:
//!
//! - flagsync with analytics events off (`send_events(false)`),
//! - flagsync with analytics events on (default settings, events to the sink),
//! - the official Rust server SDK (`launchdarkly-server-sdk` 3.2.0) with its default
//!   event processor, events to the same sink, flags from the same server (its polling
//!   data source, `/sdk/latest-all`), over its plain-HTTP hyper transport.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flagsync::eval::{Context, ContextBuilder};
use flagsync::server::{Server, ServerHandle};
use launchdarkly_sdk_transport::HyperTransport;
use serde_json::{Value, json};

/// The flag every contender evaluates.
pub const FLAG: &str = "checkout-redesign";

/// How many contexts the `context_pool` rows cycle through.
pub const POOL: usize = 10_000;

/// The flag data: [`FLAG`] (on, two rules, a percentage rollout in the fallthrough, no
/// `trackEvents`) and 199 other flags of the same shape, so the store is not trivial.
pub fn data() -> Value {
    let mut flags = serde_json::Map::new();
    for i in 0..200 {
        let key = if i == 0 {
            FLAG.to_owned()
        } else {
            format!("flag-{i:03}")
        };
        flags.insert(key.clone(), flag(&key, i));
    }
    json!({ "flags": flags, "segments": {} })
}

/// A boolean flag as LaunchDarkly serves it: individual targets, a rule on the e-mail
/// domain, a rule on country and plan with a 30/70 rollout, and a 50/50 fallthrough.
fn flag(key: &str, i: u64) -> Value {
    json!({
        "key": key,
        "version": 12 + i,
        "on": true,
        "salt": format!("{key}-salt"),
        "targets": [{"values": ["user-qa-1", "user-qa-2", "user-qa-3"], "variation": 0}],
        "contextTargets": [],
        "prerequisites": [],
        "rules": [
            {
                "id": format!("{key}-rule-staff"),
                "variation": 0,
                "clauses": [
                    {"attribute": "email", "op": "endsWith", "values": ["@example.com"], "negate": false}
                ],
                "trackEvents": false
            },
            {
                "id": format!("{key}-rule-markets"),
                "rollout": {"variations": [{"variation": 0, "weight": 30000}, {"variation": 1, "weight": 70000}]},
                "clauses": [
                    {"attribute": "country", "op": "in", "values": ["de", "fr", "nl", "se"], "negate": false},
                    {"attribute": "plan", "op": "in", "values": ["pro", "enterprise"], "negate": false}
                ],
                "trackEvents": false
            }
        ],
        "fallthrough": {"rollout": {"variations": [{"variation": 0, "weight": 50000}, {"variation": 1, "weight": 50000}]}},
        "offVariation": 1,
        "variations": [true, false],
        "clientSideAvailability": {"usingMobileKey": false, "usingEnvironmentId": false},
        "trackEvents": false,
        "trackEventsFallthrough": false,
        "debugEventsUntilDate": null
    })
}

/// User `i`: a key, a name, an e-mail address outside the staff domain, a country and
/// a plan (every fourth user matches the market rule; the rest reach the fallthrough).
pub fn context(i: usize) -> Context {
    const COUNTRIES: [&str; 4] = ["de", "us", "gb", "jp"];
    const PLANS: [&str; 3] = ["pro", "free", "team"];
    let mut b = ContextBuilder::new(format!("user-{i:06}"));
    b.name(format!("User {i}"))
        .set_string("email", format!("user{i}@mail.test"))
        .set_string("country", COUNTRIES[i % 4])
        .set_string("plan", PLANS[i % 3]);
    b.build().expect("a valid context")
}

/// [`POOL`] distinct users.
pub fn context_pool() -> Vec<Context> {
    (0..POOL).map(context).collect()
}

/// The official SDK's copy of a flagsync context (the SDKs have context types of their
/// own), through its JSON: made before anything is timed, never in a timed loop.
pub fn official_context(context: &Context) -> launchdarkly_server_sdk::Context {
    let json = serde_json::to_value(context).expect("a context serializes");
    serde_json::from_value(json).expect("the official SDK reads every context")
}

/// The same contexts in both SDKs' types, index for index.
pub struct Contexts {
    /// flagsync's.
    pub ours: Vec<Context>,
    /// The official SDK's copies.
    pub official: Vec<launchdarkly_server_sdk::Context>,
}

impl Contexts {
    /// `contexts` and their official copies.
    pub fn new(ours: Vec<Context>) -> Self {
        let official = ours.iter().map(official_context).collect();
        Self { ours, official }
    }

    /// How many contexts there are.
    pub fn len(&self) -> usize {
        self.ours.len()
    }

    /// True without contexts.
    pub fn is_empty(&self) -> bool {
        self.ours.is_empty()
    }
}

/// What the sink received from one client (by `User-Agent`).
#[derive(Debug, Default, Clone)]
pub struct Received {
    /// `POST` requests.
    pub posts: u64,
    /// Events in `/bulk` payloads, by `kind`.
    pub events: BTreeMap<String, u64>,
    /// Evaluations of [`FLAG`] counted in summary events.
    pub summarized: u64,
    /// Posts whose `X-LaunchDarkly-Payload-ID` came before (retries): not tallied again.
    pub repeated: u64,
    /// The payload ids seen.
    payload_ids: std::collections::BTreeSet<String>,
}

/// An HTTP/1.1 server on 127.0.0.1 that answers `202 Accepted` to every request,
/// keeps connections alive, and tallies what it receives.
#[derive(Debug, Clone)]
pub struct Sink {
    url: String,
    received: Arc<Mutex<BTreeMap<String, Received>>>,
}

impl Sink {
    /// Bind a free port and serve from a thread per connection.
    pub fn start() -> Sink {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind the sink");
        let url = format!("http://{}", listener.local_addr().expect("sink address"));
        let received = Arc::new(Mutex::new(BTreeMap::new()));
        let tally = Arc::clone(&received);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let tally = Arc::clone(&tally);
                std::thread::spawn(move || {
                    // A connection that breaks mid-request is simply dropped.
                    let _ = serve(stream, &tally);
                });
            }
        });
        Sink { url, received }
    }

    /// The base URI to give the clients as their events URI.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What each client (by `User-Agent` product name) has sent so far.
    pub fn received(&self) -> BTreeMap<String, Received> {
        self.received
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Answer every request on one connection with 202 until the client closes it.
fn serve(stream: TcpStream, tally: &Mutex<BTreeMap<String, Received>>) -> std::io::Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let (mut length, mut chunked) = (0usize, false);
        let (mut agent, mut payload_id) = (String::new(), None);
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 {
                return Ok(());
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let Some((name, value)) = header.split_once(':') else {
                continue;
            };
            let value = value.trim();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.parse().unwrap_or(0),
                "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
                "user-agent" => agent = value.split('/').next().unwrap_or("").to_owned(),
                "x-launchdarkly-payload-id" => payload_id = Some(value.to_owned()),
                _ => {}
            }
        }
        let body = if chunked {
            read_chunked(&mut reader)?
        } else {
            let mut body = vec![0; length];
            reader.read_exact(&mut body)?;
            body
        };
        if line.starts_with("POST") {
            let mut tally = tally.lock().unwrap_or_else(|e| e.into_inner());
            let r = tally.entry(agent).or_default();
            r.posts += 1;
            if payload_id.is_some_and(|id| !r.payload_ids.insert(id)) {
                r.repeated += 1;
            } else if line.contains("/bulk") {
                count(r, &body);
            }
        }
        writer.write_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")?;
    }
}

/// A `Transfer-Encoding: chunked` body.
fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size)?;
        let size =
            usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk)?;
        body.extend_from_slice(&chunk[..size]);
        if size == 0 {
            return Ok(body);
        }
    }
}

/// Tally one `/bulk` payload.
fn count(r: &mut Received, body: &[u8]) {
    let Ok(Value::Array(events)) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    for e in &events {
        let kind = e["kind"].as_str().unwrap_or("?").to_owned();
        if kind == "summary"
            && let Some(counters) = e["features"][FLAG]["counters"].as_array()
        {
            r.summarized += counters
                .iter()
                .map(|c| c["count"].as_u64().unwrap_or(0))
                .sum::<u64>();
        }
        *r.events.entry(kind).or_default() += 1;
    }
}

/// The three contenders, started and initialized, and what keeps them alive.
pub struct Contenders {
    /// flagsync, `send_events(false)`.
    pub events_off: flagsync::Client,
    /// flagsync, events on with default settings, sent to [`Contenders::sink`].
    pub events_on: flagsync::Client,
    /// The official SDK with its default event processor, sent to the same sink.
    pub official: launchdarkly_server_sdk::Client,
    /// The events sink.
    pub sink: Sink,
    /// flagsync's local flag server, serving [`data`].
    pub server: ServerHandle,
    /// The runtime the clients' I/O runs on (one worker thread).
    pub runtime: tokio::runtime::Runtime,
    /// Evaluations each client made in [`Contenders::start`] (checking they agree).
    pub checked: u64,
}

impl Contenders {
    /// Serve [`data`], start the three clients and wait until each has the flags.
    pub fn start() -> Contenders {
        let server = Server::builder()
            .data(data())
            .start()
            .expect("the flag server");
        let sink = Sink::start();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let (events_off, events_on, official) = runtime.block_on(async {
            let flagsync = |send: bool| {
                let client = flagsync::Client::builder("sdk-bench")
                    .stream_uri(server.url())
                    .polling_uri(server.url())
                    .events_uri(sink.url())
                    .send_events(send)
                    .no_proxy()
                    .build()
                    .expect("a flagsync client");
                client.start().expect("start flagsync");
                client
            };
            let (off, on) = (flagsync(false), flagsync(true));
            let official = official(&server.url(), sink.url());
            official.start_with_default_executor();
            let wait = Duration::from_secs(60);
            assert!(off.wait_for_initialization(wait).await, "flagsync (off)");
            assert!(on.wait_for_initialization(wait).await, "flagsync (on)");
            assert_eq!(
                official.wait_for_initialization(wait).await,
                Some(true),
                "the official SDK"
            );
            (off, on, official)
        });
        let mut c = Contenders {
            events_off,
            events_on,
            official,
            sink,
            server,
            runtime,
            checked: 0,
        };
        // The three agree on every context of the pool before anything is measured.
        for ctx in context_pool().iter().step_by(97).chain([&context(0)]) {
            c.checked += 1;
            let off = c.events_off.bool_variation_detail(FLAG, ctx, false);
            let on = c.events_on.bool_variation_detail(FLAG, ctx, false);
            let theirs = c
                .official
                .bool_variation_detail(&official_context(ctx), FLAG, false);
            assert_eq!(off, on);
            assert_eq!(off.value, theirs.value);
            // flagsync's reason is its own type (it can carry bigSegmentsStatus): the
            // two agree as JSON.
            assert_eq!(
                serde_json::to_value(&off.reason).unwrap(),
                serde_json::to_value(&theirs.reason).unwrap()
            );
        }
        c
    }

    /// Flush and close the three clients (events still queued are sent).
    pub fn close(self) -> BTreeMap<String, Received> {
        self.official.close();
        self.runtime.block_on(async {
            self.events_on.close().await;
            self.events_off.close().await;
        });
        self.sink.received()
    }
}

/// The official SDK, polling `flags` (its streaming source reads `/all` the same way,
/// but polling needs no long-lived connection) and sending events to `events`, both
/// over plain HTTP. Default event settings: capacity 10,000, flush every 5 s, 1,000
/// context keys.
pub fn official(flags: &str, events: &str) -> launchdarkly_server_sdk::Client {
    use launchdarkly_server_sdk::{
        Client, ConfigBuilder, EventProcessorBuilder, PollingDataSourceBuilder,
        ServiceEndpointsBuilder,
    };
    let transport = HyperTransport::builder()
        .disable_proxy()
        .build_http()
        .expect("a plain-HTTP transport");
    let mut endpoints = ServiceEndpointsBuilder::new();
    endpoints
        .polling_base_url(flags)
        .streaming_base_url(flags)
        .events_base_url(events);
    let mut source = PollingDataSourceBuilder::<HyperTransport>::new();
    source.transport(transport.clone());
    let mut processor = EventProcessorBuilder::<HyperTransport>::new();
    processor.transport(transport);
    let config = ConfigBuilder::new("sdk-bench")
        .service_endpoints(&endpoints)
        .data_source(&source)
        .event_processor(&processor)
        .build()
        .expect("the official SDK's settings");
    Client::build(config).expect("the official SDK")
}
