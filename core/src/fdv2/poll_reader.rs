//! An FDv2 polling body read as it arrives (issue 42): the `events` array is cut into
//! its elements as their bytes come in, and each element is read and let go at once, so
//! a poll never holds its whole body.
//!
//! The answer is the one [`parse_poll_or_fdv1_with`] gives for the same bytes, however
//! they are cut: a body that is not JSON anywhere is malformed, even after its payload
//! completed; a body of the wrong shape is a schema error before any event counts; the
//! first payload completed wins. A body that does not begin `{"events":[` (give or take
//! whitespace: an FDv1-shaped body, other members first, a broken body) is kept whole
//! and handed to [`parse_poll_or_fdv1_with`] at its end.

use bytes::Bytes;
use serde_json::value::RawValue;

use crate::store::{ChangeSet, Snapshot};

use super::poll::read_element;
use super::wire;
use super::{Error, PayloadLimits, Protocol, malformed_first, parse_poll_or_fdv1_with};

/// The opening every FDv2 server writes, whitespace aside.
const OPENING: [&[u8]; 4] = [b"{", b"\"events\"", b":", b"["];

/// Reads an FDv2 polling response body fed in pieces of any size.
///
/// Memory: the element being read (one event), the change set being built, and (with
/// a `stored` snapshot) no copy of an object the store already holds. A body of
/// another shape is kept whole, as [`parse_poll_or_fdv1_with`] needs it.
///
/// ```
/// use flagsync_core::fdv2::{PayloadLimits, PollReader, parse_poll};
/// use bytes::Bytes;
///
/// let body = br#"{"events":[
///   {"event":"server-intent","data":{"payloads":[{"intentCode":"xfer-full"}]}},
///   {"event":"put-object","data":{"version":1,"kind":"flag","key":"f","object":{"key":"f","version":2}}},
///   {"event":"payload-transferred","data":{"state":"s","version":1}}]}"#;
/// let mut reader = PollReader::new(PayloadLimits::default());
/// for piece in body.chunks(7) {
///     reader.feed(piece, None);
/// }
/// assert_eq!(reader.finish(), parse_poll(&Bytes::from_static(body)));
/// ```
#[derive(Debug)]
pub struct PollReader {
    state: State,
    /// The opening read so far; in [`State::Whole`], the whole body.
    whole: Vec<u8>,
    /// How long the body says it is, for a body kept whole.
    expected_len: Option<usize>,
    /// The element being read.
    element: Vec<u8>,
    /// Where the element's reading is.
    scan: Scan,
    protocol: Protocol,
    /// What the events decided: a completed payload or an error (later events are
    /// only checked to be JSON).
    outcome: Option<Result<ChangeSet, Error>>,
    /// What follows the array (normally `}`).
    tail: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading the opening `{"events":[`.
    Opening,
    /// The body does not begin as an FDv2 body does: kept whole.
    Whole,
    /// Before an element, or the end of the array unless a `,` came last.
    Between { comma: bool },
    /// Inside an element.
    Element,
    /// After an element: a `,` or the end of the array.
    After,
    /// After the array.
    Tail,
    /// Not JSON: the answer is [`Error::MalformedJson`]; the rest is dropped.
    Malformed,
}

/// Where the reading of one element is.
#[derive(Debug, Clone, Copy, Default)]
struct Scan {
    /// Open `{` and `[`.
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// The element is a number or literal: it ends at whitespace, `,` or `]`.
    scalar: bool,
}

const fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

impl PollReader {
    /// A reader holding at most `limits` of the payload before its
    /// `payload-transferred` (as [`parse_poll_with`](super::parse_poll_with)).
    pub fn new(limits: PayloadLimits) -> Self {
        Self {
            state: State::Opening,
            whole: Vec::new(),
            expected_len: None,
            element: Vec::new(),
            scan: Scan::default(),
            protocol: Protocol::with_limits(limits),
            outcome: None,
            tail: Vec::new(),
        }
    }

    /// The body's announced length: a body of another shape gets its whole buffer at
    /// once instead of growing by doubling.
    #[must_use]
    pub fn with_expected_len(mut self, len: Option<usize>) -> Self {
        self.expected_len = len;
        self
    }

    /// The next piece of the body. With `stored` (the store's data as it is), each
    /// object put takes the stored item's buffer when the store holds the same item,
    /// and a buffer of its own otherwise: a repeated poll then holds no second copy of
    /// what is stored, and no piece of the body is kept.
    pub fn feed(&mut self, mut bytes: &[u8], stored: Option<&Snapshot>) {
        while !bytes.is_empty() {
            match self.state {
                State::Malformed => return,
                State::Whole => {
                    self.whole.extend_from_slice(bytes);
                    return;
                }
                State::Opening => {
                    let at = self.whole.len();
                    self.whole.extend_from_slice(bytes);
                    match opening_len(&self.whole) {
                        Opening::More => return,
                        Opening::Other => {
                            self.state = State::Whole;
                            if let Some(len) = self.expected_len {
                                self.whole
                                    .reserve_exact(len.saturating_sub(self.whole.len()));
                            }
                            return;
                        }
                        Opening::Len(n) => {
                            bytes = &bytes[n - at..];
                            self.whole = Vec::new();
                            self.state = State::Between { comma: false };
                        }
                    }
                }
                State::Between { comma } => {
                    let b = bytes[0];
                    if is_ws(b) {
                        bytes = &bytes[1..];
                    } else if b == b']' && !comma {
                        bytes = &bytes[1..];
                        self.state = State::Tail;
                    } else if b == b']' || b == b',' {
                        self.malformed();
                    } else {
                        self.scan = Scan {
                            scalar: !matches!(b, b'{' | b'[' | b'"'),
                            ..Scan::default()
                        };
                        self.state = State::Element;
                    }
                }
                State::Element => {
                    let (used, done) = self.scan.advance(bytes);
                    self.element.extend_from_slice(&bytes[..used]);
                    bytes = &bytes[used..];
                    if done {
                        self.state = State::After;
                        self.read_element(stored);
                    }
                }
                State::After => {
                    let b = bytes[0];
                    bytes = &bytes[1..];
                    match b {
                        b',' => {
                            self.state = State::Between { comma: true };
                        }
                        b']' => self.state = State::Tail,
                        _ if is_ws(b) => {}
                        _ => self.malformed(),
                    }
                }
                State::Tail => {
                    self.tail.extend_from_slice(bytes);
                    return;
                }
            }
        }
    }

