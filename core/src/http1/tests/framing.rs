//! Body framings: `Content-Length`, chunked, close-delimited, no body; heads skipped
//! before the response.

use super::*;

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
