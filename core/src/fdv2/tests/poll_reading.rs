//! The polling body read as it arrives ([`PollReader`]) against the whole-body parse
//! ([`parse_poll_or_fdv1_with`]): the same answer for the same bytes, however they are
//! cut, and what a reader fed the store's data holds.

use super::*;

/// The reader's answer for `body` fed in pieces of `cut` bytes (at least one).
fn read_in(body: &[u8], cut: usize, stored: Option<&Snapshot>) -> Result<ChangeSet, Error> {
    let mut reader = PollReader::new(PayloadLimits::default());
    for piece in body.chunks(cut.max(1)) {
        reader.feed(piece, stored);
    }
    reader.finish()
}

fn whole(body: &[u8]) -> Result<ChangeSet, Error> {
    parse_poll_or_fdv1_with(&Bytes::copy_from_slice(body), PayloadLimits::default())
}

fn same_in_every_cut(body: &str) {
    let expected = whole(body.as_bytes());
    for cut in [1, 2, 3, 7, 64, body.len().max(1)] {
        assert_eq!(
            read_in(body.as_bytes(), cut, None),
            expected,
            "{body:?} in pieces of {cut}"
        );
    }
}

#[test]
fn reading_as_it_arrives_answers_as_the_whole_body() {
    let full = events(&[INTENT_FULL, PUT_A, DEL_B, DONE]);
    let spaced =
        format!(" \r\n{{ \"events\" :\t[ {INTENT_FULL} ,\n{PUT_A} , {DEL_B},{DONE} ] }} \n");
    for body in [
        full.as_str(),
        spaced.as_str(),
        // Members after the array, a duplicate one, trailing text.
        &format!(r#"{{"events":[{INTENT_FULL},{DONE}],"other":{{"a":[1,"]"]}}}}"#),
        &format!(r#"{{"events":[{INTENT_FULL},{DONE}],"events":[]}}"#),
        &format!(r#"{{"events":[{INTENT_FULL},{DONE}]}} x"#),
        &format!(r#"{{"events":[{INTENT_FULL},{DONE}]"#),
        // Not JSON after the payload completed, or between elements.
        &format!(r#"{{"events":[{INTENT_FULL},{DONE},{{"event":]}}"#),
        &format!(r#"{{"events":[{INTENT_FULL},,{DONE}]}}"#),
        &format!(r#"{{"events":[{INTENT_FULL},{DONE},]}}"#),
        &format!(r#"{{"events":[{INTENT_FULL} {DONE}]}}"#),
        &format!(r#"{{"events":[{INTENT_FULL},{DONE}}}]}}"#),
        // Elements that are not events, and strings that look like structure.
        r#"{"events":[1]}"#,
        r#"{"events":[1 ]}"#,
        r#"{"events":["x"]}"#,
        r#"{"events":[true,{}]}"#,
        r#"{"events":[tru]}"#,
        r#"{"events":[1x]}"#,
        r#"{"events":[["put-object",{}]]}"#,
        r#"{"events":[{"event":"x","data":"\"}]\\"},{"no":"event"}]}"#,
        &events(&[
            r#"{"event":"heart-beat"}"#,
            INTENT_FULL,
            r#"{"event":"put-object","data":{"version":1,"kind":"flag","key":"a\"]}","object":{"key":"a\"]}","version":1,"s":"\\\\"}}}"#,
            DONE,
        ]),
        // Errors decided by an event, then by a later syntax error.
        &events(&[PUT_A, DONE]),
        &format!(r#"{{"events":[{PUT_A},{DONE},{{]}}"#),
        &events(&[INTENT_FULL, r#"{"event":"put-object"}"#]),
        &events(&[INTENT_FULL, PUT_A]),
        // Bodies of other shapes take the whole-body way.
        r#"{}"#,
        r#"{"events":{}}"#,
        r#"{"events":null}"#,
        r#"[]"#,
        "",
        "{",
        r#"{"events""#,
        r#"{"events":["#,
        r#"{"events":[]}"#,
        &format!(r#"{{"x":1,"events":[{INTENT_FULL},{DONE}]}}"#),
        r#"{"flags":{"f":{"key":"f","version":3}},"segments":{}}"#,
        r#"{"flags":{"f":{"key":"f","version":3}},"events":[]}"#,
    ] {
        same_in_every_cut(body);
    }
}

#[test]
fn bytes_that_are_not_utf8_are_malformed_wherever_they_are() {
    // `~` stands for the byte 0xFF: in a skipped member, in the event name, in an object.
    for element in [
        r#"{"event":"heart-beat","x":"~"}"#,
        r#"{"event":"x~"}"#,
        r#"{"event":"put-object","data":{"version":1,"kind":"flag","key":"a","object":{"key":"a","version":1,"x":"~"}}}"#,
    ] {
        let body: Vec<u8> = events(&[INTENT_FULL, element, DONE])
            .bytes()
            .map(|b| if b == b'~' { 0xff } else { b })
            .collect();
        assert_eq!(
            whole(&body),
            Err(Error::MalformedJson { event: "poll" }),
            "{element}"
        );
        for cut in [1, 5, body.len()] {
            assert_eq!(
                read_in(&body, cut, None),
                whole(&body),
                "{element} in pieces of {cut}"
            );
        }
    }
}

#[test]
fn a_payload_over_the_limits_fails_as_in_the_whole_body() {
    let body = events(&[INTENT_FULL, PUT_A, PUT_A, DONE]);
    let limits = PayloadLimits {
        max_bytes: 1 << 20,
        max_objects: 1,
    };
    let mut reader = PollReader::new(limits);
    for piece in body.as_bytes().chunks(5) {
        reader.feed(piece, None);
    }
    assert_eq!(reader.finish(), Err(Error::TooManyObjects { limit: 1 }));
}

#[test]
fn objects_the_store_holds_take_its_buffers_and_others_their_own() {
    let first = events(&[INTENT_FULL, PUT_A, DEL_B, DONE]);
    let mut store = Store::new();
    store.apply(read_in(first.as_bytes(), 3, None).unwrap());
    let put_c = r#"{"event":"put-object","data":{"version":2,"kind":"flag","key":"c","object":{"key":"c","version":1}}}"#;
    let second = events(&[INTENT_FULL, PUT_A, put_c, DONE]);
    let snapshot = store.snapshot();
    let cs = read_in(second.as_bytes(), 4, Some(&snapshot)).unwrap();
    let stored_a = snapshot.get_including_deleted(Kind::Flag, "a").unwrap();
    let (a, c) = (&cs.changes[0], &cs.changes[1]);
    // Unchanged: the very buffer the store holds. Changed: exactly its JSON.
    assert_eq!(a.item.raw.as_ptr(), stored_a.raw.as_ptr());
    assert_eq!(&c.item.raw[..], br#"{"key":"c","version":1}"#);
    // Without the store the answer is the same, item for item.
    assert_eq!(Ok(cs), whole(second.as_bytes()));
}

/// A body made of the usual elements and some broken ones, for the property below.
fn element() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(INTENT_FULL.to_owned()),
        Just(PUT_A.to_owned()),
        Just(DEL_B.to_owned()),
        Just(DONE.to_owned()),
        Just(r#"{"event":"heart-beat"}"#.to_owned()),
        Just(r#"{"event":"x","data":"]\"}"}"#.to_owned()),
        Just("7".to_owned()),
        Just(r#"{"event":"put-object","data":{}}"#.to_owned()),
        "[ -~]{0,6}",
    ]
}

proptest! {
    /// Any body, cut anywhere, with any bytes changed: the same answer as the whole
    /// body's parse.
    #[test]
    fn any_cut_of_any_body_answers_as_the_whole(
        list in prop::collection::vec(element(), 0..6),
        ws in "[ \n]{0,2}",
        tail in prop_oneof![Just("}".to_owned()), "[ -~]{0,4}"],
        cut in 1usize..40,
        edit in prop::option::of((any::<prop::sample::Index>(), any::<u8>())),
    ) {
        let mut body = format!("{{{ws}\"events\"{ws}:[{}]{tail}", list.join(&format!(",{ws}")))
            .into_bytes();
        if let Some((at, byte)) = edit {
            let i = at.index(body.len());
            body[i] = byte;
        }
        prop_assert_eq!(read_in(&body, cut, None), whole(&body));
    }
}
