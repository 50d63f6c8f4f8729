//! Unit and property tests for the SSE parser (PROTOCOL.md A.2, Part E 1–15).

use bytes::Bytes;
use proptest::prelude::*;

use super::{Config, Error, Event, Item, ItemRef, Parser, SharedStr};

type Transcript = Vec<Result<Item, Error>>;

/// Feed `chunks` one read each, drain after every call, end with EOF.
fn run_with<'a>(
    config: Config,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> (Transcript, String) {
    let mut parser = Parser::new(config);
    let mut out = Vec::new();
    for chunk in chunks {
        parser.handle_bytes(chunk);
        out.extend(std::iter::from_fn(|| parser.poll_item()));
    }
    parser.handle_eof();
    out.extend(std::iter::from_fn(|| parser.poll_item()));
    (out, parser.last_event_id().to_owned())
}

/// The same as `run_with`, through `handle_chunk`.
fn run_shared<'a>(
    config: Config,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> (Transcript, String) {
    let mut parser = Parser::new(config);
    let mut out = Vec::new();
    for chunk in chunks {
        parser.handle_chunk(&Bytes::copy_from_slice(chunk));
        out.extend(std::iter::from_fn(|| parser.poll_item()));
    }
    parser.handle_eof();
    out.extend(std::iter::from_fn(|| parser.poll_item()));
    (out, parser.last_event_id().to_owned())
}

fn run(chunks: &[&[u8]]) -> Transcript {
    run_with(Config::default(), chunks.iter().copied()).0
}

fn event(event_type: &str, data: &str, id: &str) -> Result<Item, Error> {
    Ok(Item::Event(Event {
        event_type: event_type.into(),
        data: Bytes::copy_from_slice(data.as_bytes()),
        id: id.into(),
    }))
}

fn message(data: &str) -> Result<Item, Error> {
    event("message", data, "")
}

fn comment(text: &str) -> Result<Item, Error> {
    Ok(Item::Comment(text.to_owned()))
}

/// Every way of splitting `stream` in two gives `expected`.
fn assert_every_split(stream: &[u8], expected: &Transcript) {
    for at in 0..=stream.len() {
        let (a, b) = stream.split_at(at);
        assert_eq!(&run(&[a, b]), expected, "split at {at}");
    }
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(&run(&bytes), expected, "one byte per read");
}

// ---- BOM ----------------------------------------------------------------------------

#[test]
fn bom_at_stream_start_is_stripped() {
    let expected = vec![message("x")];
    assert_eq!(run(&[b"\xEF\xBB\xBFdata: x\n\n"]), expected);
    assert_every_split(b"\xEF\xBB\xBFdata: x\n\n", &expected);
}

#[test]
fn bom_split_one_byte_per_read_is_stripped() {
    assert_eq!(
        run(&[b"\xEF", b"\xBB", b"\xBF", b"data: x\n\n"]),
        vec![message("x")]
    );
}

#[test]
fn partial_bom_followed_by_other_bytes_is_kept_as_data() {
    // The held-back bytes become part of the field name, so this is no `data` field.
    assert_eq!(run(&[b"\xEF\xBB", b"data: x\n\n"]), vec![]);
    assert_eq!(run(&[b"\xEF", b"\xBBdata: x\n\n"]), vec![]);
    // As a comment's text they decode to one U+FFFD (maximal subpart).
    assert_eq!(run(&[b":", b"\xEF\xBB\n"]), vec![comment("\u{FFFD}")]);
    assert_eq!(run(&[b"\xEF", b"\n:c\n"]), vec![comment("c")]);
}

