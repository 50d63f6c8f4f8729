//! Unit and property tests of the scanner: verdicts against serde_json, the fast paths
//! against the general reading, and the item reader against a frozen copy of the old one.

use std::borrow::Cow;

use bytes::Bytes;
use proptest::prelude::*;

use super::specials::special_mask;
use super::*;
use crate::store::Kind;

fn naive(s: &[u8]) -> u64 {
    s.iter()
        .take(64)
        .enumerate()
        .filter(|&(_, &c)| c == b'"' || c == b'\\' || c < 0x20)
        .fold(0, |m, (n, _)| m | 1 << n)
}

/// Every byte value at every position of a block (the mask's saturating arithmetic
/// has edges at the quote, the control characters and the top bit).
#[test]
fn special_mask_of_every_byte_at_every_position() {
    for shift in 0..64 {
        let all: Vec<u8> = (0..=255u8).map(|c| c.wrapping_add(shift)).collect();
        for block in all.chunks(64) {
            assert_eq!(special_mask(block), naive(block), "shift {shift}");
        }
    }
}

proptest! {
    #[test]
    fn special_mask_agrees_with_a_byte_loop(s in proptest::collection::vec(
        prop_oneof![Just(b'"'), Just(b'\\'), Just(0x1fu8), Just(0x20u8), Just(0xc3u8), Just(0x80u8), Just(0u8), Just(0xffu8), 0x21u8..0x7f],
        0..80,
    )) {
        prop_assert_eq!(special_mask(&s), naive(&s));
    }

    #[test]
    fn special_mask_agrees_with_a_byte_loop_on_any_bytes(
        s in proptest::collection::vec(any::<u8>(), 0..80),
    ) {
        prop_assert_eq!(special_mask(&s), naive(&s));
    }

    /// Literals, numbers and strings, whole or cut short, anywhere (at the very end
    /// of the text included), get serde_json's verdicts.
    #[test]
    fn token_sequences_get_serde_json_verdicts(
        pad in 0usize..70,
        tokens in proptest::collection::vec(prop_oneof![
            Just("true"), Just("tru"), Just("false"), Just("fals"), Just("null"),
            Just("nul"), Just("nulll"), Just("0"), Just("-"), Just("-0"), Just("12"),
            Just("1.5"), Just("1."), Just("1e"), Just("-0.2E+3"), Just("3e-7"),
            Just("01"), Just("."), Just("\"a\""), Just("\"\\u00e9\""), Just("\"\\x\""),
            Just("\""), Just("["), Just("]"), Just("{"), Just("}"), Just(","), Just(":"),
            Just(" "), Just("\n"), Just("\u{1}"),
        ], 0..24),
    ) {
        let text = format!("{}{}", " ".repeat(pad), tokens.concat());
        let mut scan = Scan::new(&text);
        let ours = scan.value().and_then(|()| scan.end()).is_ok();
        let theirs = serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok();
        prop_assert_eq!(ours, theirs, "{:?}", text);
    }

    /// The scanner agrees with serde_json on which inputs are JSON at all.
    #[test]
    fn syntax_verdicts_match_serde_json(s in "[\\[\\]{}\",:0-9a-z\\\\ .eE+-]{0,24}") {
        let ours = Scan::new(&s).value().and_then(|()| Scan::new(&s).value().map(|_| ()));
        let mut scan = Scan::new(&s);
        let ours_full = scan.value().and_then(|()| scan.end()).is_ok();
        let theirs = serde_json::from_str::<serde::de::IgnoredAny>(&s).is_ok();
        let _ = ours;
        prop_assert_eq!(ours_full, theirs, "{:?}", s);
    }
}

