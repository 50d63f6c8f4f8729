//! Payloads out: flushing the queue and the summary into a `POST`, diagnostic events,
//! the exchanges that carry them, the one retry, and stopping for good on a final status.

use std::io::Write as _;
use std::time::Instant;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::queue::format_event;
use super::{Event, EventProcessor, Output, PayloadKind, Send, millis, uuid_v4};
use crate::events::summary::Summarizer;
use crate::http1::{self, Method};
use crate::io::{Action, ConnId};
use crate::source::exchange::{Exchange, Progress, TotalDeadline};
use crate::status::{Cause, ErrorInfo, ErrorKind};

/// An HTTP status that the events service may answer differently next time, so a
/// delivery is retried (LaunchDarkly's rule: every 4xx but 400, 408 and 429 is final).
pub fn status_is_recoverable(status: u16) -> bool {
    !(400..500).contains(&status) || matches!(status, 400 | 408 | 429)
}

impl EventProcessor {
    /// Format what is queued and send it.
    pub(super) fn flush(&mut self, now: Instant) {
        if self.disabled || self.closed {
            return;
        }
        let mut count = self.outbox.len();
        if !self.summary.is_empty() {
            count += 1;
        }
        if count == 0 {
            self.events_in_last_batch = 0;
            return;
        }
        let in_flight = self
            .sends
            .iter()
            .filter(|s| s.kind == PayloadKind::Analytics)
            .count();
        if in_flight >= self.config.max_concurrent_posts.max(1) {
            // Kept for the next flush, as LaunchDarkly's SDKs do when every sender is busy.
            return;
        }
        let Some(_) = self.bulk_url else {
            self.outbox.clear();
            self.summary = Summarizer::new();
            return;
        };
        let mut events: Vec<Value> = self
            .outbox
            .drain(..)
            .map(|q| format_event(&self.formatter, q))
            .collect();
        if let Some(summary) = std::mem::take(&mut self.summary).to_event() {
            events.push(summary);
        }
        self.queue_full = false;
        self.events_in_last_batch = count as u64;
        let body = serde_json::to_vec(&Value::Array(events)).unwrap_or_default();
        let payload_id = uuid_v4(&mut self.rng);
        self.sends.push(Send {
            kind: PayloadKind::Analytics,
            body: self.encode(body),
            payload_id: Some(payload_id),
            events: count,
            attempt: 0,
            exchange: None,
            retry_at: None,
        });
        let i = self.sends.len() - 1;
        self.start_send(now, i);
    }

    fn encode(&self, body: Vec<u8>) -> Bytes {
        if !self.config.gzip {
            return Bytes::from(body);
        }
        let mut gz = flate2::write::GzEncoder::new(
            Vec::with_capacity(body.len() / 4 + 64),
            flate2::Compression::fast(),
        );
        match gz.write_all(&body).and_then(|()| gz.finish()) {
            Ok(zipped) => Bytes::from(zipped),
            // Writing into a Vec cannot fail.
            Err(_) => Bytes::new(),
        }
    }

    pub(super) fn send_diagnostic(&mut self, now: Instant, event: &Value) {
        if self.disabled || self.diagnostic_url.is_none() {
            return;
        }
        let body = serde_json::to_vec(event).unwrap_or_default();
        self.sends.push(Send {
            kind: PayloadKind::Diagnostic,
            body: Bytes::from(body),
            payload_id: None,
            events: 0,
            attempt: 0,
            exchange: None,
            retry_at: None,
        });
        let i = self.sends.len() - 1;
        self.start_send(now, i);
    }

    /// Start (or restart) the request of `self.sends[i]`.
    pub(super) fn start_send(&mut self, now: Instant, i: usize) {
        let conn = self.conn_ids.next_id();
        let Some(send) = self.sends.get_mut(i) else {
            return;
        };
        let url = match send.kind {
            PayloadKind::Analytics => self.bulk_url.as_ref(),
            PayloadKind::Diagnostic => self.diagnostic_url.as_ref(),
        };
        let Some(url) = url else { return };
        let mut headers = self.config.identity.headers();
        headers.push(("Content-Type".into(), "application/json".into()));
        if let Some(id) = &send.payload_id {
            headers.push(("X-LaunchDarkly-Event-Schema".into(), "4".into()));
            headers.push(("X-LaunchDarkly-Payload-ID".into(), id.clone()));
            if self.config.gzip {
                headers.push(("Content-Encoding".into(), "gzip".into()));
            }
        }
        let http = http1::Config {
            // The events service answers with an empty body; anything long is not it.
            max_body_len: Some(64 * 1024),
            ..http1::Config::default()
        };
        let (exchange, action) = Exchange::start(
            now,
            conn,
            url,
            Method::Post,
            headers,
            Some(&send.body),
            self.config.connect_timeout,
            self.config.read_timeout,
            // However slowly the answer trickles in, a post ends within both timeouts.
            TotalDeadline::Response(now + self.config.connect_timeout + self.config.read_timeout),
            http,
        );
        send.attempt += 1;
        send.exchange = Some(exchange);
        send.retry_at = None;
        self.outputs.push_back(Output::Action(action));
    }

