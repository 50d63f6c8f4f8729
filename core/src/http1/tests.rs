//! Tests of the request writer and the response reader.

use std::io::Write as _;

use bytes::Bytes;
use flate2::Compression;
use flate2::write::GzEncoder;
use proptest::prelude::*;

use super::*;

type Transcript = Vec<Result<ResponseEvent, Error>>;

/// Feed `parts` (then EOF if `eof`), polling after each call; merge adjacent bodies.
fn transcript(config: Config, parts: &[&[u8]], eof: bool) -> Transcript {
    let mut reader = ResponseReader::new(config);
    let mut out: Transcript = Vec::new();
    let drain = |reader: &mut ResponseReader, out: &mut Transcript| {
        while let Some(event) = reader.poll_event() {
            match (out.last_mut(), event) {
                (Some(Ok(ResponseEvent::Body(prev))), Ok(ResponseEvent::Body(more))) => {
                    assert!(!more.is_empty(), "empty Body event");
                    *prev = [prev.as_ref(), more.as_ref()].concat().into();
                }
                (_, event) => out.push(event),
            }
        }
        assert!(
            reader.poll_event().is_none(),
            "poll after None must stay None"
        );
    };
    for part in parts {
        reader.handle_bytes(part);
        drain(&mut reader, &mut out);
    }
    if eof {
        reader.handle_eof();
        drain(&mut reader, &mut out);
    }
    out
}

/// Assert that `input` gives `expected` whole, split at every position, and byte by byte.
fn assert_all_splits(config: Config, input: &[u8], eof: bool, expected: &Transcript) {
    assert_eq!(&transcript(config, &[input], eof), expected, "whole input");
    for i in 0..=input.len() {
        let (a, b) = input.split_at(i);
        assert_eq!(&transcript(config, &[a, b], eof), expected, "split at {i}");
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(&transcript(config, &bytes, eof), expected, "byte by byte");
}

fn head(status: u16, reason: &str, headers: &[(&str, &str)]) -> Result<ResponseEvent, Error> {
    Ok(ResponseEvent::Head(ResponseHead {
        status,
        reason: reason.into(),
        headers: headers.iter().map(|&(n, v)| (n.into(), v.into())).collect(),
    }))
}

fn body(bytes: &[u8]) -> Result<ResponseEvent, Error> {
    Ok(ResponseEvent::Body(Bytes::copy_from_slice(bytes)))
}

const END: Result<ResponseEvent, Error> = Ok(ResponseEvent::End);

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    let _ = encoder.write_all(data);
    encoder.finish().unwrap_or_default()
}

fn limited(max_body_len: usize) -> Config {
    Config {
        max_body_len: Some(max_body_len),
        ..Config::default()
    }
}

/// Encode `data` as chunks of `size` bytes.
fn chunked(data: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in data.chunks(size) {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

// ---- framings -------------------------------------------------------------------------

#[test]
fn content_length_body() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"x\"\r\n\r\nhello";
    let expected = vec![
        head(200, "OK", &[("Content-Length", "5"), ("ETag", "\"x\"")]),
        body(b"hello"),
        END,
    ];
    assert_all_splits(Config::default(), input, false, &expected);
    assert_all_splits(Config::default(), input, true, &expected);
}

#[test]
fn zero_content_length_ends_at_once() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    assert_all_splits(
        Config::default(),
        input,
        false,
        &vec![head(200, "OK", &[("Content-Length", "0")]), END],
    );
}

#[test]
fn chunked_with_extensions_and_trailers() {
    let input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
        5;name=value\r\nhello\r\n\
        00A ; a=b;c\r\n, world!!!\r\n\
        0;last\r\nX-Trailer: yes\r\nOther: 1\r\n\r\n";
    let expected = vec![
        head(200, "OK", &[("Transfer-Encoding", "chunked")]),
        body(b"hello, world!!!"),
        END,
    ];
    assert_all_splits(Config::default(), input, false, &expected);
}

