//! The byte-level syntax of a line: field name and value, `retry` digits, UTF-8 decoding.

use std::borrow::Cow;

/// Split a non-empty line into its field name and the offset of its value.
///
/// The name runs up to the first colon (empty for a comment); one space after the colon
/// is not part of the value. A line without a colon is all name, with an empty value.
/// Returns `None` for a blank line.
pub(super) fn split_field(line: &[u8]) -> Option<(&[u8], usize)> {
    if line.is_empty() {
        return None;
    }
    let Some(colon) = find_colon(line) else {
        return Some((line, line.len()));
    };
    let name = line.get(..colon).unwrap_or_default();
    let value_start = if line.get(colon + 1) == Some(&b' ') {
        colon + 2
    } else {
        colon + 1
    };
    Some((name, value_start))
}

/// A `retry` value: ASCII digits only, not empty; saturates instead of overflowing.
pub(super) fn parse_retry(value: &[u8]) -> Option<u64> {
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(value.iter().fold(0_u64, |millis, digit| {
        millis
            .saturating_mul(10)
            .saturating_add(u64::from(digit - b'0'))
    }))
}

/// Decode UTF-8, replacing invalid sequences with U+FFFD (validation first: the common
/// valid case does not go through the lossy decoder).
pub(super) fn decode(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// A field value without the one space that may follow the colon.
pub(super) fn strip_space(value: &[u8]) -> &[u8] {
    match value {
        [b' ', rest @ ..] => rest,
        _ => value,
    }
}

/// Bytes scanned one by one before handing over to `memchr`: its dispatch costs more
/// than a short scalar scan, and field names are short.
const SCALAR_HEAD: usize = 16;

/// Index of the first colon (field names are short).
fn find_colon(bytes: &[u8]) -> Option<usize> {
    let head = bytes.get(..SCALAR_HEAD).unwrap_or(bytes);
    if let Some(colon) = head.iter().position(|&b| b == b':') {
        return Some(colon);
    }
    let tail = bytes.get(head.len()..)?;
    memchr::memchr(b':', tail).map(|colon| colon + head.len())
}
