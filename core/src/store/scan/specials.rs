//! Where the quotes, backslashes and control characters of a text are, 64 bytes at a time.

use wide::{i8x16, u8x16};

/// The 64-byte block of a text that starts at `block` (`usize::MAX`: none yet) has a
/// quote, backslash or control character where `mask` has a bit.
#[derive(Clone, Copy)]
pub(super) struct Specials {
    pub(super) block: usize,
    pub(super) mask: u64,
}

impl Specials {
    /// The position of the first quote, backslash or control character of `b` at or
    /// after `from`: a bit scan in the cached mask of its 64-byte block, so a string
    /// costs about the same whatever its length. `b` must be the text the cache is of.
    #[inline(always)]
    pub(super) fn next(&mut self, b: &[u8], from: usize) -> Option<usize> {
        // In the cached block (none yet: `block` is `usize::MAX` and `mask` empty).
        let offset = from.wrapping_sub(self.block);
        if offset < 64 {
            let m = self.mask >> offset;
            if m != 0 {
                return Some(from + m.trailing_zeros() as usize);
            }
        }
        self.next_in_next_blocks(b, from)
    }

    /// [`Self::next`] past the cached block (past `from`'s block if that is the cached
    /// one: the fast path found nothing more in it).
    #[inline(never)]
    fn next_in_next_blocks(&mut self, b: &[u8], from: usize) -> Option<usize> {
        let (mut block, mut skip) = (from & !63, from & 63);
        if block == self.block {
            (block, skip) = (block + 64, 0);
        }
        loop {
            // The block's exact range (one bound compare; a range that wraps is none).
            let Some(whole) = b
                .get(block..block.wrapping_add(64))
                .and_then(<[u8]>::first_chunk)
            else {
                return self.next_in_last_block(b, block, skip);
            };
            self.mask = special_mask_64(whole);
            self.block = block;
            let m = self.mask >> skip;
            if m != 0 {
                return Some(block + skip + m.trailing_zeros() as usize);
            }
            (block, skip) = (block + 64, 0);
        }
    }

    /// [`Self::next_in_next_blocks`] in the block at `block` that is shorter than 64
    /// bytes (or past the end of `b`: none).
    #[cold]
    #[inline(never)]
    fn next_in_last_block(&mut self, b: &[u8], block: usize, skip: usize) -> Option<usize> {
        self.mask = special_mask(b.get(block..)?);
        self.block = block;
        let m = self.mask >> skip;
        (m != 0).then(|| block + skip + m.trailing_zeros() as usize)
    }
}

/// Bit `n` is set where `block[n]` is a quote, a backslash or a control character,
/// for the first 64 bytes of `block` (or all of it, if shorter).
#[inline(always)]
pub(super) fn special_mask(block: &[u8]) -> u64 {
    match block.first_chunk() {
        Some(whole) => special_mask_64(whole),
        None => special_mask_short(block),
    }
}

/// [`special_mask`] of fewer than 64 bytes.
#[cold]
#[inline(never)]
fn special_mask_short(block: &[u8]) -> u64 {
    let mut padded = [b' '; 64];
    let n = block.len().min(64);
    padded[..n].copy_from_slice(&block[..n]);
    special_mask_64(&padded)
}

/// [`special_mask`] of 64 bytes, sixteen per vector step (SSE2 on x86-64, NEON on
/// aarch64, scalar lanes elsewhere), read off the bytes' top bits. A byte `c` is a
/// quote or a control character exactly when `c ^ 0x82`, as a signed byte, is at most
/// -96 (the control characters become -128..=-97, the quote -96; every other byte is
/// above): adding 95 with saturation leaves those negative and everything else not.
/// A backslash is found by an equality compare (all bits set).
#[inline(always)]
fn special_mask_64(block: &[u8; 64]) -> u64 {
    let (flip, lift) = (i8x16::splat(0x82_u8 as i8), i8x16::splat(95));
    let backslash = u8x16::splat(b'\\');
    let mut mask = 0;
    for (n, lanes) in block.as_chunks::<16>().0.iter().enumerate() {
        let v = u8x16::new(*lanes);
        let hits = (v.cast_signed() ^ flip)
            .saturating_add(lift)
            .cast_unsigned()
            | v.simd_eq(backslash);
        mask |= u64::from(hits.to_bitmask() as u16) << (16 * n);
    }
    mask
}
