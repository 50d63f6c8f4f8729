//! The FDv2 data system (coordinator, FDv2 stream and polling sources, FDv1 fallback)
//! driven by an `Arbitrary` script, with the invariants of
//! `flagsync_core::testing::ScriptRun` checked after every drain, plus:
//!
//! - **No partial payload in the store.** After every step the store (items, selector,
//!   `initialized`) either equals what it was before the step, or the step completed a
//!   payload that explains the change:
//!   - on a polling connection: the store equals the store before the step with the
//!     change set of that connection's response applied (the response is rebuilt from
//!     every byte this target sent on the connection, and parsed with the core's public
//!     body parser of that source's format: `fdv2::parse_poll_or_fdv1` for
//!     `/sdk/poll`, `fdv2::parse_fdv1_fallback_poll` for `/sdk/latest-all`);
//!   - on a stream connection, when one `payload-transferred` was dispatched in the
//!     step (a shadow SSE parser reads every byte sent on each connection) and every
//!     event of that payload came on this connection after an intent on it: the store
//!     equals the store before the step with the change set an independent builder
//!     (PROTOCOL.md B §5.3, §5.4) made of those events applied. This is the case for
//!     every stream payload of the checked-in corpus;
//!   - otherwise (a payload begun on an earlier connection of the same stream, whose
//!     builder lives across reconnects; several payloads in one input): the store's
//!     selector is one dispatched in the step, and every item that changed was sent in
//!     a `put-object` (same kind, key and raw JSON; every rendered object carries a
//!     unique serial) or `delete-object` (same version) of the same source, and items
//!     only disappear if that source sent an `xfer-full`. A necessary condition only:
//!     which events of an earlier connection the core took is not modelled.
//!
//!   Every structured polling body is also parsed by `fdv2::parse_poll_or_fdv1` and
//!   compared with an independent model of PROTOCOL.md B §5.5.
//! - `data_availability()` is REFRESHED exactly when the store's selector is defined,
//!   and never in daemon mode.
//! - After `Command::Stop`, no `Connect` is ever emitted again and the status stays OFF.
#![no_main]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use bytes::Bytes;
use flagsync_core::config::{CoordinatorTiming, Fdv2Config, SourceSpec};
use flagsync_core::fdv2::{self, Event as Fdv2Event, IntentCode};
use flagsync_core::sse;
use flagsync_core::store::{ApplyMode, Change, ChangeSet, Item, Selector, Store, Transfer};
use flagsync_core::testing::{ScriptInput, ScriptRun, Step, origin};
use flagsync_core::{
    Action, Config, ConnId, DataAvailability, DataSystem, Kind, Mode, Output, State,
};
use libfuzzer_sys::fuzz_target;

// ---------------------------------------------------------------------------------------
// The input

#[derive(Arbitrary, Debug)]
struct FuzzInput {
    setup: Setup,
    ops: Vec<Op>,
}

#[derive(Arbitrary, Debug)]
struct Setup {
    preset: Preset,
    /// Check interval, INITIALIZING and INTERRUPTED fallback, recovery, in 50 ms units.
    timing: Option<[u8; 4]>,
    /// The data system's poll interval in ms (minimum lowered to 1 ms).
    poll_interval_ms: Option<u16>,
    seed: u8,
    /// Do not send `Command::Start` before the first op.
    manual_start: bool,
}

#[derive(Arbitrary, Debug)]
enum Preset {
    Default,
    Streaming,
    Polling,
    Daemon,
    Custom {
        initializers: Vec<Spec>,
        synchronizers: Vec<Spec>,
        fdv1_fallback: Option<Spec>,
    },
}

