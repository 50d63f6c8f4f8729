//! The request reader as `cargo fuzz` drives it (feature `fuzzing`, for `fuzz/` only): a
//! connection's bytes, arriving in arbitrary pieces (and a non-blocking socket's
//! "nothing now" between them), read request after request.

use std::io::{self, Read};

use crate::reader::{ReadError, RequestReader};

/// The bytes of `data`, handed out in pieces of the sizes `splits` cycles through.
struct Pieces<'a> {
    data: &'a [u8],
    splits: &'a [u8],
    next: usize,
    /// The last read said "nothing now": the next one gives bytes.
    blocked: bool,
}

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let size = match self.splits {
            [] => self.data.len(),
            s => usize::from(s[self.next % s.len()]),
        };
        self.next += 1;
        // A split of 0: the socket has nothing now (the request loop's case), once.
        if size == 0 && !self.blocked && !self.data.is_empty() {
            self.blocked = true;
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.blocked = false;
        let size = size.max(1);
        let n = size.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// What reading `data` (split by `splits`) with a body limit of `max_body` gave: the
/// bodies of the requests read, and the status that ended the connection, if any.
/// Checks the reader's bounds on the way: a body never exceeds `max_body`, and the
/// reader never loops without progress.
pub fn read_requests(data: &[u8], splits: &[u8], max_body: usize) -> (Vec<usize>, Option<u16>) {
    let mut reader = RequestReader::new(max_body);
    let mut input = Pieces {
        data,
        splits,
        next: 0,
        blocked: false,
    };
    let mut bodies = Vec::new();
    // Every request takes at least one byte of its head; a `Pending` is followed by a
    // read that gives bytes, so there are no more of them than bytes.
    let mut pending = 0usize;
    for _ in 0..=data.len() {
        let mut req = loop {
            match reader.read_head(&mut input) {
                Ok(req) => break req,
                Err(ReadError::Pending) => pending += 1,
                Err(ReadError::Bad(status)) => return (bodies, Some(status)),
                Err(ReadError::Eof | ReadError::Io) => return (bodies, None),
            }
            assert!(pending <= data.len() + 1, "Pending without progress");
        };
        loop {
            match reader.read_body(&mut input, &mut req) {
                Ok(()) => {
                    assert!(req.body.len() <= max_body, "a body past the limit");
                    bodies.push(req.body.len());
                    break;
                }
                Err(ReadError::Pending) => pending += 1,
                Err(ReadError::Bad(status)) => return (bodies, Some(status)),
                Err(ReadError::Eof | ReadError::Io) => return (bodies, None),
            }
            assert!(pending <= data.len() + 1, "Pending without progress");
        }
    }
    panic!("more requests than bytes");
}

/// A client-side or mobile request's path and body as the server reads them: which
/// endpoint the path is (`None`: not one), and for those that carry a context (in the
/// path as base64, or the body as JSON), the context read from them — its canonical key
/// — or the message of the `400` it gets.
pub fn client_side_request(path: &str, body: &[u8]) -> Option<Option<Result<String, String>>> {
    use crate::client_side::path::{What, classify, context};
    let route = classify(path)?;
    let ctx = match route.what {
        What::Poll(ctx) | What::Stream(ctx) => ctx,
        _ => return Some(None),
    };
    let read = context(ctx, body).map(|c| c.canonical_key().to_owned());
    Some(Some(read))
}

/// The base64 reading of client-side paths (either alphabet, padded or not).
pub fn client_side_base64(text: &str) -> Option<Vec<u8>> {
    crate::client_side::path::base64_decode(text)
}