#[test]
fn second_bom_is_not_stripped() {
    assert_every_split(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n", &vec![]);
}

#[test]
fn mid_stream_bom_stays_in_name_and_value() {
    let stream = b"data: x\n\xEF\xBB\xBFdata: y\ndata: \xEF\xBB\xBFz\n\n";
    assert_every_split(stream, &vec![message("x\n\u{FEFF}z")]);
}

#[test]
fn reset_expects_a_bom_again() {
    let mut parser = Parser::new(Config::default());
    parser.handle_bytes(b"\xEF\xBB\xBFdata: a\n\n");
    parser.handle_eof();
    assert_eq!(parser.poll_item(), Some(message("a")));
    parser.reset();
    parser.handle_bytes(b"\xEF\xBB\xBFdata: b\n\n");
    assert_eq!(parser.poll_item(), Some(message("b")));
}

// ---- Line terminators ----------------------------------------------------------------

#[test]
fn crlf_split_across_reads_is_one_terminator() {
    // LaunchDarkly's 6-chunk case (Part E 1).
    let chunks: [&[u8]; 6] = [
        b"data: Hello\r",
        b"\n",
        b"data: World\r",
        b"\n",
        b"\r",
        b"\n",
    ];
    assert_eq!(run(&chunks), vec![message("Hello\nWorld")]);
}

#[test]
fn cr_lf_and_crlf_all_terminate_lines() {
    assert_every_split(
        b"data: a\rdata: b\ndata: c\r\n\r\ndata: d\r\r",
        &vec![message("a\nb\nc"), message("d")],
    );
}

#[test]
fn lf_followed_by_cr_is_two_terminators() {
    assert_every_split(b"data: a\n\r", &vec![message("a")]);
}

#[test]
fn cr_cr_lf_is_a_line_end_then_a_blank_line() {
    assert_every_split(
        b"data: a\r\r\ndata: b\n\n",
        &vec![message("a"), message("b")],
    );
}

#[test]
fn lone_cr_before_eof_terminates_the_line() {
    assert_eq!(run(&[b"data: a\n\r"]), vec![message("a")]);
    assert_eq!(run(&[b":c\r"]), vec![comment("c")]);
}

// ---- UTF-8 ---------------------------------------------------------------------------

#[test]
fn invalid_utf8_becomes_replacement_character() {
    assert_every_split(
        b"event: \xFFx\ndata: a\xC3\ndata: \xE2\x82\n\n",
        &vec![event("\u{FFFD}x", "a\u{FFFD}\n\u{FFFD}", "")],
    );
}

#[test]
fn invalid_utf8_in_a_long_buffered_line_becomes_replacement_character() {
    let mut stream = b"data: ".to_vec();
    stream.extend(std::iter::repeat_n(b'a', 100));
    stream.push(0xFF);
    stream.extend(b"\n\n");
    let expected = format!("{}\u{FFFD}", "a".repeat(100));
    let chunks: Vec<&[u8]> = stream.chunks(7).collect();
    assert_eq!(run(&chunks), vec![message(&expected)]);
}

#[test]
fn utf8_split_at_every_byte_decodes() {
    let stream = "event: é€\nid: 𝄞\ndata: ü€𝄞\n\n".as_bytes();
    assert_every_split(stream, &vec![event("é€", "ü€𝄞", "𝄞")]);
}

// ---- Fields --------------------------------------------------------------------------

#[test]
fn comment_is_reported_at_its_line_end_without_the_colon() {
    let chunks: [&[u8]; 3] = [b": heart", b"beat", b"\n"];
    assert_eq!(run(&chunks), vec![comment(" heartbeat")]);
}

#[test]
fn comment_that_looks_like_a_field_is_ignored_as_a_field() {
    assert_every_split(
        b":data: x\n:id: 1\n\n",
        &vec![comment("data: x"), comment("id: 1")],
    );
}

#[test]
fn field_name_runs_to_the_first_colon() {
    assert_every_split(b"data:a:b\n\n", &vec![message("a:b")]);
}

#[test]
fn only_one_space_after_the_colon_is_stripped() {
    assert_every_split(b"data:  a\ndata:b\n\n", &vec![message(" a\nb")]);
}

#[test]
fn space_after_colon_arriving_in_the_next_read_is_stripped() {
    assert_eq!(run(&[b"data:", b" x\n\n"]), vec![message("x")]);
    assert_eq!(run(&[b"data:", b" ", b" x\n\n"]), vec![message(" x")]);
}

#[test]
fn field_without_colon_has_an_empty_value() {
    assert_every_split(b"data\n\n", &vec![message("")]);
    assert_every_split(b"data\ndata\n\n", &vec![message("\n")]);
}

#[test]
fn bare_id_clears_the_last_event_id() {
    let (items, last) = run_with(Config::default(), [&b"id: 1\n\nid\ndata: x\n\n"[..]]);
    assert_eq!(items, vec![message("x")]);
    assert_eq!(last, "");
}

#[test]
fn bare_event_gives_message() {
    assert_every_split(b"event\ndata: x\n\n", &vec![message("x")]);
    assert_every_split(b"event:\ndata: x\n\n", &vec![message("x")]);
}

#[test]
fn data_lines_are_joined_with_lf() {
    assert_every_split(b"data: a\ndata: b\ndata: c\n\n", &vec![message("a\nb\nc")]);
}

#[test]
fn empty_data_dispatches_an_empty_string() {
    assert_every_split(b"data:\n\n", &vec![message("")]);
}

#[test]
fn blank_line_with_empty_data_buffer_dispatches_nothing() {
    assert_every_split(b"\n\n\r\n\n", &vec![]);
}

#[test]
fn only_the_final_lf_is_removed() {
    assert_every_split(b"data:\ndata:\n\n", &vec![message("\n")]);
    assert_every_split(b"data: a\ndata:\n\n", &vec![message("a\n")]);
}

#[test]
fn event_type_resets_after_dispatch() {
    assert_every_split(
        b"event: put\ndata: a\n\ndata: b\n\n",
        &vec![event("put", "a", ""), message("b")],
    );
}

#[test]
fn type_only_block_is_dropped_and_does_not_leak() {
    assert_every_split(b"event: put\n\ndata: b\n\n", &vec![message("b")]);
}

#[test]
fn id_containing_nul_is_ignored_and_the_previous_id_kept() {
    let stream = b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n";
    let (items, last) = run_with(Config::default(), [&stream[..]]);
    assert_eq!(
        items,
        vec![event("message", "a", "1"), event("message", "b", "1")]
    );
    assert_eq!(last, "1");
}

#[test]
fn id_persists_across_events() {
    assert_every_split(
        b"id: 1\ndata: a\n\ndata: b\n\n",
        &vec![event("message", "a", "1"), event("message", "b", "1")],
    );
}

#[test]
fn empty_id_clears_the_last_event_id() {
    let stream = b"id: 1\ndata: a\n\nid:\ndata: b\n\n";
    let (items, last) = run_with(Config::default(), [&stream[..]]);
    assert_eq!(items, vec![event("message", "a", "1"), message("b")]);
    assert_eq!(last, "");
}

#[test]
fn id_only_block_commits_the_last_event_id() {
    let (items, last) = run_with(Config::default(), [&b"id: 7\n\n"[..]]);
    assert_eq!(items, vec![]);
    assert_eq!(last, "7");
}

#[test]
fn id_is_committed_only_at_dispatch() {
    let mut parser = Parser::new(Config::default());
    parser.handle_bytes(b"id: 7\n");
    assert_eq!(parser.last_event_id(), "");
    parser.handle_bytes(b"\n");
    assert_eq!(parser.last_event_id(), "7");
}

#[test]
fn an_id_counts_as_committed_at_dispatch_even_empty_and_without_data() {
    let mut parser = Parser::new(Config::default());
    parser.handle_bytes(b"data: x\n\nid\n");
    assert!(!parser.has_committed_id());
    parser.handle_eof();
    parser.reset();
    assert!(
        !parser.has_committed_id(),
        "an unfinished block commits nothing"
    );
    parser.handle_bytes(b"id\n\n");
    assert!(parser.has_committed_id());
    assert_eq!(parser.last_event_id(), "");
    parser.reset();
    assert!(parser.has_committed_id(), "kept across reset");
}

#[test]
fn id_in_unfinished_event_at_eof_is_not_committed() {
    let (items, last) = run_with(Config::default(), [&b"id: 1\n\nid: 2\ndata: x\n"[..]]);
    assert_eq!(items, vec![]);
    assert_eq!(last, "1");
}

#[test]
fn uncommitted_id_does_not_leak_into_the_next_connection() {
    let mut parser = Parser::new(Config::default());
    parser.handle_bytes(b"id: 1\n\nid: 2\n");
    parser.handle_eof();
    parser.reset();
    parser.handle_bytes(b"data: x\n\n");
    assert_eq!(parser.poll_item(), Some(event("message", "x", "1")));
}

#[test]
fn retry_with_ascii_digits_applies_without_dispatch() {
    assert_eq!(run(&[b"retry: 1500\n"]), vec![Ok(Item::Retry(1500))]);
}

#[test]
fn retry_with_other_characters_is_ignored() {
    assert_every_split(
        b"retry: 1.5\nretry: -1\nretry:  1\nretry: 1a\nretry:\nretry\n",
        &vec![],
    );
    assert_every_split("retry: ١\n".as_bytes(), &vec![]);
}

#[test]
fn retry_unterminated_at_eof_is_ignored() {
    assert_eq!(run(&[b"retry: 1500"]), vec![]);
}

#[test]
fn retry_last_valid_value_wins() {
    assert_eq!(
        run(&[b"retry: 10\nretry: x\nretry: 20\n"]),
        vec![Ok(Item::Retry(10)), Ok(Item::Retry(20))]
    );
}

#[test]
fn retry_overflow_saturates() {
    assert_eq!(
        run(&[b"retry: 99999999999999999999999999\n"]),
        vec![Ok(Item::Retry(u64::MAX))]
    );
}

#[test]
fn retry_is_reported_in_stream_order() {
    assert_every_split(
        b"data: a\nretry: 5\n:c\n\n",
        &vec![Ok(Item::Retry(5)), comment("c"), message("a")],
    );
}

#[test]
fn unknown_fields_are_ignored() {
    assert_every_split(
        b"foo: bar\nDATA: x\ndata : y\ndata: z\n\n",
        &vec![message("z")],
    );
}

// ---- End of stream and reconnects ------------------------------------------------------

#[test]
fn unterminated_event_is_discarded_at_eof() {
    assert_eq!(run(&[b"data: a\n\ndata: b\n"]), vec![message("a")]);
    assert_eq!(run(&[b"data: a\n\ndata: b"]), vec![message("a")]);
}

#[test]
fn next_connection_starts_clean_after_reset() {
    let mut parser = Parser::new(Config::default());
    parser.handle_bytes(b"event: put\ndata: partial\nda");
    parser.handle_eof();
    parser.reset();
    parser.handle_bytes(b"ta: b\n\ndata: c\n\n");
    let items: Transcript = std::iter::from_fn(|| parser.poll_item()).collect();
    assert_eq!(items, vec![message("c")]);
}

#[test]
fn reset_discards_items_not_yet_polled() {
    let mut parser = Parser::new(small(4, 4));
    parser.handle_bytes(b"data\n\n:toolong\n");
    parser.reset();
    assert_eq!(parser.poll_item(), None);
}

#[test]
fn reset_discards_a_pending_cr() {
    let mut parser = Parser::new(Config::default());
    parser.handle_bytes(b":a\r");
    parser.reset();
    parser.handle_bytes(b"\ndata: x\n\n");
    let items: Transcript = std::iter::from_fn(|| parser.poll_item()).collect();
    assert_eq!(items, vec![message("x")]);
}

// ---- Limits --------------------------------------------------------------------------

fn small(max_line_len: usize, max_event_len: usize) -> Config {
    Config {
        max_line_len,
        max_event_len,
    }
}

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

// ---- Shared reads ----------------------------------------------------------------------

#[test]
fn shared_read_hands_out_single_line_data_without_a_copy() {
    let chunk = Bytes::from_static(b"event: patch\ndata: {\"a\":1}\n\ndata: x\ndata: y\n\n");
    let mut parser = Parser::new(Config::default());
    parser.handle_chunk(&chunk);
    let Some(Ok(Item::Event(first))) = parser.poll_item() else {
        panic!("expected an event");
    };
    assert_eq!(first.event_type, "patch");
    assert_eq!(first.data_str(), r#"{"a":1}"#);
    let range = chunk.as_ptr_range();
    assert!(range.contains(&first.data.as_ptr()), "sliced from the read");
    assert_eq!(parser.poll_item(), Some(message("x\ny")));
    assert_eq!(parser.poll_item(), None);
}

#[test]
fn drained_parser_holds_no_shared_read() {
    let chunk = Bytes::from(b"data: a\n\n".to_vec());
    let mut parser = Parser::new(Config::default());
    parser.handle_chunk(&chunk);
    let Some(Ok(Item::Event(event))) = parser.poll_item() else {
        panic!("expected an event");
    };
    assert_eq!(parser.poll_item(), None);
    drop(event);
    // Only the caller's handle is left: the allocation can be reclaimed for the next read.
    assert!(chunk.is_unique());
}

#[test]
fn shared_read_data_continued_in_the_next_read_is_copied() {
    let mut parser = Parser::new(Config::default());
    parser.handle_chunk(&Bytes::from_static(b"data: a\n"));
    parser.handle_chunk(&Bytes::from_static(b"data: b\n\ndata: c\n"));
    parser.handle_chunk(&Bytes::from_static(b"\n"));
    let items: Transcript = std::iter::from_fn(|| parser.poll_item()).collect();
    assert_eq!(items, vec![message("a\nb"), message("c")]);
}

#[test]
fn shared_read_items_can_be_polled_after_later_reads() {
    let mut parser = Parser::new(Config::default());
    parser.handle_chunk(&Bytes::from_static(b"id: 1\ndata: a\n\n"));
    parser.handle_bytes(b"id: 2\ndata: b\n\n");
    parser.handle_chunk(&Bytes::from_static(b"event: x\ndata: c\n\n:hi\n"));
    let items: Transcript = std::iter::from_fn(|| parser.poll_item()).collect();
    assert_eq!(
        items,
        vec![
            event("message", "a", "1"),
            event("message", "b", "2"),
            event("x", "c", "2"),
            comment("hi"),
        ]
    );
}

#[test]
fn polling_part_of_the_items_after_each_read_loses_nothing() {
    let mut parser = Parser::new(Config::default());
    let mut items = Vec::new();
    let mut expected = Vec::new();
    for i in 0..500 {
        let read = format!("id: {i}\ndata: a{i}\n\n:c{i}\ndata: b{i}\n\n");
        parser.handle_chunk(&Bytes::from(read));
        expected.extend([
            event("message", &format!("a{i}"), &i.to_string()),
            comment(&format!("c{i}")),
            event("message", &format!("b{i}"), &i.to_string()),
        ]);
        items.extend(std::iter::from_fn(|| parser.poll_item()).take(2));
    }
    items.extend(std::iter::from_fn(|| parser.poll_item()));
    assert_eq!(items, expected);
}

#[test]
fn invalid_utf8_in_a_shared_read_becomes_replacement_character() {
    let (items, _) = run_shared(Config::default(), [&b"data: a\xFFb\n\n"[..]]);
    assert_eq!(items, vec![message("a\u{FFFD}b")]);
}

// ---- Items read in place --------------------------------------------------------------

/// Drain `parser` with `poll_ref`, keeping owned copies of what it lent.
fn drain_ref(parser: &mut Parser, out: &mut Transcript) {
    while let Some(item) = parser.poll_ref() {
        out.push(item.map(|item| item.to_item()));
    }
}

#[test]
fn events_read_in_place_borrow_the_shared_read() {
    let read =
        Bytes::from_static(b"event: patch\nid: 3\ndata: {\"a\":1}\n\nevent: custom\ndata: x\n\n");
    let mut parser = Parser::new(Config::default());
    parser.handle_chunk(&read);
    let Some(Ok(ItemRef::Event(first))) = parser.poll_ref() else {
        panic!("expected an event");
    };
    assert_eq!(first.event_type(), "patch");
    assert_eq!(first.data(), b"{\"a\":1}");
    assert_eq!(first.data_str(), "{\"a\":1}");
    assert_eq!(first.id(), "3");
    // The data lies in the read itself: no copy, and an owned slice shares it.
    assert_eq!(first.owner().as_ptr(), read.as_ptr());
    let kept = first.data_bytes();
    assert_eq!(kept, Bytes::from_static(b"{\"a\":1}"));
    assert!(read.as_ptr_range().contains(&kept.as_ptr()));
    let Some(Ok(ItemRef::Event(second))) = parser.poll_ref() else {
        panic!("expected an event");
    };
    assert_eq!(second.event_type(), "custom");
    assert_eq!(
        second.to_event(),
        Event {
            event_type: "custom".into(),
            data: Bytes::from_static(b"x"),
            id: "3".into(),
        }
    );
    assert_eq!(parser.poll_ref(), None);
}

#[test]
fn copied_events_read_in_place_match_polled_ones() {
    // Borrowed reads, events spanning reads and multi-line data go through blocks.
    let stream: &[u8] = b"data: a\ndata: b\n\n:c\nretry: 5\ndata: long-";
    let rest: &[u8] = b"line\n\ndata: \n\ndata: z\n\n";
    let (expected, _) = run_with(Config::default(), [stream, rest]);
    let mut parser = Parser::new(Config::default());
    let mut out = Vec::new();
    parser.handle_bytes(stream);
    drain_ref(&mut parser, &mut out);
    parser.handle_bytes(rest);
    // Mix the two drains: the first item owned, the rest in place.
    out.extend(parser.poll_item());
    drain_ref(&mut parser, &mut out);
    parser.handle_eof();
    drain_ref(&mut parser, &mut out);
    assert_eq!(out, expected);
}

#[test]
fn events_sharing_a_block_are_read_in_place_one_after_another() {
    // Multi-line data is copied; the events of one read share one block.
    let read: &[u8] = b"data: a\ndata: b\n\ndata: c\ndata: d\n\ndata: e\ndata: f\n\n";
    let mut parser = Parser::new(Config::default());
    parser.handle_bytes(read);
    let mut out = Vec::new();
    drain_ref(&mut parser, &mut out);
    assert_eq!(out, vec![message("a\nb"), message("c\nd"), message("e\nf")]);
}

#[test]
fn reading_in_place_keeps_no_block_alive_after_the_drain() {
    let mut parser = Parser::new(Config::default());
    parser.handle_bytes(b"data: one\n\ndata: two\n\n");
    let mut kept = Vec::new();
    while let Some(Ok(ItemRef::Event(event))) = parser.poll_ref() {
        kept.push(event.data_bytes());
    }
    assert_eq!(
        kept,
        [Bytes::from_static(b"one"), Bytes::from_static(b"two")]
    );
    // Owned slices outlive the parser's lending.
    drop(parser);
    assert_eq!(kept[1], Bytes::from_static(b"two"));
}

// ---- Event ---------------------------------------------------------------------------

#[test]
fn taken_line_continued_in_shared_reads_is_handed_out_without_a_copy() {
    let mut parser = Parser::new(Config::default());
    parser.handle_bytes(b"event: put\ndata: ab");
    assert_eq!(parser.take_pending_data().unwrap(), &b"ab"[..]);
    let read = Bytes::from_static(b"cdef");
    parser.handle_chunk(&read);
    let piece = parser.take_pending_data().unwrap();
    assert_eq!(piece, &b"cdef"[..]);
    assert_eq!(piece.as_ptr(), read.as_ptr(), "a slice of the read");
    // A character cut by the end of a read, and nothing taken before the next read.
    parser.handle_chunk(&Bytes::from_static(b"xy\xE2\x82"));
    assert_eq!(parser.pending_data(), Some(&b"xy"[..]));
    parser.handle_chunk(&Bytes::from_static(b"\xACz\n\n"));
    assert_eq!(parser.take_pending_data(), None);
    let Some(Ok(Item::Event(event))) = parser.poll_item() else {
        panic!("the event is dispatched")
    };
    assert_eq!(event.data_str(), "xy€z");
}

#[test]
fn taken_bytes_count_towards_the_line_limit() {
    let mut parser = Parser::new(small(16, 64));
    parser.handle_bytes(b"data: 0123456");
    assert_eq!(parser.take_pending_data().unwrap(), &b"0123456"[..]);
    parser.handle_chunk(&Bytes::from_static(b"789abcdef"));
    assert_eq!(
        parser.poll_item(),
        Some(Err(Error::LineTooLong { limit: 16 }))
    );
    assert_eq!(parser.take_pending_data(), None);
}

#[test]
fn data_str_of_hand_made_invalid_data_does_not_panic() {
    let event = Event {
        event_type: "message".into(),
        data: Bytes::from_static(b"ok\xFFnot"),
        id: SharedStr::default(),
    };
    assert_eq!(event.data_str(), "ok");
}

// ---- Reference model and chunking properties ------------------------------------------

/// A literal transcription of the WHATWG algorithm over the whole stream at once.
fn reference(stream: &[u8]) -> (Transcript, String) {
    let decoded = String::from_utf8_lossy(stream);
    let text = decoded.strip_prefix('\u{FEFF}').unwrap_or(&decoded);
    let mut lines = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                lines.push(std::mem::take(&mut current));
            }
            '\n' => lines.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    let (mut data, mut event_type, mut id_buffer, mut last_id) =
        (String::new(), String::new(), String::new(), String::new());
    let mut out = Vec::new();
    for line in lines {
        if line.is_empty() {
            last_id.clone_from(&id_buffer);
            if data.is_empty() {
                event_type.clear();
                continue;
            }
            if data.ends_with('\n') {
                data.pop();
            }
            let kind = if event_type.is_empty() {
                "message"
            } else {
                &event_type
            };
            out.push(event(kind, &data, &last_id));
            data.clear();
            event_type.clear();
        } else if let Some(text) = line.strip_prefix(':') {
            out.push(comment(text));
        } else {
            let (name, value) = line.split_once(':').unwrap_or((&line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match name {
                "data" => {
                    data.push_str(value);
                    data.push('\n');
                }
                "event" => event_type = value.to_owned(),
                "id" if !value.contains('\0') => id_buffer = value.to_owned(),
                "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                    let millis = value.bytes().fold(0_u64, |n, d| {
                        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
                    });
                    out.push(Ok(Item::Retry(millis)));
                }
                _ => {}
            }
        }
    }
    (out, last_id)
}