/// A source with small overrides (10 ms units).
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Spec {
    Streaming(Option<u8>),
    Polling(Option<u8>),
    Fdv1Polling(Option<u8>),
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// Any raw script input (heads, bytes, closes, timeouts, commands).
    Raw(Step),
    /// Advance to the last `Wait` deadline and send `Timeout`.
    Fire,
    /// SSE on a connection: `Connected` and a head (unless `no_head`), then each event
    /// as its own `Data` input (split in two at `split`), then an optional close.
    Stream {
        advance_ms: u16,
        conn: Pick,
        head: Head,
        no_head: bool,
        events: Vec<Ev>,
        split: u8,
        end: End,
    },
    /// A polling response: `Connected`, head, body (split in two at `split`), close.
    Poll {
        advance_ms: u16,
        conn: Pick,
        head: Head,
        body: Body,
        split: u16,
        end: End,
    },
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Pick {
    Latest,
    Index(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum End {
    Open,
    Eof,
    Reset,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct Head {
    status: StatusCode,
    /// The other content type (JSON on a stream, SSE on a poll).
    wrong_type: bool,
    fallback: bool,
    env_id: bool,
    etag: bool,
    content_length: bool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum StatusCode {
    Ok,
    NotModified,
    BadRequest,
    Unauthorized,
    NotFound,
    TooMany,
    ServerError,
    Unavailable,
    Other(u16),
}

impl StatusCode {
    fn code(self) -> u16 {
        match self {
            Self::Ok => 200,
            Self::NotModified => 304,
            Self::BadRequest => 400,
            Self::Unauthorized => 401,
            Self::NotFound => 404,
            Self::TooMany => 429,
            Self::ServerError => 500,
            Self::Unavailable => 503,
            Self::Other(c) => 100 + c % 500,
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
enum ObjKind {
    Flag,
    Segment,
    Unknown,
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
enum Code {
    Full,
    Changes,
    None,
    Bogus,
    TwoPayloads,
    Missing,
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
enum Name {
    Intent,
    Put,
    Delete,
    Transferred,
    Goodbye,
    Error,
}

/// One FDv2 event from a small vocabulary: 4 keys, 8 versions, 3 kinds.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Ev {
    Intent(Code),
    Put {
        kind: ObjKind,
        key: u8,
        version: u8,
        deleted: bool,
        /// Bit 0: a prerequisite, bit 1: a `segmentMatch` clause.
        refs: u8,
    },
    Delete {
        kind: ObjKind,
        key: u8,
        version: u8,
    },
    /// `None`: a fresh selector; `Some(n)`: one of a few fixed ones, `("", 0)` included.
    Transferred(Option<u8>),
    Goodbye,
    Error,
    Heartbeat(bool),
    /// An SSE comment; in a polling body, an element without `event`.
    Comment,
    Unknown,
    Malformed(Name),
    WrongShape(Name),
    /// Shorthand for a whole payload: an intent (`xfer-full` or `xfer-changes`), up to
    /// three puts, and a `payload-transferred` (see [`expand`]).
    Payload {
        full: bool,
        puts: u8,
        selector: Option<u8>,
    },
}

/// Expand [`Ev::Payload`] into plain events; at most 64 events.
fn expand(events: &[Ev]) -> Vec<Ev> {
    let mut out = Vec::new();
    for (n, ev) in events.iter().enumerate() {
        match *ev {
            Ev::Payload {
                full,
                puts,
                selector,
            } => {
                out.push(Ev::Intent(if full { Code::Full } else { Code::Changes }));
                for i in 0..puts % 4 {
                    out.push(Ev::Put {
                        kind: if i % 2 == 0 {
                            ObjKind::Flag
                        } else {
                            ObjKind::Segment
                        },
                        key: i.wrapping_add(n as u8),
                        version: puts.wrapping_add(i),
                        deleted: false,
                        refs: i,
                    });
                }
                out.push(Ev::Transferred(selector));
            }
            other => out.push(other),
        }
    }
    out.truncate(64);
    out
}

#[derive(Arbitrary, Debug)]
enum Body {
    Events(Vec<Ev>),
    /// An FDv1-shaped body: (key, version, deleted) per item.
    Fdv1 {
        flags: Vec<(u8, u8, bool)>,
        segments: Vec<(u8, u8, bool)>,
    },
    Junk(Vec<u8>),
}

// ---------------------------------------------------------------------------------------
// Rendering

/// Gives every rendered object and selector a unique number.
#[derive(Default)]
struct Render {
    serial: u64,
    /// The selector of the last `payload-transferred` rendered.
    last_selector: Option<(String, u64)>,
}

fn key(k: u8) -> String {
    format!("k{}", k % 4)
}

impl Render {
    fn object(&mut self, kind: ObjKind, k: u8, version: u8, deleted: bool, refs: u8) -> String {
        self.serial += 1;
        let mut o = format!(
            r#"{{"key":"{}","version":{},"s":{}"#,
            key(k),
            version % 8,
            self.serial
        );
        if deleted {
            o.push_str(r#","deleted":true"#);
        }
        if refs & 1 != 0 && kind == ObjKind::Flag {
            o.push_str(&format!(
                r#","prerequisites":[{{"key":"{}","variation":0}}]"#,
                key(k % 4 + 1)
            ));
        }
        if refs & 2 != 0 {
            o.push_str(&format!(
                r#","rules":[{{"clauses":[{{"attribute":"key","op":"segmentMatch","values":["{}"]}}]}}]"#,
                key(k % 4 + 2)
            ));
        }
        o.push('}');
        o
    }

    fn selector(&mut self, fixed: Option<u8>) -> (String, u64) {
        match fixed {
            None => {
                self.serial += 1;
                (format!("sel-{}", self.serial), self.serial)
            }
            Some(n) => {
                let states = ["", "a", "b"];
                (states[usize::from(n) % 3].to_owned(), u64::from(n / 3 % 3))
            }
        }
    }

    /// The wire name and data of one event (`None` name: a comment / no `event`).
    fn event(&mut self, ev: Ev) -> (Option<&'static str>, String) {
        let kind_name = |k: ObjKind| match k {
            ObjKind::Flag => "flag",
            ObjKind::Segment => "segment",
            ObjKind::Unknown => "widget",
        };
        match ev {
            Ev::Intent(code) => {
                let data = match code {
                    Code::Full => r#"{"payloads":[{"id":"p","target":1,"intentCode":"xfer-full","reason":"payload-missing"}]}"#.to_owned(),
                    Code::Changes => r#"{"payloads":[{"id":"p","target":2,"intentCode":"xfer-changes"}]}"#.to_owned(),
                    Code::None => r#"{"payloads":[{"intentCode":"none","reason":"up-to-date"}]}"#.to_owned(),
                    Code::Bogus => r#"{"payloads":[{"intentCode":"xfer-most"}]}"#.to_owned(),
                    Code::TwoPayloads => r#"{"payloads":[{"intentCode":"xfer-full"},{"intentCode":"xfer-full"}]}"#.to_owned(),
                    Code::Missing => r#"{"payloads":[{"id":"p"}]}"#.to_owned(),
                };
                (Some("server-intent"), data)
            }
            Ev::Put {
                kind,
                key: k,
                version,
                deleted,
                refs,
            } => {
                let object = self.object(kind, k, version, deleted, refs);
                (
                    Some("put-object"),
                    format!(
                        r#"{{"version":{},"kind":"{}","key":"{}","object":{object}}}"#,
                        u32::from(version) + 100,
                        kind_name(kind),
                        key(k)
                    ),
                )
            }
            Ev::Delete {
                kind,
                key: k,
                version,
            } => (
                Some("delete-object"),
                format!(
                    r#"{{"version":{},"kind":"{}","key":"{}"}}"#,
                    version % 8,
                    kind_name(kind),
                    key(k)
                ),
            ),
            Ev::Transferred(fixed) => {
                let (state, version) = self.selector(fixed);
                self.last_selector = Some((state.clone(), version));
                (
                    Some("payload-transferred"),
                    format!(r#"{{"state":"{state}","version":{version}}}"#),
                )
            }
            Ev::Goodbye => (Some("goodbye"), r#"{"reason":"bye"}"#.to_owned()),
            Ev::Error => (
                Some("error"),
                r#"{"payloadId":"p","reason":"oops"}"#.to_owned(),
            ),
            Ev::Heartbeat(hyphen) => (
                Some(if hyphen { "heart-beat" } else { "heartbeat" }),
                "{}".to_owned(),
            ),
            Ev::Comment => (None, "{}".to_owned()),
            Ev::Unknown => (Some("surprise"), r#"{"x":1}"#.to_owned()),
            Ev::Malformed(n) => (Some(wire_name(n)), r#"{"version":1,"kind":"#.to_owned()),
            Ev::WrongShape(n) => (Some(wire_name(n)), r#"{"version":"one"}"#.to_owned()),
            Ev::Payload { .. } => (Some("payload"), "{}".to_owned()),
        }
    }

    fn sse(&mut self, ev: Ev) -> Vec<u8> {
        match self.event(ev) {
            (Some(name), data) => format!("event: {name}\ndata: {data}\n\n").into_bytes(),
            (None, _) => b": keep-alive\n".to_vec(),
        }
    }

    fn body(&mut self, body: &Body) -> Vec<u8> {
        match body {
            Body::Events(events) => {
                let elements: Vec<String> = expand(events)
                    .into_iter()
                    .map(|ev| match self.event(ev) {
                        (Some(name), data) => format!(r#"{{"event":"{name}","data":{data}}}"#),
                        (None, data) => format!(r#"{{"data":{data}}}"#),
                    })
                    .collect();
                format!(r#"{{"events":[{}]}}"#, elements.join(",")).into_bytes()
            }
            Body::Fdv1 { flags, segments } => {
                let mut map = |items: &[(u8, u8, bool)], kind| {
                    // Unique keys: a later entry replaces an earlier one.
                    let mut m = BTreeMap::new();
                    for (k, v, d) in items {
                        m.insert(key(*k), self.object(kind, *k, *v, *d, 0));
                    }
                    m.into_iter()
                        .map(|(k, o)| format!(r#""{k}":{o}"#))
                        .collect::<Vec<_>>()
                        .join(",")
                };
                let f = map(flags, ObjKind::Flag);
                let s = map(segments, ObjKind::Segment);
                format!(r#"{{"flags":{{{f}}},"segments":{{{s}}}}}"#).into_bytes()
            }
            Body::Junk(bytes) => bytes.clone(),
        }
    }
}

fn wire_name(n: Name) -> &'static str {
    match n {
        Name::Intent => "server-intent",
        Name::Put => "put-object",
        Name::Delete => "delete-object",
        Name::Transferred => "payload-transferred",
        Name::Goodbye => "goodbye",
        Name::Error => "error",
    }
}

fn head_bytes(head: &Head, stream: bool, body_len: usize) -> Vec<u8> {
    let sse = stream != head.wrong_type;
    let mut s = format!(
        "HTTP/1.1 {} Fuzz\r\nContent-Type: {}\r\n",
        head.status.code(),
        if sse {
            "text/event-stream; charset=utf-8"
        } else {
            "application/json"
        }
    );
    if head.fallback {
        s.push_str("X-LD-FD-Fallback: true\r\n");
    }
    if head.env_id {
        s.push_str("X-LD-EnvID: env-fuzz\r\n");
    }
    if head.etag {
        s.push_str("ETag: \"e1\"\r\n");
    }
    if head.content_length && !stream {
        s.push_str(&format!("Content-Length: {body_len}\r\n"));
    }
    s.push_str("\r\n");
    s.into_bytes()
}

// ---------------------------------------------------------------------------------------
// The independent model of a structured polling body (PROTOCOL.md B §5.5)

/// What a structured body should parse to: `None` for a failure (the store is left as
/// it is), else the transfer, the changes `(kind, key, version, deleted)` in order, and
/// the selector.
type Expected = Option<Summary>;

/// A change set as `(transfer, changes, selector)`.
type Summary = (Transfer, Vec<(Kind, String, u64, bool)>, Selector);

fn model_poll(events: &[(Ev, Option<(String, u64)>)]) -> Expected {
    // A malformed element makes the whole body invalid JSON.
    if events.iter().any(|(e, _)| matches!(e, Ev::Malformed(_))) {
        return None;
    }
    let mut intent: Option<Transfer> = None;
    let mut changes = Vec::new();
    let kind = |k: ObjKind| match k {
        ObjKind::Flag => Some(Kind::Flag),
        ObjKind::Segment => Some(Kind::Segment),
        ObjKind::Unknown => None,
    };
    for (ev, sel) in events {
        match *ev {
            Ev::Intent(Code::Full) => {
                intent = Some(Transfer::Full);
                changes.clear();
            }
            Ev::Intent(Code::Changes) => {
                intent = Some(Transfer::Changes);
                changes.clear();
            }
            Ev::Intent(Code::None) => {
                return Some((Transfer::None, Vec::new(), Selector::default()));
            }
            Ev::Intent(_) => return None,
            Ev::Put {
                kind: k,
                key: kk,
                version,
                deleted,
                ..
            } => {
                if let Some(k) = kind(k) {
                    intent?;
                    changes.push((k, key(kk), u64::from(version % 8), deleted));
                }
            }
            Ev::Delete {
                kind: k,
                key: kk,
                version,
            } => {
                if let Some(k) = kind(k) {
                    intent?;
                    changes.push((k, key(kk), u64::from(version % 8), true));
                }
            }
            Ev::Transferred(_) => {
                let (state, version) = sel.clone()?;
                return Some((intent?, changes, Selector { state, version }));
            }
            Ev::Error => changes.clear(),
            Ev::Goodbye | Ev::Heartbeat(_) | Ev::Comment | Ev::Unknown => {}
            // Goodbyes are skipped without reading their data.
            Ev::WrongShape(Name::Goodbye) => {}
            Ev::WrongShape(_) | Ev::Malformed(_) => return None,
            Ev::Payload { .. } => unreachable!("expanded before"),
        }
    }
    None
}

fn summarize(cs: &ChangeSet) -> Summary {
    (
        cs.transfer,
        cs.changes
            .iter()
            .map(|c| (c.kind, c.key.clone(), c.item.version, c.item.deleted))
            .collect(),
        cs.selector.clone().unwrap_or_default(),
    )
}

// ---------------------------------------------------------------------------------------
// The run

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Stream,
    PollFdv2,
    PollFdv1,
}

struct Conn {
    id: ConnId,
    format: Format,
    log: Vec<u8>,
    /// Body offset once the head is complete; `None` while incomplete.
    body_at: Option<usize>,
    status: u16,
    content_length: Option<usize>,
    /// A framing this target does not model (chunked, gzip, an unparsable head).
    unmodelled: bool,
    shadow: sse::Parser,
    fed: usize,
    /// The payload being built from events on this connection since an intent on it
    /// (`None` before any, or once the stream can no longer take events).
    model: Option<Model>,
    /// The stream failed or said goodbye: the core takes no more events from it.
    broken: bool,
    /// The core closed it, or the peer did.
    dead: bool,
}

/// An independent change-set builder (PROTOCOL.md B §5.3, §5.4) for one connection.
struct Model {
    transfer: Transfer,
    changes: Vec<Change>,
}

#[derive(Default)]
struct Seen {
    puts: HashSet<(Kind, String, Bytes)>,
    deletes: HashSet<(Kind, String, u64)>,
    full_intent: bool,
}

type Items = BTreeMap<(Kind, String), (u64, bool, Bytes)>;

#[derive(PartialEq, Eq, Debug)]
struct State2 {
    items: Items,
    selector: Selector,
    initialized: bool,
}

fn state_of(store: &Store) -> State2 {
    let mut items = BTreeMap::new();
    for kind in Kind::ALL {
        for (k, i) in store.data().iter_including_deleted(kind) {
            items.insert((kind, k.to_owned()), (i.version, i.deleted, i.raw.clone()));
        }
    }
    State2 {
        items,
        selector: store.selector().clone(),
        initialized: store.initialized(),
    }
}

/// What may explain a store change in one step.
#[derive(Default)]
struct Allowed {
    /// Stores a completed polling response may leave.
    polls: Vec<State2>,
    /// Selectors of `payload-transferred` events dispatched, and the source they came on.
    transferred: Vec<Selector>,
    /// The store the one payload completed in this step leaves, when every event of it
    /// came on this connection after an intent on it.
    stream_exact: Option<State2>,
    source: u64,
    /// The step touched a connection whose framing is not modelled.
    anything: bool,
}

struct Fuzz {
    run: ScriptRun,
    now: Instant,
    conns: Vec<Conn>,
    scanned: usize,
    last_wait: Option<Instant>,
    stopped: bool,
    daemon: bool,
    seen: HashMap<u64, Seen>,
    sse_config: sse::Config,
}

fn source_of(id: ConnId) -> u64 {
    id.0 >> 32
}

impl Fuzz {
    fn conn_index(&self, pick: Pick) -> Option<u8> {
        let n = self.conns.len();
        let i = match pick {
            Pick::Latest => n.checked_sub(1)?,
            Pick::Index(i) => usize::from(i) % n.max(1),
        };
        u8::try_from(i).ok()
    }

    fn target(&self, input: &ScriptInput) -> Option<usize> {
        let i = match input {
            ScriptInput::Connected(i)
            | ScriptInput::Head(i, ..)
            | ScriptInput::FallbackHead(i, ..)
            | ScriptInput::Data(i, _)
            | ScriptInput::Closed(i, _) => *i,
            _ => return None,
        };
        (!self.conns.is_empty()).then(|| usize::from(i) % self.conns.len())
    }

    /// Feed one step and check everything.
    fn step(&mut self, advance_ms: u32, input: ScriptInput) {
        let target = self.target(&input);
        let bytes: Option<Vec<u8>> = match &input {
            ScriptInput::Head(_, status, sse) | ScriptInput::FallbackHead(_, status, sse) => {
                // Exactly what `ScriptRun` sends.
                let ct = if *sse {
                    "text/event-stream"
                } else {
                    "application/json"
                };
                let extra = if matches!(input, ScriptInput::FallbackHead(..)) {
                    "X-LD-FD-Fallback: true\r\nX-LD-EnvID: env-1\r\n"
                } else {
                    ""
                };
                Some(
                    format!("HTTP/1.1 {status} X\r\nContent-Type: {ct}\r\n{extra}\r\n")
                        .into_bytes(),
                )
            }
            ScriptInput::Data(_, b) => Some(b.clone()),
            _ => None,
        };
        let closing = matches!(input, ScriptInput::Closed(..));
        let before_store = self.run.system.store().clone();
        let before = state_of(&before_store);
        let mut allowed = Allowed::default();
        if let Some(c) = target {
            self.observe(c, bytes.as_deref(), closing, &before_store, &mut allowed);
        }
        if matches!(input, ScriptInput::Stop) {
            self.stopped = true;
        }
        self.now += Duration::from_millis(u64::from(advance_ms));
        self.run.step(&Step { advance_ms, input });
        let after = state_of(self.run.system.store());
        if after != before && !allowed.anything {
            self.explain(&before, &after, &allowed);
            if std::env::var_os("FDV2_FUZZ_TRACE").is_some() {
                eprintln!(
                    "fdv2_system: store changed by a {} ({} items, selector {:?})",
                    if allowed.polls.contains(&after) {
                        "poll"
                    } else if allowed.stream_exact.is_some() {
                        "stream payload (exact)"
                    } else {
                        "stream payload"
                    },
                    after.items.len(),
                    after.selector
                );
            }
        }
        if closing && let Some(c) = target {
            self.conns[c].dead = true;
        }
        self.check_system();
        self.scan_outputs();
    }

    /// Record the bytes sent on connection `c` and what they may complete.
    fn observe(
        &mut self,
        c: usize,
        bytes: Option<&[u8]>,
        closing: bool,
        before: &Store,
        allowed: &mut Allowed,
    ) {
        let conn = &mut self.conns[c];
        if conn.dead {
            return;
        }
        allowed.source = source_of(conn.id);
        if let Some(b) = bytes {
            conn.log.extend_from_slice(b);
        }
        if conn.body_at.is_none() && !conn.unmodelled {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut resp = httparse::Response::new(&mut headers);
            match resp.parse(&conn.log) {
                Ok(httparse::Status::Complete(n)) => {
                    conn.body_at = Some(n);
                    conn.status = resp.code.unwrap_or(0);
                    for h in resp.headers.iter() {
                        let v = std::str::from_utf8(h.value).unwrap_or("").trim();
                        if h.name.eq_ignore_ascii_case("content-length") {
                            match v.parse() {
                                Ok(n) => conn.content_length = Some(n),
                                Err(_) => conn.unmodelled = true,
                            }
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding")
                            || h.name.eq_ignore_ascii_case("content-encoding")
                            || h.name.eq_ignore_ascii_case("location")
                        {
                            conn.unmodelled = true;
                        }
                    }
                    if conn.status < 200 {
                        conn.unmodelled = true;
                    }
                }
                Ok(httparse::Status::Partial) => {}
                Err(_) => conn.unmodelled = true,
            }
        }
        if conn.unmodelled {
            allowed.anything = true;
            return;
        }
        let Some(body_at) = conn.body_at else { return };
        match conn.format {
            Format::Stream => {
                let seen = self.seen.entry(source_of(conn.id)).or_default();
                conn.shadow.handle_bytes(&conn.log[body_at + conn.fed..]);
                conn.fed = conn.log.len() - body_at;
                let mut exact = Vec::new();
                while let Some(item) = conn.shadow.poll_item() {
                    if conn.broken {
                        continue;
                    }
                    let ev = match item {
                        Ok(sse::Item::Event(ev)) => ev,
                        Ok(_) => continue,
                        Err(_) => {
                            conn.broken = true;
                            continue;
                        }
                    };
                    let data = Bytes::copy_from_slice(&ev.data);
                    let event = match fdv2::parse_event(&ev.event_type, &data) {
                        Ok(event) => event,
                        Err(_) => {
                            // The core drops the stream (and the rest of this input).
                            conn.broken = true;
                            continue;
                        }
                    };
                    let model = &mut conn.model;
                    match event {
                        Fdv2Event::PutObject(p) => {
                            seen.puts.insert((
                                p.change.kind,
                                p.change.key.clone(),
                                p.change.item.raw.clone(),
                            ));
                            if let Some(m) = model {
                                m.changes.push(p.change);
                            }
                        }
                        Fdv2Event::DeleteObject(d) => {
                            if let Some(m) = model {
                                m.changes.push(Change {
                                    kind: d.kind,
                                    key: d.key.clone(),
                                    item: Item::tombstone(&d.key, d.version),
                                    depends_on: Vec::new(),
                                });
                            }
                            seen.deletes.insert((d.kind, d.key, d.version));
                        }
                        Fdv2Event::ServerIntent(i) => {
                            seen.full_intent |= i.code == IntentCode::TransferFull;
                            *model = Some(Model {
                                transfer: match i.code {
                                    IntentCode::TransferFull => Transfer::Full,
                                    // `none` is applied as nothing and expects changes.
                                    _ => Transfer::Changes,
                                },
                                changes: Vec::new(),
                            });
                        }
                        Fdv2Event::PayloadTransferred(sel) => {
                            allowed.transferred.push(sel.clone());
                            if let Some(m) = model {
                                exact.push(ChangeSet {
                                    mode: ApplyMode::Fdv2,
                                    transfer: m.transfer,
                                    changes: std::mem::take(&mut m.changes),
                                    selector: Some(sel),
                                });
                                m.transfer = Transfer::Changes;
                            }
                        }
                        Fdv2Event::Error { .. } => {
                            if let Some(m) = model {
                                m.changes.clear();
                            }
                        }
                        Fdv2Event::Goodbye { .. } => conn.broken = true,
                        _ => {}
                    }
                }
                if let ([_], [cs]) = (allowed.transferred.as_slice(), exact.as_slice()) {
                    let mut expected = before.clone();
                    expected.apply(cs.clone());
                    allowed.stream_exact = Some(state_of(&expected));
                }
            }
            Format::PollFdv2 | Format::PollFdv1 => {
                let body = &conn.log[body_at..];
                let body = match conn.content_length {
                    Some(n) if body.len() >= n => &body[..n],
                    Some(_) => return,
                    None if closing => body,
                    None => return,
                };
                let body = Bytes::copy_from_slice(body);
                // Any 2xx but 204 is a success (304 changes nothing).
                let success = (200..300).contains(&conn.status) && conn.status != 204;
                let cs = match conn.format {
                    _ if !success => None,
                    Format::PollFdv2 => fdv2::parse_poll_or_fdv1(&body).ok(),
                    _ => fdv2::parse_fdv1_fallback_poll(&body).ok(),
                };
                if let Some(cs) = cs {
                    let mut expected = before.clone();
                    expected.apply(cs);
                    allowed.polls.push(state_of(&expected));
                }
            }
        }
    }

    /// The store changed: it must be explained by a payload completed in this step.
    fn explain(&self, before: &State2, after: &State2, allowed: &Allowed) {
        if allowed.polls.iter().any(|p| p == after) {
            return;
        }
        assert!(
            !allowed.transferred.is_empty(),
            "the store changed in a step that completed no payload: \
             before {before:?}\nafter {after:?}\npoll outcomes {:?}",
            allowed.polls
        );
        if let Some(expected) = &allowed.stream_exact {
            assert_eq!(
                after, expected,
                "the store is not the one the payload completed in this step leaves"
            );
            return;
        }
        assert!(
            allowed.transferred.contains(&after.selector),
            "selector {:?} is none of the payloads completed in this step {:?}",
            after.selector,
            allowed.transferred
        );
        let seen = self.seen.get(&allowed.source);
        let full = seen.is_some_and(|s| s.full_intent);
        assert!(
            !after.initialized || before.initialized || full,
            "initialized without an xfer-full"
        );
        for (k, old) in &before.items {
            if !after.items.contains_key(k) {
                assert!(full, "{k:?} ({old:?}) vanished without an xfer-full");
            }
        }
        for (k, new) in &after.items {
            if before.items.get(k) == Some(new) {
                continue;
            }
            let (version, deleted, raw) = new;
            let put = seen.is_some_and(|s| s.puts.contains(&(k.0, k.1.clone(), raw.clone())));
            let del =
                *deleted && seen.is_some_and(|s| s.deletes.contains(&(k.0, k.1.clone(), *version)));
            assert!(
                put || del,
                "{k:?} became {new:?}, which no put-object or delete-object of source {} held",
                allowed.source
            );
        }
    }

    fn check_system(&self) {
        let system = &self.run.system;
        let defined = system.store().selector().is_defined();
        assert_eq!(
            system.data_availability() == DataAvailability::Refreshed,
            defined && !self.daemon,
            "availability {:?} with selector {:?}",
            system.data_availability(),
            system.store().selector()
        );
        if self.stopped {
            assert_eq!(system.status().state, State::Off, "not OFF after Stop");
        }
    }

    fn scan_outputs(&mut self) {
        for out in &self.run.outputs[self.scanned..] {
            match out {
                Output::Action(Action::Connect { conn, request, .. }) => {
                    assert!(!self.stopped, "{conn} opened after Stop");
                    let line = request.split(|b| *b == b'\r').next().unwrap_or_default();
                    let line = String::from_utf8_lossy(line);
                    let path = line.split(' ').nth(1).unwrap_or("");
                    // The format is the first request's of its source: a redirect keeps it.
                    let first = self
                        .conns
                        .iter()
                        .find(|c| source_of(c.id) == source_of(*conn))
                        .map(|c| c.format);
                    let format = first.unwrap_or(if path.starts_with("/sdk/stream") {
                        Format::Stream
                    } else if path.starts_with("/sdk/poll") {
                        Format::PollFdv2
                    } else {
                        Format::PollFdv1
                    });
                    self.conns.push(Conn {
                        id: *conn,
                        format,
                        log: Vec::new(),
                        body_at: None,
                        status: 0,
                        content_length: None,
                        unmodelled: false,
                        shadow: sse::Parser::new(self.sse_config),
                        fed: 0,
                        model: None,
                        broken: false,
                        dead: false,
                    });
                }
                Output::Action(Action::Close { conn }) => {
                    if let Some(c) = self.conns.iter_mut().find(|c| c.id == *conn) {
                        c.dead = true;
                    }
                }
                Output::Wait(d) => self.last_wait = *d,
                _ => {}
            }
        }
        self.scanned = self.run.outputs.len();
    }

    fn op(&mut self, op: &Op, render: &mut Render) {
        match op {
            // Any gap: the check grid catches up in one step (the stall this target
            // found is fixed, see the fuzz README).
            Op::Raw(step) => self.step(step.advance_ms, step.input.clone()),
            Op::Fire => {
                let Some(d) = self.last_wait else { return };
                let ms = d
                    .saturating_duration_since(self.now)
                    .as_nanos()
                    .div_ceil(1_000_000);
                let ms = u32::try_from(ms).unwrap_or(u32::MAX);
                self.step(ms, ScriptInput::Timeout);
            }
            Op::Stream {
                advance_ms,
                conn,
                head,
                no_head,
                events,
                split,
                end,
            } => {
                let Some(i) = self.conn_index(*conn) else {
                    return;
                };
                let mut advance = u32::from(*advance_ms);
                if !no_head {
                    self.step(std::mem::take(&mut advance), ScriptInput::Connected(i));
                    self.step(0, ScriptInput::Data(i, head_bytes(head, true, 0)));
                }
                for ev in expand(events) {
                    let bytes = render.sse(ev);
                    let at = usize::from(*split) % (bytes.len() + 1);
                    if at > 0 && at < bytes.len() {
                        self.step(
                            std::mem::take(&mut advance),
                            ScriptInput::Data(i, bytes[..at].to_vec()),
                        );
                        self.step(0, ScriptInput::Data(i, bytes[at..].to_vec()));
                    } else {
                        self.step(std::mem::take(&mut advance), ScriptInput::Data(i, bytes));
                    }
                }
                self.end(i, *end);
            }
            Op::Poll {
                advance_ms,
                conn,
                head,
                body,
                split,
                end,
            } => {
                let Some(i) = self.conn_index(*conn) else {
                    return;
                };
                let mut body_bytes = None;
                if let Body::Events(events) = body {
                    // Check the core's parser against the model on this body first.
                    let mut with_selectors = Vec::new();
                    let mut elements = Vec::new();
                    for ev in expand(events) {
                        let (name, data) = render.event(ev);
                        with_selectors.push((ev, render.last_selector.take()));
                        elements.push(match name {
                            Some(name) => format!(r#"{{"event":"{name}","data":{data}}}"#),
                            None => format!(r#"{{"data":{data}}}"#),
                        });
                    }
                    let b = format!(r#"{{"events":[{}]}}"#, elements.join(",")).into_bytes();
                    let parsed = fdv2::parse_poll_or_fdv1(&Bytes::copy_from_slice(&b))
                        .ok()
                        .map(|cs| summarize(&cs));
                    assert_eq!(
                        parsed,
                        model_poll(&with_selectors),
                        "polling body {}",
                        String::from_utf8_lossy(&b)
                    );
                    body_bytes = Some(b);
                }
                let body = body_bytes.unwrap_or_else(|| render.body(body));
                self.step(u32::from(*advance_ms), ScriptInput::Connected(i));
                self.step(0, ScriptInput::Data(i, head_bytes(head, false, body.len())));
                let at = usize::from(*split) % (body.len() + 1);
                if at > 0 && at < body.len() {
                    self.step(0, ScriptInput::Data(i, body[..at].to_vec()));
                    self.step(0, ScriptInput::Data(i, body[at..].to_vec()));
                } else if !body.is_empty() {
                    self.step(0, ScriptInput::Data(i, body));
                }
                self.end(i, *end);
            }
        }
    }

    fn end(&mut self, i: u8, end: End) {
        match end {
            End::Open => {}
            End::Eof => self.step(0, ScriptInput::Closed(i, true)),
            End::Reset => self.step(0, ScriptInput::Closed(i, false)),
        }
    }
}

fn spec(s: Spec, initializer: bool) -> SourceSpec {
    let ms = |v: Option<u8>| v.map(|v| Duration::from_millis(u64::from(v) * 10));
    match s {
        // A stream cannot be an initializer: use polling there.
        Spec::Streaming(d) if initializer => SourceSpec::Polling {
            base_uri: None,
            interval: ms(d),
        },
        Spec::Streaming(d) => SourceSpec::Streaming {
            base_uri: None,
            initial_retry_delay: ms(d),
        },
        Spec::Polling(d) => SourceSpec::Polling {
            base_uri: None,
            interval: ms(d),
        },
        Spec::Fdv1Polling(d) => SourceSpec::Fdv1Polling {
            base_uri: None,
            interval: ms(d),
        },
    }
}

fn config(setup: &Setup) -> Config {
    let mut config = Config::new("fuzz-key");
    config.stream_uri = "http://127.0.0.1:1".into();
    config.polling_uri = "http://127.0.0.1:2".into();
    config.mode = Mode::Fdv2;
    config.limits.sse.max_line_len = 4096;
    config.limits.sse.max_event_len = 4096;
    config.limits.max_poll_body = 4096;
    config.min_poll_interval = Duration::from_millis(1);
    if let Some(ms) = setup.poll_interval_ms {
        config.poll_interval = Duration::from_millis(u64::from(ms.max(1)));
    }
    let mut fdv2 = match &setup.preset {
        Preset::Default => Fdv2Config::default(),
        Preset::Streaming => Fdv2Config::streaming(),
        Preset::Polling => Fdv2Config::polling(),
        Preset::Daemon => Fdv2Config::daemon(),
        Preset::Custom {
            initializers,
            synchronizers,
            fdv1_fallback,
        } => Fdv2Config::custom()
            .initializers(initializers.iter().take(3).map(|s| spec(*s, true)))
            .synchronizers(synchronizers.iter().take(3).map(|s| spec(*s, false)))
            .fdv1_fallback(fdv1_fallback.map(|s| spec(s, false))),
    };
    if let Some([check, init, interrupted, recovery]) = setup.timing {
        let t = |v: u8| Duration::from_millis(u64::from(v) * 50);
        fdv2.timing = CoordinatorTiming {
            check_interval: t(check.max(1)),
            initializing_fallback: t(init),
            interrupted_fallback: t(interrupted),
            recovery: t(recovery),
        };
    }
    config.fdv2 = fdv2;
    config
}

fuzz_target!(|input: FuzzInput| {
    let config = config(&input.setup);
    let daemon = config.fdv2.has_no_sources();
    let sse_config = config.limits.sse;
    let t0 = origin();
    let system = DataSystem::new(config, u64::from(input.setup.seed), t0)
        .expect("every generated configuration is valid");
    let mut fuzz = Fuzz {
        run: ScriptRun::new(system, t0),
        now: t0,
        conns: Vec::new(),
        scanned: 0,
        last_wait: None,
        stopped: false,
        daemon,
        seen: HashMap::new(),
        sse_config,
    };
    let mut render = Render::default();
    if !input.setup.manual_start {
        fuzz.step(0, ScriptInput::Start);
    }
    for op in input.ops.iter().take(256) {
        fuzz.op(op, &mut render);
    }
});