#[test]
fn chunked_accepts_bare_lf_and_uppercase_hex() {
    let input = b"HTTP/1.1 200 OK\nTransfer-Encoding: Chunked\n\nA\n0123456789\n0\n\n";
    let expected = vec![
        head(200, "OK", &[("Transfer-Encoding", "Chunked")]),
        body(b"0123456789"),
        END,
    ];
    assert_all_splits(Config::default(), input, false, &expected);
}

#[test]
fn close_delimited_body_ends_at_eof() {
    let input = b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\ndata: 2\n\n";
    let mut expected = vec![
        head(200, "OK", &[("Content-Type", "text/event-stream")]),
        body(b"data: 1\n\ndata: 2\n\n"),
    ];
    assert_all_splits(Config::default(), input, false, &expected);
    expected.push(END);
    assert_all_splits(Config::default(), input, true, &expected);
}

#[test]
fn no_body_for_204_and_304() {
    let input = b"HTTP/1.1 204 No Content\r\n\r\n";
    assert_all_splits(
        Config::default(),
        input,
        false,
        &vec![head(204, "No Content", &[]), END],
    );
    // A 304 carries the Content-Length of the full representation but no body.
    let input = b"HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\nContent-Encoding: br\r\n\r\n";
    let expected = vec![
        head(
            304,
            "Not Modified",
            &[("Content-Length", "100"), ("Content-Encoding", "br")],
        ),
        END,
    ];
    assert_all_splits(Config::default(), input, false, &expected);
}

#[test]
fn informational_heads_are_skipped() {
    let input = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n\
        HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let expected = vec![
        head(200, "OK", &[("Content-Length", "2")]),
        body(b"ok"),
        END,
    ];
    assert_all_splits(Config::default(), input, false, &expected);
}

#[test]
fn leading_empty_lines_are_skipped() {
    let input = b"\r\n\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx";
    let expected = vec![head(200, "OK", &[("Content-Length", "1")]), body(b"x"), END];
    assert_all_splits(Config::default(), input, false, &expected);
    // Endless empty lines are consumed, not buffered or rescanned.
    let mut reader = ResponseReader::new(Config {
        max_head_len: 16,
        ..Config::default()
    });
    for _ in 0..10_000 {
        reader.handle_bytes(b"\r\n");
        assert_eq!(reader.poll_event(), None);
    }
}

#[test]
fn gzip_with_content_length() {
    let data = b"{\"flags\":{}}".repeat(200);
    let gz = gzip(&data);
    let mut input = format!(
        "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n",
        gz.len()
    )
    .into_bytes();
    input.extend_from_slice(&gz);
    let cl = gz.len().to_string();
    let expected = vec![
        head(
            200,
            "OK",
            &[("Content-Encoding", "gzip"), ("Content-Length", &cl)],
        ),
        body(&data),
        END,
    ];
    assert_all_splits(limited(1 << 20), &input, false, &expected);
}

#[test]
fn gzip_with_chunked() {
    let data = b"event: put\ndata: {}\n\n".repeat(300);
    let gz = gzip(&data);
    let mut input =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Encoding: x-gzip\r\n\r\n"
            .to_vec();
    input.extend_from_slice(&chunked(&gz, 7));
    let expected = vec![
        head(
            200,
            "OK",
            &[
                ("Transfer-Encoding", "chunked"),
                ("Content-Encoding", "x-gzip"),
            ],
        ),
        body(&data),
        END,
    ];
    assert_all_splits(Config::default(), &input, false, &expected);
}

#[test]
fn gzip_members_are_concatenated() {
    let mut gz = gzip(b"first ");
    gz.extend_from_slice(&gzip(b"second"));
    let mut input = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n".to_vec();
    input.extend_from_slice(&gz);
    let expected = vec![
        head(200, "OK", &[("Content-Encoding", "gzip")]),
        body(b"first second"),
        END,
    ];
    assert_all_splits(Config::default(), &input, true, &expected);
}