/// Bytes where SSE syntax, BOM bytes, invalid UTF-8 and NUL are common.
fn sse_bytes() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(&b"\r"[..]),
        Just(&b"\n"[..]),
        Just(&b"\r\n"[..]),
        Just(&b"\n\n"[..]),
        Just(&b":"[..]),
        Just(&b" "[..]),
        Just(&b"data"[..]),
        Just(&b"data: "[..]),
        Just(&b"id"[..]),
        Just(&b"event"[..]),
        Just(&b"retry"[..]),
        Just(&b"\xEF\xBB\xBF"[..]),
        Just(&b"\xEF"[..]),
        Just(&b"\xBB"[..]),
        Just(&b"\xBF"[..]),
        Just(&b"\xC3"[..]),
        Just(&b"\xE2\x82\xAC"[..]),
        Just(&b"\xFF"[..]),
        Just(&b"\0"[..]),
        Just(&b"42"[..]),
        Just(&b"x"[..]),
    ];
    let piece = prop_oneof![
        4 => token.prop_map(<[u8]>::to_vec),
        1 => any::<u8>().prop_map(|b| vec![b]),
    ];
    prop::collection::vec(piece, 0..80).prop_map(|pieces| pieces.concat())
}

/// Split `stream` at the given positions.
fn split<'a>(stream: &'a [u8], cuts: &[prop::sample::Index]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
    at.sort_unstable();
    let mut pieces = Vec::new();
    let mut start = 0;
    for end in at {
        pieces.push(&stream[start..end]);
        start = end;
    }
    pieces.push(&stream[start..]);
    pieces
}

