//! Shared reads: data handed out as slices of the read, items read in place, data taken
//! before dispatch.

use super::*;

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
