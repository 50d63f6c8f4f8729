//! Compact JSON written straight to a byte buffer, for the evaluated flags: the same
//! bytes as `serde_json`'s compact serializer, with a faster path for strings that need
//! no escaping (most keys and values), which go eight bytes at a time.

use serde_json::Value;

/// A JSON string: `s` quoted and escaped as serde_json escapes it (`"`, `\`, and the
/// control characters below U+0020; nothing else).
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    // `bytes[copied..i]` is still to be copied.
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        // Eight bytes at a time (the last ones padded with spaces): most have nothing to
        // escape.
        let word = match bytes.get(i..i + 8) {
            Some(chunk) => chunk.try_into().unwrap_or_default(),
            None => {
                let mut padded = [b' '; 8];
                padded[..bytes.len() - i].copy_from_slice(&bytes[i..]);
                padded
            }
        };
        let end = (i + 8).min(bytes.len());
        if !may_need_escape(u64::from_le_bytes(word)) {
            i = end;
            continue;
        }
        for (at, &b) in bytes.iter().enumerate().take(end).skip(i) {
            let escape: &[u8] = match b {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0x08 => b"\\b",
                0x0c => b"\\f",
                0..=0x1f => b"",
                _ => continue,
            };
            out.extend_from_slice(&bytes[copied..at]);
            if escape.is_empty() {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            } else {
                out.extend_from_slice(escape);
            }
            copied = at + 1;
        }
        i = end;
    }
    out.extend_from_slice(&bytes[copied..]);
    out.push(b'"');
}

/// Whether one of the eight bytes of `word` may be `"`, `\` or below 0x20 (never false
/// when one is).
fn may_need_escape(word: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero_byte = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let below_space = word.wrapping_sub(ONES * 0x20) & !word & HIGH;
    below_space
        | zero_byte(word ^ (ONES * u64::from(b'"')))
        | zero_byte(word ^ (ONES * u64::from(b'\\')))
        != 0
}

/// `value` as compact JSON, object members in the map's order (as serde_json writes
/// it).
pub(crate) fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_json(out, n),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(members) => {
            out.push(b'{');
            for (i, (key, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                write_value(out, item);
            }
            out.push(b'}');
        }
    }
}

/// `value` as compact JSON by its `Serialize` (numbers, reasons). Writing to a `Vec`
/// does not fail, nor does serializing these values.
pub(crate) fn write_json<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    let _ = serde_json::to_writer(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let mut cases: Vec<String> = vec![
            String::new(),
            "plain".into(),
            "exactly8".into(),
            "sixteen-bytes-ok".into(),
            "quote\"in the middle of a long string".into(),
            "back\\slash".into(),
            "ünïcödé → ☃ and 𝄞, then \"quotes\"".into(),
            "\u{7f}\u{80}del".into(),
        ];
        for b in 0u8..0x20 {
            let c = char::from(b);
            cases.push(format!("{c}"));
            cases.push(format!("abcdefg{c}"));
            cases.push(format!("abcdefgh{c}ijklmnop{c}"));
            cases.push(format!("{c}abcdefghijklmnop"));
        }
        for s in cases {
            let mut out = Vec::new();
            write_str(&mut out, &s);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(&s).unwrap(),
                "{s:?}"
            );
        }
    }

    #[test]
    fn values_are_written_as_serde_json_writes_them() {
        let value = serde_json::json!({
            "b": [1, -2, 2.5, 1e300, null, true, false, "x\ny"],
            "a": {"nested": {"deep": [[], {}]}, "é": "\u{1}"},
            "": 0,
        });
        let mut out = Vec::new();
        write_value(&mut out, &value);
        assert_eq!(String::from_utf8(out).unwrap(), value.to_string());
    }
}