proptest! {
    /// Long strings and containers that cross the scanner's 64-byte blocks at any
    /// offset, escapes and control characters included, get serde_json's verdicts.
    #[test]
    fn verdicts_match_serde_json_across_blocks(
        pad in 0usize..70,
        s in "[\\[\\]{}\",:0-9a-fu\\\\ \\n\\t\\x01é]{0,160}",
    ) {
        let text = format!("{}{s}", " ".repeat(pad));
        let mut scan = Scan::new(&text);
        let ours = scan.value().and_then(|()| scan.end()).is_ok();
        let theirs = serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok();
        prop_assert_eq!(ours, theirs, "{:?}", text);
    }

    /// Well-formed strings of any length end where serde_json says.
    #[test]
    fn strings_end_where_serde_json_says(
        pad in 0usize..70,
        body in proptest::collection::vec(prop_oneof![Just("\\\""), Just("\\\\"), Just("\\u00e9"), Just("é"), Just("a"), Just("\\n")], 0..80),
    ) {
        let text = format!("{}[\"{}\",1]", " ".repeat(pad), body.concat());
        let mut scan = Scan::new(&text);
        prop_assert!(scan.value().and_then(|()| scan.end()).is_ok(), "{:?}", text);
        prop_assert!(serde_json::from_str::<Vec<serde_json::Value>>(&text).is_ok());
    }
}

#[test]
fn invalid_utf8_inside_a_string_is_a_syntax_error() {
    let raw = Bytes::from_static(b"{\"key\":\"\xff\",\"version\":1}");
    assert_eq!(
        decode(Kind::Flag, raw).unwrap_err(),
        DecodeError::MalformedJson
    );
    let ok = Bytes::from("{\"key\":\"é\",\"version\":1}");
    assert_eq!(decode(Kind::Flag, ok).unwrap().key.as_deref(), Some("é"));
}

#[test]
fn escaped_keys_and_fields_are_unescaped() {
    let raw = Bytes::from_static(br#"{"k\u0065y":"a\"b","versio\u006e":4}"#);
    let d = decode(Kind::Flag, raw).unwrap();
    assert_eq!((d.key.as_deref(), d.item.version), (Some("a\"b"), 4));
}

#[test]
fn deep_nesting_is_refused_without_overflowing_the_stack() {
    let deep = format!(
        "{{\"version\":1,\"x\":{}{}}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    assert_eq!(
        decode(Kind::Flag, Bytes::from(deep)).unwrap_err(),
        DecodeError::MalformedJson
    );
}

/// Strings, whole or cut short, that end at or near the end of the text, over
/// every length around the block size (the last block shorter, or absent).
#[test]
fn strings_at_the_end_of_the_text_get_serde_json_verdicts() {
    for n in 0..200 {
        let body = "a".repeat(n);
        for text in [
            format!("\"{body}\""),
            format!("\"{body}"),
            format!("[\"{body}\",\"{body}\"]"),
            format!("[\"{body}\",\"{body}"),
            format!("{{\"{body}\":\"{body}\"}}"),
            format!("\"{body}\\"),
        ] {
            let mut scan = Scan::new(&text);
            let ours = scan.value().and_then(|()| scan.end()).is_ok();
            let theirs = serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok();
            assert_eq!(ours, theirs, "{text:?}");
        }
    }
}

/// The inline skips of [`Scan::value`] (empty containers included, against the
/// depth limit) agree with the general loop.
#[test]
fn inline_skips_agree_with_the_skip_loop() {
    for text in [
        "[]",
        "{}",
        "[ ]",
        "{ }",
        "[1]",
        "{\"a\":1}",
        "[]]",
        "0",
        "-",
        "-1.5e3",
        "01",
        "1.",
        "true",
        "tru",
        "nulll",
        "\"a\"",
        "\"a\\\"",
        "[\"a\",\"b\" ,\"c\"]",
        "[\"a\",]",
    ] {
        for depth in [0, MAX_DEPTH - 1, MAX_DEPTH] {
            let run = |nested: bool| {
                let mut s = Scan::new(text);
                s.depth = depth;
                let r = if nested { s.nested_value() } else { s.value() };
                (r, s.i, s.depth)
            };
            let (inline, general) = (run(false), run(true));
            assert_eq!(inline.0, general.0, "{text:?} at depth {depth}");
            if inline.0.is_ok() {
                assert_eq!(inline, general, "{text:?} at depth {depth}");
            }
        }
    }
}

/// Versions read as `str::parse::<u64>` reads the number's text.
#[test]
fn versions_read_as_str_parse() {
    for n in [
        "0",
        "7",
        "-0",
        "-3",
        "1.0",
        "1e2",
        "12E0",
        "18446744073709551615",
        "18446744073709551616",
        "99999999999999999999",
    ] {
        let mut s = Scan::new(n);
        let theirs = n.parse::<u64>().map_err(|_| SCHEMA);
        assert_eq!(s.u64_value(), theirs, "{n}");
    }
}

/// `deleted` read inline (a compact `false`) as by the general reading, end
/// position included.
#[test]
fn deleted_flags_read_as_the_general_reading() {
    for word in [
        "false",
        "true",
        "null",
        "fals",
        "f",
        "",
        "0",
        "\"false\"",
        "[]",
        " false",
    ] {
        for tail in ["", ",", "}", "e", "x", " "] {
            let text = format!("{word}{tail}");
            let mut s = Scan::new(&text);
            let ours = s.bool_or_null().map(|v| (v, s.i));
            let mut s = Scan::new(&text);
            let theirs = s.bool_or_null_slow().map(|v| (v, s.i));
            assert_eq!(ours, theirs, "{text}");
            let mut s = Scan::new(&text);
            let expected = match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(serde_json::Value::Bool(v)) => Ok(v),
                Ok(serde_json::Value::Null) => Ok(false),
                _ => Err(()),
            };
            if expected.is_ok() {
                assert_eq!(s.bool_or_null().ok(), expected.ok(), "{text}");
            }
        }
    }
}

