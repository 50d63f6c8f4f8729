//! Field handling: comments, `data`, `event`, `id`, `retry` and unknown fields.

use super::*;

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
