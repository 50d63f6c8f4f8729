//! HTTP/1.1 for flagsync's requests: request heads out, response events in.
//!
//! This module does no I/O. [`RequestHead::write_to`] appends a request to a buffer the
//! caller sends; a [`ResponseReader`] is fed whatever bytes the connection delivers, in
//! pieces of any size, and drained of [`ResponseEvent`]s: one `Head`, decoded `Body`
//! bytes as soon as they arrive (de-chunked and gunzipped), and `End`. Failures are
//! in-band [`Error`]s, delivered after every event that precedes the fault and sticky.
//!
//! Heads are parsed by [`httparse`] with a header array of [`Config::max_headers`]
//! entries; the body framing follows RFC 9112 §6.3 (no body for 1xx/204/304, chunked,
//! Content-Length, or until close); 1xx responses are skipped. Line endings may be CRLF
//! or a bare LF, in the head (as httparse allows) and in chunked framing (RFC 9112 §2.2).
//! Every buffer has a limit in [`Config`], including the *decoded* body, so a gzip bomb is
//! cut off after at most `max_body_len` bytes plus one 32 KiB decoding step.
//!
//! ```
//! use flagsync_core::http1::{Config, Method, RequestHead, ResponseEvent, ResponseReader};
//!
//! let request = RequestHead {
//!     method: Method::Get,
//!     target: "/sdk/latest-all".into(),
//!     host: "sdk.example.com".into(),
//!     headers: vec![("Authorization".into(), "sdk-key".into())],
//! };
//! let mut out = Vec::new();
//! request.write_to(None, &mut out);
//! assert_eq!(
//!     out,
//!     b"GET /sdk/latest-all HTTP/1.1\r\nHost: sdk.example.com\r\nAuthorization: sdk-key\r\n\r\n"
//! );
//!
//! // The response arrives in two reads that split the head and a chunk.
//! let config = Config { max_body_len: Some(1 << 20), ..Config::default() };
//! let mut reader = ResponseReader::new(config);
//! let mut body = Vec::new();
//! for read in [
//!     &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Ty"[..],
//!     &b"pe: application/json\r\n\r\n2\r\n{}\r\n0\r\n\r\n"[..],
//! ] {
//!     reader.handle_bytes(read);
//!     while let Some(event) = reader.poll_event() {
//!         match event {
//!             Ok(ResponseEvent::Head(head)) => {
//!                 assert_eq!(head.status, 200);
//!                 assert_eq!(head.content_type(), Some("application/json"));
//!             }
//!             Ok(ResponseEvent::Body(bytes)) => body.extend_from_slice(&bytes),
//!             Ok(ResponseEvent::End) => assert_eq!(body, b"{}"),
//!             Ok(_) => {}
//!             Err(e) => panic!("{e}"),
//!         }
//!     }
//! }
//! assert!(reader.is_done());
//! ```

mod chunked;
mod error;
mod gzip;
mod head;
mod request;
mod response;

pub use chunked::{ChunkProgress, Chunked};
pub use error::{Error, HeadError};
pub use head::ResponseHead;
pub(crate) use request::is_credential_header;
pub use request::{Method, RedactedHeaders, RequestHead};
pub use response::{Config, ResponseEvent, ResponseReader};

#[cfg(test)]
mod tests;
