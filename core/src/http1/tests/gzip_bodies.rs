//! `Content-Encoding: gzip`: over each framing, members, header fields, pass-through,
//! corrupt and truncated data, and the decompressed size limit.

use super::*;

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
