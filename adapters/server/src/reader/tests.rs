//! Request reading: heads, `Content-Length` and chunked bodies, limits, split reads.

use std::io::{self, Read};

use super::*;

/// A stream that hands out its bytes in pieces of at most `step` bytes per read.
struct Trickle<'a> {
    bytes: &'a [u8],
    step: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.bytes.len().min(self.step).min(out.len());
        out[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

/// Read every request of `raw`, split into reads of `step` bytes, until an error.
fn read_all(raw: &[u8], step: usize, max_body: usize) -> (Vec<Request>, ReadError) {
    let mut reader = RequestReader::new(max_body);
    let mut src = Trickle { bytes: raw, step };
    let mut reqs = Vec::new();
    loop {
        match reader.read(&mut src) {
            Ok(req) => reqs.push(req),
            Err(e) => return (reqs, e),
        }
    }
}

fn status(err: &ReadError) -> Option<u16> {
    match err {
        ReadError::Bad(s) => Some(*s),
        _ => None,
    }
}

#[test]
fn reads_pipelined_requests() {
    let raw = b"GET /all?filter=x HTTP/1.1\r\nHost: h\r\nAuthorization: k\r\n\r\nGET /sdk/latest-all HTTP/1.0\r\nAccept-Encoding: br, gzip;q=1\r\n\r\n";
    let mut r = RequestReader::default();
    let mut src = &raw[..];
    let a = r.read(&mut src).unwrap();
    assert_eq!(a.path(), "/all");
    assert_eq!(a.header("AUTHORIZATION"), Some("k"));
    assert!(!a.close);
    let b = r.read(&mut src).unwrap();
    assert_eq!(b.path(), "/sdk/latest-all");
    assert!(b.close && b.accepts_gzip());
    assert!(matches!(r.read(&mut src), Err(ReadError::Eof)));
}

#[test]
fn gzip_q0_is_refused() {
    let raw = b"GET / HTTP/1.1\r\nAccept-Encoding: gzip;q=0\r\n\r\n";
    let req = RequestReader::default().read(&mut &raw[..]).unwrap();
    assert!(!req.accepts_gzip());
}

#[test]
fn bodies_are_kept_and_limited() {
    let raw = b"POST /bulk HTTP/1.1\r\nContent-Length: 5\r\n\r\n[1,2]GET /all HTTP/1.1\r\n\r\n";
    let mut r = RequestReader::new(5);
    let mut src = &raw[..];
    let a = r.read(&mut src).unwrap();
    assert_eq!((a.path(), a.body.as_slice()), ("/bulk", &b"[1,2]"[..]));
    let b = r.read(&mut src).unwrap();
    assert_eq!((b.path(), b.body.len()), ("/all", 0));
    let raw = b"POST /bulk HTTP/1.1\r\nContent-Length: 6\r\n\r\n[1,2,]";
    assert!(matches!(
        RequestReader::new(5).read(&mut &raw[..]),
        Err(ReadError::Bad(413))
    ));
}

#[test]
fn a_body_longer_than_the_head_limit_is_read() {
    let body = vec![b'x'; MAX_HEAD * 2];
    let mut raw = format!(
        "POST /bulk HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    raw.extend_from_slice(&body);
    let req = RequestReader::new(body.len()).read(&mut &raw[..]).unwrap();
    assert_eq!(req.body, body);
}

#[test]
fn garbage_is_400() {
    let raw = b"\x00\x01 nonsense\r\n\r\n";
    assert!(matches!(
        RequestReader::default().read(&mut &raw[..]),
        Err(ReadError::Bad(400))
    ));
}

#[test]
fn chunked_bodies_are_decoded_with_extensions_and_trailers() {
    let raw = b"POST /bulk HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
        3;name=value\r\n[1,\r\nA\r\n2,3,4,5,6]\r\n0\r\nX-Sum: 1\r\nX-Other: 2\r\n\r\n\
        POST /diagnostic HTTP/1.1\r\ntransfer-encoding: Chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n";
    for step in [1, 2, 3, 7, 64, raw.len()] {
        let (reqs, end) = read_all(raw, step, 1024);
        assert!(matches!(end, ReadError::Eof), "{step}: {end:?}");
        let bodies: Vec<&[u8]> = reqs.iter().map(|r| r.body.as_slice()).collect();
        assert_eq!(bodies, [&b"[1,2,3,4,5,6]"[..], b"{}"], "step {step}");
        assert!(reqs.iter().all(|r| !r.close && r.framing == Framing::None));
    }
}

#[test]
fn a_chunked_body_split_across_many_reads_is_whole() {
    let body: Vec<u8> = (0..50_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let mut raw = b"POST /bulk HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for piece in body.chunks(777) {
        raw.extend_from_slice(format!("{:X}\r\n", piece.len()).as_bytes());
        raw.extend_from_slice(piece);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\nGET /all HTTP/1.1\r\n\r\n");
    for step in [1, 5, 4096, 100_000] {
        let (reqs, end) = read_all(&raw, step, body.len());
        assert!(matches!(end, ReadError::Eof), "{end:?}");
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0].body, body, "step {step}");
        assert_eq!(reqs[1].path(), "/all");
    }
}

#[test]
fn the_limit_applies_to_the_decoded_chunked_size() {
    let fits = b"POST /bulk HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    let (reqs, _) = read_all(fits, 1, 5);
    assert_eq!(reqs[0].body, b"abcde");
    let over = b"POST /bulk HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n";
    let (reqs, end) = read_all(over, 1, 5);
    assert!(reqs.is_empty());
    assert_eq!(status(&end), Some(413));
    let huge = b"POST /bulk HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFF\r\n";
    assert_eq!(status(&read_all(huge, 3, 5).1), Some(413));
}

#[test]
fn malformed_chunks_are_400() {
    for body in [
        &b"zz\r\nab\r\n0\r\n\r\n"[..],
        b"2\r\nabc\r\n0\r\n\r\n",
        b"2\r\nab\rX0\r\n\r\n",
        b"12345678901234567\r\n",
        b"-1\r\n",
    ] {
        let mut raw = b"POST /bulk HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        raw.extend_from_slice(body);
        assert_eq!(
            status(&read_all(&raw, 1, 1 << 20).1),
            Some(400),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn chunk_metadata_is_bounded() {
    let mut raw = b"POST /bulk HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1;".to_vec();
    raw.extend(std::iter::repeat_n(b'e', MAX_CHUNK_META + 1));
    assert_eq!(status(&read_all(&raw, 4096, 1 << 20).1), Some(400));
    let mut raw = b"POST /bulk HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n".to_vec();
    for _ in 0..MAX_CHUNK_META {
        raw.extend_from_slice(b"X: 1\r\n");
    }
    assert_eq!(status(&read_all(&raw, 4096, 1 << 20).1), Some(400));
}

#[test]
fn a_body_cut_short_is_an_io_error() {
    let raw = b"POST /bulk HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab";
    assert!(matches!(read_all(raw, 2, 100).1, ReadError::Io));
    let raw = b"POST /bulk HTTP/1.1\r\nContent-Length: 5\r\n\r\nab";
    assert!(matches!(read_all(raw, 2, 100).1, ReadError::Io));
}

#[test]
fn transfer_encoding_rules() {
    let head = |extra: &str, version: &str| {
        format!("POST /bulk HTTP/{version}\r\n{extra}\r\n2\r\n[]\r\n0\r\n\r\n").into_bytes()
    };
    // Chunked wins over Content-Length, and the connection then closes.
    let (reqs, _) = read_all(
        &head(
            "Transfer-Encoding: chunked\r\nContent-Length: 100\r\n",
            "1.1",
        ),
        1,
        100,
    );
    assert_eq!((reqs[0].body.as_slice(), reqs[0].close), (&b"[]"[..], true));
    for (extra, version, want) in [
        ("Transfer-Encoding: gzip\r\n", "1.1", 400),
        ("Transfer-Encoding: chunked, identity\r\n", "1.1", 400),
        ("Transfer-Encoding: gzip, chunked\r\n", "1.1", 501),
        (
            "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
            "1.1",
            501,
        ),
        ("Transfer-Encoding: chunked\r\n", "1.0", 400),
        ("Content-Length: 2, 3\r\n", "1.1", 400),
        ("Content-Length: +2\r\n", "1.1", 400),
        ("Content-Length: 99999999999999999999999\r\n", "1.1", 413),
    ] {
        let (reqs, end) = read_all(&head(extra, version), 1, 100);
        assert!(reqs.is_empty(), "{extra}");
        assert_eq!(status(&end), Some(want), "{extra}");
    }
    let (reqs, _) = read_all(
        b"POST /bulk HTTP/1.1\r\nContent-Length: 2, 2\r\n\r\n[]",
        1,
        100,
    );
    assert_eq!(reqs[0].body, b"[]");
}

#[test]
fn connection_and_expect_headers() {
    let raw = b"POST /bulk HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n[]\
        POST /bulk HTTP/1.0\r\nExpect: 100-continue\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n[]\
        GET /all HTTP/1.1\r\nConnection: foo, close\r\n\r\n";
    let (reqs, _) = read_all(raw, 3, 100);
    let flags: Vec<(bool, bool)> = reqs.iter().map(|r| (r.expects_continue, r.close)).collect();
    assert_eq!(flags, [(true, false), (false, false), (false, true)]);
}

#[test]
fn head_and_body_are_read_in_two_steps() {
    let raw = b"POST /bulk HTTP/1.1\r\nContent-Length: 2\r\n\r\n[]";
    let mut reader = RequestReader::default();
    let mut src = &raw[..];
    let mut req = reader.read_head(&mut src).unwrap();
    assert_eq!((req.framing, req.body.len()), (Framing::Length(2), 0));
    reader.read_body(&mut src, &mut req).unwrap();
    assert_eq!(
        (req.framing, req.body.as_slice()),
        (Framing::None, &b"[]"[..])
    );
}

/// A non-blocking source: "nothing now" before every piece of at most `step` bytes.
struct NonBlocking<'a> {
    bytes: &'a [u8],
    step: usize,
    blocked: bool,
}

impl Read for NonBlocking<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if !self.blocked && !self.bytes.is_empty() {
            self.blocked = true;
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.blocked = false;
        let n = self.bytes.len().min(self.step).min(out.len());
        out[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

#[test]
fn a_non_blocking_source_resumes_heads_and_bodies_where_they_stopped() {
    let raw = b"POST /bulk HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\nPOST /diagnostic HTTP/1.1\r\nContent-Length: 4\r\n\r\n{}{}GET /all HTTP/1.1\r\n\r\n";
    for step in [1, 2, 5, 64] {
        let mut reader = RequestReader::new(1024);
        let mut src = NonBlocking {
            bytes: raw,
            step,
            blocked: false,
        };
        let mut bodies = Vec::new();
        let mut pending = 0;
        loop {
            let mut req = match reader.read_head(&mut src) {
                Ok(req) => req,
                Err(ReadError::Pending) => {
                    pending += 1;
                    continue;
                }
                Err(ReadError::Eof) => break,
                Err(e) => panic!("{e:?}"),
            };
            loop {
                match reader.read_body(&mut src, &mut req) {
                    Ok(()) => break,
                    Err(ReadError::Pending) => pending += 1,
                    Err(e) => panic!("{e:?}"),
                }
            }
            bodies.push((req.path().to_owned(), req.body));
        }
        assert!(pending > 0, "step {step}");
        assert_eq!(
            bodies,
            [
                ("/bulk".to_owned(), b"abcde".to_vec()),
                ("/diagnostic".to_owned(), b"{}{}".to_vec()),
                ("/all".to_owned(), Vec::new()),
            ],
            "step {step}"
        );
    }
}
