//! A streaming data source: the SSE client ([`EventStream`]) plus the protocol that
//! reads its events, FDv1 (`/all`) or FDv2 (`/sdk/stream`).

use std::collections::VecDeque;
use std::time::Instant;

use super::SourceOutput;
use super::event_stream::{EventStream, EventStreamConfig, StreamOutput};
use super::fdv1_stream::Fdv1Events;
use super::fdv2_stream::Fdv2Events;
use crate::backoff::RetryState;
use crate::fdv2::PayloadLimits;
use crate::io::{CloseCause, ConnId};
use crate::status::State;
use crate::store::Selector;

#[derive(Debug)]
enum Protocol {
    Fdv1(Fdv1Events),
    Fdv2(Box<Fdv2Events>),
}

/// A streaming data source.
///
/// FDv1 ([`StreamSource::fdv1`], PROTOCOL.md B §1): `put` replaces the store and makes
/// the source VALID, `patch` and `delete` update it, bad data drops the connection.
///
/// FDv2 ([`StreamSource::fdv2`], PROTOCOL.md B §5.4): one protocol machine lives across
/// reconnects; each completed payload gives `Apply` then `Status(Valid)`; every attempt
/// carries the `basis` of the selector last given to [`StreamSource::set_basis`];
/// `goodbye` reconnects; `X-LD-FD-Fallback: true` ends the source with
/// [`SourceOutput::FallbackToFdv1`] (after the payload in flight, if the response was a
/// success).
///
/// Both report `Status(Interrupted)` for each failure that will be retried and
/// `Status(Off)` when the stream stops for good.
#[derive(Debug)]
pub struct StreamSource {
    stream: EventStream,
    protocol: Protocol,
    out: VecDeque<SourceOutput>,
}

impl StreamSource {
    /// The FDv1 source for the stream described by `config` (its URL already ends in
    /// `/all`, with any `filter`).
    pub fn fdv1(config: EventStreamConfig, seed: u64, first_conn_id: u64) -> Self {
        Self {
            stream: EventStream::new(config, seed, first_conn_id).read_puts_ahead(),
            protocol: Protocol::Fdv1(Fdv1Events),
            out: VecDeque::new(),
        }
    }

    /// The FDv2 source for the stream described by `config` (its URL is the stream
    /// endpoint with any `filter`; the `basis` is added per attempt).
    pub fn fdv2(config: EventStreamConfig, seed: u64, first_conn_id: u64) -> Self {
        Self {
            protocol: Protocol::Fdv2(Box::new(Fdv2Events::new(config.url.clone()))),
            stream: EventStream::new(config, seed, first_conn_id),
            out: VecDeque::new(),
        }
    }

    /// FDv2: hold at most `limits` of a payload before its `payload-transferred`
    /// (default [`PayloadLimits::default`]); past it the partial payload is dropped and
    /// the stream fails with INVALID_DATA and reconnects. FDv1 ignores it: its `put` is
    /// one event, bounded by the SSE limits.
    #[must_use]
    pub fn with_payload_limits(mut self, limits: PayloadLimits) -> Self {
        if let Protocol::Fdv2(p) = &mut self.protocol {
            p.set_payload_limits(limits);
        }
        self
    }

    /// The underlying SSE client.
    pub fn stream(&self) -> &EventStream {
        &self.stream
    }

    /// FDv2: the selector the store holds; a defined one is sent as `basis=<state>`
    /// from the next connection attempt on (PROTOCOL.md B §5.4, E 30). FDv1 ignores it.
    pub fn set_basis(&mut self, selector: &Selector) {
        if let Protocol::Fdv2(p) = &self.protocol {
            self.stream.set_url(p.url_for(selector));
        }
    }

    /// The retry timing to hand to the next instance of this source if it stops at
    /// `now` (see [`EventStream::retry_state`]).
    pub fn retry_state(&self, now: Instant) -> RetryState {
        self.stream.retry_state(now)
    }

    /// Before the start: go on from an earlier instance's retry timing (see
    /// [`EventStream::resume`]).
    pub fn resume(&mut self, state: RetryState) {
        self.stream.resume(state);
    }

    /// Connect (at once, or when a resumed retry timing says).
    pub fn handle_start(&mut self, now: Instant) {
        self.stream.handle_start(now);
        self.pump(now);
    }

    /// Close and stop for good; reports OFF.
    pub fn handle_stop(&mut self, now: Instant) {
        self.stream.handle_stop();
        self.pump(now);
        self.out.push_back(SourceOutput::Status(State::Off, None));
    }

    /// The driver connected `conn`.
    pub fn handle_connected(&mut self, now: Instant, conn: ConnId) {
        self.stream.handle_connected(now, conn);
        self.pump(now);
    }

    /// Bytes arrived on `conn`.
    pub fn handle_data(&mut self, now: Instant, conn: ConnId, bytes: &[u8]) {
        self.stream.handle_data(now, conn, bytes);
        self.pump(now);
    }

    /// `conn` closed.
    pub fn handle_closed(&mut self, now: Instant, conn: ConnId, cause: CloseCause) {
        self.stream.handle_closed(now, conn, cause);
        self.pump(now);
    }

    /// Time passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.stream.handle_timeout(now);
        self.pump(now);
    }

    /// The next output.
    pub fn poll_output(&mut self) -> Option<SourceOutput> {
        self.out.pop_front()
    }

    /// When to call [`StreamSource::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.stream.poll_timeout()
    }

    fn pump(&mut self, now: Instant) {
        while let Some(o) = self.stream.poll_output() {
            match o {
                StreamOutput::Action(a) => self.out.push_back(SourceOutput::Action(a)),
                other => match &mut self.protocol {
                    Protocol::Fdv1(p) => p.handle(now, other, &mut self.stream, &mut self.out),
                    Protocol::Fdv2(p) => p.handle(now, other, &mut self.stream, &mut self.out),
                },
            }
        }
    }
}