    pub(super) fn progress(&mut self, now: Instant, conn: ConnId, progress: Vec<Progress>) {
        for p in progress {
            let Some(i) = self
                .sends
                .iter()
                .position(|s| s.exchange.as_ref().is_some_and(|ex| ex.conn == conn))
            else {
                return;
            };
            match p {
                Progress::Head(head) => {
                    self.outputs
                        .push_back(Output::Action(Action::Close { conn }));
                    if let Some(date) = head.header("date").and_then(parse_http_date) {
                        self.last_known_past_time = date;
                    }
                    let send = self.sends.remove(i);
                    let status = head.status;
                    if (200..300).contains(&status) {
                        self.outputs.push_back(Output::Event(match send.kind {
                            PayloadKind::Analytics => Event::Delivered {
                                events: send.events,
                            },
                            PayloadKind::Diagnostic => Event::DiagnosticDelivered,
                        }));
                    } else if status_is_recoverable(status) {
                        let error =
                            ErrorInfo::new(now, ErrorKind::ErrorResponse, Cause::Status(status));
                        self.retry_or_drop(now, send, error);
                    } else {
                        tracing::error!(
                            status,
                            "the events service refused the SDK key: no more analytics events will be sent"
                        );
                        self.disable(status);
                    }
                }
                Progress::Failed(error) => {
                    self.outputs
                        .push_back(Output::Action(Action::Close { conn }));
                    let send = self.sends.remove(i);
                    self.retry_or_drop(now, send, error);
                }
                Progress::Body(_) | Progress::End => {}
            }
        }
    }

    fn retry_or_drop(&mut self, now: Instant, mut send: Send, error: ErrorInfo) {
        let retrying = send.attempt < 2 && !self.disabled;
        tracing::warn!(
            error = %error.cause,
            retrying,
            "posting analytics events failed"
        );
        self.outputs.push_back(Output::Event(Event::Failed {
            error,
            events: send.events,
            retrying,
        }));
        if retrying {
            send.exchange = None;
            send.retry_at = Some(now + self.config.retry_delay);
            self.sends.push(send);
        }
    }

    fn disable(&mut self, status: u16) {
        self.disabled = true;
        self.outbox.clear();
        self.summary = Summarizer::new();
        self.next_diagnostic = None;
        for send in self.sends.drain(..) {
            if let Some(ex) = send.exchange {
                self.outputs
                    .push_back(Output::Action(Action::Close { conn: ex.conn }));
            }
        }
        self.outputs
            .push_back(Output::Event(Event::Disabled { status }));
    }

    pub(super) fn diagnostic_init(&self, unix_ms: u64) -> Option<Value> {
        let d = self.config.diagnostics.as_ref()?;
        let mut out = Map::new();
        out.insert("kind".into(), "diagnostic-init".into());
        out.insert("creationDate".into(), unix_ms.into());
        out.insert("id".into(), self.diagnostic_id.clone());
        out.insert("configuration".into(), d.configuration.clone());
        out.insert("sdk".into(), d.sdk.clone());
        out.insert("platform".into(), d.platform.clone());
        Some(Value::Object(out))
    }

    pub(super) fn diagnostic_periodic(&mut self, now: Instant) -> Value {
        let wall = self.wall(now);
        let mut out = Map::new();
        out.insert("kind".into(), "diagnostic".into());
        out.insert("creationDate".into(), wall.into());
        out.insert("id".into(), self.diagnostic_id.clone());
        out.insert("dataSinceDate".into(), self.data_since.into());
        out.insert("droppedEvents".into(), self.dropped.into());
        out.insert("deduplicatedUsers".into(), self.deduplicated.into());
        out.insert("eventsInLastBatch".into(), self.events_in_last_batch.into());
        out.insert(
            "streamInits".into(),
            Value::Array(std::mem::take(&mut self.stream_inits)),
        );
        self.data_since = wall;
        self.dropped = 0;
        self.deduplicated = 0;
        self.events_in_last_batch = 0;
        Value::Object(out)
    }
}

/// An HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT` and the obsolete forms) in Unix
/// milliseconds.
fn parse_http_date(text: &str) -> Option<u64> {
    let t = httpdate::parse_http_date(text).ok()?;
    t.duration_since(std::time::UNIX_EPOCH).ok().map(millis)
}
