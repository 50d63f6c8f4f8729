//! Malformed and oversized responses, sticky errors, and header lookup.

use super::*;

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
