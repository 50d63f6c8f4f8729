//! A single-pass, validating JSON scanner that splits a flag data set into raw item
//! slices and reads the few fields the store needs, without building any JSON model.
//!
//! Splitting a 50 MB `put` with serde_json takes two full passes (one to find each
//! item's raw span, one to read its fields); this scanner does both in one, faster
//! than serde_json merely skips the same bytes: string ends come from a bit mask of
//! quotes, backslashes and control characters per 64-byte block (a few vector steps
//! per 16 bytes), unread values are skipped by one loop with the open containers as
//! bits (the usual compact shapes, such as `,"name":` or a clause's array of strings,
//! by shorter paths that leave anything else to the general reading), and it keeps
//! serde_json's verdicts: syntax errors
//! are [`DecodeError::MalformedJson`], well-formed JSON of the wrong shape is
//! [`DecodeError::Schema`]. Nesting is limited to [`MAX_DEPTH`] levels.
//!
//! This file holds the [`Scan`] cursor (position, depth, whitespace) and the number
//! grammar; the other files add to it by what they read: `specials` (the 64-byte
//! block masks that strings are scanned with), `strings`, `values` (literals, numbers,
//! and values skipped whole), `members` (containers, member names and the typed values
//! the store reads), `items` (one flag or segment, data sets of them, and the
//! single-item entry points) and `data_set` (the resumable scan of a whole data set).

use super::item::DecodeError;

mod data_set;
mod items;
mod members;
mod specials;
mod strings;
mod values;

pub(crate) use data_set::DataSetScan;
pub use data_set::split_all_data;
pub use items::decode;
pub(crate) use items::{patch, put_object};
use specials::Specials;

/// Deepest nesting accepted (serde_json's default recursion limit).
pub const MAX_DEPTH: usize = 128;

type Result<T> = std::result::Result<T, DecodeError>;

const SYNTAX: DecodeError = DecodeError::MalformedJson;
const SCHEMA: DecodeError = DecodeError::Schema;

struct Scan<'a> {
    /// The input, checked to be UTF-8 once, so string slices need no second check.
    t: &'a str,
    b: &'a [u8],
    i: usize,
    depth: usize,
    /// The special characters of the last 64-byte block of `b` looked at.
    specials: Specials,
}

impl<'a> Scan<'a> {
    fn new(t: &'a str) -> Self {
        Self {
            t,
            b: t.as_bytes(),
            i: 0,
            depth: 0,
            specials: Specials {
                block: usize::MAX,
                mask: 0,
            },
        }
    }

    /// The next byte that is not whitespace, without consuming it.
    #[inline(always)]
    fn peek(&mut self) -> Option<u8> {
        // Compact JSON has no whitespace: one compare for the usual case.
        match self.b.get(self.i) {
            Some(&c) if c > b' ' => Some(c),
            _ => self.peek_past_whitespace(),
        }
    }

    #[inline(never)]
    fn peek_past_whitespace(&mut self) -> Option<u8> {
        self.i = past_whitespace(self.b, self.i);
        self.b.get(self.i).copied()
    }

    #[inline]
    fn eat(&mut self, c: u8) -> Result<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(SYNTAX)
        }
    }

    fn end(&mut self) -> Result<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(SYNTAX),
        }
    }

    fn enter(&mut self) -> Result<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(SYNTAX)
        } else {
            Ok(())
        }
    }
}

/// The first position at or after `i` that is not JSON whitespace (`b.len()` if none).
#[cold]
#[inline(never)]
fn past_whitespace(b: &[u8], i: usize) -> usize {
    i + b
        .get(i..)
        .unwrap_or_default()
        .iter()
        .take_while(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        .count()
}

/// `b[i..]` starts with `word`.
#[inline(always)]
fn starts_with<const N: usize>(b: &[u8], i: usize, word: &[u8; N]) -> bool {
    b.get(i..).and_then(<[u8]>::first_chunk::<N>) == Some(word)
}

/// The end of the number per the JSON grammar that starts at `i`.
#[inline]
fn number_end(b: &[u8], mut i: usize) -> Result<usize> {
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits_end(b, i + 1),
        _ => return Err(SYNTAX),
    }
    match b.get(i) {
        Some(b'.' | b'e' | b'E') => fraction_end(b, i),
        _ => Ok(i),
    }
}

/// The end of the digits from `i` on.
#[inline(always)]
fn digits_end(b: &[u8], mut i: usize) -> usize {
    while let Some(c) = b.get(i)
        && c.is_ascii_digit()
    {
        i += 1;
    }
    i
}

/// The end of a number's fraction and exponent, from `i` (on a `.`, `e` or `E`).
#[inline(never)]
fn fraction_end(b: &[u8], mut i: usize) -> Result<usize> {
    if b.get(i) == Some(&b'.') {
        let end = digits_end(b, i + 1);
        if end == i + 1 {
            return Err(SYNTAX);
        }
        i = end;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let end = digits_end(b, i);
        if end == i {
            return Err(SYNTAX);
        }
        i = end;
    }
    Ok(i)
}

#[cfg(test)]
mod tests;