#[test]
fn gzip_header_fields_are_skipped() {
    let data = b"payload";
    let mut encoder = flate2::GzBuilder::new()
        .filename("f.json")
        .comment("c")
        .extra(vec![1, 2, 3])
        .write(Vec::new(), Compression::best());
    let _ = encoder.write_all(data);
    let gz = encoder.finish().unwrap_or_default();
    let mut input = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n".to_vec();
    input.extend_from_slice(&gz);
    let expected = vec![
        head(200, "OK", &[("Content-Encoding", "gzip")]),
        body(data),
        END,
    ];
    assert_all_splits(Config::default(), &input, true, &expected);
}

#[test]
fn empty_gzip_body_is_accepted() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n";
    let expected = vec![
        head(
            200,
            "OK",
            &[("Content-Encoding", "gzip"), ("Content-Length", "0")],
        ),
        END,
    ];
    assert_all_splits(Config::default(), input, false, &expected);
}

#[test]
fn gzip_passes_through_when_decoding_is_off() {
    let gz = gzip(b"abc");
    let mut input = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n".to_vec();
    input.extend_from_slice(&gz);
    let config = Config {
        decode_gzip: false,
        ..Config::default()
    };
    let expected = vec![
        head(200, "OK", &[("Content-Encoding", "gzip")]),
        body(&gz),
        END,
    ];
    assert_all_splits(config, &input, true, &expected);
}

#[test]
fn corrupt_gzip_is_an_error() {
    let mut gz = gzip(b"hello hello hello");
    let n = gz.len();
    if let Some(crc) = gz.get_mut(n - 8) {
        *crc ^= 1;
    }
    let mut input = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n".to_vec();
    input.extend_from_slice(&gz);
    let expected = vec![
        head(200, "OK", &[("Content-Encoding", "gzip")]),
        body(b"hello hello hello"),
        Err(Error::Gzip),
    ];
    assert_all_splits(Config::default(), &input, true, &expected);

    let input = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\nnot gzip";
    let expected = vec![
        head(200, "OK", &[("Content-Encoding", "gzip")]),
        Err(Error::Gzip),
    ];
    assert_all_splits(Config::default(), input, true, &expected);
}

#[test]
fn truncated_gzip_inside_complete_body_is_an_error() {
    let gz = gzip(b"hello");
    let gz = gz.get(..gz.len() - 3).unwrap_or_default();
    let mut input = format!(
        "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n\r\n",
        gz.len()
    )
    .into_bytes();
    input.extend_from_slice(gz);
    let transcript = transcript(Config::default(), &[&input], false);
    assert_eq!(transcript.last(), Some(&Err(Error::Gzip)));
    assert_all_splits(Config::default(), &input, false, &transcript);
}

#[test]
fn gzip_bomb_is_cut_off_at_the_limit() {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..10 {
        let _ = encoder.write_all(&zeros);
    }
    let gz = encoder.finish().unwrap_or_default();
    assert!(gz.len() < 20_000, "bomb is {} bytes", gz.len());
    let mut input = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n".to_vec();
    input.extend_from_slice(&gz);

    let limit = 1 << 20;
    let mut reader = ResponseReader::new(limited(limit));
    reader.handle_bytes(&input);
    let mut delivered = 0;
    let mut events = 0;
    while let Some(event) = reader.poll_event() {
        events += 1;
        match event {
            Ok(ResponseEvent::Head(_)) => {}
            // Every step decodes into one bounded scratch buffer.
            Ok(ResponseEvent::Body(bytes)) => {
                assert!(bytes.len() <= gzip::SCRATCH_LEN);
                delivered += bytes.len();
            }
            other => {
                assert_eq!(other, Err(Error::BodyTooLarge { limit }));
                break;
            }
        }
    }
    assert_eq!(delivered, limit);
    assert_eq!(reader.poll_event(), None);
    assert!(events > 2);
}