    /// The body ended: the change set of its first complete payload.
    ///
    /// # Errors
    /// As [`parse_poll_or_fdv1_with`] for the same bytes.
    pub fn finish(self) -> Result<ChangeSet, Error> {
        let malformed = Error::MalformedJson { event: wire::POLL };
        match self.state {
            State::Opening | State::Whole => {
                parse_poll_or_fdv1_with(&Bytes::from(self.whole), self.protocol.limits())
            }
            State::Tail => {
                // What follows the array decides first, as the whole body is read
                // before its events: `{"events":[]` and the tail stand for the body.
                let mut body = br#"{"events":[]"#.to_vec();
                body.extend_from_slice(&self.tail);
                if let Err(e) = serde_json::from_slice::<wire::PollBody<'_>>(&body) {
                    return Err(malformed_first(Error::from_json(wire::POLL, &e), &body));
                }
                self.outcome.unwrap_or(Err(Error::IncompletePayload))
            }
            State::Between { .. } | State::Element | State::After | State::Malformed => {
                Err(malformed)
            }
        }
    }

    fn malformed(&mut self) {
        self.state = State::Malformed;
        self.element = Vec::new();
        self.tail = Vec::new();
        self.outcome = None;
    }

    /// A whole element was read: check it is JSON, then (until the outcome is known)
    /// run it through the protocol.
    fn read_element(&mut self, stored: Option<&Snapshot>) {
        let json = |element: &[u8]| serde_json::from_slice::<&RawValue>(element).is_ok();
        if self.outcome.is_some() {
            if !json(&self.element) {
                return self.malformed();
            }
        } else if std::str::from_utf8(&self.element).is_err() {
            return self.malformed();
        } else {
            let element = Bytes::copy_from_slice(&self.element);
            // An element read without an error of its own shape is JSON: serde_json
            // went through all of it (the UTF-8 of what it skips was checked above). So
            // it is checked only on that error, which a syntax error may stand behind.
            match read_element(&mut self.protocol, &element, stored) {
                Err(Error::Schema { event: wire::POLL }) if !json(&element) => {
                    return self.malformed();
                }
                Ok(None) => {}
                Ok(Some(change_set)) => self.outcome = Some(Ok(change_set)),
                Err(e) => self.outcome = Some(Err(e)),
            }
            if self.outcome.is_some() {
                // Nothing more is read from the events: let the payload's memory go.
                self.protocol = Protocol::with_limits(self.protocol.limits());
            }
        }
        // Keep the buffer for the next element, unless this one was unusually large.
        if self.element.capacity() > 64 << 10 {
            self.element = Vec::new();
        } else {
            self.element.clear();
        }
    }
}

impl Scan {
    /// Read `bytes` into the element: how many belong to it, and whether it is whole.
    /// A scalar ends before the whitespace, `,` or `]` after it, which is not used.
    fn advance(&mut self, bytes: &[u8]) -> (usize, bool) {
        let mut i = 0;
        while i < bytes.len() {
            if self.in_string {
                // Jump to the next quote or backslash.
                if self.escaped {
                    self.escaped = false;
                    i += 1;
                    continue;
                }
                match memchr::memchr2(b'"', b'\\', &bytes[i..]) {
                    None => return (bytes.len(), false),
                    Some(at) => {
                        i += at;
                        if bytes[i] == b'\\' {
                            self.escaped = true;
                        } else {
                            self.in_string = false;
                            if self.depth == 0 {
                                return (i + 1, true);
                            }
                        }
                        i += 1;
                        continue;
                    }
                }
            }
            let b = bytes[i];
            if self.scalar {
                if is_ws(b) || b == b',' || b == b']' {
                    return (i, true);
                }
                i += 1;
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return (i + 1, true);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        (bytes.len(), false)
    }
}

/// How far the opening `{"events":[` goes in `read`.
enum Opening {
    /// All of `read` fits the opening so far.
    More,
    /// The opening ends after this many bytes.
    Len(usize),
    /// Not the opening.
    Other,
}

fn opening_len(read: &[u8]) -> Opening {
    let mut i = 0;
    for token in OPENING {
        while read.get(i).copied().is_some_and(is_ws) {
            i += 1;
        }
        let rest = &read[i.min(read.len())..];
        if rest.len() < token.len() {
            return if token.starts_with(rest) {
                Opening::More
            } else {
                Opening::Other
            };
        }
        if !rest.starts_with(token) {
            return Opening::Other;
        }
        i += token.len();
    }
    Opening::Len(i)
}