/// Versions of every length around the inline reading's 19 digits, followed by
/// what may follow a number (or not), read as `str::parse` reads the number the
/// grammar takes, ending where it ends.
#[test]
fn versions_of_every_length_end_where_the_number_does() {
    let digits = "18446744073709551615999";
    for len in 1..=digits.len() {
        for lead in ["", "0", "9", "-"] {
            for tail in ["", ",", "}", " ", ".5", "e1", "E", ".", "x"] {
                let text = format!("{lead}{}{tail}", &digits[..len]);
                let mut s = Scan::new(&text);
                let ours = s.u64_value().map(|n| (n, s.i));
                let mut s = Scan::new(&text);
                let theirs = s.number().and_then(|(start, end)| {
                    let n = text[start..end].parse::<u64>().map_err(|_| SCHEMA)?;
                    Ok((n, end))
                });
                assert_eq!(ours, theirs, "{text}");
            }
        }
    }
}

/// Nesting around the depth limit, in every mix of arrays and objects: accepted up
/// to [`MAX_DEPTH`] levels, and only if well-formed; the depth back where it was.
#[test]
fn deep_values_are_accepted_up_to_the_depth_limit() {
    for depth in (1..=3).chain(60..=70).chain(120..=132) {
        for mix in [0u64, u64::MAX, 0x5555_5555_5555_5555, 0x0f0f_f0f0_3c3c_c3c3] {
            let object = |n: usize| (mix >> (n % 64)) & 1 == 1;
            let (mut open, mut close) = (String::new(), String::new());
            for n in 0..depth {
                open.push_str(if object(n) { "{\"k\":" } else { "[1," });
            }
            for n in (0..depth).rev() {
                close.push(if object(n) { '}' } else { ']' });
            }
            for (text, levels, well_formed) in [
                (format!("{open}0{close}"), depth, true),
                (format!("{open}[]{close}"), depth + 1, true),
                (format!("{open}0{close}]"), depth, false),
                (format!("{open}0,{close}"), depth, false),
            ] {
                let mut scan = Scan::new(&text);
                let ours = scan.value().and_then(|()| scan.end()).is_ok();
                let expected = well_formed && levels <= MAX_DEPTH;
                assert_eq!(ours, expected, "{levels} levels, mix {mix:x}: {text}");
                let mut scan = Scan::new(&text);
                if scan.value().is_ok() {
                    assert_eq!(scan.depth, 0);
                }
            }
        }
    }
}

