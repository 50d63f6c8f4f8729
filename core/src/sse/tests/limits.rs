//! Buffer limits, sticky errors, and large or many events (Part E 14).

use super::*;

// ---- Limits --------------------------------------------------------------------------

#[test]
fn line_at_the_limit_is_accepted() {
    let (items, _) = run_with(small(8, 100), [&b"data: ab\n\n"[..]]);
    assert_eq!(items, vec![message("ab")]);
}

#[test]
fn line_longer_than_limit_is_an_error_after_earlier_items() {
    let stream = b"data: a\n\n:c\ndata: abc\n\ndata: late\n\n";
    for at in 0..=stream.len() {
        let (a, b) = stream.split_at(at);
        let (items, _) = run_with(small(8, 100), [a, b]);
        assert_eq!(
            items,
            vec![
                message("a"),
                comment("c"),
                Err(Error::LineTooLong { limit: 8 })
            ],
            "split at {at}"
        );
    }
}

#[test]
fn unterminated_too_long_line_fails_before_it_ends() {
    let mut parser = Parser::new(small(8, 100));
    parser.handle_bytes(b"data: abc");
    assert_eq!(
        parser.poll_item(),
        Some(Err(Error::LineTooLong { limit: 8 }))
    );
    assert_eq!(parser.poll_item(), None);
}

#[test]
fn event_larger_than_limit_is_an_error() {
    // "abc\n" + "de\n" = 7 bytes in the spec's data buffer.
    let (items, _) = run_with(small(100, 7), [&b"data: abc\ndata: de\n\n"[..]]);
    assert_eq!(items, vec![message("abc\nde")]);
    let (items, _) = run_with(small(100, 6), [&b"data: abc\ndata: de\n\n"[..]]);
    assert_eq!(items, vec![Err(Error::EventTooLarge { limit: 6 })]);
}

#[test]
fn event_larger_than_limit_in_one_buffered_line_is_an_error() {
    let (items, _) = run_with(small(100, 3), [&b"data: a"[..], b"bc\n\n"]);
    assert_eq!(items, vec![Err(Error::EventTooLarge { limit: 3 })]);
}

#[test]
fn held_back_bom_bytes_over_the_limit_fail_once() {
    // The held-back byte alone is over the limit; the rest of the read is ignored.
    let expected = vec![Err(Error::LineTooLong { limit: 0 })];
    assert_eq!(run_with(small(0, 0), [&b"\xEF"[..], b":"]).0, expected);
    assert_eq!(run_shared(small(0, 0), [&b"\xEF"[..], b":"]).0, expected);
}

#[test]
fn error_is_sticky_until_reset() {
    let mut parser = Parser::new(small(4, 100));
    parser.handle_bytes(b":abcdef\n");
    assert_eq!(
        parser.poll_item(),
        Some(Err(Error::LineTooLong { limit: 4 }))
    );
    parser.handle_bytes(b"data\n\n");
    parser.handle_eof();
    assert_eq!(parser.poll_item(), None);
    parser.reset();
    parser.handle_bytes(b"data\n\n");
    assert_eq!(parser.poll_item(), Some(message("")));
}

// ---- Size and volume (Part E 14) -----------------------------------------------------------

#[test]
fn line_longer_than_64_kib() {
    let value = "x".repeat(70 * 1024);
    let stream = format!("data: {value}\n\n");
    let chunks: Vec<&[u8]> = stream.as_bytes().chunks(4096).collect();
    assert_eq!(run(&chunks), vec![message(&value)]);
}

#[test]
fn hundred_events_in_one_chunk() {
    let stream: String = (0..100)
        .map(|i| format!("id: {i}\ndata: {i}\n\n"))
        .collect();
    let expected: Transcript = (0..100)
        .map(|i| event("message", &i.to_string(), &i.to_string()))
        .collect();
    assert_eq!(run(&[stream.as_bytes()]), expected);
}

#[test]
fn fourteen_mb_message_in_16_kib_reads() {
    let value = "{\"k\":\"v\"},".repeat(1_400_000);
    let stream = format!("event: put\ndata: {value}\n\n");
    let chunks: Vec<&[u8]> = stream.as_bytes().chunks(16 * 1024).collect();
    let items = run(&chunks);
    assert_eq!(items.len(), 1);
    let Some(Ok(Item::Event(put))) = items.first() else {
        panic!("expected one event, got {items:?}");
    };
    assert_eq!(put.event_type, "put");
    assert_eq!(put.data.len(), value.len());
    assert!(put.data_str() == value);
}
