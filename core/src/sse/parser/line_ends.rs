//! Finding the CR and LF bytes of a read, a word (8 bytes) at a time.

use std::mem;

/// Bytes scanned a word at a time without finding a terminator before handing over to
/// `memchr`: most SSE lines (blank lines, `event: patch`, small `data`) are shorter.
const DRY_BYTES: usize = 128;

/// The CR and LF positions of one read, in order, found a word (8 bytes) at a time.
///
/// Each word is loaded once and all the terminators in it are taken from one bit mask,
/// so short lines cost a few instructions each; a long line hands over to `memchr`.
pub(super) struct LineEnds<'a> {
    bytes: &'a [u8],
    /// Offset of the word that `mask` describes.
    word: usize,
    /// The high bit of each byte of that word that may be an unreturned CR or LF.
    mask: u64,
    /// The bytes of that word.
    bits: u64,
    /// The bytes of the words loaded since the last [`take_high`](Self::take_high) and of
    /// the word then current, OR-ed: its high bits are clear if all are ASCII.
    seen: u64,
}

impl<'a> LineEnds<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        let bits = load_word(bytes, 0);
        Self {
            bytes,
            word: 0,
            mask: candidates(bits),
            bits,
            seen: bits,
        }
    }

    /// The OR of the bytes looked at since the last call: its high bits are clear if the
    /// text since the end returned before the last call is ASCII (padding past the end
    /// of the read and a `memchr` scan count as not ASCII).
    #[inline(always)]
    pub(super) fn take_high(&mut self) -> u64 {
        mem::replace(&mut self.seen, self.bits)
    }

    /// The caller consumed the terminator at `at`, the byte after the one returned last.
    ///
    /// Only a shortcut: the terminator is skipped if it is in the current word (then it
    /// is the lowest candidate left); otherwise the caller skips it when it comes.
    #[inline(always)]
    pub(super) fn consume(&mut self, at: usize) {
        if at < self.word + 8 {
            self.mask &= self.mask.wrapping_sub(1);
        }
    }
}

impl Iterator for LineEnds<'_> {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        loop {
            while self.mask != 0 {
                let at = self.word + (self.mask.trailing_zeros() / 8) as usize;
                self.mask &= self.mask - 1;
                if let Some(b'\n' | b'\r') = self.bytes.get(at) {
                    return Some(at);
                }
            }
            // The next word with a candidate, within `DRY_BYTES`.
            let start = self.word + 8;
            let rest = self.bytes.get(start..).unwrap_or_default();
            let window = rest.get(..DRY_BYTES).unwrap_or(rest);
            let mut words = window.chunks_exact(8);
            let mut at = start;
            for word in words.by_ref() {
                let bits = u64::from_le_bytes(word.try_into().unwrap_or_default());
                self.seen |= bits;
                let mask = candidates(bits);
                if mask != 0 {
                    self.word = at;
                    self.mask = mask;
                    self.bits = bits;
                    break;
                }
                at += 8;
            }
            if self.mask != 0 {
                continue;
            }
            let tail = words.remainder();
            if !tail.is_empty() {
                // The end of the read: pad the last partial word.
                self.word = at;
                self.bits = load_word(tail, 0);
                self.seen |= self.bits;
                self.mask = candidates(self.bits);
                if self.mask != 0 {
                    continue;
                }
                return None;
            }
            if at >= self.bytes.len() {
                self.word = at;
                return None;
            }
            // A long line: continue with memchr's vector scan.
            let Some(end) = memchr::memchr2(b'\n', b'\r', rest) else {
                self.word = self.bytes.len();
                return None;
            };
            self.word = start + end;
            self.bits = load_word(self.bytes, self.word);
            // The bytes memchr skipped were not looked at.
            self.seen |= self.bits | HIGH;
            self.mask = candidates(self.bits);
        }
    }
}

/// The high bit of every byte of a word.
pub(super) const HIGH: u64 = u64::from_le_bytes([0x80; 8]);

/// The 8 bytes at `at` as a little-endian word, padded with zeros past the end.
#[inline]
fn load_word(bytes: &[u8], at: usize) -> u64 {
    if let Some(word) = bytes.get(at..at + 8) {
        return u64::from_le_bytes(word.try_into().unwrap_or_default());
    }
    let mut word = [0xFF; 8];
    let tail = bytes.get(at..).unwrap_or_default();
    if let Some(dst) = word.get_mut(..tail.len()) {
        dst.copy_from_slice(tail);
    }
    u64::from_le_bytes(word)
}

/// The high bit of each byte of `word` that may be a CR or LF: every CR and LF, and
/// possibly other bytes (checked by the caller).
///
/// The classic "has a byte less than n" test (here n = 0x0E, above CR and LF) flags every
/// byte below n, plus bytes that a borrow from a flagged byte below them makes look
/// small: no byte is missed, and false candidates are rare in text.
#[inline]
fn candidates(word: u64) -> u64 {
    const BELOW: u64 = u64::from_le_bytes([0x0E; 8]);
    word.wrapping_sub(BELOW) & !word & HIGH
}