#[test]
fn numbers_follow_the_json_grammar() {
    for (n, ok) in [
        ("0", true),
        ("-0.5e+3", true),
        ("01", false),
        ("1.", false),
        ("-", false),
        (".5", false),
        ("1e", false),
    ] {
        let mut s = Scan::new(n);
        assert_eq!(s.value().and_then(|()| s.end()).is_ok(), ok, "{n}");
    }
}

/// The reading of an item as it was before it became loops (closures over one
/// generic comma-separated sequence): the reference for the property test below.
mod closures {
    use std::borrow::Cow;

    use super::super::{Result, SYNTAX, Scan};
    use crate::store::Kind;

    fn sequence<'a>(
        s: &mut Scan<'a>,
        open: u8,
        close: u8,
        mut each: impl FnMut(&mut Scan<'a>) -> Result<()>,
    ) -> Result<()> {
        s.eat(open)?;
        s.enter()?;
        if s.peek() == Some(close) {
            s.i += 1;
            s.depth -= 1;
            return Ok(());
        }
        loop {
            each(s)?;
            match s.peek() {
                Some(b',') => s.i += 1,
                Some(c) if c == close => {
                    s.i += 1;
                    s.depth -= 1;
                    return Ok(());
                }
                _ => return Err(SYNTAX),
            }
        }
    }

    fn object<'a>(
        s: &mut Scan<'a>,
        mut member: impl FnMut(&mut Scan<'a>, Cow<'a, str>) -> Result<()>,
    ) -> Result<()> {
        sequence(s, b'{', b'}', |s| {
            let key = s.string_text()?;
            s.eat(b':')?;
            member(s, key)
        })
    }

    fn optional_array<'a>(
        s: &mut Scan<'a>,
        element: impl FnMut(&mut Scan<'a>) -> Result<()>,
    ) -> Result<()> {
        if s.peek() == Some(b'n') {
            return s.literal(b"null");
        }
        s.shape(b'[')?;
        sequence(s, b'[', b']', element)
    }

    fn optional_object<'a>(
        s: &mut Scan<'a>,
        member: impl FnMut(&mut Scan<'a>, Cow<'a, str>) -> Result<()>,
    ) -> Result<()> {
        if s.peek() == Some(b'n') {
            return s.literal(b"null");
        }
        s.shape(b'{')?;
        object(s, member)
    }

    pub(super) fn item(
        s: &mut Scan<'_>,
        kind: Kind,
        deps: &mut Vec<(Kind, String)>,
    ) -> Result<(Option<String>, u64, bool)> {
        s.shape(b'{')?;
        let (mut key, mut version, mut deleted) = (None, None, false);
        object(s, |s, field| {
            match field.as_ref() {
                "key" => {
                    key = if s.peek() == Some(b'n') {
                        s.literal(b"null").map(|()| None)?
                    } else {
                        Some(s.string_value()?.into_owned())
                    }
                }
                "version" => version = Some(s.u64_value()?),
                "deleted" => deleted = s.bool_or_null()?,
                "prerequisites" if kind == Kind::Flag => optional_array(s, |s| {
                    s.shape(b'{')?;
                    object(s, |s, f| {
                        if f.as_ref() == "key" {
                            let k = s.string_value()?;
                            deps.push((Kind::Flag, k.into_owned()));
                            Ok(())
                        } else {
                            s.value()
                        }
                    })
                })?,
                "rules" => optional_array(s, |s| {
                    optional_object(s, |s, f| {
                        if f.as_ref() == "clauses" {
                            optional_array(s, |s| clause(s, deps))
                        } else {
                            s.value()
                        }
                    })
                })?,
                _ => s.value()?,
            }
            Ok(())
        })?;
        let version = version.ok_or(super::super::SCHEMA)?;
        if deleted {
            deps.clear();
        } else if deps.len() > 1 {
            deps.sort_unstable();
            deps.dedup();
        }
        Ok((key, version, deleted))
    }

    fn clause(s: &mut Scan<'_>, deps: &mut Vec<(Kind, String)>) -> Result<()> {
        let mut segment_match = None;
        let mut early: Vec<String> = Vec::new();
        optional_object(s, |s, f| match f.as_ref() {
            "op" => {
                segment_match = Some(if s.peek() == Some(b'"') {
                    s.string_value()? == "segmentMatch"
                } else {
                    s.value()?;
                    false
                });
                Ok(())
            }
            "values" if segment_match != Some(false) => optional_array(s, |s| {
                if s.peek() == Some(b'"') {
                    let v = s.string_value()?.into_owned();
                    match segment_match {
                        Some(true) => deps.push((Kind::Segment, v)),
                        _ => early.push(v),
                    }
                    Ok(())
                } else {
                    s.value()
                }
            }),
            _ => s.value(),
        })?;
        if segment_match == Some(true) {
            deps.extend(early.into_iter().map(|v| (Kind::Segment, v)));
        }
        Ok(())
    }
}

