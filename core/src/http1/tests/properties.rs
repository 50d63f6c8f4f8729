//! Splitting properties over sample responses, and fuzz regressions.

use super::*;

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
    let input = include_bytes!("../testdata/fuzz-gzip-split.bin");
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