// ---- errors ---------------------------------------------------------------------------

#[test]
fn malformed_heads() {
    let cases: [(&[u8], Error); 5] = [
        (
            b"HTTP/2.0 200 OK\r\n\r\n",
            Error::MalformedHead(HeadError::Version),
        ),
        (
            b"HTTP/1.1 2x0 OK\r\n\r\n",
            Error::MalformedHead(HeadError::Status),
        ),
        (
            b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
            Error::MalformedHead(HeadError::HeaderName),
        ),
        (
            b"HTTP/1.1 200 OK\r\nA: \x01\r\n\r\n",
            Error::MalformedHead(HeadError::HeaderValue),
        ),
        (
            b"HTTP/1.1 200 OK\r\nX: y\r\n\rZ\r\n\r\n",
            Error::MalformedHead(HeadError::NewLine),
        ),
    ];
    for (input, error) in cases {
        assert_all_splits(Config::default(), input, true, &vec![Err(error)]);
    }
}

#[test]
fn head_too_large() {
    let config = Config {
        max_head_len: 32,
        ..Config::default()
    };
    let input = b"HTTP/1.1 200 OK\r\nX-Long: 0123456789abcdef\r\n\r\n";
    let expected = vec![Err(Error::HeadTooLarge { limit: 32 })];
    assert_all_splits(config, input, false, &expected);
    assert_all_splits(config, input, true, &expected);
    // A head of exactly the limit is fine.
    let config = Config {
        max_head_len: 19,
        ..Config::default()
    };
    assert_all_splits(
        config,
        b"HTTP/1.1 204 OK\r\n\r\n",
        false,
        &vec![head(204, "OK", &[]), END],
    );
}

#[test]
fn too_many_headers() {
    let config = Config {
        max_headers: 2,
        ..Config::default()
    };
    let ok = b"HTTP/1.1 204 OK\r\nA: 1\r\nB: 2\r\n\r\n";
    assert_all_splits(
        config,
        ok,
        false,
        &vec![head(204, "OK", &[("A", "1"), ("B", "2")]), END],
    );
    let input = b"HTTP/1.1 204 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    assert_all_splits(
        config,
        input,
        false,
        &vec![Err(Error::TooManyHeaders { limit: 2 })],
    );
}

#[test]
fn invalid_content_length() {
    for value in ["abc", "+5", "-1", "5, 6", "", "99999999999999999999999"] {
        let input = format!("HTTP/1.1 200 OK\r\nContent-Length: {value}\r\n\r\n");
        let t = transcript(Config::default(), &[input.as_bytes()], false);
        assert_eq!(
            t.get(1),
            Some(&Err(Error::InvalidContentLength)),
            "{value:?}"
        );
        assert_eq!(t.len(), 2);
    }
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n";
    assert_eq!(
        transcript(Config::default(), &[input], false).get(1),
        Some(&Err(Error::InvalidContentLength))
    );
    // Identical repeated values are one value.
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\nabc";
    assert_eq!(
        transcript(Config::default(), &[input], false).get(1),
        Some(&body(b"abc"))
    );
}

#[test]
fn unsupported_codings() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 1\r\n\r\nx";
    let expected = vec![
        head(
            200,
            "OK",
            &[("Content-Encoding", "br"), ("Content-Length", "1")],
        ),
        Err(Error::UnsupportedEncoding),
    ];
    assert_all_splits(Config::default(), input, false, &expected);
    let input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
    let t = transcript(Config::default(), &[input], false);
    assert_eq!(t.get(1), Some(&Err(Error::UnsupportedTransferEncoding)));
    let input = b"HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\nContent-Length: 1\r\n\r\nx";
    assert_eq!(
        transcript(Config::default(), &[input], false).get(1),
        Some(&body(b"x"))
    );
}