/// Items of every shape the reader looks into: references, nulls where lists go,
/// escaped names, values of the wrong shape.
const ITEMS: [&str; 8] = [
    r#"{"key":"f","version":2,"on":true,"prerequisites":[{"key":"p","variation":0},{"variation":1,"key":"o"}],"rules":[{"id":"r","clauses":[{"contextKind":"user","attribute":"key","op":"segmentMatch","values":["s","t",3]},{"values":["a"],"op":"segmentMatch"},{"values":["b"],"op":"in","negate":false}],"trackEvents":false}],"fallthrough":{"rollout":{"variations":[{"variation":0,"weight":6441},{"variation":1,"weight":-2.5e+3}]}},"variations":[true,false,null,{"a":[]}],"deleted":false}"#,
    r#"{"key":null,"version":1,"deleted":null,"rules":[null,{"clauses":null},{"clauses":[null,{"op":null,"values":null},{"op":"segmentMatch","values":null}]}],"prerequisites":null}"#,
    r#"{"k\u0065y":"a\"b","versio\u006e":4,"rul\u0065s":[{"cl\u0061uses":[{"o\u0070":"segm\u0065ntMatch","values":["x\n"]}]}],"pr\u0065requisites":[{"k\u0065y":"q"}]}"#,
    r#"{ "key" : "s" , "version" : 7 , "included" : [ "a" , "b" ] , "rules" : [ { "clauses" : [ { "op" : "segmentMatch" , "values" : [ "z" ] } ] } ] , "deleted" : true }"#,
    r#"{"key":1,"version":"2","deleted":"no","rules":{"clauses":[]},"prerequisites":[1,[]]}"#,
    r#"{"version":3,"rules":[{"clauses":[{"values":["e"],"op":1}]},[]],"prerequisites":[{"key":[1]}]}"#,
    r#"{"key":"g","version":5,"targets":[{"values":["u1","u2"],"variation":0}],"rules":[{"id":"r","clauses":[{"attribute":"a","op":"in","values":["x","y\"z","w"],"negate":false},{"op":"endsWith","values":[]},{"op":"lessThan","values":[1,"v"]},{"op":"in","values":["q"]},{"op":"segmentMatch","values":["s"]}],"variation":1}],"fallthrough":{"variation":0},"deleted":false}"#,
    r#"{"key":"h","version":1234567890123456789,"on":false,"prerequisites":[],"salt":"s","targets":[],"rules":[],"deleted":true}"#,
];

/// An item of `ITEMS` and a kind flag, with `edits` edits of characters from `inserts`
/// (or removals), each made by `apply`.
fn edited_with(
    inserts: &'static [char],
    edits: std::ops::Range<usize>,
    apply: fn(&mut Vec<char>, prop::sample::Index, Option<char>),
) -> impl Strategy<Value = (String, bool)> {
    let edit = (
        any::<prop::sample::Index>(),
        prop::option::of(prop::sample::select(inserts)),
    );
    (
        prop::sample::select(&ITEMS[..]),
        any::<bool>(),
        prop::collection::vec(edit, edits),
    )
        .prop_map(move |(item, flag, edits)| {
            let mut chars: Vec<char> = item.chars().collect();
            for (at, insert) in edits {
                apply(&mut chars, at, insert);
            }
            (chars.into_iter().collect(), flag)
        })
}