/// Feed `stream` split at `cuts`, shared or borrowed reads as `shared` says, draining
/// after each read and then taking the pending data when `take` says; the taken pieces
/// are put back in front of the data of the next event dispatched.
fn taken_transcript(
    config: Config,
    stream: &[u8],
    cuts: &[prop::sample::Index],
    shared: &[bool],
    take: &[bool],
) -> (Transcript, String) {
    let mut parser = Parser::new(config);
    let mut out = Vec::new();
    let mut taken: Vec<u8> = Vec::new();
    for ((chunk, shared), take) in split(stream, cuts).into_iter().zip(shared).zip(take) {
        if *shared {
            parser.handle_chunk(&Bytes::copy_from_slice(chunk));
        } else {
            parser.handle_bytes(chunk);
        }
        // Everything dispatched so far first: what is taken next belongs to the next
        // event dispatched.
        while let Some(item) = parser.poll_item() {
            out.push(item.map(|item| match item {
                Item::Event(mut event) if !taken.is_empty() => {
                    taken.extend_from_slice(&event.data);
                    event.data = Bytes::from(std::mem::take(&mut taken));
                    Item::Event(event)
                }
                other => other,
            }));
        }
        if *take {
            let pending = parser.pending_data().map(<[u8]>::to_vec);
            if let Some(piece) = parser.take_pending_data() {
                assert!(std::str::from_utf8(&piece).is_ok());
                assert!(pending.is_some_and(|p| p.starts_with(&piece)));
                taken.extend_from_slice(&piece);
            }
        }
    }
    parser.handle_eof();
    out.extend(std::iter::from_fn(|| parser.poll_item()));
    (out, parser.last_event_id().to_owned())
}

