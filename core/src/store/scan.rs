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

use std::borrow::Cow;

use bytes::Bytes;
use wide::{i8x16, u8x16};

use super::item::{DecodeError, Decoded, Item};
use super::{Change, Kind};

mod data_set;

pub(crate) use data_set::DataSetScan;

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

/// The 64-byte block of a text that starts at `block` (`usize::MAX`: none yet) has a
/// quote, backslash or control character where `mask` has a bit.
#[derive(Clone, Copy)]
struct Specials {
    block: usize,
    mask: u64,
}

impl Specials {
    /// The position of the first quote, backslash or control character of `b` at or
    /// after `from`: a bit scan in the cached mask of its 64-byte block, so a string
    /// costs about the same whatever its length. `b` must be the text the cache is of.
    #[inline(always)]
    fn next(&mut self, b: &[u8], from: usize) -> Option<usize> {
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

    /// A string; returns the span of its content and whether it has escapes.
    fn string(&mut self) -> Result<(usize, usize, bool)> {
        self.eat(b'"')?;
        self.string_body()
    }

    /// A string's text, unescaped when needed; a slice of the input when it has no
    /// escapes (the usual case, handled inline).
    #[inline(always)]
    fn string_text(&mut self) -> Result<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.i;
        let end = self.next_special(start).ok_or(SYNTAX)?;
        if self.b[end] == b'"' {
            self.i = end + 1;
            return self.t.get(start..end).map(Cow::Borrowed).ok_or(SYNTAX);
        }
        let span = self.string_body()?;
        self.text(span)
    }

    /// The rest of a string whose opening quote was just consumed.
    #[inline]
    fn string_body(&mut self) -> Result<(usize, usize, bool)> {
        let start = self.i;
        let mut escaped = false;
        loop {
            self.i = self.next_special(self.i).ok_or(SYNTAX)?;
            match self.b[self.i] {
                b'"' => {
                    let end = self.i;
                    self.i += 1;
                    return Ok((start, end, escaped));
                }
                b'\\' => escaped = true,
                _ => return Err(SYNTAX),
            }
            self.escape()?;
        }
    }

    /// [`Specials::next`] in the input.
    #[inline(always)]
    fn next_special(&mut self, from: usize) -> Option<usize> {
        self.specials.next(self.b, from)
    }

    /// One escape sequence; the scanner sits on its backslash.
    fn escape(&mut self) -> Result<()> {
        match self.b.get(self.i + 1) {
            Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => self.i += 2,
            Some(b'u') => {
                let hex = self.b.get(self.i + 2..self.i + 6).ok_or(SYNTAX)?;
                if !hex.iter().all(u8::is_ascii_hexdigit) {
                    return Err(SYNTAX);
                }
                self.i += 6;
            }
            _ => return Err(SYNTAX),
        }
        Ok(())
    }