#[test]
fn bad_chunks() {
    let prefix = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
    let ten_ext = format!("1;{}\r\nx\r\n", "e".repeat(20));
    let cases: [(&[u8], Error); 8] = [
        (b"zz\r\n", Error::InvalidChunkSize),
        (b"\r\n", Error::InvalidChunkSize),
        (b"5 x\r\n", Error::InvalidChunkSize),
        (b"00000000000000001\r\n", Error::ChunkSizeTooLarge),
        (b"3\r\nabcX", Error::MalformedChunk),
        (b"3\rX", Error::MalformedChunk),
        (b"0\r\nT: x\r\n\rX", Error::MalformedChunk),
        (
            ten_ext.as_bytes(),
            Error::ChunkExtensionTooLarge { limit: 10 },
        ),
    ];
    let config = Config {
        max_trailer_len: 10,
        ..Config::default()
    };
    for (chunks, error) in cases {
        let input = [&prefix[..], chunks].concat();
        let t = transcript(config, &[&input], true);
        assert_eq!(
            t.last(),
            Some(&Err(error.clone())),
            "{:?}",
            String::from_utf8_lossy(chunks)
        );
        assert_all_splits(config, &input, true, &t);
    }
    let input = [&prefix[..], b"0\r\nTrailer: 0123456789\r\n\r\n"].concat();
    let t = transcript(config, &[&input], false);
    assert_eq!(t.last(), Some(&Err(Error::TrailerTooLarge { limit: 10 })));
}

#[test]
fn chunk_size_digit_limit_counts_leading_zeros() {
    let config = Config {
        max_chunk_size_digits: 3,
        ..Config::default()
    };
    let input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n001\r\nx\r\n0000\r\n\r\n";
    let t = transcript(config, &[input], false);
    assert_eq!(t.get(1), Some(&body(b"x")));
    assert_eq!(t.get(2), Some(&Err(Error::ChunkSizeTooLarge)));
}

#[test]
fn body_too_large() {
    let limit = 4;
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    let expected = vec![
        head(200, "OK", &[("Content-Length", "5")]),
        Err(Error::BodyTooLarge { limit }),
    ];
    assert_all_splits(limited(limit), input, false, &expected);

    let input =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    let expected = vec![
        head(200, "OK", &[("Transfer-Encoding", "chunked")]),
        body(b"abc"),
        Err(Error::BodyTooLarge { limit }),
    ];
    assert_all_splits(limited(limit), input, false, &expected);

    let input = b"HTTP/1.1 200 OK\r\n\r\nhello";
    let expected = vec![
        head(200, "OK", &[]),
        body(b"hell"),
        Err(Error::BodyTooLarge { limit }),
    ];
    assert_all_splits(limited(limit), input, false, &expected);
    // Exactly the limit is fine.
    let input = b"HTTP/1.1 200 OK\r\n\r\nhell";
    let expected = vec![head(200, "OK", &[]), body(b"hell"), END];
    assert_all_splits(limited(limit), input, true, &expected);

    let gz = gzip(b"hello");
    let mut input = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n".to_vec();
    input.extend_from_slice(&gz);
    let expected = vec![
        head(200, "OK", &[("Content-Encoding", "gzip")]),
        body(b"hell"),
        Err(Error::BodyTooLarge { limit }),
    ];
    assert_all_splits(limited(limit), &input, true, &expected);
}

#[test]
fn truncated_responses_are_unexpected_eof() {
    let cases: [&[u8]; 5] = [
        b"",
        b"HTTP/1.1 200 OK\r\nContent-Le",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nTrailer: x\r\n",
    ];
    for input in cases {
        let t = transcript(Config::default(), &[input], true);
        assert_eq!(
            t.last(),
            Some(&Err(Error::UnexpectedEof)),
            "{:?}",
            String::from_utf8_lossy(input)
        );
        assert_all_splits(Config::default(), input, true, &t);
    }
}

