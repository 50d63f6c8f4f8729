//! The request reader as `cargo fuzz` drives it (feature `fuzzing`, for `fuzz/` only): a
//! connection's bytes, arriving in arbitrary pieces, read request after request.

use std::io::{self, Read};

use crate::reader::{ReadError, RequestReader};

/// The bytes of `data`, handed out in pieces of the sizes `splits` cycles through.
struct Pieces<'a> {
    data: &'a [u8],
    splits: &'a [u8],
    next: usize,
}

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let size = match self.splits {
            [] => self.data.len(),
            s => usize::from(s[self.next % s.len()]).max(1),
        };
        self.next += 1;
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
    };
    let mut bodies = Vec::new();
    // Every request takes at least one byte of its head.
    for _ in 0..=data.len() {
        let mut req = match reader.read_head(&mut input) {
            Ok(req) => req,
            Err(ReadError::Bad(status)) => return (bodies, Some(status)),
            Err(ReadError::Eof | ReadError::Io | ReadError::Pending) => return (bodies, None),
        };
        match reader.read_body(&mut input, &mut req) {
            Ok(()) => {
                assert!(req.body.len() <= max_body, "a body past the limit");
                bodies.push(req.body.len());
            }
            Err(ReadError::Bad(status)) => return (bodies, Some(status)),
            Err(ReadError::Eof | ReadError::Io | ReadError::Pending) => return (bodies, None),
        }
    }
    panic!("more requests than bytes");
}
