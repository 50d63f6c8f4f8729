//! The response reader: bytes in, [`ResponseEvent`]s out.

use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};

use super::Error;
use super::chunked::{ChunkProgress, Chunked};
use super::gzip::Gzip;
use super::head::{self, Coding, Framing, HeadScanner, ResponseHead};

/// Limits and switches of a [`ResponseReader`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Longest response head, status line to empty line inclusive (default 64 KiB).
    pub max_head_len: usize,
    /// Most header fields in one head; the size of the httparse header array
    /// (default 100).
    pub max_headers: usize,
    /// Longest decoded body (default `None`, for endless streams; set it for polling).
    pub max_body_len: Option<usize>,
    /// Most hex digits in a chunk size, leading zeros included (default 16).
    pub max_chunk_size_digits: usize,
    /// Longest trailer section; also bounds the extensions of each chunk-size line
    /// (default 16 KiB).
    pub max_trailer_len: usize,
    /// Whether to decode `Content-Encoding: gzip` bodies (default `true`). When `false`
    /// the body is passed through as received, whatever its coding.
    pub decode_gzip: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_head_len: 64 * 1024,
            max_headers: 100,
            max_body_len: None,
            max_chunk_size_digits: 16,
            max_trailer_len: 16 * 1024,
            decode_gzip: true,
        }
    }
}

/// Something the reader decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResponseEvent {
    /// The final (non-1xx) response head.
    Head(ResponseHead),
    /// Decoded body bytes (de-chunked and gunzipped), never empty. How a body is cut
    /// into `Body` events depends on how the input was split; their concatenation does
    /// not.
    Body(Bytes),
    /// The body is complete. The reader then ignores further input; whether the
    /// connection can be reused is up to the caller.
    End,
}

/// Where the reader is in the response.
#[derive(Debug)]
enum Stage {
    /// Reading a head (1xx heads are skipped).
    Head,
    /// Reading a body.
    Body(Body),
    /// End or an error is queued: input is ignored.
    Done,
}

/// Body decoding state.
#[derive(Debug)]
struct Body {
    framing: BodyFraming,
    gzip: Option<Box<Gzip>>,
    /// Decoded bytes delivered so far.
    delivered: usize,
}

/// The framing of the body being read.
#[derive(Debug)]
enum BodyFraming {
    /// `remaining` bytes of a Content-Length body.
    Length { remaining: u64 },
    /// A chunked body.
    Chunked(Chunked),
    /// A body delimited by connection close.
    Close,
    /// The raw body is complete; the decoder may still hold output.
    Complete,
}

/// A sans-I/O HTTP/1.1 response reader.
///
/// Feed it bytes with [`handle_bytes`](Self::handle_bytes) and the connection's end with
/// [`handle_eof`](Self::handle_eof); drain [`poll_event`](Self::poll_event) until it
/// returns `None` after each call. Decoding happens while polling, so the reader holds at
/// most the input not yet decoded plus one bounded decoding step, and a caller that
/// stops polling gets back-pressure instead of a growing event queue.
///
/// The transcript (events, with adjacent `Body` bytes concatenated, and the error) does
/// not depend on how the input is split into `handle_bytes` calls.
#[derive(Debug)]
pub struct ResponseReader {
    config: Config,
    /// Input received and not yet decoded.
    buf: BytesMut,
    stage: Stage,
    scanner: HeadScanner,
    /// The httparse header array, allocated once and reused for every head.
    headers: Vec<httparse::Header<'static>>,
    eof: bool,
    /// Decoded events not yet returned (at most a few).
    queue: VecDeque<Result<ResponseEvent, Error>>,
}

impl ResponseReader {
    /// Create a reader for one response.
    pub fn new(config: Config) -> Self {
        Self {
            config,
            buf: BytesMut::new(),
            stage: Stage::Head,
            scanner: HeadScanner::default(),
            headers: vec![httparse::EMPTY_HEADER; config.max_headers],
            eof: false,
            queue: VecDeque::new(),
        }
    }

    /// Feed bytes received from the connection.
    ///
    /// Then drain [`poll_event`](Self::poll_event). Bytes are copied once into the
    /// reader's buffer; after `End` or an error they are ignored.
    pub fn handle_bytes(&mut self, bytes: &[u8]) {
        if !self.eof && !matches!(self.stage, Stage::Done) {
            if self.buf.is_empty() {
                // A buffer of exactly this read: body data handed out is a slice of it,
                // and a read appended to the space left in a larger buffer (grown to
                // 64 KiB by earlier reads) would leave the rest of that space unused
                // for as long as the data handed out lives.
                self.buf = BytesMut::from(bytes);
            } else {
                self.buf.extend_from_slice(bytes);
            }
        }
    }

