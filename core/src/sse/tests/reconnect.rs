//! End of stream, `reset` and the next connection.

use super::*;

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
