//! The resumable data-set scan against the plain recursive reading of the whole text.

use bytes::Bytes;
use proptest::prelude::*;

use super::super::{Result, SCHEMA, Scan};
use super::{DataSetScan, GATHER, SMALL_PIECE};
use crate::store::{Change, Item, Kind};

/// The plain recursive reading of data sets that [`reference`] is built on.
impl Scan<'_> {
    /// `{"KEY": item, …}`: each item becomes a change keyed by its map key (the plain
    /// recursive reading, the reference for [`DataSetScan`] in tests).
    fn items(&mut self, whole: &Bytes, kind: Kind, out: &mut Vec<Change>) -> Result<()> {
        self.shape(b'{')?;
        self.object(|s, key| {
            s.peek();
            let start = s.i;
            let mut depends_on = Vec::new();
            let (_, version, deleted) = s.item(kind, &mut depends_on)?;
            out.push(Change {
                kind,
                key: key.into_owned(),
                item: Item {
                    version,
                    deleted,
                    raw: whole.slice(start..s.i),
                },
                depends_on,
            });
            Ok(())
        })
    }

    /// `{"flags": {…}, "segments": {…}}`, both required.
    fn all_data(&mut self, whole: &Bytes, out: &mut Vec<Change>) -> Result<()> {
        let (mut flags, mut segments) = (false, false);
        self.shape(b'{')?;
        self.object(|s, key| match key.as_ref() {
            "flags" => {
                flags = true;
                s.items(whole, Kind::Flag, out)
            }
            "segments" => {
                segments = true;
                s.items(whole, Kind::Segment, out)
            }
            _ => s.value(),
        })?;
        if flags && segments {
            Ok(())
        } else {
            Err(SCHEMA)
        }
    }
}

/// The plain reading: one recursive pass over the whole text.
fn reference(whole: &Bytes, envelope: bool) -> Result<Vec<Change>> {
    let mut out = Vec::new();
    let text = std::str::from_utf8(whole).map_err(|_| super::super::SYNTAX)?;
    let mut s = Scan::new(text);
    if envelope {
        let mut data = false;
        s.shape(b'{')?;
        s.object(|s, key| {
            if key.as_ref() == "data" {
                data = true;
                s.all_data(whole, &mut out)
            } else {
                s.value()
            }
        })?;
        if !data {
            return Err(SCHEMA);
        }
    } else {
        s.all_data(whole, &mut out)?;
    }
    s.end()?;
    Ok(out)
}

/// Read `whole` in pieces cut at `cuts` (the last piece through `finish_rest`).
fn resumed(whole: &Bytes, envelope: bool, cuts: &[usize]) -> Result<Vec<Change>> {
    let mut scan = DataSetScan::new(envelope);
    let mut cuts = cuts.to_vec();
    cuts.sort_unstable();
    let mut at = 0;
    for cut in cuts {
        let cut = cut.min(whole.len());
        scan.advance(&whole.slice(at..cut));
        at = cut;
        assert!(scan.scanned() <= cut);
    }
    scan.finish_rest(&whole.slice(at..)).map_err(|(e, text)| {
        assert_eq!(text, whole, "the whole text is handed back with an error");
        e
    })
}