fn edited_item() -> impl Strategy<Value = (String, bool)> {
    const INSERTS: &[char] = &[
        '{', '}', '[', ']', ',', '"', ':', ' ', '\\', 'n', '1', '-', 'é',
    ];
    edited_with(INSERTS, 0..4, |chars, at, insert| {
        let at = at.index(chars.len() + 1);
        match insert {
            Some(c) => chars.insert(at, c),
            None if at < chars.len() => drop(chars.remove(at)),
            None => {}
        }
    })
}

/// An item with a few separators or brackets put (or taken away) right next to
/// others, where the fast paths for the usual `,"`, `":` and `}` look.
fn item_edited_at_tokens() -> impl Strategy<Value = (String, bool)> {
    const INSERTS: &[char] = &['{', '}', '[', ']', ',', '"', ':', ' '];
    edited_with(INSERTS, 1..3, |chars, at, insert| {
        let tokens: Vec<usize> = (0..chars.len())
            .filter(|&n| matches!(chars[n], '{' | '}' | '[' | ']' | ',' | '"' | ':'))
            .collect();
        let at = tokens[at.index(tokens.len())];
        match insert {
            Some(c) => chars.insert(at + 1, c),
            None => drop(chars.remove(at)),
        }
    })
}

/// A clause's `values` after a known `op` (the inline skip of arrays of strings),
/// well-formed or not, read as before.
#[test]
fn clause_values_after_the_op_read_as_before() {
    let values = [
        r#"["x"]"#,
        r#"["x","y"]"#,
        r#"[]"#,
        r#"[ "x"]"#,
        r#"["x" ]"#,
        r#"["x" ,"y"]"#,
        r#"["x",1]"#,
        r#"["x",1"]"#,
        r#"["x",1,"y"]"#,
        r#"["x","y""#,
        r#"["x"#,
        r#"["x\"]"#,
        r#"["x\"y"]"#,
        r#"["x",]"#,
        r#"[,"x"]"#,
        r#"["x""y"]"#,
        r#"["x"],"#,
        r#"["x"]]"#,
        "[\"x\u{1}\"]",
        r#"["x",{"a":1}]"#,
        r#"["x",["y"]]"#,
        r#"["x",null]"#,
        r#""x""#,
        r#"{"a":"b"}"#,
        r#"["x"}"#,
        r#"["x",,"y"]"#,
    ];
    for v in values {
        for op in [r#""in""#, r#""segmentMatch""#, "1"] {
            let text = format!(
                r#"{{"version":1,"rules":[{{"clauses":[{{"op":{op},"values":{v},"negate":false}}]}}]}}"#
            );
            items_read_alike(&text, true).unwrap();
        }
    }
}

fn items_read_alike(text: &str, flag: bool) -> std::result::Result<(), TestCaseError> {
    let kind = if flag { Kind::Flag } else { Kind::Segment };
    let (mut deps, mut before_deps) = (Vec::new(), Vec::new());
    let mut s = Scan::new(text);
    let ours = s.item(kind, &mut deps).map(|(key, version, deleted)| {
        ((key.map(Cow::into_owned), version, deleted), s.i, s.depth)
    });
    let mut s = Scan::new(text);
    let before = closures::item(&mut s, kind, &mut before_deps).map(|r| (r, s.i, s.depth));
    prop_assert_eq!(&ours, &before, "{:?}", text);
    if ours.is_ok() {
        prop_assert_eq!(deps, before_deps);
    }
    Ok(())
}

proptest! {
    /// The item reader gives the results, errors and end positions of the reading
    /// it replaced, on items of every shape, damaged or not.
    #[test]
    fn items_read_as_before((text, flag) in edited_item()) {
        items_read_alike(&text, flag)?;
    }
}

proptest! {
    // Damage where it matters is rarer than anywhere: more cases.
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// The same, on damage next to the tokens.
    #[test]
    fn items_edited_at_tokens_read_as_before((text, flag) in item_edited_at_tokens()) {
        items_read_alike(&text, flag)?;
    }
}