    /// A string's text, unescaped when needed.
    fn text(&self, (start, end, escaped): (usize, usize, bool)) -> Result<Cow<'a, str>> {
        if escaped {
            serde_json::from_slice::<String>(&self.b[start - 1..end + 1])
                .map(Cow::Owned)
                .map_err(|_| SYNTAX)
        } else {
            // Both ends are next to a quote: character boundaries of text already
            // checked, so slicing costs no second check.
            self.t.get(start..end).map(Cow::Borrowed).ok_or(SYNTAX)
        }
    }

    fn literal(&mut self, word: &[u8]) -> Result<()> {
        if self.b.get(self.i..self.i + word.len()) == Some(word) {
            self.i += word.len();
            Ok(())
        } else {
            Err(SYNTAX)
        }
    }

    /// A number per the JSON grammar; returns its span.
    fn number(&mut self) -> Result<(usize, usize)> {
        self.peek();
        let start = self.i;
        self.i = number_end(self.b, start)?;
        Ok((start, self.i))
    }

    /// Skip any value, checking its syntax. Strings, literals, numbers and empty
    /// containers, most of the values skipped, here; the rest in
    /// [`Self::nested_value`].
    #[inline(always)]
    fn value(&mut self) -> Result<()> {
        self.value_with::<false>()
    }

    /// [`Self::value`], with the loop of [`Self::nested_value`] inline if `INLINE` (in
    /// the item's member loop, where most of the nested values are: no call, no
    /// registers saved and restored for each).
    #[inline(always)]
    fn value_with<const INLINE: bool>(&mut self) -> Result<()> {
        let (b, i) = (self.b, self.i);
        match b.get(i) {
            Some(b'"') => self.i = self.string_end(i + 1)?,
            Some(b'f') if starts_with(b, i, b"false") => self.i = i + 5,
            Some(b't') if starts_with(b, i, b"true") => self.i = i + 4,
            Some(b'n') if starts_with(b, i, b"null") => self.i = i + 4,
            Some(b'-' | b'0'..=b'9') => self.i = number_end(b, i)?,
            // Empty containers (`targets`, `rules`…), within the depth limit.
            Some(b'[') if b.get(i + 1) == Some(&b']') && self.depth < MAX_DEPTH => self.i = i + 2,
            Some(b'{') if b.get(i + 1) == Some(&b'}') && self.depth < MAX_DEPTH => self.i = i + 2,
            _ if INLINE => return self.nested_value_inline(),
            _ => return self.nested_value(),
        }
        Ok(())
    }

    /// [`Self::value`], with an array of strings without escapes in compact form (a
    /// clause's `values`) skipped inline; anything else, valid or not, from the start
    /// by [`Self::value`].
    #[inline(always)]
    fn strings_or_value(&mut self) -> Result<()> {
        let (b, i) = (self.b, self.i);
        if starts_with(b, i, b"[\"") && self.depth < MAX_DEPTH {
            let mut j = i + 2;
            while let Some(end) = self.next_special(j)
                && b.get(end) == Some(&b'"')
            {
                match b.get(end + 1) {
                    Some(b']') => {
                        self.i = end + 2;
                        return Ok(());
                    }
                    Some(b',') if b.get(end + 2) == Some(&b'"') => j = end + 3,
                    _ => break,
                }
            }
        }
        self.value()
    }

    /// [`Self::value`] in one loop over the tokens, with the open containers kept as
    /// bits (1 for an object) rather than as recursive calls, and the position and
    /// depth in locals (written back once, at the end).
    #[inline(never)]
    fn nested_value(&mut self) -> Result<()> {
        self.nested_value_inline()
    }

    /// [`Self::nested_value`], inline.
    #[inline(always)]
    fn nested_value_inline(&mut self) -> Result<()> {
        let b = self.b;
        let mut i = self.i;
        let base = self.depth;
        let mut depth = base;
        let mut objects: u128 = 0;
        let mut specials = self.specials;
        // The position past the closing quote of the string whose content starts at
        // `from`.
        macro_rules! string_end {
            ($from:expr) => {{
                let end = specials.next(b, $from).ok_or(SYNTAX)?;
                if b.get(end) == Some(&b'"') {
                    end + 1
                } else {
                    self.string_end_escaped(end)?
                }
            }};
        }
        // The next byte that is not whitespace (`i` moves past the whitespace).
        macro_rules! peek {
            () => {
                match b.get(i) {
                    Some(&c) if c > b' ' => Some(c),
                    _ => {
                        i = past_whitespace(b, i);
                        b.get(i).copied()
                    }
                }
            };
        }
        // The position past the colon after the member name whose content starts at
        // `from` (one two-byte compare for the usual quote and colon).
        macro_rules! name_end {
            ($from:expr) => {{
                let end = specials.next(b, $from).ok_or(SYNTAX)?;
                if starts_with(b, end, b"\":") {
                    end + 2
                } else {
                    i = if b.get(end) == Some(&b'"') {
                        end + 1
                    } else {
                        self.string_end_escaped(end)?
                    };
                    if peek!() != Some(b':') {
                        return Err(SYNTAX);
                    }
                    i + 1
                }
            }};
        }
        'value: loop {
            // A value starts here.
            match peek!() {
                Some(b'"') => {
                    i = string_end!(i + 1);
                    // An array of strings, the usual array: the next element straight
                    // away when a comma and a quote follow.
                    if objects & 1 == 0 && depth != base {
                        while starts_with(b, i, b",\"") {
                            i = string_end!(i + 2);
                        }
                    }
                }
                Some(b'{') => {
                    i += 1;
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(SYNTAX);
                    }
                    objects = objects << 1 | 1;
                    match peek!() {
                        Some(b'}') => {
                            i += 1;
                            depth -= 1;
                            objects >>= 1;
                        }
                        Some(b'"') => {
                            i = name_end!(i + 1);
                            continue;
                        }
                        _ => return Err(SYNTAX),
                    }
                }
                Some(b'[') => {
                    i += 1;
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(SYNTAX);
                    }
                    objects <<= 1;
                    if peek!() != Some(b']') {
                        continue;
                    }
                    i += 1;
                    depth -= 1;
                    objects >>= 1;
                }
                Some(b't') if starts_with(b, i, b"true") => i += 4,
                Some(b'f') if starts_with(b, i, b"false") => i += 5,
                Some(b'n') if starts_with(b, i, b"null") => i += 4,
                Some(b'-' | b'0'..=b'9') => i = number_end(b, i)?,
                _ => return Err(SYNTAX),
            }
            // A value ended: close containers until one goes on.
            loop {
                if depth == base {
                    self.i = i;
                    self.specials = specials;
                    return Ok(());
                }
                let in_object = objects & 1 == 1;
                match peek!() {
                    Some(b',') => {
                        i += 1;
                        if in_object {
                            if peek!() != Some(b'"') {
                                return Err(SYNTAX);
                            }
                            i = name_end!(i + 1);
                        }
                        continue 'value;
                    }
                    Some(b'}') if in_object => {}
                    Some(b']') if !in_object => {}
                    _ => return Err(SYNTAX),
                }
                i += 1;
                depth -= 1;
                objects >>= 1;
            }
        }
    }

    /// The position just past the closing quote of the string whose content starts at
    /// `from` (its opening quote just consumed); `self.i` is left as it was, unless the
    /// string has escapes.
    #[inline(always)]
    fn string_end(&mut self, from: usize) -> Result<usize> {
        let end = self.next_special(from).ok_or(SYNTAX)?;
        if self.b.get(end) == Some(&b'"') {
            Ok(end + 1)
        } else {
            self.string_end_escaped(end)
        }
    }

    /// [`Self::string_end`] from the first backslash or control character of a string.
    #[inline(never)]
    fn string_end_escaped(&mut self, at: usize) -> Result<usize> {
        self.i = at;
        self.string_body()?;
        Ok(self.i)
    }

    /// The opening bracket `open` of a container: one level deeper. Returns the state
    /// [`Self::more`] takes.
    #[inline(always)]
    fn open(&mut self, open: u8) -> Result<bool> {
        self.eat(open)?;
        self.enter()?;
        Ok(true)
    }

    /// `null` (false), or the opening bracket `open` of a container (true, one level
    /// deeper); a well-formed value of another shape is a schema error.
    #[inline(always)]
    fn optional_open(&mut self, open: u8) -> Result<bool> {
        // The usual case, the bracket itself, first.
        if self.b.get(self.i) == Some(&open) {
            self.i += 1;
            self.enter()?;
            return Ok(true);
        }
        if self.peek() == Some(b'n') {
            return self.literal(b"null").map(|()| false);
        }
        self.shape(open)?;
        self.open(open)
    }

    /// Whether another element of the open container that `close` closes comes next:
    /// true past its comma (or at the first element: `first`, from [`Self::open`]),
    /// false past the closing bracket (one level up).
    #[inline(always)]
    fn more(&mut self, close: u8, first: &mut bool) -> Result<bool> {
        // The usual comma first.
        if !*first && self.b.get(self.i) == Some(&b',') {
            self.i += 1;
            return Ok(true);
        }
        match self.peek() {
            Some(c) if c == close => {
                self.i += 1;
                self.depth -= 1;
                Ok(false)
            }
            _ if *first => {
                *first = false;
                Ok(true)
            }
            Some(b',') => {
                self.i += 1;
                Ok(true)
            }
            _ => Err(SYNTAX),
        }
    }

    /// A member's name and its colon, as bytes (a slice of the input, or its unescaped
    /// text when it has escapes): matching it against the few names the store reads
    /// costs a length and a byte compare.
    #[inline(always)]
    fn name(&mut self) -> Result<Cow<'a, [u8]>> {
        self.eat(b'"')?;
        let (b, start) = (self.b, self.i);
        let end = self.next_special(start).ok_or(SYNTAX)?;
        if starts_with(b, end, b"\":") {
            self.i = end + 2;
            return Ok(Cow::Borrowed(b.get(start..end).ok_or(SYNTAX)?));
        }
        let name = if b.get(end) == Some(&b'"') {
            self.i = end + 1;
            Cow::Borrowed(b.get(start..end).ok_or(SYNTAX)?)
        } else {
            self.escaped_name(start, end)?
        };
        self.eat(b':')?;
        Ok(name)
    }

    /// The name of the next member of the open object (`first`: none read yet, a
    /// constant at each call) and its colon, as [`Self::name`] reads it (an escaped name is
    /// unescaped into `buf`); `None` past the object's closing brace (one level up), as
    /// [`Self::more`] reads it. The usual compact `,"` (or `"` for the first member)
    /// and `":` around a name without escapes cost a two-byte compare each; anything
    /// else takes those two.
    #[inline(always)]
    fn member<'s>(&mut self, first: bool, buf: &'s mut Vec<u8>) -> Result<Option<&'s [u8]>>
    where
        'a: 's,
    {
        let (b, i) = (self.b, self.i);
        let start = if !first && starts_with(b, i, b",\"") {
            i + 2
        } else if b.get(i) == Some(&b'}') {
            self.i = i + 1;
            self.depth -= 1;
            return Ok(None);
        } else if first && b.get(i) == Some(&b'"') {
            i + 1
        } else {
            return self.member_slow(first, buf);
        };
        let end = self.next_special(start).ok_or(SYNTAX)?;
        if starts_with(b, end, b"\":") {
            self.i = end + 2;
            return Ok(Some(b.get(start..end).ok_or(SYNTAX)?));
        }
        // Back on the name's opening quote, for the general reading.
        self.i = start - 1;
        self.member_name(buf).map(Some)
    }

    /// [`Self::member`] past whitespace, or at the closing brace.
    #[inline(never)]
    fn member_slow<'s>(&mut self, mut first: bool, buf: &'s mut Vec<u8>) -> Result<Option<&'s [u8]>>
    where
        'a: 's,
    {
        if self.more(b'}', &mut first)? {
            self.member_name(buf).map(Some)
        } else {
            Ok(None)
        }
    }

    /// [`Self::name`], unescaped into `buf` if it has escapes.
    #[inline(never)]
    fn member_name<'s>(&mut self, buf: &'s mut Vec<u8>) -> Result<&'s [u8]>
    where
        'a: 's,
    {
        Ok(match self.name()? {
            Cow::Borrowed(name) => name,
            Cow::Owned(name) => {
                *buf = name;
                buf
            }
        })
    }

    /// The text of a name that starts at `start` and has a backslash or a control
    /// character at `at`.
    #[cold]
    #[inline(never)]
    fn escaped_name(&mut self, start: usize, at: usize) -> Result<Cow<'a, [u8]>> {
        self.i = at;
        let (_, end, _) = self.string_body()?;
        Ok(match self.text((start, end, true))? {
            Cow::Borrowed(text) => Cow::Borrowed(text.as_bytes()),
            Cow::Owned(text) => Cow::Owned(text.into_bytes()),
        })
    }

    /// An object, calling `member` with each key (the scanner sits before the value,
    /// which `member` must consume).
    #[cfg(test)]
    fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, Cow<'a, str>) -> Result<()>,
    ) -> Result<()> {
        let mut first = self.open(b'{')?;
        while self.more(b'}', &mut first)? {
            let key = self.string_text()?;
            self.eat(b':')?;
            member(self, key)?;
        }
        Ok(())
    }

    /// Expect a value of the shape `open`; a well-formed value of another shape is a
    /// schema error (after checking its syntax, as serde_json would have).
    fn shape(&mut self, open: u8) -> Result<()> {
        match self.peek() {
            Some(c) if c == open => Ok(()),
            Some(_) => self.nested_value().and(Err(SCHEMA)),
            None => Err(SYNTAX),
        }
    }

    /// A compact `[]` within the depth limit, skipped (true); anything else is left
    /// for the general reading.
    #[inline(always)]
    fn empty_array(&mut self) -> bool {
        let empty = starts_with(self.b, self.i, b"[]") && self.depth < MAX_DEPTH;
        if empty {
            self.i += 2;
        }
        empty
    }

    /// Whether the string on whose opening quote the scanner sits is `text`.
    #[inline(always)]
    fn string_is(&mut self, text: &str) -> Result<bool> {
        let (b, start) = (self.b, self.i + 1);
        let end = self.next_special(start).ok_or(SYNTAX)?;
        if b.get(end) == Some(&b'"') {
            self.i = end + 1;
            Ok(b.get(start..end) == Some(text.as_bytes()))
        } else {
            Ok(self.string_text()? == text)
        }
    }

    #[inline(always)]
    fn string_value(&mut self) -> Result<Cow<'a, str>> {
        if self.b.get(self.i) != Some(&b'"') {
            self.shape(b'"')?;
        }
        self.string_text()
    }

    #[inline(always)]
    fn u64_value(&mut self) -> Result<u64> {
        // The usual version: up to 19 digits (no overflow), not starting with 0, and no
        // fraction, exponent or digit after them.
        let (b, i) = (self.b, self.i);
        if let Some(&c @ b'1'..=b'9') = b.get(i) {
            let (mut n, mut j) = (u64::from(c - b'0'), i + 1);
            while j - i < 19
                && let Some(&c) = b.get(j)
                && c.is_ascii_digit()
            {
                n = n * 10 + u64::from(c - b'0');
                j += 1;
            }
            if !matches!(b.get(j), Some(b'0'..=b'9' | b'.' | b'e' | b'E')) {
                self.i = j;
                return Ok(n);
            }
        }
        self.u64_value_slow()
    }

    /// [`Self::u64_value`] of anything else.
    #[inline(never)]
    fn u64_value_slow(&mut self) -> Result<u64> {
        match self.peek() {
            Some(b'-' | b'0'..=b'9') => {
                let (start, end) = self.number()?;
                // What `str::parse::<u64>` reads of a JSON number: digits only (no
                // sign, fraction or exponent), and no overflow.
                let digits = self.b.get(start..end).ok_or(SCHEMA)?;
                digits.iter().try_fold(0u64, |n, &c| {
                    if !c.is_ascii_digit() {
                        return Err(SCHEMA);
                    }
                    n.checked_mul(10)
                        .and_then(|n| n.checked_add(u64::from(c - b'0')))
                        .ok_or(SCHEMA)
                })
            }
            _ => self.nested_value().and(Err(SCHEMA)),
        }
    }

    #[inline(always)]
    fn bool_or_null(&mut self) -> Result<bool> {
        let (b, i) = (self.b, self.i);
        if starts_with(b, i, b"false") {
            self.i = i + 5;
            return Ok(false);
        }
        self.bool_or_null_slow()
    }

    /// [`Self::bool_or_null`] of anything but a compact `false`.
    #[inline(never)]
    fn bool_or_null_slow(&mut self) -> Result<bool> {
        match self.peek() {
            Some(b't') => self.literal(b"true").map(|()| true),
            Some(b'f') => self.literal(b"false").map(|()| false),
            Some(b'n') => self.literal(b"null").map(|()| false),
            _ => self.nested_value().and(Err(SCHEMA)),
        }
    }

    /// One flag or segment: its key (borrowed when it has no escapes; a data set names
    /// items by their map keys and drops it), version, deleted flag and references.
    fn item(
        &mut self,
        kind: Kind,
        deps: &mut Vec<(Kind, String)>,
    ) -> Result<(Option<Cow<'a, str>>, u64, bool)> {
        let (mut key, mut version, mut deleted) = (None, None, false);
        if self.b.get(self.i) == Some(&b'{') {
            self.i += 1;
            self.enter()?;
        } else {
            self.shape(b'{')?;
            self.open(b'{')?;
        }
        let mut buf = Vec::new();
        let mut next = self.member(true, &mut buf)?;
        while let Some(name) = next {
            match name {
                b"key" => {
                    key = if self.peek() == Some(b'n') {
                        self.literal(b"null").map(|()| None)?
                    } else {
                        Some(self.string_value()?)
                    }
                }
                b"version" => version = Some(self.u64_value()?),
                b"deleted" => deleted = self.bool_or_null()?,
                b"prerequisites" if kind == Kind::Flag => {
                    if !self.empty_array() {
                        self.prerequisites(deps)?;
                    }
                }
                b"rules" => {
                    if !self.empty_array() {
                        self.rules(deps)?;
                    }
                }
                _ => self.value_with::<true>()?,
            }
            next = self.member(false, &mut buf)?;
        }
        let version = version.ok_or(SCHEMA)?;
        if deleted {
            deps.clear();
        } else if deps.len() > 1 {
            deps.sort_unstable();
            deps.dedup();
        }
        Ok((key, version, deleted))
    }

    /// A flag's prerequisites (`null` or an array of objects): their `key`s are flag
    /// references.
    fn prerequisites(&mut self, deps: &mut Vec<(Kind, String)>) -> Result<()> {
        if !self.optional_open(b'[')? {
            return Ok(());
        }
        let mut first = true;
        while self.more(b']', &mut first)? {
            self.shape(b'{')?;
            self.open(b'{')?;
            let mut buf = Vec::new();
            let mut next = self.member(true, &mut buf)?;
            while let Some(name) = next {
                if name == b"key" {
                    let k = self.string_value()?;
                    deps.push((Kind::Flag, k.into_owned()));
                } else {
                    self.value()?;
                }
                next = self.member(false, &mut buf)?;
            }
        }
        Ok(())
    }

    /// An item's rules (`null` or an array of `null` or objects), for their clauses.
    fn rules(&mut self, deps: &mut Vec<(Kind, String)>) -> Result<()> {
        if !self.optional_open(b'[')? {
            return Ok(());
        }
        let mut first = true;
        while self.more(b']', &mut first)? {
            if !self.optional_open(b'{')? {
                continue;
            }
            let mut buf = Vec::new();
            let mut next = self.member(true, &mut buf)?;
            while let Some(name) = next {
                if name != b"clauses" {
                    self.value()?;
                } else if self.optional_open(b'[')? {
                    let mut first = true;
                    while self.more(b']', &mut first)? {
                        self.clause(deps)?;
                    }
                }
                next = self.member(false, &mut buf)?;
            }
        }
        Ok(())
    }

    /// A rule clause (`null` or an object): the string `values` of a `segmentMatch`
    /// clause are segment references.
    fn clause(&mut self, deps: &mut Vec<(Kind, String)>) -> Result<()> {
        let mut segment_match = None;
        let mut early: Vec<String> = Vec::new();
        if self.optional_open(b'{')? {
            let mut buf = Vec::new();
            let mut next = self.member(true, &mut buf)?;
            while let Some(name) = next {
                match name {
                    b"op" => {
                        segment_match = Some(if self.peek() == Some(b'"') {
                            self.string_is("segmentMatch")?
                        } else {
                            self.value()?;
                            false
                        });
                    }
                    b"values" if segment_match != Some(false) => {
                        if self.optional_open(b'[')? {
                            let mut first = true;
                            while self.more(b']', &mut first)? {
                                if self.peek() == Some(b'"') {
                                    let v = self.string_value()?.into_owned();
                                    match segment_match {
                                        Some(true) => deps.push((Kind::Segment, v)),
                                        _ => early.push(v),
                                    }
                                } else {
                                    self.value()?;
                                }
                            }
                        }
                    }
                    // Not a segment match: skipped, as the strings they usually are.
                    b"values" => self.strings_or_value()?,
                    _ => self.value()?,
                }
                next = self.member(false, &mut buf)?;
            }
        }
        if segment_match == Some(true) {
            deps.extend(early.into_iter().map(|v| (Kind::Segment, v)));
        }
        Ok(())
    }

    /// `{"KEY": item, …}`: each item becomes a change keyed by its map key (the plain
    /// recursive reading, the reference for [`DataSetScan`] in tests).
    #[cfg(test)]
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
    #[cfg(test)]
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