    /// Record that the peer closed the connection.
    ///
    /// Then drain [`poll_event`](Self::poll_event): a body delimited by close ends with
    /// `End`; an incomplete head, chunked body or Content-Length body yields
    /// [`Error::UnexpectedEof`]. Later input is ignored.
    pub fn handle_eof(&mut self) {
        self.eof = true;
    }

    /// Return the next event or error, or `None` when more input is needed.
    ///
    /// Events come in order: `Head`, any number of `Body`, `End`; or an error in place of
    /// any of them, after which the reader stays silent (errors are returned once). A
    /// head that parses but whose framing or coding headers are unusable (for example
    /// `Content-Encoding: br`) is still delivered, followed by the error, so the caller
    /// sees the status.
    pub fn poll_event(&mut self) -> Option<Result<ResponseEvent, Error>> {
        loop {
            if let Some(event) = self.queue.pop_front() {
                return Some(event);
            }
            if matches!(self.stage, Stage::Done) {
                return None;
            }
            match self.step() {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => self.fail(e),
            }
        }
    }

    /// Whether the response is over: `End` or an error has been queued.
    pub fn is_done(&self) -> bool {
        matches!(self.stage, Stage::Done)
    }

    /// Queue `error`, drop buffered input and stop.
    fn fail(&mut self, error: Error) {
        self.queue.push_back(Err(error));
        self.stage = Stage::Done;
        self.buf = BytesMut::new();
    }

    /// Decode as far as the next event; `Ok(false)` if no progress is possible.
    fn step(&mut self) -> Result<bool, Error> {
        match self.stage {
            Stage::Head => self.step_head(),
            Stage::Body(_) => self.step_body(),
            Stage::Done => Ok(false),
        }
    }

    /// Try to parse a head from the buffer.
    fn step_head(&mut self) -> Result<bool, Error> {
        // httparse skips empty lines before the status line; drop them here so that a
        // stream of them is neither buffered nor rescanned.
        let blank = self
            .buf
            .iter()
            .take_while(|&&b| b == b'\r' || b == b'\n')
            .count();
        let keep = usize::from(self.buf.get(blank.saturating_sub(1)) == Some(&b'\r'));
        if blank > keep {
            self.buf.advance(blank - keep);
            self.scanner.reset();
        }
        let window_len = self.buf.len().min(self.config.max_head_len);
        let Some(end) = self
            .scanner
            .find_end(self.buf.get(..window_len).unwrap_or_default())
        else {
            return if self.buf.len() >= self.config.max_head_len {
                Err(Error::HeadTooLarge {
                    limit: self.config.max_head_len,
                })
            } else if self.eof {
                Err(Error::UnexpectedEof)
            } else {
                Ok(false)
            };
        };
        let parsed = with_headers(&mut self.headers, |headers| {
            head::parse_head(self.buf.get(..end).unwrap_or_default(), headers)
        })?;
        let Some((head, len)) = parsed else {
            // Blank lines were stripped above, so httparse has a whole head.
            return Err(Error::MalformedHead(super::HeadError::NewLine));
        };
        self.buf.advance(len);
        self.scanner.reset();
        if head.status < 200 {
            // 1xx informational: no body, the final response follows (RFC 9110 §15.2).
            return Ok(true);
        }
        let framing = head::framing(&head);
        let coding = match framing {
            Ok(Framing::Empty) | Err(_) => Ok(Coding::Identity),
            Ok(_) if self.config.decode_gzip => head::coding(&head),
            Ok(_) => Ok(Coding::Identity),
        };
        self.queue.push_back(Ok(ResponseEvent::Head(head)));
        let framing = framing?;
        let coding = coding?;
        let raw_limit = match coding {
            Coding::Identity => self.config.max_body_len,
            Coding::Gzip => None,
        };
        let framing = match framing {
            Framing::Empty => BodyFraming::Complete,
            Framing::Length(n) => {
                if let Some(limit) = raw_limit
                    && n > u64::try_from(limit).unwrap_or(u64::MAX)
                {
                    return Err(Error::BodyTooLarge { limit });
                }
                BodyFraming::Length { remaining: n }
            }
            Framing::Chunked => BodyFraming::Chunked(Chunked::new(
                self.config.max_chunk_size_digits,
                self.config.max_trailer_len,
                raw_limit,
            )),
            Framing::Close => BodyFraming::Close,
        };
        let gzip = (coding == Coding::Gzip).then(|| Box::new(Gzip::new()));
        self.stage = Stage::Body(Body {
            framing,
            gzip,
            delivered: 0,
        });
        Ok(true)
    }