#[test]
fn errors_are_sticky_and_come_after_earlier_events() {
    let mut reader = ResponseReader::new(Config::default());
    reader.handle_bytes(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokzz");
    assert!(matches!(
        reader.poll_event(),
        Some(Ok(ResponseEvent::Head(_)))
    ));
    assert_eq!(reader.poll_event(), Some(body(b"ok")));
    assert_eq!(reader.poll_event(), Some(Err(Error::MalformedChunk)));
    assert_eq!(reader.poll_event(), None);
    assert!(reader.is_done());
    reader.handle_bytes(b"\r\n0\r\n\r\n");
    reader.handle_eof();
    assert_eq!(reader.poll_event(), None);
}

#[test]
fn bytes_after_the_end_are_ignored() {
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 500 Oops\r\n\r\n";
    let expected = vec![
        head(200, "OK", &[("Content-Length", "2")]),
        body(b"ok"),
        END,
    ];
    assert_all_splits(Config::default(), input, true, &expected);
}

#[test]
fn header_lookup_is_case_insensitive() {
    let head = ResponseHead {
        status: 200,
        reason: String::new(),
        headers: vec![
            ("content-TYPE".into(), "text/event-stream".into()),
            ("Etag".into(), "\"1\"".into()),
            ("LOCATION".into(), "/x".into()),
            ("x-a".into(), "1".into()),
            ("X-A".into(), "2".into()),
        ],
    };
    assert_eq!(head.header("X-a"), Some("1"));
    assert_eq!(head.headers_named("x-A").collect::<Vec<_>>(), ["1", "2"]);
    assert_eq!(head.content_type(), Some("text/event-stream"));
    assert_eq!(head.etag(), Some("\"1\""));
    assert_eq!(head.location(), Some("/x"));
    assert_eq!(head.header("missing"), None);
}

#[test]
fn header_values_are_lossy_utf8() {
    let input = b"HTTP/1.1 204 OK\r\nX: caf\xe9\r\n\r\n";
    assert_eq!(
        transcript(Config::default(), &[input], false),
        vec![head(204, "OK", &[("X", "caf\u{fffd}")]), END]
    );
}

// ---- requests -------------------------------------------------------------------------

#[test]
fn request_without_body() {
    let request = RequestHead {
        method: Method::Get,
        target: "/all?filter=x".into(),
        host: "stream.example.com:8443".into(),
        headers: vec![
            ("Authorization".into(), "sdk-1".into()),
            ("Accept".into(), "text/event-stream".into()),
        ],
    };
    let mut out = b"prefix".to_vec();
    request.write_to(None, &mut out);
    assert_eq!(
        out,
        b"prefixGET /all?filter=x HTTP/1.1\r\nHost: stream.example.com:8443\r\n\
          Authorization: sdk-1\r\nAccept: text/event-stream\r\n\r\n"
    );
}

#[test]
fn request_with_body() {
    for (method, name) in [
        (Method::Post, "POST"),
        (Method::Report, "REPORT"),
        (Method::Get, "GET"),
    ] {
        let request = RequestHead {
            method,
            target: "/e".into(),
            host: "h".into(),
            headers: vec![],
        };
        let mut out = Vec::new();
        request.write_to(Some(b"{\"k\":1}"), &mut out);
        let expected =
            format!("{name} /e HTTP/1.1\r\nHost: h\r\nContent-Length: 7\r\n\r\n{{\"k\":1}}");
        assert_eq!(out, expected.as_bytes());
        assert_eq!(method.as_str(), name);
    }
    let request = RequestHead {
        method: Method::Post,
        target: "/".into(),
        host: "h".into(),
        headers: vec![],
    };
    let mut out = Vec::new();
    request.write_to(Some(b""), &mut out);
    assert_eq!(
        out,
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"
    );
    let mut out = Vec::new();
    request.write_to(Some(&[b'x'; 12345]), &mut out);
    assert!(out.starts_with(b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 12345\r\n\r\nxx"));
}

#[test]
fn request_fields_cannot_inject_lines() {
    let request = RequestHead {
        method: Method::Get,
        target: "/a\r\nX: y".into(),
        host: "h\n".into(),
        headers: vec![("K".into(), "v\r\nEvil: 1\0".into())],
    };
    let mut out = Vec::new();
    request.write_to(None, &mut out);
    assert_eq!(
        out,
        b"GET /a  X: y HTTP/1.1\r\nHost: h \r\nK: v  Evil: 1 \r\n\r\n"
    );
}

// ---- properties -----------------------------------------------------------------------

/// Sample responses covering every framing; the property splits them at random points.
fn samples() -> Vec<(Vec<u8>, bool)> {
    let gz = gzip(&b"0123456789abcdef".repeat(100));
    let mut gz_chunked =
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\
        Content-Encoding: gzip\r\n\r\n"
            .to_vec();
    gz_chunked.extend_from_slice(&chunked(&gz, 13));
    let mut gz_close = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n\r\n".to_vec();
    gz_close.extend_from_slice(&gz);
    vec![
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec(), false),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nT: 1\r\n\r\n".to_vec(), false),
        (b"HTTP/1.1 200 OK\r\n\r\nstream stream stream".to_vec(), true),
        (gz_chunked, false),
        (gz_close, true),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX".to_vec(), true),
    ]
}

proptest! {
    #[test]
    fn random_splits_never_change_the_transcript(
        sample in 0usize..6,
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..12),
        limit in prop::option::of(0usize..2000),
    ) {
        let (input, eof) = samples().swap_remove(sample);
        let config = Config { max_body_len: limit, ..Config::default() };
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(input.len() + 1)).collect();
        points.sort_unstable();
        let mut parts = Vec::new();
        let mut start = 0;
        for p in points {
            parts.push(input.get(start..p).unwrap_or_default());
            start = p;
        }
        parts.push(input.get(start..).unwrap_or_default());
        prop_assert_eq!(transcript(config, &parts, eof), transcript(config, &[&input], eof));
    }

    #[test]
    fn arbitrary_input_is_split_invariant(input in proptest::collection::vec(any::<u8>(), 0..300), cut in any::<prop::sample::Index>()) {
        let mut input = input;
        input.splice(0..0, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".iter().copied());
        let (a, b) = input.split_at(cut.index(input.len() + 1));
        let config = Config { max_body_len: Some(100), ..Config::default() };
        prop_assert_eq!(transcript(config, &[a, b], true), transcript(config, &[&input], true));
    }
}

/// Fuzz regression: corrupt deflate data after output split at a point the decoder
/// cannot see. miniz_oxide discards its undelivered window on a data error, so the number
/// of bytes delivered before `Error::Gzip` depends on the split; the events around them,
/// and the fact that one body is a prefix of the other, do not.
#[test]
fn corrupt_deflate_data_errors_the_same_at_any_split() {
    let input = include_bytes!("testdata/fuzz-gzip-split.bin");
    let config = Config {
        max_head_len: 1024,
        max_headers: 16,
        max_body_len: Some(64 * 1024),
        ..Config::default()
    };
    let strip = |t: &Transcript| -> (Transcript, Vec<u8>) {
        let mut body = Vec::new();
        let mut rest = Vec::new();
        for event in t {
            match event {
                Ok(ResponseEvent::Body(b)) => body.extend_from_slice(b),
                other => rest.push(other.clone()),
            }
        }
        (rest, body)
    };
    let (whole, whole_body) = strip(&transcript(config, &[input], true));
    assert_eq!(whole.last(), Some(&Err(Error::Gzip)));
    for split in (0..=input.len()).step_by(7) {
        let (a, b) = input.split_at(split);
        let (events, body) = strip(&transcript(config, &[a, b], true));
        assert_eq!(events, whole, "split at {split}");
        assert!(
            whole_body.starts_with(&body) || body.starts_with(&whole_body),
            "split at {split}"
        );
    }
}
