//! Stream framing: the BOM, line terminators and UTF-8 decoding.

use super::*;

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