fn item_text() -> impl Strategy<Value = String> {
    let prerequisite = "[a-c]{1,2}".prop_map(|k| format!(r#"{{"key":"{k}","variation":0}}"#));
    let clause = ("[a-c]{1,2}", any::<bool>()).prop_map(|(v, seg)| {
        let op = if seg { "segmentMatch" } else { "in" };
        format!(r#"{{"attribute":"key","op":"{op}","values":["{v}", "x"],"negate":false}}"#)
    });
    (
        "[a-d]{1,2}",
        0u64..4,
        any::<bool>(),
        prop::collection::vec(prerequisite, 0..3),
        prop::collection::vec(clause, 0..3),
        "[ \\n]{0,1}",
    )
        .prop_map(|(key, version, deleted, prereqs, clauses, ws)| {
            format!(
                r#"{{"key":"{key}",{ws}"version":{version},"deleted":{deleted},"prerequisites":[{}],"rules":[{{"id":"r","clauses":[{}]}}],"salt":"s\u00e9\"q","variations":[true,1.5e3,null,{{"a":[]}}]}}"#,
                prereqs.join(","),
                clauses.join(",")
            )
        })
}

fn items_text() -> impl Strategy<Value = String> {
    prop::collection::vec(("[a-d]{1,2}", item_text()), 0..5).prop_map(|items| {
        let members: Vec<String> = items
            .into_iter()
            .map(|(key, item)| format!(r#""{key}":{item}"#))
            .collect();
        format!("{{{}}}", members.join(","))
    })
}

/// Data sets and `put` bodies, mostly well formed, some with members missing, extra,
/// repeated or reordered.
fn data_set_text() -> impl Strategy<Value = (String, bool)> {
    (
        items_text(),
        items_text(),
        0u8..6,
        any::<bool>(),
        prop::option::of(Just(r#""extra":{"flags":[1,{"x":"}"}]}"#)),
    )
        .prop_map(|(flags, segments, shape, envelope, extra)| {
            let mut members = vec![
                format!(r#""flags":{flags}"#),
                format!(r#""segments":{segments}"#),
            ];
            match shape {
                1 => members.reverse(),
                2 => drop(members.pop()),
                3 => members.push(r#""flags":[]"#.to_owned()),
                _ => {}
            }
            if let Some(extra) = extra {
                members.insert(1, extra.to_owned());
            }
            let data = format!("{{{}}}", members.join(","));
            if envelope {
                let body = match shape {
                    4 => format!(r#"{{"path":"/","dat":{data}}}"#),
                    5 => format!(r#"{{"data":{data},"path":"/","data":{data}}}"#),
                    _ => format!(r#"{{"path":"/","data":{data}}}"#),
                };
                (body, true)
            } else {
                (data, false)
            }
        })
}

/// A few edits of the bytes: deletions, and insertions of JSON punctuation, whitespace
/// and invalid UTF-8.
fn edited() -> impl Strategy<Value = (Vec<u8>, bool)> {
    let edit = (
        any::<prop::sample::Index>(),
        prop::option::of(prop_oneof![
            Just(b'{'),
            Just(b'}'),
            Just(b','),
            Just(b'"'),
            Just(b':'),
            Just(b' '),
            Just(b'1'),
            Just(0xFF),
            Just(0xC3),
        ]),
    );
    (data_set_text(), prop::collection::vec(edit, 0..3)).prop_map(|((text, envelope), edits)| {
        let mut bytes = text.into_bytes();
        for (at, insert) in edits {
            let at = at.index(bytes.len() + 1);
            match insert {
                Some(b) => bytes.insert(at, b),
                None if at < bytes.len() => drop(bytes.remove(at)),
                None => {}
            }
        }
        (bytes, envelope)
    })
}

proptest! {
    #[test]
    fn one_pass_matches_the_recursive_reading((bytes, envelope) in edited()) {
        let whole = Bytes::from(bytes);
        prop_assert_eq!(DataSetScan::new(envelope).finish(&whole), reference(&whole, envelope));
    }

    #[test]
    fn reading_in_pieces_never_changes_the_result(
        (bytes, envelope) in edited(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let whole = Bytes::from(bytes);
        let cuts: Vec<usize> = cuts.iter().map(|c| c.index(whole.len() + 1)).collect();
        prop_assert_eq!(resumed(&whole, envelope, &cuts), reference(&whole, envelope));
    }

    /// A large `put` (mostly gathered reads, some large ones), maybe broken by one
    /// edit, in reads of random sizes: the result of one read, errors included.
    #[test]
    fn small_and_large_reads_of_a_large_put_read_the_same(
        sizes in prop::collection::vec(prop_oneof![1usize..16, 900usize..5000], 1..40),
        edit in prop::option::of((any::<prop::sample::Index>(), prop_oneof![Just(b'}'), Just(b'"'), Just(0xFF)])),
    ) {
        let mut bytes = large_put(300).to_vec();
        if let Some((at, b)) = edit {
            let at = at.index(bytes.len());
            bytes[at] = b;
        }
        let whole = Bytes::from(bytes);
        let (got, kept) = in_pieces(&whole, &sizes);
        prop_assert_eq!(got, reference(&whole, true));
        // Each piece kept is a gathered one of GATHER bytes, a read of SMALL_PIECE or
        // more, or the last.
        prop_assert!(kept <= whole.len() / SMALL_PIECE + 2, "{} pieces", kept);
    }
}

#[test]
fn every_prefix_of_a_put_reads_the_same() {
    let whole = Bytes::from_static(
        br#"{"path":"/","data":{"flags":{"a":{"key":"a","version":2,"prerequisites":[{"key":"b"}]},"b":{"key":"b","version":1,"rules":[{"clauses":[{"op":"segmentMatch","values":["s"]}]}]}},"segments":{"s":{"key":"s","version":4,"deleted":true}}}}"#,
    );
    let expected = reference(&whole, true).unwrap();
    assert_eq!(expected.len(), 3);
    for step in 1..=whole.len() {
        let cuts: Vec<usize> = (0..=whole.len()).step_by(step).collect();
        let got = resumed(&whole, true, &cuts).unwrap();
        assert_eq!(got, expected, "reads of {step} bytes");
    }
}

/// A `put` of `n` flags with prerequisites and segment rules, about 150 bytes each.
fn large_put(n: usize) -> Bytes {
    let items: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#""f{i}":{{"key":"f{i}","version":{i},"prerequisites":[{{"key":"f{}","variation":0}}],"rules":[{{"clauses":[{{"op":"segmentMatch","values":["s{}"]}}]}}]}}"#,
                i / 2,
                i % 7
            )
        })
        .collect();
    Bytes::from(format!(
        r#"{{"path":"/","data":{{"flags":{{{}}},"segments":{{"s1":{{"key":"s1","version":3}}}}}}}}"#,
        items.join(",")
    ))
}

/// Read `whole` in pieces of the sizes `sizes` (cycled), the last one through
/// `finish_rest`; returns the result and how many pieces the scan kept at the end.
///
/// Also checks that each piece kept but the last is a read of at least
/// [`SMALL_PIECE`] bytes, or [`GATHER`] bytes gathered: never a small one.
fn in_pieces(whole: &Bytes, sizes: &[usize]) -> (Result<Vec<Change>>, usize) {
    let mut scan = DataSetScan::new(true);
    let mut at = 0;
    for size in sizes.iter().cycle() {
        let end = at + size.max(&1);
        if end >= whole.len() {
            break;
        }
        scan.advance(&whole.slice(at..end));
        at = end;
    }
    let mut kept = scan.clone();
    kept.advance(&whole.slice(at..));
    kept.read_gathered();
    if let Some((_, all_but_last)) = kept.pieces.split_last() {
        let small: Vec<usize> = all_but_last
            .iter()
            .map(Bytes::len)
            .filter(|&len| len < SMALL_PIECE)
            .collect();
        assert!(
            small.is_empty(),
            "small pieces kept: {small:?} (reads of {sizes:?})"
        );
    }
    let kept = kept.pieces.len();
    let result = scan.finish_rest(&whole.slice(at..)).map_err(|(e, text)| {
        assert_eq!(text, whole, "the whole text is handed back with an error");
        e
    });
    (result, kept)
}

#[test]
fn tiny_reads_keep_few_pieces_and_read_the_same() {
    let whole = large_put(2000);
    let expected = reference(&whole, true).unwrap();
    assert_eq!(expected.len(), 2001);
    for size in [1, 2, 7, 64, 1023] {
        let (got, kept) = in_pieces(&whole, &[size]);
        assert_eq!(got.unwrap(), expected, "reads of {size} bytes");
        // Gathered into pieces of GATHER bytes or more: not one piece per read.
        assert!(
            kept <= whole.len() / GATHER + 1,
            "{kept} pieces kept for {} bytes in reads of {size}",
            whole.len()
        );
    }
    // Pieces of SMALL_PIECE bytes or more are read where they are: items inside them
    // are slices of the text, not copies.
    let (got, kept) = in_pieces(&whole, &[SMALL_PIECE]);
    let got = got.unwrap();
    assert_eq!(kept, whole.len().div_ceil(SMALL_PIECE));
    let slices = got
        .iter()
        .filter(|c| whole.as_ptr_range().contains(&c.item.raw.as_ptr()))
        .count();
    assert!(
        slices > got.len() / 2,
        "{slices} of {} are slices",
        got.len()
    );
}

#[test]
fn a_read_gathered_with_tiny_ones_keeps_its_place() {
    let whole = large_put(500);
    let expected = reference(&whole, true).unwrap();
    // Small and large reads in turn: the order of the bytes is kept.
    for sizes in [
        &[1, 5000][..],
        &[1, 2000],
        &[3000, 1, 1, 900],
        &[1023, 1024, 1025],
        &[20_000, 7],
    ] {
        let (got, _) = in_pieces(&whole, sizes);
        assert_eq!(got.unwrap(), expected, "reads of {sizes:?} bytes");
    }
}

#[test]
fn reading_ahead_gets_most_of_a_large_put_before_it_ends() {
    let items: Vec<String> = (0..1000)
        .map(|i| format!(r#""f{i}":{{"key":"f{i}","version":{i}}}"#))
        .collect();
    let text = format!(
        r#"{{"data":{{"segments":{{}},"flags":{{{}}}}}}}"#,
        items.join(",")
    );
    let whole = Bytes::from(text);
    let mut scan = DataSetScan::new(true);
    // The rest is not a small piece either (a small one would be gathered: copied).
    let last = whole.len() / 1024 * 1024 - SMALL_PIECE;
    for at in (0..last).step_by(1024) {
        scan.advance(&whole.slice(at..at + 1024));
    }
    assert!(
        scan.scanned() + 2048 + SMALL_PIECE > whole.len(),
        "{} of {}",
        scan.scanned(),
        whole.len()
    );
    let changes = scan.finish_rest(&whole.slice(last..)).unwrap();
    assert_eq!(changes.len(), 1000);
    // Most items are slices of the pieces; those cut by a piece's end are copies.
    let copies = changes
        .iter()
        .filter(|c| !whole.as_ptr_range().contains(&c.item.raw.as_ptr()))
        .count();
    assert!(copies <= whole.len() / 1024 + 1, "{copies} copies");
}

#[test]
fn a_malformed_start_is_reread_rarely_and_judged_at_the_end() {
    // An unterminated string: every advance fails at the same step.
    let mut text = br#"{"data":{"flags":{"a":{"key":"a","version":1,"salt":"x"#.to_vec();
    text.resize(1 << 20, b'x');
    let whole = Bytes::from(text);
    let mut scan = DataSetScan::new(true);
    let mut tries = 0;
    for at in (0..whole.len()).step_by(1024) {
        let before = scan.retry_at;
        scan.advance(&whole.slice(at..at + 1024));
        tries += usize::from(scan.retry_at != before);
    }
    // Retries double the text each time: about log2(1 MiB / 1 KiB) of them.
    assert!(tries <= 24, "{tries} tries");
    assert_eq!(
        scan.finish_rest(&Bytes::new()).map_err(|(e, _)| e),
        reference(&whole, true)
    );
}