/// Bit `n` is set where `block[n]` is a quote, a backslash or a control character,
/// for the first 64 bytes of `block` (or all of it, if shorter).
#[inline(always)]
fn special_mask(block: &[u8]) -> u64 {
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

/// Decode one item from `raw` (the store's rules for what is read; see [`super::decode`]).
pub(super) fn decode_item(kind: Kind, raw: Bytes) -> Result<Decoded> {
    let text = std::str::from_utf8(&raw).map_err(|_| SYNTAX)?;
    let mut depends_on = Vec::new();
    let mut s = Scan::new(text);
    let (key, version, deleted) = s.item(kind, &mut depends_on)?;
    let key = key.map(Cow::into_owned);
    s.end()?;
    Ok(Decoded {
        key,
        item: Item {
            version,
            deleted,
            raw,
        },
        depends_on,
    })
}

/// The usual shape of FDv1 `patch` data, `{"path":"/KIND/KEY","data":{…}}`, in one
/// pass: the path, and the data decoded as an item of the kind `kind_of` reads from the
/// path (the data's raw JSON is a slice of `data`). `None` for anything else, valid or
/// not (other member orders, extra members, a path of no known kind, deep nesting,
/// any error): the caller's general parse then decides, errors included. When this
/// returns an item, the general parse would have returned the same one.
pub(crate) fn patch<'a>(
    data: &'a Bytes,
    kind_of: impl FnOnce(&str) -> Option<Kind>,
) -> Option<(Cow<'a, str>, Kind, Decoded)> {
    let mut s = Scan::new(std::str::from_utf8(data).ok()?);
    // Start half way down: deep data goes to the general parse, whose limit counts
    // the same levels differently.
    s.depth = MAX_DEPTH / 2;
    s.eat(b'{').ok()?;
    let member = |s: &mut Scan<'a>, name: &str| {
        let key = s.string().ok()?;
        (s.text(key).ok()?.as_ref() == name && s.eat(b':').is_ok()).then_some(())
    };
    member(&mut s, "path")?;
    let path = s.string_value().ok()?;
    let kind = kind_of(&path)?;
    s.eat(b',').ok()?;
    member(&mut s, "data")?;
    s.peek();
    let start = s.i;
    let mut depends_on = Vec::new();
    let (key, version, deleted) = s.item(kind, &mut depends_on).ok()?;
    let key = key.map(Cow::into_owned);
    let end = s.i;
    s.eat(b'}').ok()?;
    s.end().ok()?;
    let item = Item {
        version,
        deleted,
        raw: data.slice(start..end),
    };
    Some((
        path,
        kind,
        Decoded {
            key,
            item,
            depends_on,
        },
    ))
}

