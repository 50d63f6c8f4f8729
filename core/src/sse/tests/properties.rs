//! The reference model of the WHATWG algorithm and the chunking properties checked
//! against it.

use super::*;

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
