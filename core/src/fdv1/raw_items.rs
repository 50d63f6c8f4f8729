//! Zero-copy slicing of raw JSON out of an event's data.

use bytes::Bytes;

/// The part of `whole` that `part` borrows from it, without copying; a copy if `part`
/// does not lie inside `whole`.
pub(crate) fn slice_of(whole: &Bytes, part: &str) -> Bytes {
    let base = whole.as_ptr() as usize;
    let start = (part.as_ptr() as usize).wrapping_sub(base);
    match start.checked_add(part.len()) {
        Some(end) if start <= whole.len() && end <= whole.len() => whole.slice(start..end),
        _ => Bytes::copy_from_slice(part.as_bytes()),
    }
}
