//! Values read or skipped whole: literals, numbers, and nested arrays and objects.

use super::{MAX_DEPTH, Result, SYNTAX, Scan, number_end, past_whitespace, starts_with};

impl<'a> Scan<'a> {
    pub(super) fn literal(&mut self, word: &[u8]) -> Result<()> {
        if self.b.get(self.i..self.i + word.len()) == Some(word) {
            self.i += word.len();
            Ok(())
        } else {
            Err(SYNTAX)
        }
    }

    /// A number per the JSON grammar; returns its span.
    pub(super) fn number(&mut self) -> Result<(usize, usize)> {
        self.peek();
        let start = self.i;
        self.i = number_end(self.b, start)?;
        Ok((start, self.i))
    }

    /// Skip any value, checking its syntax. Strings, literals, numbers and empty
    /// containers, most of the values skipped, here; the rest in
    /// [`Self::nested_value`].
    #[inline(always)]
    pub(super) fn value(&mut self) -> Result<()> {
        self.value_with::<false>()
    }

    /// [`Self::value`], with the loop of [`Self::nested_value`] inline if `INLINE` (in
    /// the item's member loop, where most of the nested values are: no call, no
    /// registers saved and restored for each).
    #[inline(always)]
    pub(super) fn value_with<const INLINE: bool>(&mut self) -> Result<()> {
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
    pub(super) fn strings_or_value(&mut self) -> Result<()> {
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
    pub(super) fn nested_value(&mut self) -> Result<()> {
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
}