proptest! {
    #[test]
    fn matches_the_reference_algorithm(stream in sse_bytes()) {
        prop_assert_eq!(run_with(Config::default(), [&stream[..]]), reference(&stream));
        prop_assert_eq!(run_shared(Config::default(), [&stream[..]]), reference(&stream));
    }

    #[test]
    fn chunking_never_changes_the_transcript(
        stream in sse_bytes(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let whole = run_with(Config::default(), [&stream[..]]);
        prop_assert_eq!(run_with(Config::default(), split(&stream, &cuts)), whole.clone());
        prop_assert_eq!(run_shared(Config::default(), split(&stream, &cuts)), whole);
    }

    #[test]
    fn chunking_never_changes_the_transcript_with_errors(
        stream in sse_bytes(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        max_line_len in 0_usize..24,
        max_event_len in 0_usize..32,
    ) {
        let config = small(max_line_len, max_event_len);
        let whole = run_with(config, [&stream[..]]);
        prop_assert_eq!(run_with(config, split(&stream, &cuts)), whole.clone());
        prop_assert_eq!(run_shared(config, split(&stream, &cuts)), whole);
    }

    #[test]
    fn shared_reads_mixed_with_borrowed_reads_give_the_same_transcript(
        stream in sse_bytes(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        shared in prop::collection::vec(any::<bool>(), 13),
        max_line_len in 0_usize..24,
        max_event_len in 0_usize..32,
    ) {
        let config = if max_line_len == 0 { Config::default() } else { small(max_line_len, max_event_len) };
        let whole = run_with(config, [&stream[..]]);
        let mut parser = Parser::new(config);
        let mut out = Vec::new();
        for (chunk, shared) in split(&stream, &cuts).into_iter().zip(&shared) {
            if *shared {
                parser.handle_chunk(&Bytes::copy_from_slice(chunk));
            } else {
                parser.handle_bytes(chunk);
            }
            // Poll only now and then: queued items survive later reads.
            if chunk.len() % 3 == 0 {
                out.extend(std::iter::from_fn(|| parser.poll_item()));
            }
        }
        parser.handle_eof();
        out.extend(std::iter::from_fn(|| parser.poll_item()));
        prop_assert_eq!((out, parser.last_event_id().to_owned()), whole);
    }

    #[test]
    fn taking_a_long_data_line_never_changes_the_data(
        before in sse_bytes(),
        value in prop::collection::vec(prop_oneof![
            3 => Just(&b"{\"k\":[1,2]}"[..]),
            3 => Just(&b"\xE2\x82\xAC"[..]),
            1 => Just(&b"\xC3"[..]),
            1 => Just(&b"\xFF"[..]),
            1 => Just(&b" "[..]),
        ], 0..60),
        after in sse_bytes(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        shared in prop::collection::vec(any::<bool>(), 13),
        take in prop::collection::vec(any::<bool>(), 13),
        max_line_len in 0_usize..400,
    ) {
        let mut stream = before;
        stream.extend_from_slice(b"\n\nevent: put\ndata: ");
        stream.extend_from_slice(&value.concat());
        stream.extend_from_slice(b"\n\n");
        stream.extend_from_slice(&after);
        let config = if max_line_len < 100 { Config::default() } else { small(max_line_len, max_line_len) };
        prop_assert_eq!(taken_transcript(config, &stream, &cuts, &shared, &take), run_with(config, [&stream[..]]));
    }

    #[test]
    fn taking_pending_data_never_changes_the_data(
        stream in sse_bytes(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        shared in prop::collection::vec(any::<bool>(), 13),
        take in prop::collection::vec(any::<bool>(), 13),
        max_line_len in 0_usize..24,
        max_event_len in 0_usize..32,
    ) {
        let config = if max_line_len == 0 { Config::default() } else { small(max_line_len, max_event_len) };
        let whole = run_with(config, [&stream[..]]);
        prop_assert_eq!(taken_transcript(config, &stream, &cuts, &shared, &take), whole);
    }

    #[test]
    fn reading_in_place_gives_the_same_transcript(
        stream in sse_bytes(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        shared in prop::collection::vec(any::<bool>(), 13),
        in_place in prop::collection::vec(any::<bool>(), 64),
        max_line_len in 0_usize..24,
        max_event_len in 0_usize..32,
    ) {
        let config = if max_line_len == 0 { Config::default() } else { small(max_line_len, max_event_len) };
        let whole = run_with(config, [&stream[..]]);
        let mut parser = Parser::new(config);
        let mut out = Vec::new();
        let mut turn = in_place.iter().cycle();
        let mut poll = |parser: &mut Parser, out: &mut Transcript| loop {
            let item = if *turn.next().unwrap_or(&true) {
                parser.poll_ref().map(|item| item.map(|item| item.to_item()))
            } else {
                parser.poll_item()
            };
            match item {
                Some(item) => out.push(item),
                None => break,
            }
        };
        for (chunk, shared) in split(&stream, &cuts).into_iter().zip(&shared) {
            if *shared {
                parser.handle_chunk(&Bytes::copy_from_slice(chunk));
            } else {
                parser.handle_bytes(chunk);
            }
            if chunk.len() % 3 == 0 {
                poll(&mut parser, &mut out);
            }
        }
        parser.handle_eof();
        poll(&mut parser, &mut out);
        prop_assert_eq!((out, parser.last_event_id().to_owned()), whole);
    }
}