/// FDv2 `put-object` data, `{"version":…,"kind":…,"key":…,"object":{…}}`, in one pass:
/// the envelope's version and key, and the object decoded as an item of the kind
/// `kind_of` reads from `kind` (its raw JSON a slice of `data`). `None` for anything
/// else, valid or not (`object` before `kind`, a repeated member, a kind `kind_of` does
/// not know, deep nesting, any error): the caller's general parse then decides, errors
/// included. When this returns an item, the general parse would have returned the same.
pub(crate) fn put_object(
    data: &Bytes,
    kind_of: impl Fn(&str) -> Option<Kind>,
) -> Option<(u64, String, Kind, Decoded)> {
    let mut s = Scan::new(std::str::from_utf8(data).ok()?);
    // As for `patch`: deep data goes to the general parse.
    s.depth = MAX_DEPTH / 2;
    s.eat(b'{').ok()?;
    let (mut version, mut key, mut kind, mut object) = (None, None, None, None);
    loop {
        let name = s.string_text().ok()?;
        s.eat(b':').ok()?;
        match name.as_ref() {
            "version" if version.is_none() => version = Some(s.u64_value().ok()?),
            "key" if key.is_none() => key = Some(s.string_value().ok()?.into_owned()),
            "kind" if kind.is_none() => kind = Some(kind_of(&s.string_value().ok()?)?),
            "object" if object.is_none() => {
                let kind = kind?;
                s.peek();
                let start = s.i;
                let mut depends_on = Vec::new();
                let (key, version, deleted) = s.item(kind, &mut depends_on).ok()?;
                let key = key.map(Cow::into_owned);
                let item = Item {
                    version,
                    deleted,
                    raw: data.slice(start..s.i),
                };
                object = Some(Decoded {
                    key,
                    item,
                    depends_on,
                });
            }
            "version" | "key" | "kind" | "object" => return None,
            _ => s.value().ok()?,
        }
        match s.peek() {
            Some(b',') => s.i += 1,
            Some(b'}') => {
                s.i += 1;
                break;
            }
            _ => return None,
        }
    }
    s.end().ok()?;
    Some((version?, key?, kind?, object?))
}

/// Split a full data set `{"flags":{…},"segments":{…}}`, or with `envelope`, an FDv1
/// `put` body `{"path":…,"data":{…}}`, into changes whose raw JSON are slices of
/// `whole` (no copy).
pub fn split_all_data(whole: &Bytes, envelope: bool) -> Result<Vec<Change>> {
    DataSetScan::new(envelope).finish(whole)
}

#[cfg(test)]
mod tests;