    /// Decode body bytes, framing metadata, or the end of the body.
    fn step_body(&mut self) -> Result<bool, Error> {
        let Stage::Body(body) = &mut self.stage else {
            return Ok(false);
        };
        let mut progress = false;
        // Bytes of `buf` that are body data, as far as the framing knows now.
        let available = match &mut body.framing {
            BodyFraming::Length { remaining } => {
                if *remaining == 0 {
                    body.framing = BodyFraming::Complete;
                    return Ok(true);
                }
                clamp(*remaining, self.buf.len())
            }
            BodyFraming::Chunked(chunked) => {
                let (consumed, next) = chunked.parse(&self.buf)?;
                self.buf.advance(consumed);
                progress = consumed > 0;
                match next {
                    ChunkProgress::Data(remaining) => clamp(remaining, self.buf.len()),
                    ChunkProgress::NeedMore => 0,
                    ChunkProgress::Done => {
                        body.framing = BodyFraming::Complete;
                        return Ok(true);
                    }
                }
            }
            BodyFraming::Close => self.buf.len(),
            BodyFraming::Complete => {
                if Self::deliver(body, &mut self.buf, 0, &self.config, &mut self.queue)? > 0
                    || !self.queue.is_empty()
                {
                    return Ok(true);
                }
                if body.gzip.as_ref().is_some_and(|g| !g.at_boundary()) {
                    return Err(Error::Gzip);
                }
                self.queue.push_back(Ok(ResponseEvent::End));
                self.stage = Stage::Done;
                self.buf = BytesMut::new();
                return Ok(true);
            }
        };
        let queued = self.queue.len();
        let consumed = Self::deliver(
            body,
            &mut self.buf,
            available,
            &self.config,
            &mut self.queue,
        )?;
        match &mut body.framing {
            BodyFraming::Length { remaining } => *remaining -= consumed as u64,
            BodyFraming::Chunked(chunked) => chunked.data_consumed(consumed as u64),
            BodyFraming::Close | BodyFraming::Complete => {}
        }
        if consumed > 0 || self.queue.len() > queued || progress {
            return Ok(true);
        }
        if !self.eof {
            return Ok(false);
        }
        match body.framing {
            BodyFraming::Close => {
                body.framing = BodyFraming::Complete;
                Ok(true)
            }
            _ => Err(Error::UnexpectedEof),
        }
    }

    /// Decode up to `available` body bytes from the front of `buf` into at most one
    /// `Body` event; returns the number of raw bytes consumed.
    fn deliver(
        body: &mut Body,
        buf: &mut BytesMut,
        available: usize,
        config: &Config,
        queue: &mut VecDeque<Result<ResponseEvent, Error>>,
    ) -> Result<usize, Error> {
        let budget = config
            .max_body_len
            .map_or(usize::MAX, |limit| limit.saturating_sub(body.delivered));
        let (consumed, data) = match &mut body.gzip {
            None => {
                let take = available.min(budget);
                let data = buf.split_to(take).freeze();
                (take, data)
            }
            Some(gzip) => {
                let input = buf.get(..available).unwrap_or_default();
                let (consumed, out) = gzip.decode(input, budget.saturating_add(1))?;
                let data =
                    Bytes::copy_from_slice(out.get(..budget.min(out.len())).unwrap_or_default());
                let over = out.len() > budget;
                buf.advance(consumed);
                if over {
                    push_body(queue, data);
                    body.delivered += budget;
                    return Err(Error::BodyTooLarge {
                        limit: config.max_body_len.unwrap_or(0),
                    });
                }
                (consumed, data)
            }
        };
        body.delivered += data.len();
        push_body(queue, data);
        if body.gzip.is_none() && available > budget {
            return Err(Error::BodyTooLarge {
                limit: config.max_body_len.unwrap_or(0),
            });
        }
        Ok(consumed)
    }
}

/// Queue a `Body` event unless `data` is empty.
fn push_body(queue: &mut VecDeque<Result<ResponseEvent, Error>>, data: Bytes) {
    if !data.is_empty() {
        queue.push_back(Ok(ResponseEvent::Body(data)));
    }
}

/// `min(remaining, len)` as a `usize`.
fn clamp(remaining: u64, len: usize) -> usize {
    usize::try_from(remaining).map_or(len, |r| r.min(len))
}

/// Run `f` with the reader's header array re-borrowed for a shorter lifetime.
///
/// `httparse::Header<'b>` borrows the buffer being parsed, so an array kept in the
/// reader cannot be typed with that lifetime. Mapping `Vec<Header<'static>>` to
/// `Vec<Header<'b>>` and back collects in place (same layout), so the allocation is
/// reused for every head without `unsafe`.
fn with_headers<'b, T>(
    headers: &mut Vec<httparse::Header<'static>>,
    f: impl FnOnce(&mut [httparse::Header<'b>]) -> T,
) -> T {
    let mut borrowed: Vec<httparse::Header<'b>> = std::mem::take(headers)
        .into_iter()
        .map(|_| httparse::EMPTY_HEADER)
        .collect();
    let result = f(&mut borrowed);
    *headers = borrowed
        .into_iter()
        .map(|_| httparse::EMPTY_HEADER)
        .collect();
    result
}
